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
from typing import Any, Callable

import numpy as np

from ..safe import clean
from .parse import NUMERIC, Rows, _empty, _rows
from .parse import _num as _cell_number

#: what the start events of a log say about where the figures come from, and what a log cannot give
SOURCE = "mindformers log"
#: the source of a plain MindSpore job's log (LossMonitor, TimeMonitor: an msrun worker log, a captured stdout)
SOURCE_PLAIN = "mindspore log"
CANNOT = ("memory", "data wait", "heartbeats")
#: the losses MindFormers prints beside the loss, kept as extra columns
SEPARATE_LOSSES = ("lm_loss", "load_balancing_loss", "mtp_loss", "indexer_loss", "aux_loss", "kl_loss",
                   "extra_loss")
#: extra columns of a log's rows, in this order
EXTRA = (*SEPARATE_LOSSES, "train_throughput_per_npu", "samples_per_s_per_npu")

_TS = r"(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(?P<ms>\d{3})"
#: the two line formats of MindFormers' logger: the file's and stdout's
_PREFIX = re.compile(r"^\[(?P<level>[A-Z]+)\] " + _TS + r" \[[^\]]*\] [^:\s]*: ?"
                     r"|^" + _TS.replace("?P<ts>", "?P<ts2>").replace("?P<ms>", "?P<ms2>")
                     + r" - \S+ - (?P<level2>[A-Z]+) - ")
#: MFLossMonitor's step line (r0.7 on: ``{ Epoch:[..], step:[..], loss...``) and the PyNative trainer's (r2.0:
#: ``{ step:[    1/   10], loss:  11.813965, per_step_time:  13570ms, ...}``, no epoch), wherever it stands
_STEP = re.compile(r"\{\s*(?:Epoch:\[\s*(?P<epoch>\d{1,15})/\s*(?P<epochs>\d{1,15})\],\s*)?"
                   r"step:\[\s*(?P<step>\d{1,15})/\s*(?P<steps>\d{1,15})\],\s*"
                   r"(?:loss:\[\s*(?P<loss>[^/\]]*)/[^\]]*\]|loss:\s*(?P<sink_loss>[^,\s\[]+))(?P<rest>.*)$")
#: MindFormers v0.6 and before: no braces, ``time:`` the step's (in sink mode the sink's) milliseconds
_STEP06 = re.compile(r"Epoch:\[\s*(?P<epoch>\d{1,15})/\s*(?P<epochs>\d{1,15})\],\s*"
                     r"step:\[\s*(?P<step>\d{1,15})/\s*(?P<steps>\d{1,15})\],\s*"
                     r"loss:\[\s*(?P<loss>[^/\]]*)/[^\]]*\],\s*time:\s*(?P<ms>[^,\s]+)\s*ms(?P<rest>.*)$")
#: MindSpore's LossMonitor (``print("epoch: %s step: %s, loss is %s")``, the step within its epoch) and
#: TimeMonitor (``"{} epoch time: {:5.3f} ms, per step time: {:5.3f} ms"``, mode.title() first)
_LOSS_MONITOR = re.compile(r"\bepoch: (?P<epoch>\d{1,15}) step: (?P<step>\d{1,15}), loss is (?P<loss>.+?)\s*$")
_TIME_MONITOR = re.compile(r"\bepoch time: (?P<epoch_ms>[-+0-9.eE]+|nan|inf) ms, per step time: "
                           r"(?P<step_ms>[-+0-9.eE]+|nan|inf) ms")
#: a timestamp anywhere before a step in a line of an unknown logger: ``2026-12-01 07:09:48,553``, ISO
#: ``2026-12-01T07:09:48.553``, MindSpore's own ``2026-12-01-07:09:48.553.123``
_ANY_TS = re.compile(r"(?P<date>\d{4}-\d\d-\d\d)[ T-](?P<time>\d\d:\d\d:\d\d)(?:[,.](?P<frac>\d{1,6}))?")
#: what a training step's line looks like to a person: a step (a number after it) and a loss (a number)
_LOOKS_LIKE_STEP = re.compile(r"\bstep\b\W{0,8}\d.*\bloss\b\W{0,12}(?:is\W{1,4})?[-+]?(?:\d|nan|inf)"
                              r"|\bloss\b\W{0,12}(?:is\W{1,4})?[-+]?(?:\d|nan|inf).*\bstep\b\W{0,8}\d", re.I)
_SINK_SIZE = re.compile(r"Will be Training epochs:\s*\d+, sink_size:\s*(?P<sink>-?\d+)")
#: MindFormers' own lines that start and end training (``.........Starting Training Model..........``), the
#: whole message: the words inside a config dump or a job's own message are not a start or an end
_START_LINE = re.compile(r"\.*\s*Starting Training Model\s*\.*\s*$")
_OVER_LINE = re.compile(r"\.*\s*Training Over!\s*\.*\s*$")
_PROGRESS = re.compile(r"\|\s*(?P<sps>[-+0-9.eE]+|nan|inf) samples/s/p")
_FLOPS = re.compile(r"Full model flops is (?P<full>\d+)")
_CKPT = re.compile(r"Finish saving \w+ of epoch (?P<epoch>\d+) step (?P<step>\d+)")
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Warning)\b")
#: an exception's last line on its own (``ValueError: ...``), a failure even with no traceback header read
_RAISED = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception): ")
#: the usual step line whole, as bytes (file format; non-sink loss; lr; no separate losses): read without
#: decoding or splitting into fields. Groups: hour, minute, second, ms, epoch, epochs, step, steps, loss,
#: per_step_time, lr, overflow, loss scale, global norm, TFLOP/s.
#: a number as pandas reads it, and nothing else (bounded: a 5,000-digit field is not a fast line)
_FLOAT = rb"[-+]?(?:\d{1,40}\.?\d{0,40}|\.\d{1,40})(?:[eE][-+]?\d{1,4})?"
_FAST_STEP = re.compile(
    rb"\[INFO\] (\d{4}-\d\d-\d\d \d\d):([0-5]\d):([0-5]\d|60),(\d{3}) \[[^\]]*\] print_output_info: "
    rb"\{ Epoch:\[ *(\d{1,15})/ *(\d{1,15})\], step:\[ *(\d{1,15})/ *(\d{1,15})\], "
    rb"loss:\[ *(" + _FLOAT + rb")/ *" + _FLOAT + rb"\], per_step_time: (\d{1,15})ms, lr: (" + _FLOAT + rb"), "
    rb"overflow cond: (True|False), loss_scale: (" + _FLOAT + rb"), global_norm: \[?(" + _FLOAT + rb")\]?"
    rb"(?:, train_throughput_per_npu: (" + _FLOAT + rb")T)?\r?$")
