"""What every format of a log's lines writes to (mstop.formats.mflog): one rank's sessions and start events,
its rows not yet given out, what the log said of the job (its batch, devices, FLOPs, steps), and the time of
its lines (local stamps, one calendar call per hour).

Each format (MindFormers' step and progress lines: mstop.formats.mfsteps; MindSpore's LossMonitor and
TimeMonitor: mstop.formats.msmonitors) reads its own lines and adds rows here through :class:`LogState`'s
methods (a row, a block of rows read as arrays, a row whose numbers its format reads later, a bad row, an
event); the driver (:class:`mstop.formats.mflog.MfLogParser`) hands each line to the format that reads it
and takes the rows out (:meth:`LogState.take`).
"""

from __future__ import annotations

import calendar
import math
import time
from typing import Any, Callable, Protocol

import numpy as np

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

#: a number as pandas reads it, and nothing else (bounded: a 5,000-digit field is not a fast line)
FLOAT_BYTES = rb"[-+]?(?:\d{1,40}\.?\d{0,40}|\.\d{1,40})(?:[eE][-+]?\d{1,4})?"
FLOAT_TEXT = FLOAT_BYTES.decode()

#: a row read as arrays (a format's bulk read): its numbers are in ``LogState._bulk_rows``
_BULK: Any = ()


class Deferred(Protocol):
    """A format that holds rows whose numbers it reads only when they are taken (all at once: one pandas call
    for many lines), and gives them in the order it held them."""

    def rows(self, k: int) -> np.ndarray:
        """The first ``k`` rows it holds, as a table of NUMERIC and EXTRA columns (and forgets them)."""
        ...

#: how far a stamped line (MindSpore's own: the host's clock) may come before the steps timed by the file's
#: time (this machine's clock) and still be read on the same clock: the longest start-up (a large graph's
#: compilation takes up to an hour), and the longest step a LossMonitor line is printed after. Further back,
#: the host's clock was wrong when it wrote (never set: 1970), and its stamps time nothing of those steps
STAMPED_START_S = 6 * 3600.0
STAMPED_STEP_S = 600.0


