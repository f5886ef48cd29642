"""A rank's record in the store: its rows (a view of the store's table, the oldest in the spill file), its
sessions as segments, and what its events say (starts, ends, aborts, checkpoints, its processes, its stacks),
kept as each event is taken in; the constants of the store's columns."""

from __future__ import annotations

import copy
import itertools
import math
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ...formats.parse import NUMERIC, Rows
from ..ledgerfold import RankLedger
from ..spill import Chunk, SpillFile
from .table import Held, Table

#: a new number at every change of a rank's events (mstop.engine.rankstate keeps each rank's answers by it)
EVENT_STAMPS = itertools.count(1)

EXACT = ("time", "step")
FLOAT_COLS = tuple(c for c in NUMERIC if c not in EXACT)
EXACT_INDEX = {c: i for i, c in enumerate(EXACT)}
FLOAT_INDEX = {c: i for i, c in enumerate(FLOAT_COLS)}
#: the float columns the goodput ledger reads of a row (RankLedger.settle_row)
_LEDGER_FLOATS = [FLOAT_INDEX["step_time"], FLOAT_INDEX["data_wait"]]



#: A block grows by this fraction of its size (and 64 rows): the most slack it holds is 1/GROWTH.
GROWTH = 16
#: Rows per block of the per-column summaries that make drawing independent of the run's length.
BLOCK = 2048
#: Values of spilled rows a rank keeps per column once read one at a time (a chart's points, drawn at every
#: frame: a few hundred); at most this many, else forgotten and read back again.
POINTS_KEPT = 4096



@dataclass
class Summary:
    """Per block of BLOCK rows of one column: min and max (values and rows), first NaN/Inf row (or -1)."""

    blocks: int = 0
    mins: np.ndarray = field(default_factory=lambda: np.empty(0))
    maxs: np.ndarray = field(default_factory=lambda: np.empty(0))
    argmin: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    argmax: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    firstbad: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))


