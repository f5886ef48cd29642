"""Turning a MindFormers log (``output/log/rank_<R>/info.log``) into rows and events, as if a writer had
written them: a job nobody changed can be watched from the log it already writes.

What MFLossMonitor prints each step (``mindformers/core/callback/callback.py``, ``print_output_info``)::

    [INFO] 2026-12-01 07:09:48,553 [mindformers/core/callback/callback.py:747] print_output_info: { Epoch:[  1/  1],
      step:[    2/   60], loss:[5.539429/5.544593], per_step_time: 20ms, lr: 0.00020000001, overflow cond: False,
      loss_scale: 1.0, global_norm: [1.013255], train_throughput_per_npu: 0.004T
    [INFO] 2026-12-01 07:09:48,553 [...:764] print_output_info:    3.3% |█...| 192.56489 samples/s/p  0:00:01 }

(one line each in the file). Sink mode prints ``loss: x, `` for ``loss:[cur/mean], ``; MoE and MTP models add
``lm_loss``, ``load_balancing_loss``, ``mtp_loss`` (``indexer_loss``) after the loss; ``lr`` is left out when
MindFormers cannot compute it; ``train_throughput_per_npu`` (TFLOP/s from the compiled graph's FLOPs) only
when it counted them. MindFormers' stdout format (``2026-12-01 07:09:48,526 - mindformers[...] - INFO - ``)
is read too, so a captured stdout or an msrun worker log works as well.

A row per step line: ``step`` is the global step ((epoch - 1) x steps per epoch + step), ``loss`` the step's
own loss (not the running mean), ``time`` the line's timestamp (the writing host's local time; the UTC offset
is given by the source when it knows it). ``step_time`` is MindFormers' own figure: from the progress line's
samples/s/p when the global batch and device count are known (exact), else ``per_step_time`` (whole ms).
Every other line is skipped, not counted bad; a step line that cannot be read is a bad row.

Sessions (process starts) begin at MindFormers' ``Starting Training Model`` line, or where the step goes
back without one; MindFormers appends to ``info.log`` on a restart. ``Training Over!`` ends a session
(finished); an ``ERROR`` line or a Python traceback after a session's last step is its ``abort`` (failed),
given once the lines read so far end there (:meth:`MfLogParser.flush`).
"""

from __future__ import annotations

import calendar
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..safe import clean
from .parse import NUMERIC, Rows, _empty, _rows

#: what the start events of a log say about where the figures come from, and what a log cannot give
SOURCE = "mindformers log"
CANNOT = ("memory", "data wait", "heartbeats")
#: the losses MindFormers prints beside the loss, kept as extra columns
SEPARATE_LOSSES = ("lm_loss", "load_balancing_loss", "mtp_loss", "indexer_loss")
#: extra columns of a log's rows, in this order
EXTRA = (*SEPARATE_LOSSES, "train_throughput_per_npu", "samples_per_s_per_npu")

_TS = r"(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(?P<ms>\d{3})"
#: the two line formats of MindFormers' logger: the file's and stdout's
_PREFIX = re.compile(r"^\[(?P<level>[A-Z]+)\] " + _TS + r" \[[^\]]*\] [^:\s]*: ?"
                     r"|^" + _TS.replace("?P<ts>", "?P<ts2>").replace("?P<ms>", "?P<ms2>")
                     + r" - \S+ - (?P<level2>[A-Z]+) - ")
_STEP = re.compile(r"\{ Epoch:\[\s*(?P<epoch>\d+)/\s*(?P<epochs>\d+)\], step:\[\s*(?P<step>\d+)/\s*(?P<steps>\d+)\], "
                   r"(?:loss:\[\s*(?P<loss>[^/\]]*)/[^\]]*\]|loss: *(?P<sink_loss>[^,\s\[]+))(?P<rest>.*)$")
