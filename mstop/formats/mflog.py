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

The reading is one driver and a list of formats, one per kind of logger (toolong's ``format_parser.py``):
:class:`MfLogParser` hands each line to the formats of :data:`FORMATS` in turn (MindFormers' step, progress
and job lines: mstop.formats.mfsteps; MindSpore's LossMonitor and TimeMonitor: mstop.formats.msmonitors),
the last one that read a step first, until one reads it; it reads the lines of a process's life itself (its
start, its end, its errors and tracebacks), and gives out the rows the formats added to the rank's shared
state (mstop.formats.logstate: sessions, rows held, the lines' time). A format is one class and one entry
of :data:`FORMATS`, with the methods of :class:`LogFormat`.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np

from ..safe import clean
from .logs import CANN
from .logstate import CANNOT, EXTRA, SEPARATE_LOSSES, SOURCE, SOURCE_PLAIN, LogState, looks_utf16, unix_time
from .mfsteps import MindFormersSteps
from .msmonitors import MonitorLines
from .parse import NUMERIC, Rows
from .waits import waited_peer

__all__ = ["CANNOT", "EXTRA", "SEPARATE_LOSSES", "SOURCE", "SOURCE_PLAIN", "MfLogParser", "Parsed", "SchedulerLog",
           "WorkerState", "looks_like_step"]

_TS = r"(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(?P<ms>\d{3})"
#: the two line formats of MindFormers' logger: the file's and stdout's
_PREFIX = re.compile(r"^\[(?P<level>[A-Z]+)\] " + _TS + r" \[[^\]]*\] [^:\s]*: ?"
                     r"|^" + _TS.replace("?P<ts>", "?P<ts2>").replace("?P<ms>", "?P<ms2>")
                     + r" - \S+ - (?P<level2>[A-Z]+) - ")
#: a timestamp anywhere before a step in a line of an unknown logger: ``2026-12-01 07:09:48,553``, ISO
#: ``2026-12-01T07:09:48.553``, MindSpore's own ``2026-12-01-07:09:48.553.123``
_ANY_TS = re.compile(r"(?P<date>\d{4}-\d\d-\d\d)[ T-](?P<time>\d\d:\d\d:\d\d)(?:[,.](?P<frac>\d{1,6}))?")
#: what a training step's line looks like to a person: a step (a number after it) and a loss (a number)
_LOOKS_LIKE_STEP = re.compile(r"\bstep\b\W{0,8}\d.*\bloss\b\W{0,12}(?:is\W{1,4})?[-+]?(?:\d|nan|inf)"
                              r"|\bloss\b\W{0,12}(?:is\W{1,4})?[-+]?(?:\d|nan|inf).*\bstep\b\W{0,8}\d", re.I)
#: MindFormers' own lines that start and end training (``.........Starting Training Model..........``), the
#: whole message: the words inside a config dump or a job's own message are not a start or an end
_START_LINE = re.compile(r"\.*\s*Starting Training Model\s*\.*\s*$")
_OVER_LINE = re.compile(r"\.*\s*Training Over!\s*\.*\s*$")
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Warning)\b")
#: an exception's last line on its own (``ValueError: ...``), a failure even with no traceback header read
_RAISED = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception): ")
#: MindSpore's own log line (glog's, and its Python logger's): ``[ERROR] DEVICE(1234,ffff,python):2024-06-04-
#: 10:20:42.176.000 [file.cc:300] SyncStream] Call aclrtSynchronizeStreamWithTimeout failed``, ``[WARNING]
#: ME(11357:1406...,MainProcess):2026-12-04-23:36:33.714.000 [file.py:69] ...``; its message after the
#: function's ``]``. An error fails a session; every level is a time stamp (a process's start, its last word)
_MS_LINE = re.compile(r"^\[(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\] [A-Z_]{1,32}\([^)]{0,80}\):"
                      r"(?P<date>\d{4}-\d\d-\d\d)-"
                       r"(?P<time>\d\d:\d\d:\d\d)\.(?P<ms>\d{3})(?:\.\d+)? ?(?:\[[^\]]{0,300}\] ?)?"
                       r"(?:\w{1,80}\] ?)?(?P<msg>.*)")