#: a fast line's text from its epoch on, as whitespace-separated fields for pandas ("[", "]", "/", ":", ","
#: and the "T" of TFLOP/s become spaces; "m" too, so that "20ms" reads as 20): the columns kept of it
_FAST_TABLE = bytes.maketrans(b"[]/:,mT", b"       ")
_FAST_COLS = {"epoch": 0, "loss": 6, "step_ms": 10, "lr": 13, "loss_scale": 18, "grad_norm": 20, "tflops": 22}
_NO_TFLOPS = b", train_throughput_per_npu: nanT"
_FAST_PROGRESS = re.compile(rb"\| *([0-9.]+) samples/s/p")
#: the same two shapes for RE2 (pyarrow.compute), matched over whole arrays of lines at once: named groups
#: of the fast step line's fields, and the progress line's samples/s/p
_F = _FLOAT.decode()
_FAST_RE2 = (r"^\[INFO\] (?P<ts>\d{4}-\d\d-\d\d \d\d:[0-5]\d:(?:[0-5]\d|60),\d{3}) \[[^\]]*\] print_output_info: "
             r"\{ Epoch:\[ *(?P<epoch>\d{1,15})/ *(?P<epochs>\d{1,15})\], step:\[ *(?P<step>\d{1,15})/ *"
             r"(?P<steps>\d{1,15})\], loss:\[ *(?P<loss>" + _F + r")/ *" + _F + r"\], "
             r"per_step_time: (?P<ms>\d{1,15})ms, "
             r"lr: (?P<lr>" + _F + r"), overflow cond: (?P<over>True|False), loss_scale: (?P<scale>" + _F + r"), "
             r"global_norm: \[?(?P<norm>" + _F + r")\]?(?:, train_throughput_per_npu: (?P<tflops>" + _F + r")T)?\r?$")