_PROGRESS = re.compile(r"\|\s*(?P<sps>[-+0-9.eE]+|nan|inf) samples/s/p")
_GLOBAL_BATCH = re.compile(r"global_batch_size = (?P<formula>[a-z_ *]+) = (?P<g>\d+) = (?P<factors>[\d *]+)")
_FLOPS = re.compile(r"Full model flops is (?P<full>\d+)")
_CKPT = re.compile(r"Finish saving \w+ of epoch (?P<epoch>\d+) step (?P<step>\d+)")
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Warning)\b")
#: the usual step line whole, as bytes (file format; non-sink loss; lr; no separate losses): read without
#: decoding or splitting into fields. Groups: hour, minute, second, ms, epoch, epochs, step, steps, loss,
#: per_step_time, lr, overflow, loss scale, global norm, TFLOP/s.
_FAST_STEP = re.compile(
    rb"\[INFO\] (\d{4}-\d\d-\d\d \d\d):(\d\d):(\d\d),(\d{3}) \[[^\]]*\] print_output_info: "
    rb"\{ Epoch:\[ *(\d+)/ *(\d+)\], step:\[ *(\d+)/ *(\d+)\], "
    rb"loss:\[ *([^/\]]+)/[^\]]*\], per_step_time: (\d+)ms, lr: ([^,]+), "
    rb"overflow cond: (True|False), loss_scale: ([^,]+), global_norm: \[?([^\],]+)\]?"
    rb"(?:, train_throughput_per_npu: ([^T,]+)T)?\r?$")
_FAST_PROGRESS = re.compile(rb"\| *([0-9.]+) samples/s/p")
assert list(NUMERIC) == ["time", "step", "epoch", "loss", "lr", "grad_norm", "step_time", "data_wait", "queue_depth",
                         "tokens", "samples", "tokens_per_s", "mfu", "mem_used", "mem_peak", "mem_total", "overflow",
                         "loss_scale"], "MfLogParser._row lists the columns in this order"


@dataclass
class Parsed:
    """What a run of lines gave: rows, events, and the count of step lines that could not be read."""

    rows: Rows
    events: list[dict[str, Any]] = field(default_factory=list)