#: a run of at least this many step and progress lines between other lines is read as arrays (pyarrow); a
#: piece is looked at for runs when it has this many lines (its lines counted: a 16 KB piece cut to its whole
#: lines was just under the byte size once asked for, and never read as arrays)
BULK_RUN = 256
assert list(NUMERIC) == ["time", "step", "epoch", "loss", "lr", "grad_norm", "step_time", "data_wait", "queue_depth",
                         "tokens", "samples", "tokens_per_s", "mfu", "mem_used", "mem_peak", "mem_total", "overflow",
                         "loss_scale"], "MfLogParser._row lists the columns in this order"


@dataclass
class Parsed:
    """What a run of lines gave: rows, events, and the count of step lines that could not be read."""

    rows: Rows
    events: list[dict[str, Any]] = field(default_factory=list)


def _split(blob: bytes, utf16: bool) -> list[bytes]:
    """A blob's lines. UTF-16 (known, or by :func:`looks_utf16`): at b"\n" only (a character's 0x0D byte,
    U+0D00, is no line end; the "\r" of a CRLF is dropped once decoded)."""
    if not (utf16 or looks_utf16(blob)):
        return blob.splitlines()
    lines = blob.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    return lines


class LogFormat(Protocol):
    """One logger's lines in a rank's log (a class of mstop.formats.mfsteps or .msmonitors), built on the log's
    shared :class:`LogState` and reading into it."""

    #: the kinds of line its :meth:`classify` marks, read as arrays by its :meth:`bulk`
    bulk_kinds: tuple[int, ...]

    def fast(self, raw: bytes) -> bool:
        """A line of its usual shape, read without decoding; False: not one (it may still be read decoded)."""
        ...

    def step(self, t: float, msg: str) -> bool:
        """A step line of this format in ``msg`` (its time ``t``; NaN: none): a row, a bad row, or what the
        rows hold (an epoch's step time). False: not this format's."""
        ...

    def trailer(self, msg: str) -> bool:
        """A line that completes the step line before it (MindFormers' progress line); False: not one."""
        ...

    def info(self, t: float, msg: str) -> bool:
        """A line that says what the job's steps hold (batch, devices, FLOPs) or that a checkpoint was saved."""
        ...

    def classify(self, arr: Any, kinds: np.ndarray) -> None:
        """Mark in ``kinds`` (0: not marked yet) the lines of ``arr`` (an Arrow array of lines) it reads as
        arrays, with its :attr:`bulk_kinds`."""
        ...

    def bulk(self, lines: Any, arr: Any, kinds: np.ndarray, a: int, b: int, one: Callable[[bytes], None]) -> bool:
        """Lines ``a``..``b`` (each of its :attr:`bulk_kinds`) as arrays, the same rows as one by one (``one``
        reads a line so); False (nothing done) where they would differ."""
        ...

    def given_out(self) -> None:
        """The rows held were taken (:meth:`LogState.take`)."""
        ...


#: the formats of a log's lines, tried in this order at first (then the last to read a step first)
FORMATS: tuple[Callable[[LogState], LogFormat], ...] = (MindFormersSteps, MonitorLines)