_PROGRESS_RE2 = r"\| *(?P<sps>[0-9.]+) samples/s/p"
#: the fields of a line _FAST_RE2 matched, with unbounded numbers (the same captures there: each number
#: stands between fixed words), which RE2 extracts three times faster than the bounded ones
_FU = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_FIELDS_RE2 = _FAST_RE2.replace(_F, _FU).replace(r"\d{1,15}", r"\d+")
#: the words every fast step line holds (a cheap first sieve before the regular expression)
_FAST_WORDS = b"] print_output_info: { Epoch:["
#: LossMonitor's line with nothing around it (as msrun's worker logs hold it) and a plain number for a loss
_LM_RE2 = r"^epoch: (?P<epoch>\d{1,9}) step: (?P<step>\d{1,9}), loss is (?P<loss>" + _F + r")\n$"
#: a run of at least this many step and progress lines between other lines is read as arrays (pyarrow)
BULK_RUN = 256
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
        # one entry per row not yet taken: a careful row's numbers, or None for a fast row (in _fast)
        self._rows: list[list[float] | None] = []
        self._extra: list[list[float] | None] = []
        self._fast: list[tuple[bytes, bytes, float, float]] = []  # (timestamp, text, overflow, step)
        self._bulk_rows: list[np.ndarray] = []  # rows read as arrays (_bulk), in order; _BULK in _rows marks them
        self._last_fast_ts: bytes | None = None
        self._sps_of: list[float] = []
        self._batch_of: list[tuple[float, float]] = []  # (global batch, devices) as the log said at that row
        self._sessions: list[str] = []
        self._nonfinite: list[tuple[int, str, float]] = []
        self._events: list[dict[str, Any]] = []
        self._bad = 0
        self._open: int | None = None  # index of the last row, still waiting for its progress line
        self._hours: dict[str | bytes, float] = {}
        #: "le" or "be" once the log is known to be UTF-16 (its lines are read as such; the source says so)
        self.utf16: str | None = None
        self.sink_size: int | None = None  # v0.6's "Will be Training epochs:1, sink_size:4" (-1: no sink)
        #: when the lines being parsed were written (the file's time): the time of a step line with no stamp
        self.arrived: float | None = None
        self.untimed = 0  # step rows timed by their arrival, not by a stamp of their own
        self.lines_seen = 0
        self.step_lines = 0  # lines read as steps (rows or bad rows)
        self.look_alike = 0  # lines that look like steps but match no format (each a bad row)
        self.first_look_alike: str | None = None
        self.formats: set[str] = set()  # the step formats read: "mindformers", "mindformers v0.6", ...
        # LossMonitor's step is within its epoch: the epoch's size (from TimeMonitor, else the last step seen)
        self._lm_epoch: int | None = None
        self._lm_size: dict[int, int] = {}
        self._lm_base: tuple[int, int] | None = None  # (epoch, global step before it) while the sizes hold
        self._lm_waiting: list[list[float]] = []  # this epoch's rows not given out, waiting for TimeMonitor
        self._arrival_rows: list[list[float]] = []  # this read's rows timed by the file (_space_arrivals)

    # -- the public calls ----------------------------------------------------------------

    def parse(self, blob: bytes, arrived: float | None = None) -> Parsed:
        """Read complete lines (a :class:`~mstop.sources.files.Chunk`'s ``blob``); ``arrived``: when they
        were written (the file's time), the time of step lines with no timestamp of their own. The last step
        line's row is held back until its progress line (or any later step) comes, or :meth:`flush`."""
        if arrived is not None:
            self.arrived = arrived
        got = _classify(blob) if len(blob) >= 64 * BULK_RUN and self.utf16 is None else None
        if got is None:
            lines = blob.splitlines()
            self.lines_seen += len(lines)
            for raw in lines:
                self._one(raw)
            self._space_arrivals()
            return self._take(keep_open=True)
        kinds, arr, offsets = got
        self.lines_seen += len(kinds)
        lines = _Lines(blob, offsets)
        # runs of one family's lines as arrays (MindFormers' step and progress lines; LossMonitor's); the
        # lines between them, and short runs, one by one
        family = np.where(kinds == 3, 2, np.minimum(kinds, 1))
        cuts = [0, *(np.flatnonzero(family[1:] != family[:-1]) + 1).tolist(), len(kinds)]
        for a, b in zip(cuts[:-1], cuts[1:]):
            fam = int(family[a])
            if fam and b - a >= BULK_RUN and (self._bulk(lines, arr, kinds, a, b) if fam == 1 else
                                              self._bulk_loss_monitor(lines, arr, a, b)):
                continue
            for k in range(a, b):
                self._one(lines[k])
        self._space_arrivals()
        return self._take(keep_open=True)

    def _one(self, raw: bytes) -> None:
        """One line, on its own."""
        if b"\x00" in raw and (self.utf16 is not None or 3 * raw.count(0) >= len(raw)):
            raw = self._utf16(raw)  # a UTF-16 log (PowerShell's > and Tee-Object write one), split at b"\n"
        elif raw[:3] == b"\xef\xbb\xbf":  # a UTF-8 BOM
            raw = raw[3:]
        if b"{ Epoch:[" in raw:
            m = _FAST_STEP.match(raw)  # the usual shape, read without decoding (see _fast_step)
            if m is None:
                self.line(raw.decode("utf-8", "replace"))
            else:
                self._fast_step(m, raw)
        elif b"samples/s/p" in raw and (m := _FAST_PROGRESS.search(raw)) is not None:
            self._sps(_cell_number(m.group(1).decode()))
        else:
            self.line(raw.decode("utf-8", "replace"))

    def _bulk(self, lines: Any, arr: Any, kinds: np.ndarray, a: int, b: int) -> bool:
        """Lines ``a``..``b`` (each a fast step line or a progress line) as arrays: their fields by one RE2
        pass, their times by array arithmetic, sessions and progress lines by where the steps go back.
        The same rows and events as reading them one by one; False (nothing done) where that would differ
        (a step no job ran, a stamp that is no date, a number a progress line cannot be read as)."""
        k = kinds[a:b]
        step_at = np.flatnonzero(k == 1) + a
        prog_at = np.flatnonzero(k == 2) + a
        if len(step_at) < 2:
            return False
        got = self._bulk_fields(arr, step_at, prog_at)
        if got is None:
            return False
        c, sps = got
        self.step_lines += len(step_at)
        # progress lines before the segment's first step belong to the row held from before
        early = prog_at < step_at[0]
        for v in sps[early].tolist():
            self._sps(v)
        # each step's samples/s/p: the first progress line after it, before the next step
        row_sps = np.full(len(step_at), np.nan)
        late = np.flatnonzero(~early)
        if len(late):
            owner = np.searchsorted(step_at, prog_at[late], side="right") - 1
            first = np.unique(owner, return_index=True)[1]
            row_sps[owner[first]] = sps[late][first]
        self._bulk_rows_of(c, row_sps)
        last = lines[int(step_at[-1])]
        self._last_fast_ts, self.last_time = last[7:30], None
        return True

    def _bulk_loss_monitor(self, lines: Any, arr: Any, a: int, b: int) -> bool:
        """Lines ``a``..``b`` (each LossMonitor's bare line) as arrays, an epoch at a time: the first line of
        each epoch one by one (sessions, the epoch's base step), the rest as one block timed by the file,
        as one by one. False (nothing done) before the first line where that would differ (no file time,
        a step that goes back, a loss that is no finite number)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if self.arrived is None:
            return False
        f = pc.extract_regex(arr.slice(a, b - a), _LM_RE2)
        try:
            ep, st, loss = (pc.cast(f.field(n).cast(pa.string()), pa.float64()).to_numpy(zero_copy_only=False)
                            for n in ("epoch", "step", "loss"))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return False
        if f.null_count or not np.isfinite(loss).all() or (ep < 1).any() or (st < 1).any():
            return False
        cuts = [0, *(np.flatnonzero(ep[1:] != ep[:-1]) + 1).tolist(), len(ep)]
        for s0, e0 in zip(cuts[:-1], cuts[1:]):
            rows = len(self._rows)
            self._one(lines[a + s0])
            base = self._lm_base
            steps = st[s0 + 1:e0]
            if (len(self._rows) != rows + 1 or base is None or base[0] != int(ep[s0]) or
                    (np.diff(st[s0:e0]) <= 0).any()):
                for k in range(s0 + 1, e0):  # as one by one would: the line does not fit a block
                    self._one(lines[a + k])
                continue
            if len(steps):
                self._lm_rows(int(ep[s0]), base[1], steps, loss[s0 + 1:e0])
        return True

    def _lm_rows(self, epoch: int, base: int, steps: np.ndarray, loss: np.ndarray) -> None:
        """LossMonitor rows of one epoch after its first (which opened the session): one block, each row
        timed by the file and waiting for the epoch's TimeMonitor line."""
        m, gstep = len(steps), base + steps
        table = np.full((m, len(NUMERIC) + len(EXTRA)), np.nan)
        table[:, 0], table[:, 1], table[:, 2], table[:, 3] = self.arrived, gstep, float(epoch), loss
        self._sessions.extend([self.session or ""] * m)
        self._sps_of.extend([math.nan] * m)
        self._batch_of.extend([self._batch] * m)
        self._open = len(self._rows) + m - 1
        self._rows.extend([_BULK] * m)
        self._extra.extend([_BULK] * m)
        self._bulk_rows.append(table)
        views = list(table)  # each row a view: TimeMonitor's step time and the spacing by it write through
        self._arrival_rows.extend(views)
        self._lm_waiting.extend(views)
        self.last_step = float(gstep[-1])
        self._lm_size[epoch] = max(self._lm_size.get(epoch, 0), int(steps[-1]))
        self.step_lines += m
        self.untimed += m

    def _bulk_fields(self, arr: Any, step_at: np.ndarray,
                     prog_at: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray] | None:
        """The step lines' fields as float arrays (and ``time``), and the progress lines' samples/s/p; None
        where a line would read otherwise one by one."""
        import pyarrow as pa
        import pyarrow.compute as pc

        f = _extract(arr.take(pa.array(step_at)), _FIELDS_RE2[:-1] + r"\n$")
        if f.null_count:
            return None

        def number(field: Any) -> np.ndarray:
            return pc.cast(field.cast(pa.string()), pa.float64()).to_numpy(zero_copy_only=False)

        try:
            c = {n: number(f.field(n)) for n in ("epoch", "epochs", "step", "steps", "loss", "ms", "lr", "scale",
                                                 "norm")}
            tf = f.field("tflops")  # an optional group: empty where the line has none
            c["tflops"] = np.full(len(step_at), np.nan)
            said = pc.binary_length(tf).to_numpy(zero_copy_only=False) > 0
            if said.any():
                c["tflops"][said] = number(tf.filter(pa.array(said)))
            sps = np.full(0, np.nan)
            if len(prog_at):
                p = pc.extract_regex(arr.take(pa.array(prog_at)), _PROGRESS_RE2)
                if p.null_count:
                    return None
                sps = number(p.field("sps"))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None  # "1.2.3" samples/s/p, a field that is no number: line by line
        ts = f.field("ts")
        data = np.frombuffer(ts.buffers()[2], np.uint8)
        width = np.int64 if pa.types.is_large_binary(ts.type) else np.int32
        off = np.frombuffer(ts.buffers()[1], width)[ts.offset:ts.offset + len(ts) + 1]
        raw_ts = data[off[0]:off[-1]]
        if len(raw_ts) != 23 * len(ts):
            return None
        c["time"] = self._stamp_array(raw_ts.reshape(-1, 23))
        if not (np.isfinite(c["time"]).all() and all((c[n] >= 1).all() for n in ("epoch", "epochs", "step", "steps"))):
            return None
        c["over"] = (f.field("over").to_numpy(zero_copy_only=False) == b"True").astype(np.float64)
        return c, sps

    def _bulk_rows_of(self, c: dict[str, np.ndarray], row_sps: np.ndarray) -> None:
        """The rows of a run of step lines read as arrays: sessions cut where the step goes back (or the
        total changes), as :meth:`_begin_row` does row by row, and one block of numbers."""
        gstep = (c["epoch"] - 1) * c["steps"] + c["step"]
        total = c["epochs"] * c["steps"]
        cuts = np.flatnonzero((gstep[1:] <= gstep[:-1]) | (total[1:] != total[:-1])) + 1
        first_row, m = len(self._rows), len(gstep)
        for s0, e0 in zip([0, *cuts.tolist()], [*cuts.tolist(), m]):
            t0 = float(c["time"][s0])
            self._begin_row(int(c["epoch"][s0]), int(c["epochs"][s0]), int(c["step"][s0]), int(c["steps"][s0]),
                            lambda t=t0: t)
            n = e0 - s0 - 1
            if n:
                self._sessions.extend([self.session or ""] * n)
                self._sps_of.extend([math.nan] * n)
                self._batch_of.extend([self._batch] * n)
                self.last_step = float(gstep[e0 - 1])
        self._sps_of[first_row:first_row + m] = row_sps.tolist()
        self._open = None if not np.isnan(row_sps[-1]) else first_row + m - 1
        table = np.full((m, len(NUMERIC) + len(EXTRA)), np.nan)
        table[:, 0], table[:, 1], table[:, 2] = c["time"], gstep, c["epoch"]
        table[:, 3], table[:, 4], table[:, 5] = c["loss"], c["lr"], c["norm"]
        table[:, 6] = np.where(c["ms"] > 0, c["ms"] / 1000.0, np.nan)
        table[:, 16], table[:, 17] = c["over"], c["scale"]
        table[:, len(NUMERIC) + EXTRA.index("train_throughput_per_npu")] = c["tflops"]
        self._rows.extend([_BULK] * m)
        self._extra.extend([_BULK] * m)
        self._bulk_rows.append(table)

    def _utf16(self, raw: bytes) -> bytes:
        """A line of a UTF-16 log as UTF-8. Split at its b"\\n" bytes, each line keeps a stray byte of its
        line ends (the leading 0 of a little-endian line after the first, the trailing 0 of a big-endian
        one); the byte order comes from the BOM, else from where the zero bytes of ASCII text fall."""
        for bom, order in ((b"\xff\xfe", "le"), (b"\xfe\xff", "be")):
            if raw.startswith(bom):
                self.utf16, raw = order, raw[len(bom):]
        order = self.utf16 or ("le" if raw[1::2].count(0) >= raw[0::2].count(0) else "be")
        if len(raw) % 2:
            raw = raw[1:] if order == "le" else raw[:-1]
        text = raw.decode("utf-16-le" if order == "le" else "utf-16-be", "replace").rstrip("\r")
        if self.utf16 is None and text.isprintable():
            self.utf16 = order
        return text.encode("utf-8", "surrogatepass").replace(b"\x00", b"")

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
            if not self._unprefixed(text):
                self._continuation(text)
            return
        ts, ms = (m.group("ts"), m.group("ms")) if m.group("ts") else (m.group("ts2"), m.group("ms2"))
        level = m.group("level") or m.group("level2")
        t = self._time(ts, ms)
        msg = text[m.end():]
        if ("loss is" in msg or "per step time" in msg or looks_like_step(msg)) and not _RAISED.match(msg):
            if math.isnan(t) and looks_like_step(msg):
                self._bad += 1  # a step at no time: one bad row
                self.step_lines += 1
                return
            if self._any_step(t, msg, text):
                self.last_time = t
                return
        if math.isnan(t):  # a stamp that is no date: the line counts as one of the last dated line's
            t = self._line_time()
            if t is None:
                return
        self.last_time = t
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

    def _any_step(self, t: float, msg: str, whole: str) -> bool:
        """A step of any format mstop knows in ``msg`` (its time ``t``; NaN: the line had none): a row, or a
        bad row for a step line that cannot be read. A line that only looks like a step is a bad row too,
        counted and shown (never a silent zero); False for a line that is no step at all."""
        if "step:[" in msg:
            m = _STEP.search(msg)
            if m is not None:
                self._step(t, m)
                return True
            m = _STEP06.search(msg)
            if m is not None:
                self._step06(t, m)
                return True
        if "loss is" in msg and (m := _LOSS_MONITOR.search(msg)) is not None:
            self._loss_monitor(t, m)
            return True
        if "per step time" in msg and (m := _TIME_MONITOR.search(msg)) is not None:
            self._time_monitor(m)
            return True
        if looks_like_step(msg):  # a step line cut short, or of a format mstop does not know
            self.step_lines += 1
            self.look_alike += 1
            self._bad += 1
            if self.first_look_alike is None:
                self.first_look_alike = clean(whole.strip(), 160)
            return True
        return False

    def _unprefixed(self, text: str) -> bool:
        """A line with none of MindFormers' prefixes (stdout of ``print``, a job's own logger, ``tee``,
        lines pasted into a file): a step in it is read, timed by a timestamp before it, else by when the
        line was written (the file's time). False: no step here."""
        if _RAISED.match(text) or not ("per step time" in text or "loss is" in text or looks_like_step(text)):
            return False  # an exception's line ("ValueError: In epoch: 1 step: 4, loss is NAN") is no step
        ts = _ANY_TS.search(text)
        t = math.nan
        if ts is not None and ts.start() < text.find("step"):
            t = self._time(f"{ts.group('date')} {ts.group('time')}", ((ts.group("frac") or "") + "000")[:3])
        untimed = math.isnan(t)
        if untimed and self.arrived is not None:
            t = self.arrived
        if math.isnan(t) and "per step time" not in text:
            if not looks_like_step(text):
                return False  # "loss is" with no step: nothing a row could be made of
            self.step_lines += 1
            self._bad += 1  # a step at no time at all (no stamp, no file time): one bad row
            return True
        rows = len(self._rows)
        self._timing_by_arrival = untimed
        try:
            if not self._any_step(t, text, text):
                return False
        finally:
            self._timing_by_arrival = False
        if untimed:
            self.untimed += len(self._rows) - rows
        elif not math.isnan(t):
            self.last_time = t
        return True

    def _step(self, t: float, m: re.Match[str]) -> None:
        """A row of MFLossMonitor's (or the PyNative trainer's) step line."""
        self.step_lines += 1
        loss_text = m.group("loss") if m.group("loss") is not None else m.group("sink_loss")
        if not _is_number(loss_text):
            self._bad += 1  # a step line cut short, or not MindFormers'
            return
        epoch, epochs = int(m.group("epoch") or 1), int(m.group("epochs") or 1)
        if not _real_step(epoch, epochs, int(m.group("step")), int(m.group("steps"))):
            self._bad += 1  # Epoch:[0/0], step:[0/0]: no step a job ran (it would start a phantom session)
            return
        self.formats.add("mindformers" if m.group("epoch") is not None else "mindformers pynative")
        f = _fields(m.group("rest"))
        over = f.get("overflow_cond")
        extra = [_number(f.get(k)) for k in SEPARATE_LOSSES]
        extra.append(_number((f.get("train_throughput_per_npu") or f.get("throughput") or "").removesuffix("T")))
        norm = f.get("global_norm", f.get("grad_norm"))
        self._row(t, epoch, epochs, int(m.group("step")), int(m.group("steps")),
                  float(loss_text), _number(f.get("lr")), _number(norm),
                  _number(f.get("per_step_time", "").removesuffix("ms").strip()),
                  1.0 if over == "True" else 0.0 if over == "False" else math.nan, _number(f.get("loss_scale")),
                  extra, norm_said=_is_number(norm))

    def _step06(self, t: float, m: re.Match[str]) -> None:
        """A row of MindFormers v0.6's step line: ``time`` is the step's milliseconds, in sink mode the whole
        sink's (``sink_size`` steps, as its "Will be Training" line said): the row's is per step."""
        self.step_lines += 1
        if not _is_number(m.group("loss")) or not _is_number(m.group("ms")):
            self._bad += 1
            return
        epoch, epochs, step, steps = (int(m.group(k)) for k in ("epoch", "epochs", "step", "steps"))
        if not _real_step(epoch, epochs, step, steps):
            self._bad += 1
            return
        self.formats.add("mindformers v0.6")
        f = _fields(m.group("rest"))
        ms = float(m.group("ms")) / (self.sink_size if self.sink_size and self.sink_size > 1 else 1)
        over = f.get("overflow_cond")
        self._row(t, epoch, epochs, step, steps, float(m.group("loss")), _number(f.get("lr")), math.nan, ms,
                  1.0 if over == "True" else 0.0 if over == "False" else math.nan, _number(f.get("loss_scale")),
                  [math.nan] * (len(SEPARATE_LOSSES) + 1), norm_said=False)

    def _loss_monitor(self, t: float, m: re.Match[str]) -> None:
        """A row of MindSpore's LossMonitor: its step is within the epoch; the global step adds the sizes
        of the epochs before (TimeMonitor's count, else the last step seen in each)."""
        self.step_lines += 1
        loss_text = m.group("loss").strip().strip("[]()").strip()
        epoch, step = int(m.group("epoch")), int(m.group("step"))
        if not _is_number(loss_text) or epoch < 1 or step < 1:
            self._bad += 1
            return
        self.formats.add("mindspore LossMonitor")
        if self._lm_epoch is not None and epoch < self._lm_epoch:
            self._lm_size.clear()  # a new process from an earlier epoch: the sizes count again
            self._lm_base = None
        if epoch != self._lm_epoch:
            self._lm_waiting = []
        if self._lm_base is not None and self._lm_base[0] == epoch:
            base = self._lm_base[1]
        else:
            # an earlier epoch not seen (a log that begins at epoch 2: rotated, or a resumed job) is guessed
            # from the epochs before this one only: this epoch's own growing size would move its base with
            # every line (steps 1, 3, 5 ...); the base then holds for the epoch, guessed or not
            earlier = [v for e, v in self._lm_size.items() if e < epoch]
            size = self._lm_size.get(epoch - 1) or max(earlier, default=0)
            base = sum(self._lm_size.get(e, size) for e in range(1, epoch))
            self._lm_base = (epoch, base)
        self._lm_epoch = epoch
        self._lm_size[epoch] = max(self._lm_size.get(epoch, 0), step)
        gstep = base + step
        i = len(self._rows)
        self._begin_row(1, 1, gstep, 0, lambda: t)
        loss = float(loss_text)
        if not math.isfinite(loss):
            self._nonfinite.append((i, "loss", loss))
        row = [math.nan] * len(NUMERIC)
        row[0], row[1], row[2], row[3] = t, float(gstep), float(epoch), loss
        if self._timing_by_arrival:
            self._arrival_rows.append(row)
        self._rows.append(row)
        self._lm_waiting.append(row)
        self._extra.append([math.nan] * len(EXTRA))

    def _time_monitor(self, m: re.Match[str]) -> None:
        """TimeMonitor's epoch line: the epoch's size (epoch time / per step time), and its per-step time
        for the epoch's rows not given out yet (a log read afterwards: all of them)."""
        epoch_ms, step_ms = _number(m.group("epoch_ms")), _number(m.group("step_ms"))
        if not (step_ms > 0 and math.isfinite(epoch_ms)):
            return
        self.formats.add("mindspore TimeMonitor")
        if self._lm_epoch is not None:
            self._lm_size[self._lm_epoch] = max(1, round(epoch_ms / step_ms))
            self._lm_base = None  # an epoch's size changed: the next epoch's base is counted again
        for row in self._lm_waiting:  # the epoch's rows still here (not given out), each once
            if math.isnan(row[6]):
                row[6] = step_ms / 1000.0
        self._lm_waiting = []

    def _fast_step(self, m: re.Match[bytes], raw: bytes) -> None:
        """A step line of the usual shape (:data:`_FAST_STEP`: file format, non-sink loss, lr, finite numbers,
        no separate losses). Only its step is read now; its numbers are read with the others at
        :meth:`_take`, by pandas, from the text kept."""
        self.step_lines += 1
        g = m.groups()
        hour = raw[7:20]
        base = self._hours.get(hour)
        if base is None:
            base = self._hour(hour.decode())
        if math.isnan(base) or not _real_step(int(g[4]), int(g[5]), int(g[6]), int(g[7])):
            self._bad += 1  # a stamp that is no date, or a step no job ran (step 0 of 0): one bad row
            return
        gstep = self._begin_row(int(g[4]), int(g[5]), int(g[6]), int(g[7]), lambda: self._time(
            g[0].decode() + ":" + g[1].decode() + ":" + g[2].decode(), g[3].decode()))
        self._rows.append(None)
        self._extra.append(None)
        text = raw[m.start(5):]
        self._fast.append((raw[7:30], text if g[14] is not None else text + _NO_TFLOPS,
                           1.0 if g[11] == b"True" else 0.0, gstep))
        self._last_fast_ts, self.last_time = raw[7:30], None  # the time is read when needed (_line_time)

    def _begin_row(self, epoch: int, epochs: int, step: int, steps: int, when: Callable[[], float]) -> float:
        """Sessions and start events up to date for a row of this step (a new session where none is open,
        after an end, or where the step goes back; ``when`` gives the line's time, read only then); the row's
        place in the lists. Returns the global step."""
        gstep = float((epoch - 1) * steps + step) if steps > 0 else float(step)
        if self.session is None or self.ended or (self.last_step is not None and gstep <= self.last_step):
            self._new_session(self.first_time if self.first_time is not None else when())
        self.steps_per_epoch, self.total_steps = steps, epochs * steps
        if not self.started or self._started_total != self.total_steps:
            self._start(self._session_start)
        self._sessions.append(self.session or "")
        self._sps_of.append(math.nan)
        self._batch_of.append(self._batch)
        self._open = len(self._rows)
        self.last_step = gstep
        self.first_time = None
        self.error = None
        self.error_sent = False
        return gstep

    def _row(self, t: float, epoch: int, epochs: int, step: int, steps: int, loss: float, lr: float,
             norm: float, step_ms: float, overflow: float, scale: float, extra: list[float], *,
             norm_said: bool = True) -> None:
        """One step's row (sessions and start events kept up to date first)."""
        i = len(self._rows)
        gstep = self._begin_row(epoch, epochs, step, steps, lambda: t)
        if not math.isfinite(loss):
            self._nonfinite.append((i, "loss", loss))
        if not math.isfinite(norm) and norm_said:  # a missing norm is NaN too, but no NaN norm
            self._nonfinite.append((i, "grad_norm", norm))
        # NUMERIC's order: time step epoch loss lr grad_norm step_time data_wait queue_depth tokens samples
        # tokens_per_s mfu mem_used mem_peak mem_total overflow loss_scale (samples, and the exact step time,
        # at _take)
        self._rows.append([t, gstep, float(epoch), loss, lr, norm, step_ms / 1000.0 if step_ms > 0 else math.nan,
                           math.nan, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan,
                           overflow, scale])
        self._extra.append(extra + [math.nan])  # samples/s/p: filled at _take

    def _sps(self, sps: float) -> None:
        """The progress line after a step line: samples/s/p (and with it, at _take, the exact step time)."""
        if self._open is not None:
            self._sps_of[self._open] = sps
            self._open = None

    def _info(self, t: float, msg: str) -> None:
        if "Starting Training Model" in msg and _START_LINE.match(msg):
            if self.session is None or self.last_step is not None or self.ended:
                self._new_session(self.first_time if self.first_time is not None else t)
            self._start(self._session_start)
        elif "Training Over!" in msg and _OVER_LINE.match(msg):
            if self.session is not None and not self.ended:
                self._events.append({"kind": "end", "time": t, "session": self.session, "step": self.last_step})
                self.ended = True
            self.first_time = None  # the process's last line: a restart's start is after it
        elif "sink_size:" in msg and (m := _SINK_SIZE.search(msg)) is not None:
            self.sink_size = int(m.group("sink"))
        elif "global_batch_size = " in msg:
            self._global_batch(msg)
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

    def _global_batch(self, msg: str) -> None:
        """MindFormers' account of the global batch, in each of its forms: ``global_batch_size = batch_size_per_card
        * device_num * gradient_accumulation_steps = 4 = 4 * 1 * 1``, ``... = per_batch_size * data_parallel
        = 8 * 2 = 16``; the device count where the formula names it."""
        parts = [p.strip().rstrip(").") for p in msg.split("global_batch_size = ", 1)[1].split(" = ")]
        if len(parts) != 3:
            return
        formula, a, b = parts
        total, factors = (a, b) if a.isdigit() else (b, a)
        if not total.isdigit():
            return
        self.global_batch = int(total)
        names = [n.strip() for n in formula.split("*")]
        values = [v.strip() for v in factors.split("*")]
        devices = None
        if "device_num" in names and len(names) == len(values) and values[names.index("device_num")].isdigit():
            devices = float(values[names.index("device_num")])
            self.devices = int(devices)
        self._batch = (float(self.global_batch), devices if devices is not None else self._batch[1])

    def _error(self, t: float, msg: str) -> None:
        if self.session is not None and self.error is None:
            self.error = (t, clean(msg.strip(), 400))
        self.first_time = None  # the failing process's line: a restart's start is after it

    def _continuation(self, text: str) -> None:
        """A line of a multi-line record (a config dump, a traceback): only a traceback's exception matters."""
        if self.session is None or not text or text[0].isspace():
            return
        if text.startswith("Traceback (most recent call last)"):
            t = self._line_time()
            t = t if t is not None else self.arrived  # a log of prints has no stamps: the file's time
            if self.error is None and t is not None:
                self.error = (t, "Traceback (most recent call last)")
        elif self.error is not None and _EXCEPTION.match(text):
            t, first = self.error
            exc = clean(text.strip(), 300)
            self.error = (t, exc if first.startswith("Traceback") else f"{first} ({exc})")
        elif self.error is None and _RAISED.match(text):  # an exception's line with no traceback read before
            t = self._line_time()
            t = t if t is not None else self.arrived
            if t is not None:
                self.error = (t, clean(text.strip(), 300))

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
        plain = bool(self.formats) and all(f.startswith("mindspore") for f in self.formats)
        e: dict[str, Any] = {"kind": "start", "time": t, "session": self.session, "rank": self.rank,
                             "source": SOURCE_PLAIN if plain else SOURCE, "memory_source": "none",
                             "cannot_give": list(CANNOT),
                             "note": f"read from a {'MindSpore' if plain else 'MindFormers'} log: no "
                                     f"{', '.join(CANNOT)}"}
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
    _timing_by_arrival = False  # the step being read has no stamp: it is timed by the file's time

    def _space_arrivals(self) -> None:
        """Rows of one read timed by the file's time (no stamps: LossMonitor's print) all got that one
        instant; counted back from it by their step times instead (TimeMonitor's per-step time), the last
        at the file's time, so elapsed, pace and goodput read as the job ran, not as one moment."""
        rows, self._arrival_rows = self._arrival_rows, []
        for i in range(len(rows) - 2, -1, -1):  # one read's rows share one arrival time
            if math.isfinite(rows[i + 1][6]):
                rows[i][0] = rows[i + 1][0] - rows[i + 1][6]
    _batch: tuple[float, float] = (math.nan, math.nan)  # (global batch, devices) the log said last
    _started_total: int | None = None

    # -- output -----------------------------------------------------------------------------

    def _take(self, *, keep_open: bool) -> Parsed:
        n = len(self._rows) - (1 if keep_open and self._open is not None else 0)
        events, self._events = self._events, []
        bad, self._bad = self._bad, 0
        if n <= 0:
            return Parsed(_empty(list(EXTRA), bad), events)
        table = np.full((n, len(NUMERIC) + len(EXTRA)), np.nan)
        head = self._rows[:n]
        careful = [i for i, r in enumerate(head) if r is not None and r is not _BULK]
        if careful:
            table[careful] = [self._rows[i] + self._extra[i] for i in careful]  # type: ignore[operator]
        fast = [i for i, r in enumerate(head) if r is None]
        if fast:
            table[fast] = self._fast_table(self._fast[:len(fast)])
            self._fast = self._fast[len(fast):]
        bulk = [i for i, r in enumerate(head) if r is _BULK]
        if bulk:
            table[bulk] = self._take_bulk(len(bulk))
        self._exact_step_time(table, n)
        nonfinite = [x for x in self._nonfinite if x[0] < n]
        rows = _rows(table, list(EXTRA), self._sessions[:n], nonfinite, bad)
        for name in ("_rows", "_extra", "_sessions", "_sps_of", "_batch_of"):
            setattr(self, name, getattr(self, name)[n:])
        self._nonfinite = [(i - n, c, v) for i, c, v in self._nonfinite if i >= n]
        if self._open is not None:
            self._open = self._open - n if self._open >= n else None
        # rows given out are no longer filled in by a TimeMonitor line (the waiting rows are the newest: at
        # most the rows still here are kept; a kept one given out is written to, read by no one)
        self._lm_waiting = self._lm_waiting[len(self._lm_waiting) - min(len(self._lm_waiting), len(self._rows)):]
        return Parsed(rows, events)

    def _take_bulk(self, k: int) -> np.ndarray:
        """The first ``k`` rows read as arrays."""
        parts, got = [], 0
        while got < k:
            block = self._bulk_rows[0]
            need = k - got
            if len(block) <= need:
                parts.append(self._bulk_rows.pop(0))
                got += len(block)
            else:
                parts.append(block[:need])
                self._bulk_rows[0] = block[need:]
                got = k
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def _fast_table(self, fast: list[tuple[bytes, bytes, float, float]]) -> np.ndarray:
        """The rows of fast lines: their numbers read by one pandas call, their times by array arithmetic."""
        import io

        import pandas as pd

        stamps, texts, overflow, steps = zip(*fast)
        out = np.full((len(fast), len(NUMERIC) + len(EXTRA)), np.nan)
        blob = b"\n".join(texts).translate(_FAST_TABLE)
        df = pd.read_csv(io.BytesIO(blob), sep=r"\s+", header=None, usecols=list(_FAST_COLS.values()),
                         engine="c", dtype=np.float64)
        col = {name: df[j].to_numpy(dtype=np.float64) for name, j in _FAST_COLS.items()}
        out[:, 0] = self._stamps(stamps)
        out[:, 1] = steps
        out[:, 2], out[:, 3], out[:, 4], out[:, 5] = col["epoch"], col["loss"], col["lr"], col["grad_norm"]
        out[:, 6] = np.where(col["step_ms"] > 0, col["step_ms"] / 1000.0, np.nan)
        out[:, 16], out[:, 17] = overflow, col["loss_scale"]
        out[:, len(NUMERIC) + EXTRA.index("train_throughput_per_npu")] = col["tflops"]
        return out

    def _stamps(self, stamps: tuple[bytes, ...]) -> np.ndarray:
        """Unix times of ``YYYY-MM-DD HH:MM:SS,mmm`` stamps, as arrays: one calendar call per hour."""
        return self._stamp_array(np.frombuffer(b"".join(stamps), np.uint8).reshape(-1, 23))

    def _stamp_array(self, raw: np.ndarray) -> np.ndarray:
        """Unix times of stamps given as an (n, 23) array of their bytes; NaN where the hour is no date."""
        a = raw.astype(np.int64) - 48
        digits = np.array([0, 1, 2, 3, 5, 6, 8, 9, 11, 12])  # YYYY MM DD HH: one number per hour
        key = a[:, digits] @ (10 ** np.arange(9, -1, -1, dtype=np.int64))
        hours, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        heads = [bytes(raw[i, :13]) for i in first]
        base = np.array([self._hours.get(h) or self._hour(h.decode()) for h in heads], dtype=np.float64)
        minute = a[:, 14] * 10 + a[:, 15]
        second = a[:, 17] * 10 + a[:, 18]
        ms = a[:, 20] * 100 + a[:, 21] * 10 + a[:, 22]
        return base[inverse.reshape(-1)] + minute * 60 + second + ms / 1000.0

    def _exact_step_time(self, table: np.ndarray, n: int) -> None:
        """Samples per step (the global batch), and the step time from samples/s/p where the log gave the
        global batch and the device count: ``batch / devices / (samples/s/p)``, kept only where it truncates
        to MindFormers' own ``per_step_time`` (else the batch or devices read are not what it divided by)."""
        sps = np.array(self._sps_of[:n], dtype=np.float64)
        batch = np.array(self._batch_of[:n], dtype=np.float64).reshape(n, 2)
        table[:, len(NUMERIC) + EXTRA.index("samples_per_s_per_npu")] = sps
        table[:, 10] = batch[:, 0]
        with np.errstate(all="ignore"):
            exact = batch[:, 0] / batch[:, 1] / sps
            ms = table[:, 6]
            agrees = np.floor(exact * 1000.0 + 1e-6) == np.round(ms * 1000.0)
            ok = np.isfinite(exact) & (sps > 0) & (np.isnan(ms) | agrees)
        table[:, 6] = np.where(ok, exact, ms)

    def _line_time(self) -> float | None:
        """The time of the last line with a timestamp (a fast line's is read only now)."""
        if self.last_time is None and self._last_fast_ts is not None:
            ts = self._last_fast_ts.decode()
            self.last_time = self._time(ts[:19], ts[20:23])
        return self.last_time

    def _time(self, ts: str, ms: str) -> float:
        """Unix time of a timestamp (local time of the writing host), one calendar call per hour."""
        hour = ts[:13]
        base = self._hours.get(hour)
        if base is None:
            base = self._hour(hour)
        return base + int(ts[14:16]) * 60 + int(ts[17:19]) + int(ms) / 1000.0

    def _hour(self, hour: str) -> float:
        """Unix time of the start of an hour ``YYYY-MM-DD HH`` (cached under its text and its bytes); NaN
        for a stamp that is no date."""
        try:
            base = _unix(time.strptime(hour, "%Y-%m-%d %H"), self.gmtoff)
        except (ValueError, OverflowError):  # no date (2026-13-45, 2026-02-30): the line has no time
            base = math.nan
        if len(self._hours) > 4096:
            self._hours.clear()
        self._hours[hour] = self._hours[hour.encode()] = base  # type: ignore[index]
        return base