class MfLogParser:
    """Read one rank's MindFormers log, line after line, across reads (its state carries over).

    ``gmtoff``: the writing host's offset from UTC in seconds, when the source knows it; else the
    timestamps are read in this machine's local time."""

    def __init__(self, rank: int, *, gmtoff: float | None = None, run_name: str | None = None) -> None:
        self.rank = rank
        self.gmtoff = gmtoff
        self.run_name = run_name
        self.sessions = 0
        self.session: str | None = None
        self.started = False  # a start event was given for the current session
        self.last_step: float | None = None
        self.last_time: float | None = None
        self.first_time: float | None = None  # the first line since the last step line: a new session's start
        self.global_batch: int | None = None
        self.devices: int | None = None
        self.model_flops: float | None = None
        self.total_steps: int | None = None
        self.steps_per_epoch: int | None = None
        self.error: tuple[float, str] | None = None  # an ERROR line or traceback after the last step
        self.error_sent = False
        self.ended = False
        self._rows: list[list[float]] = []
        self._extra: list[list[float]] = []
        self._sessions: list[str] = []
        self._nonfinite: list[tuple[int, str, float]] = []
        self._events: list[dict[str, Any]] = []
        self._bad = 0
        self._open: int | None = None  # index of the last row, still waiting for its progress line
        self._hours: dict[str | bytes, float] = {}

    # -- the public calls ----------------------------------------------------------------

    def parse(self, blob: bytes) -> Parsed:
        """Read complete lines (a :class:`~mstop.sources.files.Chunk`'s ``blob``). The last step line's row
        is held back until its progress line (or any later step) comes, or :meth:`flush`."""
        fast, progress, line = _FAST_STEP.match, _FAST_PROGRESS.search, self.line
        for raw in blob.splitlines():
            if b"{ Epoch:[" in raw:
                m = fast(raw)  # the usual shape, read without decoding (see _fast_step)
                if m is None or not self._fast_step(m):
                    line(raw.decode("utf-8", "replace"))
            elif b"samples/s/p" in raw and (m := progress(raw)) is not None:
                self._sps(float(m.group(1)))
            else:
                line(raw.decode("utf-8", "replace"))
        return self._take(keep_open=True)

    def flush(self) -> Parsed:
        """The lines read so far are all there is for now: give the held row, and the abort of a session
        whose last line is an error."""
        if self.error is not None and not self.error_sent and not self.ended and self.session is not None:
            t, text = self.error
            self._events.append({"kind": "abort", "time": t, "session": self.session, "step": self.last_step,
                                 "error": text})
            self.error_sent = True
        return self._take(keep_open=False)

    # -- one line ----------------------------------------------------------------------------

    def line(self, text: str) -> None:
        """Read one line (without its newline)."""
        m = _PREFIX.match(text)
        if m is None:
            self._continuation(text)
            return
        ts, ms = (m.group("ts"), m.group("ms")) if m.group("ts") else (m.group("ts2"), m.group("ms2"))
        level = m.group("level") or m.group("level2")
        t = self._time(ts, ms)
        msg = text[m.end():]
        self.last_time = t
        if "{ Epoch:[" in msg:
            self._step(t, msg)
            return
        if "samples/s/p" in msg:
            m = _PROGRESS.search(msg)
            if m is not None:
                self._sps(_number(m.group("sps")))
            return
        if self.first_time is None:
            self.first_time = t  # the first line since the last step: where a restart's session begins
        if level in ("ERROR", "CRITICAL"):
            self._error(t, msg)
        else:
            self._info(t, msg)

    def _step(self, t: float, msg: str) -> None:
        m = _STEP.search(msg)
        loss_text = None if m is None else m.group("loss") if m.group("loss") is not None else m.group("sink_loss")
        if m is None or not _is_number(loss_text):
            self._bad += 1  # a step line cut short, or not MindFormers'
            return
        f = _fields(m.group("rest"))
        over = f.get("overflow cond")
        extra = [_number(f.get(k)) for k in SEPARATE_LOSSES]
        extra.append(_number(f.get("train_throughput_per_npu", "").removesuffix("T")))
        self._row(t, int(m.group("epoch")), int(m.group("epochs")), int(m.group("step")), int(m.group("steps")),
                  float(loss_text), _number(f.get("lr")), _number(f.get("global_norm")),
                  _number(f.get("per_step_time", "").removesuffix("ms")),
                  1.0 if over == "True" else 0.0 if over == "False" else math.nan, _number(f.get("loss_scale")),
                  extra, norm_said=_is_number(f.get("global_norm")))

    def _fast_step(self, m: re.Match[bytes]) -> bool:
        """A step line of the usual shape (file format, non-sink loss, lr, no separate losses), from
        :data:`_FAST_STEP`'s groups; False when a value does not read (the careful path decides)."""
        g = m.groups()
        try:
            hour = g[0]
            base = self._hours.get(hour)  # type: ignore[call-overload]
            if base is None:
                base = self._hour(hour.decode())
            t = base + int(g[1]) * 60 + int(g[2]) + int(g[3]) / 1000.0
            tput = float(g[14]) if g[14] is not None else math.nan
            self._row(t, int(g[4]), int(g[5]), int(g[6]), int(g[7]), float(g[8]), float(g[10]), float(g[13]),
                      float(g[9]), 1.0 if g[11] == b"True" else 0.0 if g[11] == b"False" else math.nan,
                      _number(g[12].decode()), [math.nan, math.nan, math.nan, math.nan, tput])
        except ValueError:
            return False
        self.last_time = t
        return True

    def _row(self, t: float, epoch: int, epochs: int, step: int, steps: int, loss: float, lr: float,
             norm: float, step_ms: float, overflow: float, scale: float, extra: list[float], *,
             norm_said: bool = True) -> None:
        """One step's row (sessions and start events kept up to date first)."""
        gstep = float((epoch - 1) * steps + step) if steps > 0 else float(step)
        if self.session is None or self.ended or (self.last_step is not None and gstep <= self.last_step):
            self._new_session(self.first_time if self.first_time is not None else t)
        self.steps_per_epoch, self.total_steps = steps, epochs * steps
        if not self.started or self._started_total != self.total_steps:
            self._start(self._session_start)
        i = len(self._rows)
        if not math.isfinite(loss):
            self._nonfinite.append((i, "loss", loss))
        if not math.isfinite(norm) and norm_said:  # a missing norm is NaN too, but no NaN norm
            self._nonfinite.append((i, "grad_norm", norm))
        samples = float(self.global_batch) if self.global_batch is not None else math.nan
        # NUMERIC's order: time step epoch loss lr grad_norm step_time data_wait queue_depth tokens samples
        # tokens_per_s mfu mem_used mem_peak mem_total overflow loss_scale
        self._rows.append([t, gstep, float(epoch), loss, lr, norm, step_ms / 1000.0 if step_ms > 0 else math.nan,
                           math.nan, math.nan, math.nan, samples, math.nan, math.nan, math.nan, math.nan, math.nan,
                           overflow, scale])
        extra.append(math.nan)  # samples/s/p, from the progress line
        self._extra.append(extra)
        self._sessions.append(self.session or "")
        self._open = i
        self.last_step = gstep
        self.first_time = None
        self.error = None
        self.error_sent = False

    def _sps(self, sps: float) -> None:
        """The progress line after a step line: samples/s/p, and with it the exact step time."""
        if self._open is None:
            return
        row, extra = self._rows[self._open], self._extra[self._open]
        extra[-1] = sps
        if self.global_batch and self.devices and sps > 0:
            exact = self.global_batch / self.devices / sps
            ms = row[6]
            # MindFormers prints int(ms): the exact figure must round down to it (else the batch or device
            # count read from the log is not the one MindFormers divided by)
            if not math.isfinite(ms) or int(exact * 1000.0 + 1e-6) == int(round(ms * 1000.0)):
                row[6] = exact
        self._open = None

    def _info(self, t: float, msg: str) -> None:
        if "Starting Training Model" in msg:
            if self.session is None or self.last_step is not None or self.ended:
                self._new_session(self.first_time if self.first_time is not None else t)
            self._start(self._session_start)
        elif "Training Over!" in msg:
            if self.session is not None and not self.ended:
                self._events.append({"kind": "end", "time": t, "session": self.session, "step": self.last_step})
                self.ended = True
            self.first_time = None  # the process's last line: a restart's start is after it
        elif "global_batch_size = " in msg:
            m = _GLOBAL_BATCH.search(msg)
            if m is not None:
                self.global_batch = int(m.group("g"))
                names = [n.strip() for n in m.group("formula").split("*")]
                factors = [f.strip() for f in m.group("factors").split("*")]
                if "device_num" in names and len(names) == len(factors):
                    self.devices = int(factors[names.index("device_num")])
        elif "Full model flops is" in msg:
            m = _FLOPS.search(msg)
            if m is not None:
                self.model_flops = float(m.group("full"))
        elif "Finish saving" in msg:
            m = _CKPT.search(msg)
            if m is not None and self.session is not None:
                step = int(m.group("step"))
                if self.steps_per_epoch and step <= self.steps_per_epoch:
                    step += (int(m.group("epoch")) - 1) * self.steps_per_epoch
                self._events.append({"kind": "checkpoint", "time": t, "session": self.session, "step": step,
                                     "path": None})

    def _error(self, t: float, msg: str) -> None:
        if self.session is not None and self.error is None:
            self.error = (t, clean(msg.strip(), 400))
        self.first_time = None  # the failing process's line: a restart's start is after it

    def _continuation(self, text: str) -> None:
        """A line of a multi-line record (a config dump, a traceback): only a traceback's exception matters."""
        if self.session is None or not text or text[0].isspace():
            return
        if text.startswith("Traceback (most recent call last)"):
            if self.error is None and self.last_time is not None:
                self.error = (self.last_time, "Traceback (most recent call last)")
        elif self.error is not None and _EXCEPTION.match(text):
            t, first = self.error
            exc = clean(text.strip(), 300)
            self.error = (t, exc if first.startswith("Traceback") else f"{first} ({exc})")

    # -- sessions and events ----------------------------------------------------------------

    def _new_session(self, t: float) -> None:
        self.sessions += 1
        self.session = f"mindformers-{self.sessions}"
        self._session_start = t
        self.started = False
        self.ended = False
        self.last_step = None
        self.error = None
        self.error_sent = False

    def _start(self, t: float) -> None:
        e: dict[str, Any] = {"kind": "start", "time": t, "session": self.session, "rank": self.rank,
                             "source": SOURCE, "memory_source": "none", "cannot_give": list(CANNOT),
                             "note": f"read from a MindFormers log: no {', '.join(CANNOT)}"}
        if self.run_name:
            e["run_name"] = self.run_name
        if self.total_steps:
            e["total_steps"] = self.total_steps
        if self.global_batch:
            e["samples_per_step"] = self.global_batch
        if self.devices:
            e["world_size"] = self.devices
        if self.model_flops:
            e["model_flops_per_step"] = self.model_flops
        self._events.append(e)
        self.started = True
        self._started_total = self.total_steps

    _session_start: float = 0.0
    _started_total: int | None = None

    # -- output -----------------------------------------------------------------------------

    def _take(self, *, keep_open: bool) -> Parsed:
        n = len(self._rows) - (1 if keep_open and self._open is not None else 0)
        events, self._events = self._events, []
        bad, self._bad = self._bad, 0
        if n <= 0:
            return Parsed(_empty(list(EXTRA), bad), events)
        table = np.array([r + x for r, x in zip(self._rows[:n], self._extra[:n])], dtype=np.float64)
        nonfinite = [x for x in self._nonfinite if x[0] < n]
        rows = _rows(table, list(EXTRA), self._sessions[:n], nonfinite, bad)
        self._rows, self._extra, self._sessions = self._rows[n:], self._extra[n:], self._sessions[n:]
        self._nonfinite = [(i - n, c, v) for i, c, v in self._nonfinite if i >= n]
        if self._open is not None:
            self._open = self._open - n if self._open >= n else None
        return Parsed(rows, events)

    def _time(self, ts: str, ms: str) -> float:
        """Unix time of a timestamp (local time of the writing host), one calendar call per hour."""
        hour = ts[:13]
        base = self._hours.get(hour)
        if base is None:
            base = self._hour(hour)
        return base + int(ts[14:16]) * 60 + int(ts[17:19]) + int(ms) / 1000.0

    def _hour(self, hour: str) -> float:
        """Unix time of the start of an hour ``YYYY-MM-DD HH`` (cached under its text and its bytes)."""
        st = time.strptime(hour, "%Y-%m-%d %H")
        base = calendar.timegm(st) - self.gmtoff if self.gmtoff is not None else time.mktime(st)
        if len(self._hours) > 4096:
            self._hours.clear()
        self._hours[hour] = self._hours[hour.encode()] = base  # type: ignore[index]
        return base


def _fields(rest: str) -> dict[str, str]:
    """``, key: value`` pairs after the loss (``global_norm: [1.0]`` gives ``1.0``)."""
    out = {}
    for part in rest.split(", "):
        key, sep, value = part.partition(": ")
        if sep:
            out[key.strip()] = value.strip().strip("[]").strip()
    return out


def _number(text: str | None) -> float:
    if not text:
        return math.nan
    try:
        return float(text)
    except ValueError:
        return math.nan


def _is_number(text: str | None) -> bool:
    try:
        float(text or "")
    except ValueError:
        return False
    return True