class MfLogParser:
    """Read one rank's log, line after line, across reads (its state carries over).

    ``gmtoff``: the writing host's offset from UTC in seconds, when the source knows it; else the
    timestamps are read in this machine's local time. ``state``: what was read (its sessions, its counts of
    lines, the formats seen), for the sources' notes."""

    def __init__(self, rank: int, *, gmtoff: float | None = None, run_name: str | None = None) -> None:
        self.state = LogState(rank, gmtoff=gmtoff, run_name=run_name)
        self.formats: list[LogFormat] = [make(self.state) for make in FORMATS]

    def parse(self, blob: bytes, arrived: float | None = None) -> Parsed:
        """Read complete lines (a :class:`~mstop.sources.files.Chunk`'s ``blob``); ``arrived``: when they
        were written (the file's time), the time of step lines with no timestamp of their own. The last step
        line's row is held back until its progress line (or any later step) comes, or :meth:`flush`."""
        st = self.state
        if arrived is not None:
            st.arrived = arrived
        blob = st.whole_lines(blob)
        # the formats as they stand now: a line read one by one below may move another to the front, and
        # which format reads a run of lines as arrays must not move with it
        order = tuple(self.formats)
        got = _classify(order, blob) if blob.count(b"\n") >= BULK_RUN and st.utf16 is None else None
        if got is None:
            lines = _split(blob, st.utf16 is not None)
            st.lines_seen += len(lines)
            for raw in lines:
                self._one(raw)
            st.space_arrivals()
            return self._take(keep_open=True)
        kinds, arr, offsets = got
        st.lines_seen += len(kinds)
        lines = _Lines(blob, offsets)
        # runs of one format's lines as arrays; the lines between them, and short runs, one by one
        owner = np.zeros(max(k for f in order for k in f.bulk_kinds) + 1, np.int8)
        for i, f in enumerate(order):
            owner[list(f.bulk_kinds)] = i + 1
        family = owner[kinds]
        cuts = [0, *(np.flatnonzero(family[1:] != family[:-1]) + 1).tolist(), len(kinds)]
        for a, b in zip(cuts[:-1], cuts[1:]):
            fam = int(family[a])
            if fam and b - a >= BULK_RUN and order[fam - 1].bulk(lines, arr, kinds, a, b, self._one):
                continue
            for k in range(a, b):
                self._one(lines[k])
        st.space_arrivals()
        return self._take(keep_open=True)

    def _one(self, raw: bytes) -> None:
        """One line, on its own."""
        if b"\x00" in raw and (self.state.utf16 is not None or 3 * raw.count(0) >= len(raw)):
            raw = self._utf16(raw)  # a UTF-16 log (PowerShell's > and Tee-Object write one), split at b"\n"
        elif raw[:3] == b"\xef\xbb\xbf":  # a UTF-8 BOM
            raw = raw[3:]
        for f in self.formats:
            if f.fast(raw):
                return
        self.line(raw.decode("utf-8", "replace"))

    def flush(self) -> Parsed:
        """The lines read so far are all there is for now: give the held row, and the abort of a session
        whose last line is an error."""
        st = self.state
        if st.held:  # a UTF-16 log's last line without its end
            self._one(st.held.rstrip(b"\r"))
            st.held = b""
        if st.error is not None and not st.error_sent and st.session is None:
            # a Python exception before the first step (a device OOM at start, an HCCL socket or communicator
            # timeout while the graph compiles): the process's session began at its first stamped line, and
            # failed (steps after it would begin a session of their own)
            error = st.error
            st.new_session(st.first_time if st.first_time is not None else error[0])
            st.start()
            st.error = error
        if st.error is not None and not st.error_sent and not st.ended and st.session is not None:
            t, text = st.error
            st.event({"kind": "abort", "time": t, "session": st.session, "step": st.last_step, "error": text})
            st.error_sent = True
        st.send_waits()
        return self._take(keep_open=False)

    def line(self, text: str) -> None:
        """Read one line (without its newline)."""
        if "ank" in text and (w := waited_peer(text)) is not None:  # a collective's timeout naming its peer
            t = self.state.line_time()
            self.state.waited(t if t is not None else self.state.arrived, w)
        m = _PREFIX.match(text)
        if m is None:
            if not self._unprefixed(text):
                self._continuation(text)
            return
        ts, ms = (m.group("ts"), m.group("ms")) if m.group("ts") else (m.group("ts2"), m.group("ms2"))
        level = m.group("level") or m.group("level2")
        t = self.state.time(ts, ms)
        msg = text[m.end():]
        if ("loss is" in msg or "per step time" in msg or looks_like_step(msg)) and not _RAISED.match(msg):
            if math.isnan(t) and looks_like_step(msg):
                self.state.bad_row()  # a step at no time: one bad row
                self.state.step_lines += 1
                return
            if self._any_step(t, msg, text):
                self.state.last_time = t
                return
        if math.isnan(t):  # a stamp that is no date: the line counts as one of the last dated line's
            t = self.state.line_time()
            if t is None:
                return
        self.state.last_time = t
        if any(f.trailer(msg) for f in self.formats):
            return
        if self.state.first_time is None:
            self.state.first_time = t  # the first line since the last step: where a restart's session begins
        if level in ("ERROR", "CRITICAL"):
            self._error(t, msg)
        else:
            self._info(t, msg)

    def _any_step(self, t: float, msg: str, whole: str) -> bool:
        """A step of any format mstop knows in ``msg`` (its time ``t``; NaN: the line had none): a row, or a
        bad row for a step line that cannot be read. A line that only looks like a step is a bad row too,
        counted and shown (never a silent zero); False for a line that is no step at all."""
        for i, f in enumerate(self.formats):
            if f.step(t, msg):
                if i:  # the format that read it first from now on (toolong's FormatParser)
                    self.formats.insert(0, self.formats.pop(i))
                return True
        if looks_like_step(msg):  # a step line cut short, or of a format mstop does not know
            self.state.step_lines += 1
            self.state.look_alike += 1
            self.state.bad_row()
            if self.state.first_look_alike is None:
                self.state.first_look_alike = clean(whole.strip(), 160)
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
            t = self.state.time(f"{ts.group('date')} {ts.group('time')}", ((ts.group("frac") or "") + "000")[:3])
        untimed = math.isnan(t)
        if untimed and self.state.arrived is not None:
            t = self.state.arrived
        if math.isnan(t) and "per step time" not in text:
            if not looks_like_step(text):
                return False  # "loss is" with no step: nothing a row could be made of
            self.state.step_lines += 1
            self.state.bad_row()  # a step at no time at all (no stamp, no file time): one bad row
            return True
        rows = self.state.rows_held
        self.state.timing_by_arrival = untimed
        try:
            if not self._any_step(t, text, text):
                return False
        finally:
            self.state.timing_by_arrival = False
        if untimed:
            self.state.untimed += self.state.rows_held - rows
        elif not math.isnan(t):
            self.state.last_time = t
        return True

    def _info(self, t: float, msg: str) -> None:
        """A line of a process's life (MindFormers' start and end of training), else one a family reads."""
        if "Starting Training Model" in msg and _START_LINE.match(msg):
            if self.state.session is None or self.state.last_step is not None or self.state.ended:
                self.state.new_session(self.state.first_time if self.state.first_time is not None else t)
            self.state.start()
        elif "Training Over!" in msg and _OVER_LINE.match(msg):
            if self.state.session is not None and not self.state.ended:
                self.state.event({"kind": "end", "time": t, "session": self.state.session,
                                  "step": self.state.last_step})
                self.state.ended = True
            self.state.first_time = None  # the process's last line: a restart's start is after it
        else:  # the job's batch, devices, FLOPs, sink size; a checkpoint saved
            any(f.info(t, msg) for f in self.formats)

    def _error(self, t: float, msg: str) -> None:
        if self.state.session is not None and self.state.error is None:
            self.state.error = (t, clean(msg.strip(), 400))
        self.state.first_time = None  # the failing process's line: a restart's start is after it

    def _continuation(self, text: str) -> None:
        """A line of a multi-line record (a config dump, a traceback): only a traceback's exception matters;
        or MindSpore's own line (its time, and an error)."""
        if not text or text[0].isspace():
            return
        if text[0] == "[" and (m := _MS_LINE.match(text)) is not None:
            self._framework_line(m)
            return
        if self.state.session is None and self.state.first_time is None:
            return  # no process of this log has begun (a traceback before it: another program's, quoted)
        if text.startswith("Traceback (most recent call last)"):
            t = self.state.line_time()
            t = t if t is not None else self.state.arrived  # a log of prints has no stamps: the file's time
            if self.state.error is None and t is not None:
                self.state.error = (t, "Traceback (most recent call last)")
        elif self.state.error is not None and _EXCEPTION.match(text):
            t, first = self.state.error
            exc = clean(text.strip(), 300)
            self.state.error = (t, exc if first.startswith("Traceback") else f"{first} ({exc})")
        elif self.state.error is None and _RAISED.match(text):  # an exception's line with no traceback read before
            t = self.state.line_time()
            t = t if t is not None else self.state.arrived
            if t is not None:
                self.state.error = (t, clean(text.strip(), 300))
        elif CANN.match(text):  # the Ascend cause: the error itself, or what the error before it was
            t = self.state.line_time()
            t = t if t is not None else self.state.arrived
            if self.state.error is None and t is not None:
                self.state.error = (t, clean(text.strip(), 300))
            elif self.state.error is not None and not self.state.error[1].endswith(")"):
                self.state.error = (self.state.error[0], f"{self.state.error[1]} ({clean(text.strip(), 200)})")

    def _framework_line(self, m: re.Match[str]) -> None:
        """MindSpore's own line: a time a plain log otherwise lacks (the first since the last step begins a
        session; the last before unstamped steps begins their spread, ``LogState.space_arrivals``); at
        ``[ERROR]``/``[CRITICAL]`` after a session's last step, its error (as a MindFormers ERROR line)."""
        t = self.state.time(f"{m.group('date')} {m.group('time')}", m.group("ms"))
        error = m.group("level") in ("ERROR", "CRITICAL")
        if math.isnan(t):
            if not error:
                return
            t = self.state.line_time() or self.state.arrived or math.nan
            if math.isnan(t):
                return
        self.state.last_time = t
        if not error:
            if self.state.first_time is None:
                self.state.first_time = t
            return
        self.state.first_time = None  # the failing process's line: a restart's start is after it
        if self.state.session is not None and self.state.error is None:
            self.state.error = (t, clean(m.group("msg").strip() or m.group(0).strip(), 400))

    def _utf16(self, raw: bytes) -> bytes:
        """A line of a UTF-16 log as UTF-8. Split at its b"\\n" bytes, each line keeps a stray byte of its
        line ends (the leading 0 of a little-endian line after the first, the trailing 0 of a big-endian
        one); the byte order comes from the BOM, else from where the zero bytes of ASCII text fall."""
        for bom, order in ((b"\xff\xfe", "le"), (b"\xfe\xff", "be")):
            if raw.startswith(bom):
                self.state.utf16, raw = order, raw[len(bom):]
        order = self.state.utf16 or ("le" if raw[1::2].count(0) >= raw[0::2].count(0) else "be")
        codec = "utf-16-le" if order == "le" else "utf-16-be"
        if len(raw) % 2:  # a stray byte at one end: where a line end split it, or a character's 0x0A byte
            ends = [raw[1:], raw[:-1]] if order == "le" else [raw[:-1], raw[1:]]
            raw = max(ends, key=lambda b: sum(ord(c) < 128 for c in b.decode(codec, "replace")))
        text = raw.decode(codec, "replace").rstrip("\r")
        if self.state.utf16 is None and text.isprintable():
            self.state.utf16 = order
        return text.encode("utf-8", "surrogatepass").replace(b"\x00", b"")

    def _take(self, *, keep_open: bool) -> Parsed:
        rows, events = self.state.take(keep_open=keep_open)
        for f in self.formats:
            f.given_out()
        return Parsed(rows, events)