def _unix(st: time.struct_time, gmtoff: float | None) -> float:
    """Unix time of a log's local time: on the writing host's offset from UTC when known, else in the
    viewer's own zone (a log read where it was written)."""
    return calendar.timegm(st) - gmtoff if gmtoff is not None else time.mktime(st)


def _extract(arr: Any, pattern: str) -> Any:
    """pyarrow.compute.extract_regex over ``arr``, in pieces on two threads when long (it lets go of the
    GIL: a second core halves a long read)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(arr)
    if n < 20_000:
        return pc.extract_regex(arr, pattern)
    from concurrent.futures import ThreadPoolExecutor

    bounds = [n * i // 4 for i in range(5)]
    with ThreadPoolExecutor(2) as pool:
        parts = list(pool.map(lambda i: pc.extract_regex(arr.slice(bounds[i], bounds[i + 1] - bounds[i]), pattern),
                              range(4)))
    return pa.concat_arrays(parts)


#: a row read as arrays (:meth:`MfLogParser._bulk`): its numbers are in the parser's blocks
_BULK: Any = ()


class _Lines:
    """The lines of a blob split at its newlines, each made when asked for (most are read as arrays)."""

    def __init__(self, blob: bytes, offsets: np.ndarray) -> None:
        self.blob, self.offsets = blob, offsets

    def __getitem__(self, k: int) -> bytes:
        return self.blob[int(self.offsets[k]):int(self.offsets[k + 1]) - 1]

    def __len__(self) -> int:
        return len(self.offsets) - 1


def _classify(blob: bytes) -> tuple[np.ndarray, Any, np.ndarray] | None:
    """Each line's kind, found over the whole array at once (RE2, pyarrow.compute): 1 a fast step line,
    2 a progress line, 3 LossMonitor's bare line, 0 any other (read one by one); and the lines as an Arrow
    array. None without pyarrow, or for text whose lines the two splittings would not cut alike (a CR), or
    with NULs or a BOM (those lines have rules of their own): every line one by one then."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:
        return None
    if b"\r" in blob or b"\x00" in blob or b"\xef\xbb\xbf" in blob or not blob.endswith(b"\n"):
        return None
    ends = np.flatnonzero(np.frombuffer(blob, np.uint8) == 10)  # no CR: the lines splitlines() would give
    offsets = np.empty(len(ends) + 1, np.int64)
    offsets[0], offsets[1:] = 0, ends + 1
    arr = pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(ends),
                                           [None, pa.py_buffer(offsets), pa.py_buffer(blob)])
    kinds = np.zeros(len(ends), np.int8)
    cand = np.flatnonzero(pc.match_substring(arr, _FAST_WORDS).to_numpy(zero_copy_only=False))
    if len(cand):
        ok = pc.match_substring_regex(arr.take(pa.array(cand)), _FAST_RE2[:-1] + r"\n$")
        kinds[cand[ok.to_numpy(zero_copy_only=False)]] = 1
    rest = np.flatnonzero(kinds == 0)  # progress lines among the others: "samples/s/p", and no step record
    if len(rest):
        sub = arr.take(pa.array(rest))
        prog = rest[pc.match_substring(sub, b"samples/s/p").to_numpy(zero_copy_only=False)]
        if len(prog):
            prog = prog[~pc.match_substring(arr.take(pa.array(prog)), b"{ Epoch:[").to_numpy(zero_copy_only=False)]
        kinds[prog] = 2
    rest = np.flatnonzero(kinds == 0)  # LossMonitor's bare lines: 3
    if len(rest):
        lm = rest[pc.match_substring(arr.take(pa.array(rest)), b"loss is").to_numpy(zero_copy_only=False)]
        if len(lm):
            ok = pc.match_substring_regex(arr.take(pa.array(lm)), _LM_RE2)
            kinds[lm[ok.to_numpy(zero_copy_only=False)]] = 3
    return kinds, arr, offsets