class LogState:
    """One rank's log as read so far: what carries over from line to line and from read to read."""

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
        #: the peers a collective's timeout said this rank waits for (mstop.formats.waits), each given once a
        #: session as a ``waits_for`` event (at the read's end: the session an error before the first step
        #: makes is there by then)
        self._waits: list[tuple[float | None, Any]] = []
        self._waits_sent: set[tuple[str | None, Any]] = set()
        self.ended = False
        # one entry per row not yet taken: a careful row's numbers, _BULK for a row of a block read as arrays, or
        # the format that reads its numbers when it is taken (a Deferred)
        self._rows: list[Any] = []
        self._extra: list[Any] = []
        self._bulk_rows: list[np.ndarray] = []  # rows read as arrays (bulk), in order; _BULK in _rows marks them
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
        #: a UTF-16 log's last bytes after its last b"\n": a reader splits lines at a 0x0D byte too, which in
        #: UTF-16 is part of a character (a CR, U+0D00): the line goes on in the next read
        self.held = b""
        #: when the lines being parsed were written (the file's time): the time of a step line with no stamp
        self.arrived: float | None = None
        self.untimed = 0  # step rows timed by their arrival, not by a stamp of their own
        self.lines_seen = 0
        self.step_lines = 0  # lines read as steps (rows or bad rows)
        self.look_alike = 0  # lines that look like steps but match no format (each a bad row)
        self.first_look_alike: str | None = None
        self.formats: set[str] = set()  # the step formats read: "mindformers", "mindformers v0.6", ...
        self._arrival_rows: list[list[float]] = []  # this read's rows timed by the file (space_arrivals)
        self._last_arrival: float | None = None  # the file's time at the last read that gave such rows
        self.arrival_from: float | None = None  # the last stamped line's time before this read's first such row
        #: the last step read before lines were lost (a rotation past the last backup, a truncation with no
        #: copy): the steps between it and the next step read are counted as dropped (:meth:`count_lost`)
        self._lost_after: float | None = None

    def whole_lines(self, blob: bytes) -> bytes:
        """``blob`` up to its last UTF-16 line end, what was held before it first, the rest held for the next
        read (only for a UTF-16 log: known, or a blob that looks it); other logs' blobs as they come."""
        if not (self.utf16 is not None or self.held or looks_utf16(blob)):
            return blob
        blob, self.held = self.held + blob, b""
        cut = blob.rfind(b"\n") + 1
        if len(blob) - cut > 1 << 20:  # a MiB with no line end (a hostile file): read as it is, never kept on
            return blob
        blob, self.held = blob[:cut], blob[cut:]
        return blob

    def time(self, ts: str, ms: str) -> float:
        """Unix time of a timestamp (local time of the writing host), one calendar call per hour."""
        hour = ts[:13]
        base = self._hours.get(hour)
        if base is None:
            base = self.hour(hour)
        return base + int(ts[14:16]) * 60 + int(ts[17:19]) + int(ms) / 1000.0

    def hour(self, hour: str) -> float:
        """Unix time of the start of an hour ``YYYY-MM-DD HH`` (cached under its text and its bytes); NaN
        for a stamp that is no date."""
        try:
            base = unix_time(time.strptime(hour, "%Y-%m-%d %H"), self.gmtoff)
        except (ValueError, OverflowError):  # no date (2026-13-45, 2026-02-30): the line has no time
            base = math.nan
        if len(self._hours) > 4096:
            self._hours.clear()
        self._hours[hour] = self._hours[hour.encode()] = base  # type: ignore[index]
        return base

    def line_time(self) -> float | None:
        """The time of the last line with a timestamp (a fast line's is read only now)."""
        if self.last_time is None and self._last_fast_ts is not None:
            ts = self._last_fast_ts.decode()
            self.last_time = self.time(ts[:19], ts[20:23])
        return self.last_time

    def stamps(self, stamps: tuple[bytes, ...]) -> np.ndarray:
        """Unix times of ``YYYY-MM-DD HH:MM:SS,mmm`` stamps, as arrays: one calendar call per hour."""
        return self.stamp_array(np.frombuffer(b"".join(stamps), np.uint8).reshape(-1, 23))

    def stamp_array(self, raw: np.ndarray) -> np.ndarray:
        """Unix times of stamps given as an (n, 23) array of their bytes; NaN where the hour is no date."""
        a = raw.astype(np.int64) - 48
        digits = np.array([0, 1, 2, 3, 5, 6, 8, 9, 11, 12])  # YYYY MM DD HH: one number per hour
        key = a[:, digits] @ (10 ** np.arange(9, -1, -1, dtype=np.int64))
        hours, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        heads = [bytes(raw[i, :13]) for i in first]
        base = np.array([self._hours.get(h) or self.hour(h.decode()) for h in heads], dtype=np.float64)
        minute = a[:, 14] * 10 + a[:, 15]
        second = a[:, 17] * 10 + a[:, 18]
        ms = a[:, 20] * 100 + a[:, 21] * 10 + a[:, 22]
        return base[inverse.reshape(-1)] + minute * 60 + second + ms / 1000.0

    def new_session(self, t: float) -> None:
        self.sessions += 1
        self.session = f"mindformers-{self.sessions}"
        self._session_start = t
        self.started = False
        self.ended = False
        self.last_step = None
        self.error = None
        self.error_sent = False

    def world(self, n: int) -> dict[str, Any] | None:
        """The world size the job's launcher names (msrun's scheduler: ``expected node number: 4``) where the
        log names none: kept for the session's start events; the start event to give now when the session's
        first one went out without it (None: nothing to give)."""
        if self.devices or n <= 0:
            return None
        self.devices = n
        return self._start_event(self._session_start) if self.started else None

    def start(self, t: float | None = None) -> None:
        """The session's start event (at ``t``; None: when the session began)."""
        self._events.append(self._start_event(self._session_start if t is None else t))
        self.started = True
        self._started_total = self.total_steps

    def _start_event(self, t: float | None) -> dict[str, Any]:
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
        return e

    def begin_row(self, epoch: int, epochs: int, step: int, steps: int, when: Callable[[], float]) -> float:
        """Sessions and start events up to date for a row of this step (a new session where none is open,
        after an end, or where the step goes back; ``when`` gives the line's time, read only then); the row's
        place in the lists. Returns the global step."""
        gstep = float((epoch - 1) * steps + step) if steps > 0 else float(step)
        if self.session is None or self.ended or (self.last_step is not None and gstep <= self.last_step):
            begun = self.first_time
            if begun is not None and self.timing_by_arrival and not 0 <= when() - begun <= STAMPED_START_S:
                begun = None  # a stamp on another clock than the file's (a host whose clock was never set)
            self.new_session(begun if begun is not None else when())
        self.steps_per_epoch, self.total_steps = steps, epochs * steps
        if not self.started or self._started_total != self.total_steps:
            self.start(self._session_start)
        self._sessions.append(self.session or "")
        self._sps_of.append(math.nan)
        self._batch_of.append(self.batch)
        self._open = len(self._rows)
        self.last_step = gstep
        self.first_time = None
        self.error = None
        self.error_sent = False
        return gstep

    def row(self, t: float, epoch: int, epochs: int, step: int, steps: int, loss: float, lr: float,
            norm: float, step_ms: float, overflow: float, scale: float, extra: list[float], *,
            norm_said: bool = True) -> None:
        """One step's row (sessions and start events kept up to date first)."""
        i = len(self._rows)
        gstep = self.begin_row(epoch, epochs, step, steps, lambda: t)
        # NUMERIC's order: time step epoch loss lr grad_norm step_time data_wait queue_depth tokens samples
        # tokens_per_s mfu mem_used mem_peak mem_total overflow loss_scale (samples, and the exact step time,
        # when the rows are given out)
        self.hold_row([t, gstep, float(epoch), loss, lr, norm, step_ms / 1000.0 if step_ms > 0 else math.nan,
                       math.nan, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan,
                       overflow, scale], extra + [math.nan])  # samples/s/p: filled when given out
        if not math.isfinite(norm) and norm_said:  # a missing norm is NaN too, but no NaN norm
            self._nonfinite.append((i, "grad_norm", norm))

    @property
    def rows_held(self) -> int:
        """The rows held, not taken yet."""
        return len(self._rows)

    def bad_row(self) -> None:
        """A step line that cannot be read: one bad row (counted and shown, never a silent zero)."""
        self._bad += 1

    def event(self, e: dict[str, Any]) -> None:
        """An event the log tells (a checkpoint saved, a session's end or abort), given out with the rows."""
        self._events.append(e)

    def waited(self, t: float | None, wait: Any) -> None:
        """A collective's timeout line: this rank waited for ``wait`` (a mstop.formats.waits.Wait) at ``t``."""
        if len(self._waits) < 64:  # (a log repeating the line for every retry: the first few say it)
            self._waits.append((t, wait))

    def send_waits(self) -> None:
        """The waits read, as ``waits_for`` events of the current session (each peer once a session); a wait
        read before any session or with no time waits for one."""
        keep = []
        for t, w in self._waits:
            if self.session is None or t is None:
                keep.append((t, w))
            elif (self.session, w) not in self._waits_sent:
                self._waits_sent.add((self.session, w))
                self._events.append({"kind": "waits_for", "time": t, "session": self.session, "peer": w.peer,
                                     "group": w.group, "group_size": w.group_size})
        self._waits = keep

    def hour_of(self, hour: bytes) -> float:
        """Unix time of the start of an hour given as the bytes ``YYYY-MM-DD HH`` (cached; NaN: no date)."""
        base = self._hours.get(hour)
        return self.hour(hour.decode()) if base is None else base

    def hold_row(self, row: list[float], extra: list[float], *, arrival: bool = False) -> None:
        """A row read whole from its line (:meth:`begin_row` done), its EXTRA columns; a non-finite loss
        noted. ``arrival``: the line had no stamp, the row is timed by the file (:meth:`space_arrivals`)."""
        if not math.isfinite(row[3]):
            self._nonfinite.append((len(self._rows), "loss", row[3]))
        if arrival:
            if not self._arrival_rows:
                self.arrival_from = self.last_time
            self._arrival_rows.append(row)
        self._rows.append(row)
        self._extra.append(extra)

    def hold_deferred(self, owner: Deferred, stamp: bytes) -> None:
        """A row (:meth:`begin_row` done) whose numbers ``owner`` reads when the rows are taken; ``stamp`` its
        line's ``YYYY-MM-DD HH:MM:SS,mmm``, read as a time only when asked for (:meth:`line_time`)."""
        self._rows.append(owner)
        self._extra.append(None)
        self.stamped(stamp)

    def stamped(self, stamp: bytes) -> None:
        """The last line's time is this stamp (read as a time only when asked for: :meth:`line_time`)."""
        self._last_fast_ts, self.last_time = stamp, None

    def same_session(self, n: int) -> None:
        """``n`` more rows of the session open now (a block's rows after the first, which :meth:`begin_row`
        placed)."""
        self._sessions.extend([self.session or ""] * n)
        self._sps_of.extend([math.nan] * n)
        self._batch_of.extend([self.batch] * n)

    def hold_block(self, table: np.ndarray, sps: np.ndarray | None = None, *,
                   arrival: bool = False) -> list[np.ndarray]:
        """Rows read as arrays (each placed: :meth:`begin_row` and :meth:`same_session`), their numbers in
        ``table``; ``sps`` each row's samples/s/p (its last NaN: the last row waits for its progress line; None:
        the last row waits). ``arrival``: timed by the file (:meth:`space_arrivals`): each row as a view,
        written through (returned)."""
        first, m = len(self._rows), len(table)
        if sps is not None:
            self._sps_of[first:first + m] = sps.tolist()
        self._open = first + m - 1 if sps is None or np.isnan(sps[-1]) else None
        self._rows.extend([_BULK] * m)
        self._extra.extend([_BULK] * m)
        self._bulk_rows.append(table)
        if not arrival:
            return []
        views = list(table)
        if not self._arrival_rows:
            self.arrival_from = self.last_time
        self._arrival_rows.extend(views)
        return views

    def take(self, *, keep_open: bool) -> tuple[Rows, list[dict[str, Any]]]:
        """The rows held and the events, given out (the last row kept while it waits for its progress line,
        with ``keep_open``)."""
        n = len(self._rows) - (1 if keep_open and self._open is not None else 0)
        events, self._events = self._events, []
        bad, self._bad = self._bad, 0
        if n <= 0:
            return _empty(list(EXTRA), bad), events
        table = np.full((n, len(NUMERIC) + len(EXTRA)), np.nan)
        head = self._rows[:n]
        careful = [i for i, r in enumerate(head) if isinstance(r, list)]
        if careful:
            table[careful] = [self._rows[i] + self._extra[i] for i in careful]
        owners: dict[int, tuple[Deferred, list[int]]] = {}
        for i, r in enumerate(head):
            if r is not _BULK and not isinstance(r, list):
                owners.setdefault(id(r), (r, []))[1].append(i)
        for owner, at in owners.values():
            table[at] = owner.rows(len(at))
        bulk = [i for i, r in enumerate(head) if r is _BULK]
        if bulk:
            table[bulk] = self.take_bulk(len(bulk))
        self.exact_step_time(table, n)
        nonfinite = [x for x in self._nonfinite if x[0] < n]
        rows = _rows(table, list(EXTRA), self._sessions[:n], nonfinite, bad)
        events += self.count_lost(table[:, 0], table[:, 1], self._sessions[:n])
        for name in ("_rows", "_extra", "_sessions", "_sps_of", "_batch_of"):
            setattr(self, name, getattr(self, name)[n:])
        self._nonfinite = [(i - n, c, v) for i, c, v in self._nonfinite if i >= n]
        if self._open is not None:
            self._open = self._open - n if self._open >= n else None
        return rows, events

    def sps(self, sps: float) -> None:
        """The progress line after a step line: samples/s/p (and with it, when given out, the exact step time)."""
        if self._open is not None:
            self._sps_of[self._open] = sps
            self._open = None

    def lines_lost(self) -> None:
        """Lines of the log were lost before those read next: their steps are counted when the next step is."""
        if self._lost_after is None and self.last_step is not None:
            self._lost_after = float(self.last_step)

    def count_lost(self, time: np.ndarray, step: np.ndarray, sessions: list[str]) -> list[dict[str, Any]]:
        """The steps lost lines held, once the first step after them is among the rows given out (their
        times, steps and sessions): a ``dropped`` event of that many rows (``rows read ..., N lost`` in
        ``summary``, as a writer's lost rows are), its ``steps`` the first and last lost. The row held from
        before the loss (its step is the last read) is passed over; a step that goes back (the job restarted
        meanwhile) counts nothing: the lines lost are then not known to have been steps."""
        gap = self._lost_after
        after = np.flatnonzero(step != gap) if gap is not None else ()
        if not len(after):
            return []
        i = int(after[0])
        self._lost_after = None
        missing = int(step[i] - gap - 1) if step[i] > gap else 0
        if missing <= 0:
            return []
        return [{"kind": "dropped", "time": float(time[i]), "rows": missing, "events": 0, "session": sessions[i],
                 "source": "lines lost", "steps": [int(gap) + 1, int(step[i]) - 1]}]

    def space_arrivals(self) -> None:
        """Rows of one read timed by the file's time (no stamps: LossMonitor's print) all got that one
        instant; counted back from it by their step times instead (TimeMonitor's per-step time), the last
        at the file's time, so elapsed, pace and goodput read as the job ran, not as one moment. Rows with
        no step time yet (followed live: TimeMonitor speaks at the epoch's end) are spread evenly over the
        time since the last read that gave rows, the last at the file's time: the lines were written in
        that interval, one a step (steps/s and the ETA come from these times). That interval begins at the
        last read's file time or, when later (or at the first read: a log read afterwards), at the last
        stamped line before the rows (MindSpore's own ``[WARNING] ME(...)`` lines: the process's start-up);
        with neither, the rows keep the file's time."""
        rows, self._arrival_rows = self._arrival_rows, []
        since, self.arrival_from = self.arrival_from, None
        if not rows:
            return
        for i in range(len(rows) - 2, -1, -1):  # one read's rows share one arrival time
            if math.isfinite(rows[i + 1][6]):
                rows[i][0] = rows[i + 1][0] - rows[i + 1][6]
        now, prev = rows[-1][0], self._last_arrival
        if since is not None and math.isfinite(since) and (prev is None or since > prev) \
                and now - since <= STAMPED_START_S + len(rows) * STAMPED_STEP_S:
            prev = since  # (a stamp further back is on another clock: the host's was wrong, 1970)
        self._last_arrival = now
        if prev is None or not prev < now or any(math.isfinite(r[6]) for r in rows):
            return
        k = len(rows)
        for i, r in enumerate(rows):
            r[0] = prev + (now - prev) * (i + 1) / k

    def take_bulk(self, k: int) -> np.ndarray:
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

    def exact_step_time(self, table: np.ndarray, n: int) -> None:
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

    _session_start: float = 0.0
    timing_by_arrival = False  # the step being read has no stamp: it is timed by the file's time
    batch: tuple[float, float] = (math.nan, math.nan)  # (global batch, devices) the log said last
    _started_total: int | None = None