class Block:
    """A growable numpy array of rows (each a scalar, or ``width`` same-typed columns).

    Appends are amortised O(1) and cost one copy however many columns a row
    has; views taken earlier stay valid after growth. Growth by a sixteenth
    keeps the slack under 6.25 % (a row is copied about 16 times over its life:
    cheap beside parsing it once; the memory of 10,000 ranks is what counts).
    """

    __slots__ = ("data", "n")

    def __init__(self, dtype: Any, width: int | None = None, capacity: int = 64) -> None:
        self.data = np.empty((capacity,) if width is None else (capacity, width), dtype=dtype)
        self.n = 0

    def extend(self, values: np.ndarray) -> None:
        k = len(values)
        if self.n == 0 and k > len(self.data) and values.dtype == self.data.dtype and values.flags.c_contiguous:
            # a large first read: adopt it, no copy; with the room the parser left after its rows, if any
            base = values.base
            room = (isinstance(base, np.ndarray) and base.dtype == values.dtype and base.flags.c_contiguous
                    and base.shape[1:] == values.shape[1:] and base.ctypes.data == values.ctypes.data)
            self.data, self.n = (base if room else values), k
            return
        if self.n + k > len(self.data):
            cap = max(len(self.data) + len(self.data) // GROWTH + 64, self.n + k)
            grown = np.empty((cap,) + self.data.shape[1:], dtype=self.data.dtype)
            grown[: self.n] = self.data[: self.n]
            self.data = grown
        self.data[self.n: self.n + k] = values
        self.n += k

    def view(self) -> np.ndarray:
        return self.data[: self.n]

    def frozen(self) -> Block:
        """A block that shares this one's rows as they are now: appends land past its end (or in a grown
        copy), so what it holds never changes."""
        b = Block.__new__(Block)
        b.data, b.n = self.data, self.n
        return b

    def clear(self) -> None:
        """Forget every row. A fresh array, never the old one overwritten: frozen blocks keep theirs."""
        self.data = np.empty((64,) + self.data.shape[1:], dtype=self.data.dtype)
        self.n = 0

    @property
    def nbytes(self) -> int:
        """Bytes allocated."""
        return self.data.nbytes


@dataclass
class Segment:
    """One process start of one rank (a session): where its rows begin and its first step."""

    session: str
    first_row: int
    first_step: float
    first_time: float = math.nan  # its first row's time and step time (read at every frame: never spilled)
    first_step_time: float = math.nan


@dataclass
class RankData:
    """All rows and events of one rank."""

    rank: int
    #: the store's table of held rows (mstop.engine.table) and this rank's place in it; a frozen copy reads
    #: its rows as they were through ``frozen_rows`` instead
    table: Table | None = None
    slot: int = -1
    frozen_rows: Held | None = None
    extras: tuple[str, ...] = ()  # the numeric extra columns its rows have had
    segments: list[Segment] = field(default_factory=list)
    segment_of: dict[str, int] = field(default_factory=dict)  # session -> index in segments
    nonfinite: list[tuple[int, str, float]] = field(default_factory=list)  # (row, column, value)
    starts: dict[str, dict[str, Any]] = field(default_factory=dict)  # session -> start event
    ends: dict[str, float] = field(default_factory=dict)  # session -> time of its end event
    stamp: int = 0  # bumped by every change the store makes to this rank: snapshots reuse unchanged copies
    #: a new number at every change of its events (mstop.engine.rankstate.EVENT_STAMPS): its answers are kept
    ev_stamp: int = field(default_factory=lambda: next(EVENT_STAMPS))
    rows_epoch: int = 0  # bumped when its rows are forgotten (reset_rank): its lists no longer only grow
    #: bumped when rows change which of its rows are on the timeline (a new session, an older one's rows)
    retimes: int = 0
    #: what a rule keeps of its rows between frames, by the rule (mstop.engine.ruletable): shared with frozen
    #: copies; each entry names what it was computed from and is replaced whole
    kept: dict[Any, Any] = field(default_factory=dict)
    last_start: dict[str, Any] | None = None
    last_heartbeat: float | None = None
    last_event_time: float | None = None
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    evals: list[dict[str, Any]] = field(default_factory=list)
    dropped: int = 0
    rejected: int = 0  # of the dropped rows, those the writer refused for bad input (not lost to I/O)
    aborts: list[dict[str, Any]] = field(default_factory=list)
    #: ``lost`` events: a launcher (msrun's scheduler) lost the rank (timed out: exited abnormally or stopped)
    losts: list[dict[str, Any]] = field(default_factory=list)
    writer_errors: list[dict[str, Any]] = field(default_factory=list)  # the writer said it failed at something
    #: ``waits_for`` events: its log's collective timeout named the peer it waited for (mstop.formats.waits)
    waits: list[dict[str, Any]] = field(default_factory=list)
    device_events: list[dict[str, Any]] = field(default_factory=list)  # its host's device sampling (devices)
    profiles: list[dict[str, Any]] = field(default_factory=list)  # profile events (mstop_writer.profiling)
    #: ``exit`` events: a process of the rank ended (its exit witness: mstop_writer.witness), oldest first
    exits: list[dict[str, Any]] = field(default_factory=list)
    #: pid -> its newest ``proc`` event (state, cpu_s, rss, threads), with ``since``: when that state began
    #: and ``cpu_rate``: CPU seconds a second since the previous event
    procs: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: the newest ``stack`` events (every thread's stack of a step that overran, or a crash), oldest first
    stacks: list[dict[str, Any]] = field(default_factory=list)
    #: (first, last) steps run under the profiler (asked for, planned or done): slowed, so out of the figures
    profiled: list[tuple[float, float]] = field(default_factory=list)
    _effective: np.ndarray | None = None
    _steady: np.ndarray | None = None
    #: per incident rule, how many leading rows are known to hold no row that could make it fire (the history
    #: scan then reads only the rows after them: a followed run is not scanned whole every second)
    quiet: dict[str, int] = field(default_factory=dict)
    monotonic: bool = True  # steps never go down within the file (true of every well-formed run)
    #: when its rank file was last written (its modification time; while following, when rows arrived): a
    #: witness of the rank's clock (mstop.engine.clocks)
    csv_mtime: float | None = None
    summaries: dict[str, Summary] = field(default_factory=dict)
    #: guards extending the summaries, which a rank shares with its frozen copies (see frozen())
    summary_lock: threading.Lock = field(default_factory=threading.Lock)
    #: the goodput ledger's fold of its rows (mstop.engine.ledgerfold): classified as they arrive
    ledger: RankLedger = field(default_factory=RankLedger)
    #: rows before it are in the spill file (mstop.engine.spill), not in memory: its blocks hold rows base..
    base: int = 0
    spilled: tuple[Chunk, ...] = ()  # those rows, in chunks, oldest first
    spill: SpillFile | None = None  # the store's spill file
    #: of a frozen copy: its event containers by name (the next copy takes them over while they did not change)
    events_copy: dict[str, Any] | None = None

    @property
    def rows(self) -> int:
        return self.base + self.held_rows

    @property
    def held_rows(self) -> int:
        """Rows held in memory (the rows from ``base`` on)."""
        h = self.frozen_rows
        if h is not None:
            return h.hi - h.lo
        t = self.table
        return int(t.hi[self.slot] - t.lo[self.slot]) if t is not None else 0

    def held(self, name: str) -> np.ndarray:
        """The rows held in memory (rows ``base``..) of a column ("session": each row's segment index); an
        unknown column is all NaN."""
        h = self.frozen_rows
        if h is not None:
            got = h.column(name)
        elif self.table is not None:
            got = self.table.column(self.slot, name)
        else:
            return np.empty(0, np.float32)
        return got if got is not None else np.full(self.held_rows, np.nan, np.float32)

    def col(self, name: str) -> np.ndarray:
        """All rows of a column (NaN = missing); an unknown column is all NaN. Rows spilled are read back
        from the spill file (O(rows)): a reader of the recent rows uses :meth:`span`, :meth:`at`, :meth:`last`."""
        if not self.base:
            return self.held(name)
        return self.span(name, 0, self.rows)

    def span(self, name: str, lo: int, hi: int) -> np.ndarray:
        """Rows ``lo``..``hi - 1`` of a column (clipped to the rows there are): a view of memory when they are
        held, else read back from the spill file."""
        n = self.rows
        lo, hi = max(0, min(lo, n)), max(0, min(hi, n))
        base = self.base
        if lo >= base:
            return self.held(name)[lo - base:hi - base]
        held = self.held(name)
        firsts = self._chunk_firsts()  # the chunks holding rows lo..hi, by their first rows
        a = max(0, int(np.searchsorted(firsts, lo, "right")) - 1)
        chunks = [c for c in self.spilled[a:int(np.searchsorted(firsts, hi, "left"))] if c.first + c.n > lo]
        parts = []
        if chunks:
            v = self.spill.read(chunks, name, held.dtype)  # type: ignore[union-attr]
            parts.append(v[lo - chunks[0].first:hi - chunks[0].first])
        if hi > base:
            parts.append(held[:hi - base])
        return np.concatenate(parts) if len(parts) > 1 else parts[0] if parts else held[:0]

    def at(self, name: str, i: int) -> float:
        """Row ``i``'s value of a column (negative: from the end)."""
        if i < 0:
            i += self.rows
        if i >= self.base:
            return float(self.held(name)[i - self.base])
        return float(self.span(name, i, i + 1)[0])

    def last(self, name: str) -> float:
        """The last row's value of a column."""
        if self.frozen_rows is None and self.table is not None and self.held_rows:
            return self.table.last(self.slot, name)
        return float(self.held(name)[-1])

    def search_step(self, step: float, side: Literal["left", "right"] = "left") -> int:
        """``np.searchsorted(col("step"), step, side)`` for a rank whose steps never go down: among the held
        rows when the step is past the spilled ones (a spilled chunk is read back only when the step is in
        it)."""
        held = self.held("step")
        past = (lambda x: step > x) if side == "left" else (lambda x: step >= x)
        if not self.base or (len(held) and past(held[0])):
            return self.base + int(np.searchsorted(held, step, side))
        for c in self.spilled:
            if not past(c.smax):
                return c.first + int(np.searchsorted(self.span("step", c.first, c.first + c.n), step, side))
        return self.base + int(np.searchsorted(held, step, side))

    def has_values(self, name: str) -> bool:
        """Whether some row of the column holds a value (not NaN): the held rows first, then what was spilled
        (a chunk where the column was one value, or absent, is not read back)."""
        if not np.isnan(self.held(name)).all():
            return True
        for c in self.spilled:
            got = c.has(name)
            if got is None or (isinstance(got, float) and got != got):
                continue
            if isinstance(got, float) or not np.isnan(self.span(name, c.first, c.first + c.n)).all():
                return True
        return False

    def take(self, name: str, idx: np.ndarray) -> np.ndarray:
        """A column's values at rows ``idx`` (as ``col(name)[idx]``, non-negative): read back only the spilled
        chunks holding some of them (a chart's few hundred rows across a long run read as many chunks, not
        the run)."""
        idx = np.asarray(idx)
        held = self.held(name)
        if not len(idx):
            return held[:0].copy()
        lo, base = int(np.min(idx)), self.base
        if lo >= base:
            return held[idx - base]
        old = idx < base
        if np.count_nonzero(old) > POINTS_KEPT // 8:  # much of the history: read it in one go
            return self.span(name, lo, self.rows)[idx - lo]
        out = np.empty(len(idx), held.dtype)
        out[~old] = held[idx[~old] - base]
        # a chart's points: the same rows at every frame, kept by row (a spilled row never changes)
        points = self.kept.get(("points", name))
        if points is None or len(points) > POINTS_KEPT:
            points = self.kept[("points", name)] = {}
        pos = np.flatnonzero(old).tolist()
        rows = idx[old].tolist()
        got = [points.get(i) for i in rows]
        missing = [i for i, v in zip(rows, got) if v is None]
        if missing:
            want = np.array(missing, np.int64)
            which = np.searchsorted(self._chunk_firsts(), want, "right") - 1
            for k in np.unique(which).tolist():
                c = self.spilled[k]
                sel = want[which == k]
                vals = self.spill.read([c], name, held.dtype)[sel - c.first]  # type: ignore[union-attr]
                points.update(zip(sel.tolist(), vals.tolist()))
            got = [points[i] for i in rows]
        out[pos] = got
        return out

    def _chunk_firsts(self) -> np.ndarray:
        """Each spilled chunk's first row (kept until more are spilled)."""
        n = len(self.spilled)  # chunks are only appended (a reset empties kept): a longer list's prefix is ours
        got = self.kept.get("chunk firsts")
        if got is None or len(got) < n:
            got = np.fromiter((c.first for c in self.spilled), np.int64, n)
            self.kept["chunk firsts"] = got
        return got[:n]

    def summary(self, column: str) -> Summary:
        """The column's block summary, extended to every complete block (cheap: only new blocks are read)."""
        with self.summary_lock:
            return self._summary(column)

    def _summary(self, column: str) -> Summary:
        s = self.summaries.get(column)
        if s is None:
            s = self.summaries[column] = Summary()
        nb = self.rows // BLOCK
        if nb < s.blocks:  # a frozen copy behind the rank it shares the summaries with: its own blocks only
            return Summary(nb, s.mins[:nb], s.maxs[:nb], s.argmin[:nb], s.argmax[:nb], s.firstbad[:nb])
        if nb > s.blocks:
            lo = s.blocks * BLOCK
            vals = self.span(column, lo, nb * BLOCK).astype(np.float64).reshape(-1, BLOCK)
            fin = np.isfinite(vals)
            anyfin = fin.any(axis=1)
            amin = np.argmin(np.where(fin, vals, np.inf), axis=1)
            amax = np.argmax(np.where(fin, vals, -np.inf), axis=1)
            rows = np.arange(s.blocks, nb)[:, None] * BLOCK
            take = np.arange(len(vals))
            mins = np.where(anyfin, vals[take, amin], np.nan)
            maxs = np.where(anyfin, vals[take, amax], np.nan)
            inf = np.isinf(vals)
            bad = np.where(inf.any(axis=1), np.argmax(inf, axis=1) + rows[:, 0], -1)
            for i, c, _ in self.nonfinite:
                if c == column and lo <= i < nb * BLOCK:
                    k = (i - lo) // BLOCK
                    if bad[k] < 0 or i < bad[k]:
                        bad[k] = i
            s.mins = np.concatenate([s.mins, mins])
            s.maxs = np.concatenate([s.maxs, maxs])
            s.argmin = np.concatenate([s.argmin, amin + rows[:, 0]])
            s.argmax = np.concatenate([s.argmax, amax + rows[:, 0]])
            s.firstbad = np.concatenate([s.firstbad, bad])
            s.blocks = nb
        return s

    def frozen(self) -> RankData:
        """This rank as it is now, for a reader that must not hold the store's lock for long (a frame): its
        rows a view of the table's arrays (mstop.engine.table.Held), its lists and events copied. The block
        summaries and the incident scan's ``quiet`` marks stay shared, so work done on a copy is kept: a reset
        replaces them."""
        return self.frozen_after(None)

    def frozen_after(self, prev: RankData | None) -> RankData:
        """:meth:`frozen`, given this rank's previous frozen copy: while its events did not change since
        (the same ``ev_stamp``: only rows arrived, as they do at every read round), the copy's event lists are
        taken over, not copied again (nothing writes to a frozen copy's lists)."""
        c = RankData.__new__(RankData)
        c.__dict__.update(self.__dict__)
        if self.frozen_rows is None and self.table is not None:
            c.frozen_rows = self.table.held(self.slot)
        c.ledger = self.ledger.frozen()
        same_rows = prev is not None and prev.rows_epoch == self.rows_epoch  # no reset since: lists only grew
        if same_rows and len(prev.segments) == len(self.segments):  # type: ignore[union-attr]
            c.segments, c.segment_of = prev.segments, prev.segment_of  # type: ignore[union-attr]
        else:
            c.segments, c.segment_of = list(self.segments), dict(self.segment_of)
        c.nonfinite = prev.nonfinite if same_rows and len(prev.nonfinite) == len(self.nonfinite) \
            else list(self.nonfinite)  # type: ignore[union-attr]
        # the lists and dicts its events fill: copied, or the last copy's (one update: a snapshot makes a copy of
        # every rank that changed, at 1,024 ranks every second)
        ev = prev.events_copy if prev is not None and prev.ev_stamp == self.ev_stamp else None
        if ev is None:
            ev = {name: copy.copy(getattr(self, name)) for name in _EVENT_CONTAINERS}
        c.__dict__.update(ev)
        c.events_copy = ev
        return c

    def effective(self) -> np.ndarray:
        """Boolean mask of the rows on the run's current timeline.

        After a resume from an earlier checkpoint, a later session's first step
        cuts every older session's rows at that step and beyond: those rows were
        run again (or abandoned) and are kept only for ``repeated_steps``.
        """
        n = self.rows
        if len(self.segments) <= 1:  # every row: a read-only view of one value, no byte a row held
            return np.broadcast_to(np.True_, (n,))
        if self._effective is not None and len(self._effective) == n:
            return self._effective
        sess = self.col("session")
        step = self.col("step")
        cut = np.full(len(self.segments), np.inf)
        later = np.inf
        for k in range(len(self.segments) - 1, -1, -1):
            cut[k] = later
            later = min(later, self.segments[k].first_step)
        mask = step < cut[sess]
        self._effective = mask
        return mask

    def last_effective(self, k: int) -> np.ndarray:
        """The last ``k`` row indices on the timeline, found from the end (a live rule over the recent rows
        must not cost O(rows) a frame: at 1.25 M rows a rank, every rule's flatnonzero took 1 ms)."""
        n = self.rows
        if len(self.segments) <= 1:
            return np.arange(max(0, n - k), n)
        eff = self.effective()
        found: list[np.ndarray] = []
        total, end = 0, n
        while end > 0 and total < k:
            start = max(0, end - max(4 * k, 4096))
            sel = np.flatnonzero(eff[start:end]) + start
            found.append(sel)
            total, end = total + len(sel), start
        return np.concatenate(found[::-1])[-k:] if found else np.empty(0, np.int64)

    def effective_rows(self) -> int:
        """How many rows are on the timeline."""
        return self.rows if len(self.segments) <= 1 else int(np.count_nonzero(self.effective()))

    def steady_key(self) -> tuple[int, ...]:
        """What a figure kept over the :meth:`steady` rows is kept under: while it is the same, the steady rows
        are the ones they were with any new rows after them. It changes with a reset, a retiming, a new
        session, a session's lone first row becoming its compilation step (its second row came), a profiled
        span."""
        latest = self.rows - self.segments[-1].first_row if self.segments else 0
        return (self.rows_epoch, self.retimes, len(self.segments), min(latest, 2), len(self.profiled))

    def steady(self) -> np.ndarray:
        """The effective rows less each session's first row: the step that compiled the graph (100-1,000x a
        normal step) and warmed up, which no step-time or throughput window may hold. A session of one row
        keeps it (there is nothing else to show)."""
        if self._steady is not None and len(self._steady) == self.rows:
            return self._steady
        mask = self.effective().copy()
        mask[self.compile_rows()] = False
        if self.profiled:  # steps under the profiler run slower: no figure reads them
            step = self.col("step")
            for first, last in self.profiled:
                mask &= ~((step >= first) & (step <= last))
        self._steady = mask
        return mask

    def compile_rows(self) -> list[int]:
        """Each session's first row (its compilation step), when the session has more rows."""
        out = []
        for k, seg in enumerate(self.segments):
            end = self.segments[k + 1].first_row if k + 1 < len(self.segments) else self.rows
            if end - seg.first_row > 1:
                out.append(seg.first_row)
        return out

    def repeated_rows(self) -> np.ndarray:
        """Boolean mask of the rows of older sessions whose steps a later session ran again (rows past the
        timeline's last step were abandoned, not repeated)."""
        if len(self.segments) < 2:
            return np.zeros(self.rows, dtype=bool)
        eff = self.effective()
        step = self.col("step")
        last = step[eff][-1] if eff.any() else -np.inf
        return (~eff) & (step <= last)

    def repeated_steps(self) -> int:
        """Rows of older sessions whose steps a later session ran again."""
        return int(self.repeated_rows().sum()) if len(self.segments) > 1 else 0


def _profiled_span(e: dict[str, Any]) -> tuple[float, float] | None:
    """The steps an event says run (or ran, or will run) under the profiler."""
    lo, hi = (e.get("profile_steps") or (None, None)) if e.get("kind") == "start" else \
        (e.get("first_step"), e.get("last_step"))
    ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in (lo, hi))
    return (float(lo), float(hi)) if ok and lo <= hi else None  # type: ignore[operator]


#: what a rank's events fill (RankData.frozen_after takes them over from the last frozen copy while they
#: did not change)
_EVENT_CONTAINERS = ("starts", "ends", "checkpoints", "evals", "aborts", "losts", "writer_errors", "waits",
                     "device_events", "profiles", "profiled", "exits", "procs", "stacks")

#: event kinds a rank keeps whole, by the RankData list they go in (``lost``: a launcher's word, said long
#: after the rank's last sign of life: msrun's scheduler timed the worker out)
_LISTED = {"eval": "evals", "abort": "aborts", "lost": "losts", "writer_error": "writer_errors",
           "devices": "device_events", "exit": "exits", "waits_for": "waits"}
#: what a frame looks for among few ranks: the ranks with writer errors, stack dumps, profiles, device
#: sampling events (a rank a host samples), a literal NaN/Inf, several sessions (Store.ranks_with: a walk of
#: every rank for them cost each frame of 1,024 ranks a millisecond or more apiece)
HAVING = ("writer_errors", "stacks", "profiles", "device_events", "waits", "nonfinite", "resumed")
#: of HAVING, the event lists a rank has them by (the others come with its rows)
_HAVING_EVENTS = ("writer_errors", "stacks", "profiles", "device_events", "waits")

#: stack events kept per rank (each up to 32 threads of 48 frames): the newest say where it is stuck
STACKS_KEPT = 8


#: a process's last proc samples kept (its CPU seconds and run delay): a minute at the witness's 5 s
TRAIL = 16


#: process states that hold the other ranks up at their next collective (stopped, traced, in D)
HOLDING = ("T", "t", "D")


def _proc(d: RankData, e: dict[str, Any], t: float) -> None:
    """Keep a ``proc`` event as its pid's newest facts: since when its state holds, its CPU rate."""
    pid = e.get("pid")
    if not isinstance(pid, int):
        return
    old = d.procs.get(pid)
    if old is not None and float(old["time"]) > t:
        return  # an older event read late
    e = dict(e)
    same = old is not None and old.get("state") == e.get("state")
    e["since"] = old["since"] if same and old is not None else t
    if old is not None and not same and old.get("state") in HOLDING:
        # the stretch it was stopped (or in D) for, kept while the next state lasts: a stopped process a kill
        # ends is woken to die, and a witness that looks then sees it running a moment before its end
        e["held"] = {"state": old["state"], "since": old["since"], "until": t}
    elif same and old is not None and "held" in old:
        e["held"] = old["held"]
    rate = None
    if old is not None and isinstance(old.get("cpu_s"), (int, float)) and isinstance(e.get("cpu_s"), (int, float)) \
            and t > float(old["time"]):
        rate = max(0.0, (float(e["cpu_s"]) - float(old["cpu_s"])) / (t - float(old["time"])))
    e["cpu_rate"] = rate if rate is not None else (old or {}).get("cpu_rate")
    # the last samples of its CPU seconds and run delay (mstop.engine.diagnosis: rates over a minute)
    trail = list(old.get("trail", ())) if old is not None else []
    cpu, delay = e.get("cpu_s"), e.get("run_delay_s")
    if type(cpu) in (int, float) and math.isfinite(cpu):
        trail.append((t, float(cpu), float(delay) if type(delay) in (int, float) and math.isfinite(delay) else None))
    e["trail"] = tuple(trail[-TRAIL:])
    d.procs[pid] = e
    if len(d.procs) > 16:  # a rank restarted many times: only its newest processes
        for k in sorted(d.procs, key=lambda k: float(d.procs[k]["time"]))[:-16]:
            del d.procs[k]


def _session_codes(d: RankData, rows: Rows, base: int) -> tuple[np.ndarray, bool]:
    """The segment index of rows ``base``.. of rank ``d`` (new sessions become segments), and whether any of
    them belongs to an older session than its latest (which rows are on the timeline changes)."""
    known = d.segment_of
    if len(rows.session_names) == 1 and rows.session_names[0] in known:  # the usual increment
        k = known[rows.session_names[0]]
        return np.full(len(rows), k, np.int32), k != len(d.segments) - 1
    steps = rows.exact[:, 1]
    to_segment = np.empty(len(rows.session_names), dtype=np.int32)
    for code, name in enumerate(rows.session_names):
        k = known.get(name)
        if k is None:
            mine = rows.session_codes == code
            if not mine.any():  # a name no kept row carries: never a segment of its own
                continue
            first = int(np.argmax(mine))
            k = known[name] = len(d.segments)
            d.segments.append(Segment(name, base + first, float(steps[first]), float(rows.exact[first, 0]),
                                      float(rows.floats[first, FLOAT_INDEX["step_time"]])))
        to_segment[code] = k
    coded = to_segment[rows.session_codes]
    return coded, bool((coded != len(d.segments) - 1).any())