def looks_like_step(text: str) -> bool:
    """Whether a line reads as a training step to a person: it names a step and a loss, each with a number
    (``step:[ 3/ 4], loss:[oops`` or ``{ Epoch:[`` too: a MindFormers step record cut short). Such a line is a
    row, or a bad row that is counted and shown; MindFormers' other ``step:[..]`` lines (TrainingStateMonitor's norms)
    name no loss and are not steps."""
    if _RAISED.match(text):  # an exception's line names a step and a loss too: it is a failure, not a step
        return False
    return ("{ Epoch:[" in text or ("step:[" in text and "loss" in text)
            or _LOOKS_LIKE_STEP.search(text) is not None)


def _real_step(epoch: int, epochs: int, step: int, steps: int) -> bool:
    """Whether a step line names a step a job ran: MindFormers counts epochs and steps from 1."""
    return epoch >= 1 and epochs >= 1 and step >= 1 and steps >= 1


def _fields(rest: str) -> dict[str, str]:
    """``, key: value`` pairs after the loss (``global_norm: [1.0]`` gives ``1.0``; ``lm loss`` is
    ``lm_loss``; the record's closing brace is not part of its last value)."""
    out = {}
    for part in rest.split(","):
        key, sep, value = part.partition(":")  # v0.6 prints "lr:[0.]", later ones "lr: 1e-05"
        if sep:
            out[key.strip().replace(" ", "_")] = value.strip().rstrip("}").strip().strip("[]").strip()
    return out