def looks_utf16(blob: bytes) -> bool:
    """A blob that starts as UTF-16 text: its BOM, or a third of its first bytes zero (ASCII in two bytes a
    character, as PowerShell's ``>`` writes it without a BOM). Its lines end at b"\\n" only: its 0x0D bytes
    are parts of characters (U+0D00, or the CR inside a line), never line ends."""
    head = blob[:512]
    return head[:2] in (b"\xff\xfe", b"\xfe\xff") or (len(head) >= 2 and 3 * head.count(0) >= len(head))


def unix_time(st: time.struct_time, gmtoff: float | None) -> float:
    """Unix time of a log's local time: on the writing host's offset from UTC when known, else in the
    viewer's own zone (a log read where it was written)."""
    return calendar.timegm(st) - gmtoff if gmtoff is not None else time.mktime(st)


def real_step(epoch: int, epochs: int, step: int, steps: int) -> bool:
    """Whether a step line names a step a job ran: MindFormers counts epochs and steps from 1."""
    return epoch >= 1 and epochs >= 1 and step >= 1 and steps >= 1


def number(text: str | None) -> float:
    """A field's text as a float; NaN when missing or not a number (the CSV parser's rule)."""
    return _cell_number(text or "")


def is_number(text: str | None) -> bool:
    try:
        float(text or "")
    except ValueError:
        return False
    return True