def _classify(formats: tuple[LogFormat, ...], blob: bytes) -> tuple[np.ndarray, Any, np.ndarray] | None:
    """Each line's kind, found over the whole array at once (RE2, pyarrow.compute) by each of ``formats`` in turn
    (0: read one by one); and the lines as an Arrow array. None without pyarrow, or for text whose lines
    the two splittings would not cut alike (a CR), or with NULs or a BOM (those lines have rules of their
    own): every line one by one then."""
    try:
        import pyarrow as pa
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
    for f in formats:
        f.classify(arr, kinds)
    return kinds, arr, offsets


class _Lines:
    """The lines of a blob split at its newlines, each made when asked for (most are read as arrays)."""

    def __init__(self, blob: bytes, offsets: np.ndarray) -> None:
        self.blob, self.offsets = blob, offsets

    def __getitem__(self, k: int) -> bytes:
        return self.blob[int(self.offsets[k]):int(self.offsets[k + 1]) - 1]

    def __len__(self) -> int:
        return len(self.offsets) - 1


def looks_like_step(text: str) -> bool:
    """Whether a line reads as a training step to a person: it names a step and a loss, each with a number
    (``step:[ 3/ 4], loss:[oops`` or ``{ Epoch:[`` too: a MindFormers step record cut short). Such a line is a
    row, or a bad row that is counted and shown; MindFormers' other ``step:[..]`` lines (TrainingStateMonitor's norms)
    name no loss and are not steps."""
    if _RAISED.match(text):  # an exception's line names a step and a loss too: it is a failure, not a step
        return False
    return ("{ Epoch:[" in text or ("step:[" in text and "loss" in text)
            or _LOOKS_LIKE_STEP.search(text) is not None)