def _number(text: str | None) -> float:
    """A field's text as a float; NaN when missing or not a number (the CSV parser's rule)."""
    return _cell_number(text or "")


def _is_number(text: str | None) -> bool:
    try:
        float(text or "")
    except ValueError:
        return False
    return True



#: msrun's scheduler log (MindSpore's meta server node): a worker registering (its node id and rank id),
#: unregistering (it called finalize: it ended cleanly), and timed out (no heartbeat reached the scheduler
#: for its timeout: the process exited abnormally, was killed, or hangs stopped; MindSpore 2.x's
#: meta_server_node.cc ``UpdateTopoState``: ``The node: 1 is timed out. It may exit with exception, please
#: check this node's log.``)
_REGISTER = re.compile(r"The new node: (?P<node>\d{1,7})\(role: MS_WORKER\), rank id: (?P<rank>\d{1,7})")
_UNREGISTER = re.compile(r"Node (?P<node>\d{1,7}) has unregistered")
_TIMED_OUT = re.compile(r"The node: (?P<node>\d{1,7}) is timed out")


@dataclass(frozen=True)
class WorkerState:
    """What msrun's scheduler log says of one worker: ``end`` (it unregistered: a clean exit) or ``lost``
    (timed out: it exited abnormally or stopped), when (unix time), and the scheduler's line (cleaned)."""

    rank: int
    time: float
    kind: str
    line: str