#: msrun's scheduler log (MindSpore's meta server node): a worker registering (its node id and rank id),
#: unregistering (it called finalize: it ended cleanly), and timed out (no heartbeat reached the scheduler
#: for its timeout: the process exited abnormally, was killed, or hangs stopped; MindSpore 2.x's
#: meta_server_node.cc ``UpdateTopoState``: ``The node: 1 is timed out. It may exit with exception, please
#: check this node's log.``)
_REGISTER = re.compile(r"The new node: (?P<node>\d{1,7})\(role: MS_WORKER\), rank id: (?P<rank>\d{1,7})")
_UNREGISTER = re.compile(r"Node (?P<node>\d{1,7}) has unregistered")
_TIMED_OUT = re.compile(r"The node: (?P<node>\d{1,7}) is timed out")
#: the count of workers the scheduler waits for (``Currently registered node number: 1, expected node number: 4``)
_EXPECTED = re.compile(r"expected node number: (?P<n>\d{1,7})\b")


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
        #: the job's world size as msrun's scheduler names it (``expected node number: 4``), once read
        self.expected: int | None = None

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
                if (n := _EXPECTED.search(text)) is not None:
                    self.expected = int(n.group("n"))
                continue
            m = _UNREGISTER.search(text)
            kind = "end"
            if m is None:
                m, kind = _TIMED_OUT.search(text), "lost"
            ts = _ANY_TS.search(text)
            if m is None or ts is None:
                continue
            try:
                stamp = time.strptime(f"{ts.group('date')} {ts.group('time')}", "%Y-%m-%d %H:%M:%S")
                base = unix_time(stamp, self.gmtoff)
            except (ValueError, OverflowError):
                continue
            frac = ts.group("frac") or "0"
            node = int(m.group("node"))
            line = clean(text[m.start():].strip(), 300)
            out.append(WorkerState(self.rank_of.get(node, node), base + int(frac) / 10 ** len(frac), kind, line))
        return out