class SchedulerLog:
    """msrun's ``scheduler.log``, for the job's state: which workers ended cleanly, which were lost, and
    when."""

    def __init__(self, *, gmtoff: float | None = None) -> None:
        self.rank_of: dict[int, int] = {}
        self.gmtoff = gmtoff  # the writing host's offset from UTC (as MfLogParser's), else the viewer's zone

    def parse(self, blob: bytes) -> list[WorkerState]:
        """What these lines say of workers ending (cleanly or not), oldest first."""
        out = []
        for raw in blob.splitlines():
            if b"node" not in raw.lower():
                continue
            text = raw.decode("utf-8", "replace")
            m = _REGISTER.search(text)
            if m is not None:
                self.rank_of[int(m.group("node"))] = int(m.group("rank"))
                continue
            m = _UNREGISTER.search(text)
            kind = "end"
            if m is None:
                m, kind = _TIMED_OUT.search(text), "lost"
            ts = _ANY_TS.search(text)
            if m is None or ts is None:
                continue
            try:
                base = _unix(time.strptime(f"{ts.group('date')} {ts.group('time')}", "%Y-%m-%d %H:%M:%S"), self.gmtoff)
            except (ValueError, OverflowError):
                continue
            frac = ts.group("frac") or "0"
            node = int(m.group("node"))
            line = clean(text[m.start():].strip(), 300)
            out.append(WorkerState(self.rank_of.get(node, node), base + int(frac) / 10 ** len(frac), kind, line))
        return out
