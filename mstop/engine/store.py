"""Every row of a run, by rank, in compact growable columns; plus what the events say.

The store knows nothing of files or widgets: sources feed it parsed rows by one
door, :meth:`Store.append` of a :class:`Batch` (a read round's rows of any number
of ranks, one file's or many files' parsed together, and the files' times), and
events (``ingest_events``); figures and charts read it. All access goes through
one lock, so a source thread can feed it while the screen reads.

Rows held in memory live in one table by column across ranks
(mstop.engine.table: a rank's column is a view of it, a read round's rows land
by one assignment per column); the oldest rows past the store's budget are in
the spill file (mstop.engine.spill); a rank reads either by row number alone
(:meth:`RankData.span`, ``at``, ``take``, ``col``).

Memory: ``time`` and ``step`` are float64 (exact for unix times and steps up
to 2**53), the 16 other numeric base columns float32 (7 significant digits:
plenty for losses, rates and byte counts), each only once some rank's value
varies (a column of one value in each rank is that value), plus a one-byte
session index: 17 bytes a row and 4 per varying float column, 4 more per
numeric extra column, and the table's room (a rank's region has an eighth and
64 rows more than its rows). Every row is kept at full resolution: no
downsampling at rest, so an exact value at any step can always be shown.
"""

from __future__ import annotations

import copy
import itertools
import math
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import numpy as np

from ..formats.parse import NUMERIC, Rows
from . import door, spill
from .folds import ACHIEVED, WEIGHT, Folds
from .ledgerfold import RankLedger
from .spill import Chunk, SpillFile
from .table import Held, Table

#: a new number at every change of a rank's events (mstop.engine.rankstate keeps each rank's answers by it)
EVENT_STAMPS = itertools.count(1)

EXACT = ("time", "step")
FLOAT_COLS = tuple(c for c in NUMERIC if c not in EXACT)
EXACT_INDEX = {c: i for i, c in enumerate(EXACT)}
FLOAT_INDEX = {c: i for i, c in enumerate(FLOAT_COLS)}
#: the float columns the goodput ledger reads of a row (RankLedger.settle_row)
_LEDGER_FLOATS = [FLOAT_INDEX["step_time"], FLOAT_INDEX["data_wait"]]



#: How many snapshots' changed ranks a snapshot remembers (Store.changed_after).
CHANGE_LOG = 32
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

    def widen(self, dtype: Any) -> None:
        """Hold its rows as ``dtype`` from now on (a new array: frozen copies keep the old one)."""
        if self.data.dtype != dtype:
            self.data = self.data.astype(dtype)

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


class _Grown:
    """A rank that only got rows since its last frozen copy (``made``), as a snapshot took it: its rows'
    bounds in the table's arrays of that moment, its ledger's :meth:`RankLedger.state`, its file's time. Made
    into a frozen record only when the snapshot's reader asks for the rank (:class:`FrozenRanks`): a frame
    that reads a few ranks' records no longer pays for a copy of every rank that got a row."""

    __slots__ = ("made", "lo", "hi", "ledger", "csv_mtime", "view")

    def __init__(self, made: RankData, lo: int, hi: int, ledger: Any, csv_mtime: float | None,
                 view: tuple[dict[str, np.ndarray], np.ndarray, dict[str, int]]) -> None:
        self.made, self.lo, self.hi, self.ledger, self.csv_mtime, self.view = made, lo, hi, ledger, csv_mtime, view

    def record(self) -> RankData:
        """The frozen record: ``made``'s, with the rows, ledger and file time taken (nothing else of a rank
        changes with its rows alone: every other change makes a new frozen copy at the next snapshot)."""
        m = self.made
        c = RankData.__new__(RankData)
        c.__dict__.update(m.__dict__)
        arrays, kmat, kcol = self.view
        c.frozen_rows = Held(arrays, kmat, kcol, m.slot, self.lo, self.hi)
        c.ledger = m.ledger.frozen_at(self.ledger)
        c.csv_mtime = self.csv_mtime
        c._effective = c._steady = None  # worked out for ``made``'s rows
        return c


class FrozenRanks(Mapping[int, RankData]):
    """A snapshot's ranks (read-only): a rank that only got rows since the last snapshot is held as what the
    snapshot took of it (:class:`_Grown`, O(1)) and made a record when first read. Reading it from several
    threads at once may make a record twice: both equal, one kept."""

    __slots__ = ("entries",)

    def __init__(self, entries: dict[int, RankData | _Grown]) -> None:
        self.entries = entries

    def __getitem__(self, r: int) -> RankData:
        got = self.entries[r]
        if type(got) is _Grown:
            got = self.entries[r] = got.record()
        return got  # type: ignore[return-value]

    def get(self, r: int, default: Any = None) -> Any:
        return self[r] if r in self.entries else default

    def __contains__(self, r: object) -> bool:
        return r in self.entries

    def __iter__(self) -> Iterator[int]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


def _profiled_span(e: dict[str, Any]) -> tuple[float, float] | None:
    """The steps an event says run (or ran, or will run) under the profiler."""
    lo, hi = (e.get("profile_steps") or (None, None)) if e.get("kind") == "start" else \
        (e.get("first_step"), e.get("last_step"))
    ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in (lo, hi))
    return (float(lo), float(hi)) if ok and lo <= hi else None  # type: ignore[operator]


#: what a rank's events fill (RankData.frozen_after takes them over from the last frozen copy while they
#: did not change)
_EVENT_CONTAINERS = ("starts", "ends", "checkpoints", "evals", "aborts", "losts", "writer_errors",
                     "device_events", "profiles", "profiled", "exits", "procs", "stacks")

#: event kinds a rank keeps whole, by the RankData list they go in (``lost``: a launcher's word, said long
#: after the rank's last sign of life: msrun's scheduler timed the worker out)
_LISTED = {"eval": "evals", "abort": "aborts", "lost": "losts", "writer_error": "writer_errors",
           "devices": "device_events", "exit": "exits"}
#: what a frame looks for among few ranks: the ranks with writer errors, stack dumps, profiles, device
#: sampling events (a rank a host samples), a literal NaN/Inf, several sessions (Store.ranks_with: a walk of
#: every rank for them cost each frame of 1,024 ranks a millisecond or more apiece)
HAVING = ("writer_errors", "stacks", "profiles", "device_events", "nonfinite", "resumed")
#: of HAVING, the event lists a rank has them by (the others come with its rows)
_HAVING_EVENTS = ("writer_errors", "stacks", "profiles", "device_events")

#: stack events kept per rank (each up to 32 threads of 48 frames): the newest say where it is stuck
STACKS_KEPT = 8


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
    rate = None
    if old is not None and isinstance(old.get("cpu_s"), (int, float)) and isinstance(e.get("cpu_s"), (int, float)) \
            and t > float(old["time"]):
        rate = max(0.0, (float(e["cpu_s"]) - float(old["cpu_s"])) / (t - float(old["time"])))
    e["cpu_rate"] = rate if rate is not None else (old or {}).get("cpu_rate")
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


@dataclass(frozen=True)
class Progress:
    """How far a first read has come: what a frame shows while it goes on. Taken under the lock from the
    folds and the lowest rank's events, no rank frozen (a snapshot of 10,000 ranks at every frame of a first
    read froze every rank again after each growth of the table: the reading frames cost a third of the read,
    and the regions they viewed could no longer be cut to the rows kept)."""

    rows: int  # rows read, all ranks
    ranks: int  # ranks with a rank file
    step: int | None  # the furthest rank's last step
    newest: float | None  # the newest row's own time (its rank's clock)
    bad_rows: int
    bad_events: int
    start: dict[str, Any]  # the lowest rank's latest start event (empty before one)


@dataclass
class KeptAnswers:
    """Each rank's answers as mstop.engine.rankstate worked them out, and the last of them in arrays."""

    #: rank -> (what its answers read, its answers)
    per_rank: dict[int, tuple[Any, Any]] = field(default_factory=dict)
    #: (the snapshot they were worked out for, its ranks in order, their answers, where each rank is, the
    #: answers in arrays by name): the next snapshot's are worked out only where a rank changed
    arrays: tuple[int, list[int], list[Any], dict[int, int], dict[str, np.ndarray]] | None = None


@dataclass
class Batch:
    """Rows on their way into the store (:meth:`Store.append`): a read round's, in file order. ``parts``: each
    (rank, rows, lo, hi), rows ``lo`` to ``hi`` of ``rows`` being that rank's (several ranks' parts may share
    one ``rows``: files parsed together); ``times``: the files found modified, (rank, kind, mtime), taken in
    under the same hold of the store's lock."""

    parts: list[tuple[int, Rows, int, int]] = field(default_factory=list)
    times: list[tuple[int, str, float | None]] = field(default_factory=list)

    @classmethod
    def of(cls, r: int, rows: Rows) -> Batch:
        """One rank's rows."""
        return cls([(r, rows, 0, len(rows))])

    @classmethod
    def round(cls, batches: list[tuple[int, Rows]]) -> Batch:
        """Several ranks' rows, each parsed on its own, in file order."""
        return cls([(r, rows, 0, len(rows)) for r, rows in batches])

    def add(self, r: int, rows: Rows) -> Batch:
        self.parts.append((r, rows, 0, len(rows)))
        return self

    def add_joined(self, ranks: list[int], rows: Rows, counts: list[int]) -> Batch:
        """Rows parsed together (mstop.formats.parse.parse_joined): ``counts[i]`` rows of ``ranks[i]``, in order."""
        at = 0
        for r, n in zip(ranks, counts):
            if n:
                self.parts.append((r, rows, at, at + n))
            at += n
        return self

    def file_time(self, r: int, kind: str, mtime: float | None) -> Batch:
        self.times.append((r, kind, mtime))
        return self


class Store:
    """The rows and events of every rank of one run (thread-safe). ``spill``: how many rows it holds in memory
    (mstop.engine.spill; default: what the environment sets, read now)."""

    def __init__(self, spill_budget: spill.SpillBudget | None = None) -> None:
        self.lock = threading.RLock()
        self.ranks: dict[int, RankData] = {}
        self.bad_rows = 0
        self.bad_events = 0
        self.cut_events = 0  # events whose text or lists were cut to bounded sizes
        self.resets = 0
        self.ignored_files: set[str] = set()
        self.refused: dict[str, str] = {}  # rank-file names that are not regular files -> why
        #: cells refused at the door (mstop.engine.door): reason -> (how many, the first: rank, step, cell);
        #: replaced whole on change, so a snapshot shares it
        self.refused_cells: dict[str, tuple[int, str]] = {}
        self.notes: list[str] = []  # what readers should say about the files (columns cut, ...)
        self._keyed: dict[str, str] = {}  # a note that changes (a count) by what it is about: see note_as
        self._memo: dict[str, tuple[int, Any]] = {}  # key -> (version, value): see memo()
        self.rank_files: set[int] = set()  # ranks whose rank<R>.csv exists
        self.owners: dict[int, str] = {}  # rank -> the source its files come from
        self.duplicates: list[str] = []  # "rank 3 is in A and in B: B's file is not shown"
        self.extra_columns: list[str] = []
        #: (host, NPU, chip) -> its last samples, oldest first (mstop.engine.devices; a tuple replaced whole)
        self.devices: dict[tuple[str, int, int], tuple[Any, ...]] = {}
        self.bad_device_rows = 0
        self.version = 0  # bumps on every change: a cheap "anything new?" for readers
        self._arrival: float | None = None  # our clock when the last rows arrived (immune to the hosts' clocks)
        self._life_arrival: float | None = None  # our clock when the last rows or events arrived
        self._mtime: float | None = None  # newest modification time of the rank files read (this machine's clock)
        self.frozen = False  # a snapshot(): nothing is added to it
        #: rank -> (the rank's record, its stamp, its frozen copy): a snapshot copies only ranks that changed
        self._frozen_ranks: dict[int, tuple[RankData, int, RankData]] = {}
        #: state that advances with the rows (mstop.engine.folds), fed by append
        self.folds = Folds(FLOAT_INDEX)
        self._checkpoints: tuple[dict[float, float], list[float], dict[str, Any] | None] | None = None
        #: ranks changed since the last snapshot, and that snapshot's ranks: a snapshot copies only those
        self._dirty: set[int] = set()
        #: ranks changed only by rows since the last snapshot (a read round's, their file's time): a snapshot
        #: takes their bounds and ledger figures, and makes their records only when read (FrozenRanks)
        self._grown: set[int] = set()
        self._snap_ranks: FrozenRanks | None = None
        self._snap_arrays: dict[str, np.ndarray] | None = None  # the table's arrays the last snapshot read
        self._snaps = 0  # snapshots taken
        #: of a snapshot: (how many were taken before it, the ranks changed since the one before it)
        self.changed: tuple[int, frozenset[int]] | None = None
        #: the last CHANGE_LOG snapshots' ``changed``, oldest first (a snapshot holds the log as it took it):
        #: a reader that skipped snapshots still learns which ranks changed since the one it last read
        self.change_log: tuple[tuple[int, frozenset[int]], ...] = ()
        #: each rank's answers (mstop.engine.rankstate), kept by what they were worked out from: shared with
        #: snapshots (a derived cache, like the block summaries: entries are replaced whole, never changed)
        self.answers = KeptAnswers()
        #: HAVING's name -> the ranks that have it (a snapshot's are frozen)
        self.having: dict[str, set[int]] | dict[str, frozenset[int]] = {name: set() for name in HAVING}
        #: how many rows all ranks hold in memory before their oldest are spilled, in chunks of how many
        self.spill_budget = spill_budget or spill.SpillBudget.from_environment()
        #: rows all ranks hold in memory before their oldest are spilled (None: never)
        self.keep_rows: int | None = self.spill_budget.keep_rows
        self.spill = SpillFile()
        #: every rank's rows held in memory, by column across ranks (mstop.engine.table)
        self.table = Table(EXACT, FLOAT_COLS)

    # read-only: the store's own methods change them (saw_mtime, forget_arrivals, file_time, ingest_*)
    @property
    def mtime(self) -> float | None:
        """The newest modification time of the files read, on this machine's clock."""
        return self._mtime

    @property
    def arrival(self) -> float | None:
        """Our clock when rows last arrived (immune to the hosts' clocks); None: nothing arrived while we
        followed (what was read at start is as old as its own times)."""
        return self._arrival

    @property
    def life_arrival(self) -> float | None:
        """Our clock when rows or events last arrived."""
        return self._life_arrival

    def snapshot(self) -> Store:
        """The store as it is now, taken under the lock in O(ranks) (rows are shared, never copied): a frame
        is computed from it while the reading thread goes on adding rows. A snapshot's snapshot is itself."""
        if self.frozen:
            return self
        with self.lock:
            self.checkpoints_seen()  # folded here, once per change, not by every snapshot again
            snap = Store.__new__(Store)
            snap.__dict__.update(self.__dict__)
            snap.lock = threading.RLock()
            snap.frozen = True
            prev = self._snap_ranks
            if self._snap_arrays is not self.table.arrays:  # the table made new arrays: every rank frozen
                prev = None  # anew, so the old arrays are let go with the last snapshot that read them
                self._snap_arrays = self.table.arrays
            if prev is not None:  # the last snapshot's ranks, those that changed since copied again: O(changes)
                ranks = dict(prev.entries)
                for r in self._dirty:
                    d = self.ranks.get(r)
                    if d is not None:
                        ranks[r] = self._frozen_rank(r, d)
                self._take_grown(ranks, [r for r in self._grown if r not in self._dirty])
            else:
                ranks = {r: self._frozen_rank(r, d) for r, d in self.ranks.items()}
            snap.ranks = self._snap_ranks = FrozenRanks(ranks)  # type: ignore[assignment]
            # the ranks whose answers (mstop.engine.rankstate) may have changed: not those that only got rows
            snap.changed = (self._snaps, frozenset(self._dirty))
            snap.change_log = self.change_log = (*self.change_log[-(CHANGE_LOG - 1):], snap.changed)
            self._snaps += 1
            self._dirty = set()
            self._grown = set()
            snap._memo = dict(self._memo)
            snap.folds = self.folds.frozen()
            snap.having = {name: frozenset(got) for name, got in self.having.items()}
            for name in ("ignored_files", "refused", "notes", "rank_files", "owners", "duplicates", "extra_columns",
                         "devices"):
                setattr(snap, name, copy.copy(getattr(self, name)))
            return snap

    def changed_after(self, seen: int) -> frozenset[int] | None:
        """Of a snapshot: the ranks changed since snapshot number ``seen`` was taken (None: not known, so
        older than the change log, or not a snapshot's)."""
        log = self.change_log
        if not log or self.changed is None or log[-1] is not self.changed or not log[0][0] <= seen + 1 \
                or seen > self.changed[0]:  # a later snapshot's: what this older one lacks is not known
            return None
        got: set[int] = set()
        for n, ranks in log:
            if n > seen:
                got |= ranks
        return frozenset(got)

    def _touch(self, d: RankData) -> None:
        """Rank ``d`` changed: its next frozen copy is made anew, and the next snapshot looks at it."""
        d.stamp += 1
        self._dirty.add(d.rank)

    def _take_grown(self, ranks: dict[int, RankData | _Grown], grown: list[int]) -> None:
        """Into a snapshot's ``ranks``: each rank of ``grown`` (changed by rows alone since its last frozen
        copy) as a :class:`_Grown`, its bounds read for all of them at once; a rank with no usable frozen copy
        is frozen now."""
        if not grown:
            return
        t = self.table
        ds = [self.ranks[r] for r in grown]
        slots = np.fromiter((d.slot for d in ds), np.int64, len(ds))
        t.viewed[slots[t.hi[slots] > t.lo[slots]]] = True  # their cells are never handed out again
        t.shared = True
        view = (t.arrays, t.kmat, t.kcol)
        made = self._frozen_ranks
        for r, d, lo, hi in zip(grown, ds, t.lo[slots].tolist(), t.hi[slots].tolist()):
            got = made.get(r)
            if got is None or got[0] is not d or got[2].frozen_rows is None or \
                    got[2].frozen_rows.arrays is not t.arrays:
                ranks[r] = self._frozen_rank(r, d)
                continue
            ranks[r] = _Grown(got[2], lo, hi, d.ledger.state(), d.csv_mtime, view)

    def _frozen_rank(self, r: int, d: RankData) -> RankData:
        """Rank ``r`` frozen (see RankData.frozen); the copy made last time when nothing changed since (every
        change goes through this class's methods and bumps ``stamp``): at 10,000 ranks a snapshot copying
        every rank took about 0.1 s of every frame."""
        got = self._frozen_ranks.get(r)
        if got is not None and got[0] is d and got[1] == d.stamp and (
                got[2].frozen_rows is None or got[2].frozen_rows.arrays is self.table.arrays):
            return got[2]
        c = d.frozen_after(got[2] if got is not None and got[0] is d else None)
        self._frozen_ranks[r] = (d, d.stamp, c)
        return c

    def claim(self, r: int, source: str) -> bool:
        """Whether ``source`` may feed rank ``r``: the first source that shows a rank owns it; a second
        one is reported in :attr:`duplicates`, never silently merged."""
        with self.lock:
            owner = self.owners.setdefault(r, source)
            if owner == source:
                return True
            note = f"rank {r} is in {owner} and in {source}: the second is not shown"
            if note not in self.duplicates:
                self.duplicates.append(note)
                self.version += 1
            return False

    def memo(self, key: str, compute: Callable[[], Any]) -> Any:
        """A value derived from the rows (the recent window, the headrooms), computed once per version of the
        store: a frame or a summary asks for it several times."""
        with self.lock:
            got = self._memo.get(key)
            if got is not None and got[0] == self.version:
                return got[1]
            value = compute()
            self._memo[key] = (self.version, value)
            return value

    def note(self, text: str) -> None:
        """Remember something about the files that readers should say (once)."""
        with self.lock:
            if text not in self.notes:
                self.notes.append(text)
                self.version += 1

    def note_as(self, key: str, text: str | None) -> None:
        """Say ``text`` about ``key`` in place of what was said about it before (a count that grows is one
        note, not one per count); None: nothing is to be said about it any more."""
        with self.lock:
            old = self._keyed.get(key)
            if old == text:
                return
            if text is None:
                self._keyed.pop(key, None)
                if old in self.notes:
                    self.notes.remove(old)
                self.version += 1
                return
            if old is not None and old in self.notes:
                self.notes[self.notes.index(old)] = text
            else:
                self.notes.append(text)
            self._keyed[key] = text
            self.version += 1

    def refuse(self, name: str, why: str | None) -> None:
        """Record that the file ``name`` is not followed and why (None: it is followed again)."""
        with self.lock:
            if why is None:
                if self.refused.pop(name, None) is not None:
                    self.version += 1
            elif self.refused.get(name) != why:
                self.refused[name] = why
                self.version += 1

    def saw_mtime(self, mtime: float) -> None:
        """The files read were last modified at ``mtime`` (this machine's clock): the store's ``mtime`` moves
        to it when newer (a job's own logs: not one rank file's time)."""
        with self.lock:
            if self._mtime is None or mtime > self._mtime:
                self._mtime = mtime

    def forget_arrivals(self) -> None:
        """What the store holds did not just arrive (the first read of files that were already there): its
        own times tell its age, not our clock at the read."""
        with self.lock:
            self._arrival = self._life_arrival = None
            self.version += 1

    def file_time(self, r: int, kind: str, mtime: float | None, *, newest: bool = True) -> None:
        """A file of rank ``r`` was found modified at ``mtime``, on the source's clock (the newest of all
        files: ``mtime``, on this machine's clock, unless ``newest`` is False; of its rank file: the rank's
        ``csv_mtime``, on the source's clock: a remote host's for a remote source)."""
        if mtime is None:
            return
        with self.lock:
            if newest and (self._mtime is None or mtime > self._mtime):
                self._mtime = mtime
            if kind == "csv":
                d = self.rank(r)
                if d.csv_mtime is None or mtime > d.csv_mtime:
                    d.csv_mtime = mtime
                    self.folds.file_time(r, mtime)
                    d.stamp += 1
                    if d.segments and d.segments[-1].session == "":
                        self._dirty.add(r)  # rows without a session: restarting() reads their file's time
                    else:
                        self._grown.add(r)  # no answer of the rank reads it: its frozen copy's is taken

    def rank(self, r: int) -> RankData:
        data = self.ranks.get(r)
        if data is None:
            data = self.ranks[r] = RankData(r, self.table, self.table.add_slot())
            data.spill = self.spill
            self._dirty.add(r)
        return data

    def add_rank_file(self, r: int) -> None:
        """Rank ``r`` has a file of rows (a writer's CSV, a MindFormers log): it counts among the ranks."""
        with self.lock:
            self.rank(r)
            self.rank_files.add(r)

    # -- feeding -----------------------------------------------------------------

    def append(self, batch: Batch) -> None:
        """Every row that enters, by this one door: a batch's parts in order, its files' times, under one hold
        of the lock. A part that is one row of a rank's latest session after a held row, with no extra column,
        bad line or literal NaN (the usual part while following: a rank's one new row) joins the others of
        its kind: they land in the table by one assignment per column and are folded in at once; any other
        part is appended on its own, after the plain rows before it (each rank's rows in file order)."""
        with self.lock:
            for r, kind, mtime in batch.times:
                self.file_time(r, kind, mtime)
            plain: list[tuple[RankData, Rows, int]] = []
            seen: set[int] = set()
            odd: dict[int, set[int]] = {}
            for r, rows, lo, hi in batch.parts:
                d = self.ranks.get(r)
                if rows.nonfinite and id(rows) not in odd:
                    odd[id(rows)] = {i for i, _, _ in rows.nonfinite}
                if (hi - lo == 1 and d is not None and r not in seen and not rows.extra and not rows.bad
                        and d.segments and d.held_rows and lo not in odd.get(id(rows), ())
                        and d.segments[-1].session == rows.session_names[int(rows.session_codes[lo])]):
                    seen.add(r)
                    plain.append((d, rows, lo))
                    continue
                self._append_plain(plain)
                seen.clear()
                self._append_part(r, rows if hi - lo == len(rows) else rows.part(lo, hi))
            self._append_plain(plain)

    def _append_part(self, r: int, rows: Rows) -> None:
        """Rows of rank ``r`` (in file order), appended on their own."""
        self.bad_rows += rows.bad
        if not len(rows):
            if rows.bad:
                self.version += 1
            return
        d = self.rank(r)
        rows.floats = self._refuse([r], rows.exact, rows.floats)
        base = d.rows
        segments_before = len(d.segments)
        new_steps = rows.exact[:, 1]
        if d.monotonic and ((base and new_steps[0] < d.last("step"))
                            or (len(new_steps) > 1 and bool((new_steps[1:] < new_steps[:-1]).any()))):
            d.monotonic = False
        weight = rows.weights
        if weight is not None and (weight != 1).any():  # a digest's merged rows: kept beside them
            rows.extra[WEIGHT] = weight.astype(np.float32)
        for name in rows.extra:
            self._keep_extra(d, name)
        codes, mixed = _session_codes(d, rows, base)
        self.table.append(d.slot, rows.exact, rows.floats, codes, rows.extra)
        d.ledger.settle(d)
        if rows.nonfinite:
            d.nonfinite.extend((base + i, c, v) for i, c, v in rows.nonfinite)
            self.having["nonfinite"].add(r)  # type: ignore[union-attr]
        if len(d.segments) > 1:
            self.having["resumed"].add(r)  # type: ignore[union-attr]
        retimed = mixed or len(d.segments) != segments_before  # which rows are on the timeline changed
        if retimed:
            d.retimes += 1
        tokens = float(np.nansum(d.col("tokens")[d.effective()], dtype=np.float64)) if retimed else None
        self.folds.add(r, rows.exact, rows.floats, rows.extra.get(ACHIEVED), segments=len(d.segments),
                       latest_first=d.segments[-1].first_row if d.segments else 0, mixed=mixed, tokens=tokens,
                       weight=weight)
        self._spill_old(d)
        self._touch(d)
        self._arrival = self._life_arrival = time.time()
        self.version += 1

    def _refuse(self, ranks: list[int] | list[RankData], exact: np.ndarray, floats: np.ndarray) -> np.ndarray:
        """``floats`` with the cells no real step can have made missing (mstop.engine.door), counted by
        reason with the first one's rank, step and value; ``ranks``: the rank of each row, or of them all
        (one). A copy where the batch's array is read-only (a large read adopted as pyarrow gave it)."""
        found = door.impossible(floats)
        if not found:
            return floats
        if not floats.flags.writeable:
            floats = floats.copy()
        got = dict(self.refused_cells)
        st = floats[:, door.column_at("step_time")]
        for f in found:
            j = door.column_at(f.column)
            n, first = got.get(f.reason, (0, ""))
            if not first:
                i = int(f.rows[0])
                rank = ranks[i] if len(ranks) > 1 else ranks[0]
                rank = rank if isinstance(rank, int) else rank.rank
                first = (f"rank {rank} step {door.step_text(float(exact[i, 1]))}: "
                         f"{door.example(f.column, float(floats[i, j]), float(st[i]))}")
            got[f.reason] = (n + len(f.rows), first)
        for f in found:  # after every example is taken: a negative step time's row quotes its wait as given
            floats[f.rows, door.column_at(f.column)] = np.nan
        self.refused_cells = got
        self.version += 1
        return floats

    def _spill_old(self, d: RankData) -> None:
        """Move rank ``d``'s oldest rows to the spill file when it holds more than its share of the store's
        budget (:attr:`keep_rows` over the ranks, at least the budget's ``min_held``), in whole chunks of its
        ``chunk_rows`` rows: called after the folds took the rows in, so none of them reads them back."""
        keep, size = self.keep_rows, self.spill_budget.chunk_rows
        held = d.held_rows
        if keep is None or held < size or self.spill.failed is not None:
            return
        cap = max(self.spill_budget.min_held, keep // max(1, len(self.ranks)))
        chunks = (held - cap) // size
        if chunks <= 0:
            return
        m = chunks * size
        blocks, constant = self.table.spill_blocks(d.slot, m, d.extras)
        try:
            made = self.spill.write_chunks(d.base, size, chunks, blocks, constant)
        except OSError as e:
            self.spill.failed = str(e)
            self.note(f"the oldest rows could not be moved out of memory ({e}): every row is held in memory")
            return
        if self.spill.ram_disk is not None:
            self.note(f"the rows moved out of memory are in {self.spill.ram_disk}, a RAM disk: set MSTOP_SPILL_DIR "
                      "to a directory on a disk to save that memory")
        self.table.drop_front(d.slot, m)
        self.table.trim(d.slot)
        d.spilled = (*d.spilled, *made)
        d.base += m

    def _append_plain(self, plain: list[tuple[RankData, Rows, int]]) -> None:
        """One row of each of distinct ranks (each ``rows``' row ``i``), each of the rank's latest session and
        after a held row: one append for all of them, then what each rank keeps of its rows (the ledger, the
        spill). Rows of one batch parsed together are taken by their places, not one by one."""
        if not plain:
            return
        ds = [d for d, _, _ in plain]
        first = plain[0][1]
        if all(rows is first for _, rows, _ in plain):
            idx = np.fromiter((i for _, _, i in plain), np.int64, len(plain))
            exact, floats = first.exact[idx], first.floats[idx]
            weight = first.weights[idx] if first.weights is not None else None
        else:
            exact = np.stack([rows.exact[i] for _, rows, i in plain])
            floats = np.stack([rows.floats[i] for _, rows, i in plain])
            weight = None if all(rows.weights is None for _, rows, _ in plain) else np.array(
                [1.0 if rows.weights is None else float(rows.weights[i]) for _, rows, i in plain])
        plain.clear()
        self._append_one_each(ds, exact, floats, weight)

    def _keep_extra(self, d: RankData, name: str) -> None:
        """Rank ``d``'s rows gain the numeric extra column ``name`` (its earlier rows NaN); a column a file
        names is listed among the run's extra columns (WEIGHT, the store's own, is not)."""
        if name in d.extras:
            return
        d.extras = (*d.extras, name)
        self.table.add_column(name)
        if name not in self.extra_columns and name != WEIGHT:
            self.extra_columns.append(name)

    def _append_one_each(self, ds: list[RankData], exact: np.ndarray, floats: np.ndarray,
                         weight: np.ndarray | None = None) -> None:
        """A row of each of ``ds`` (distinct ranks, each row of its latest session, after a held row): one
        append for all of them, then what each rank keeps of its rows (the ledger, the spill). ``weight``: the
        rows written each stands for (a digest's merged rows; None: one each)."""
        t = self.table
        floats = self._refuse(ds, exact, floats)
        slots = np.fromiter((d.slot for d in ds), np.int64, len(ds))
        codes = np.fromiter((len(d.segments) - 1 for d in ds), np.int32, len(ds))
        down = (exact[:, 1] < t.arrays["step"][t.hi[slots] - 1]).tolist()  # each has a held row
        extra: dict[str, np.ndarray] = {}
        if weight is not None and (weight != 1).any():
            for d in ds:
                self._keep_extra(d, WEIGHT)
            extra = {WEIGHT: weight.astype(np.float32)}
        else:
            weight = None
        t.append_round(slots, exact, floats, codes, extra)
        held = (t.hi[slots] - t.lo[slots]).tolist()
        values = np.column_stack([exact, floats[:, _LEDGER_FLOATS]]).tolist()
        wts = weight.tolist() if weight is not None else [1.0] * len(ds)
        grown = self._grown
        for d, v, k, dn, h, w in zip(ds, values, codes.tolist(), down, held, wts):
            d.ledger.settle_row(d, k, *v, w)
            d.stamp += 1
            base = d.base
            if h >= self.spill_budget.chunk_rows:
                self._spill_old(d)
            # rows alone: the rank's next frozen copy is its last one with these rows, unless more changed
            # (steps going down, rows spilled) or its answers read its last row's time (rankstate._key)
            if dn:
                d.monotonic = False
            if dn or d.base != base or d.aborts or d.ends or d.segments[-1].session == "":
                self._dirty.add(d.rank)
            else:
                grown.add(d.rank)
        self.folds.add_rows([d.rank for d in ds], exact, floats, weight)
        self._arrival = self._life_arrival = time.time()
        self.version += 1

    def reset_rank(self, r: int) -> None:
        """Forget rank ``r``'s rows: its file is being read again from the start."""
        with self.lock:
            self.resets += 1
            d = self.ranks.get(r)
            if d is not None:
                self.table.forget(d.slot)
                d.summaries = {}  # replaced, not cleared: frozen copies keep the summaries of their rows
                d.monotonic = True
                d.segments.clear()
                d.segment_of.clear()
                d.nonfinite.clear()
                self.having["nonfinite"].discard(r)  # type: ignore[union-attr]
                self.having["resumed"].discard(r)  # type: ignore[union-attr]
                d._effective = None
                d._steady = None
                d.quiet = {}
                d.kept = {}
                d.ledger = RankLedger()
                d.base, d.spilled = 0, ()  # what it spilled stays in the file, unread
                d.csv_mtime = None
                self._touch(d)
                d.rows_epoch += 1
            self.folds.reset(r)
            self.version += 1

    def reset_events(self, r: int) -> None:
        """Forget rank ``r``'s events: its events file is being read again from the start."""
        with self.lock:
            self.resets += 1
            old = self.ranks.get(r)
            if old is not None:
                fresh = RankData(r)
                fresh.table, fresh.slot, fresh.extras = old.table, old.slot, old.extras
                fresh.segments, fresh.segment_of, fresh.nonfinite = old.segments, old.segment_of, old.nonfinite
                fresh.monotonic, fresh.summaries, fresh.summary_lock = old.monotonic, old.summaries, old.summary_lock
                fresh.rows_epoch, fresh.retimes, fresh.kept = old.rows_epoch, old.retimes, old.kept
                fresh.base, fresh.spilled, fresh.spill = old.base, old.spilled, old.spill
                fresh.csv_mtime = old.csv_mtime  # its rank file's, as the folds keep it
                fresh.ledger.settle(fresh)  # classified again without the checkpoints, which come again
                self.ranks[r] = fresh
                for name in _HAVING_EVENTS:
                    self.having[name].discard(r)  # type: ignore[union-attr]
                self._dirty.add(r)
                self._checkpoints = None
            self.version += 1

    def ingest_devices(self, samples: list[Any], bad: int = 0) -> None:
        """Record device samples of a devices file (mstop.engine.devices), the last KEEP of each device."""
        from .devices import KEEP

        with self.lock:
            self.bad_device_rows += bad
            grouped: dict[tuple[str, int, int], list[Any]] = {}
            for s in samples:
                grouped.setdefault(s.key, []).append(s)
            for key, new in grouped.items():
                self.devices[key] = (self.devices.get(key, ()) + tuple(new))[-KEEP:]
            if samples or bad:
                self.version += 1

    def ingest_events(self, r: int, items: list[dict[str, Any]], bad: int = 0, cut: int = 0) -> None:
        """Record events of rank ``r`` (checked by :func:`mstop.formats.parse.parse_events`; ``cut``: how many had
        text or lists cut to mstop.safe's bounds)."""
        with self.lock:
            self.bad_events += bad
            self.cut_events += cut
            d = self.rank(r)
            for e in items:
                kind, t = e["kind"], float(e["time"])
                if kind not in ("start", "lost", "exit") and not (kind == "proc" and e.get("state") in ("Z", "X")):
                    # a start begins a session: what follows it is the sign of life (a start stamped years off
                    # by a clock not yet set must not keep a finished rank alive); a launcher's word that it
                    # lost the rank, its process's end or its zombie are no life of the rank
                    d.last_event_time = t if d.last_event_time is None else max(d.last_event_time, t)
                if kind == "start":
                    d.starts[str(e.get("session"))] = e
                    d.last_start = e
                elif kind == "heartbeat":
                    d.last_heartbeat = t
                elif kind == "checkpoint":
                    d.checkpoints.append({"step": e.get("step"), "time": t, "path": e.get("path")})
                    d.ledger.checkpoint(d, e.get("step"), t)
                    self._checkpoints = None
                elif kind in _LISTED:  # kept whole, in order: evals, aborts, losses, the writer's errors
                    getattr(d, _LISTED[kind]).append(e)
                elif kind == "end":
                    d.ends[str(e.get("session"))] = t
                elif kind == "proc":
                    _proc(d, e, t)
                elif kind == "stack":
                    d.stacks.append(e)
                    del d.stacks[:-STACKS_KEPT]
                elif kind == "dropped":
                    d.dropped += int(e.get("rows") or 0)
                    d.rejected += int(e.get("rejected") or 0)
                if kind in ("profile", "profile_request") or (kind == "start" and e.get("profile_steps")):
                    span = _profiled_span(e)
                    if span is not None and span not in d.profiled:
                        d.profiled.append(span)
                        d._steady = None
                        self.folds.profiled(r)
                    if kind == "profile":
                        d.profiles.append(e)
            if items:
                self._index_events(d)
                self._touch(d)
                d.ev_stamp = next(EVENT_STAMPS)
                self._life_arrival = time.time()
            self.version += 1

    def _index_events(self, d: RankData) -> None:
        """Rank ``d`` in :attr:`having` for the events it has (see HAVING)."""
        for name in _HAVING_EVENTS:
            if getattr(d, name):
                self.having[name].add(d.rank)  # type: ignore[union-attr]

    # -- reading -----------------------------------------------------------------

    def checkpoints_seen(self) -> tuple[dict[float, float], list[float], dict[str, Any] | None]:
        """Every rank's checkpoint events, folded: the earliest time of each step saved, the times of saves
        that name no step, and the checkpoint of the highest step (then the latest). Worked out again only
        after a checkpoint event (at 10,000 ranks saving every 1,000 steps, every frame read them all)."""
        got = self._checkpoints
        if got is None:
            by_step: dict[float, float] = {}
            other: list[float] = []
            best: tuple[Any, dict[str, Any]] | None = None
            for d in self.ranks.values():
                for c in d.checkpoints:
                    step = c.get("step")
                    if isinstance(step, (int, float)) and math.isfinite(step):
                        by_step[float(step)] = min(by_step.get(float(step), math.inf), float(c["time"]))
                    else:
                        other.append(float(c["time"]))
                    key = (step if isinstance(step, (int, float)) else -1, c["time"])
                    if best is None or key > best[0]:
                        best = (key, c)
            got = self._checkpoints = (by_step, other, best[1] if best is not None else None)
        return got

    @property
    def rows(self) -> int:
        """Rows held, all ranks (the folds count them: a sum over 10,000 ranks' records took 12 ms a frame)."""
        with self.lock:
            return self.folds.total_rows()

    @property
    def rows_written(self) -> int:
        """The rows written that the rows held stand for, all ranks: :attr:`rows` and, for a digest's merged
        rows (mstop.sources.followers.follower), the rows each was merged from."""
        with self.lock:
            return self.folds.total_stood()

    def ranks_with(self, name: str) -> list[int]:
        """The ranks that have ``name`` (one of HAVING: writer errors, stack dumps, profiles, a literal NaN/Inf,
        several sessions), in rank order: what a frame looks for among few ranks, without a walk of all."""
        with self.lock:
            return sorted(self.having[name])

    def progress(self) -> Progress:
        """How far the read has come (see :class:`Progress`): O(ranks) array work, no rank copied."""
        with self.lock:
            lasts = self.folds.lasts()
            times = lasts.time[np.isfinite(lasts.time)]
            first = min((r for r, d in self.ranks.items() if d.last_start is not None), default=None)
            start = self.ranks[first].last_start if first is not None else None
            return Progress(self.folds.total_stood(), len(self.rank_files),
                            int(lasts.step.max()) if len(lasts.ranks) else None,
                            float(times.max()) if len(times) else None, self.bad_rows, self.bad_events,
                            dict(start or {}))

    def nbytes(self) -> int:
        """Bytes allocated for the row columns."""
        return self.table.nbytes

    def series(self, r: int, column: str, points: int, *, steps: tuple[float, float] | None = None,
               x: str = "step") -> tuple[np.ndarray, np.ndarray]:
        """At most ``points`` (x, y) pairs of a column on rank ``r``'s timeline, for drawing.

        Rows are grouped into buckets along the timeline; each bucket gives its
        minimum, its maximum and its first NaN/Inf, in order, so no extreme and
        no NaN is ever dropped, however many rows there are. On a long
        single-session rank the buckets are built from per-block summaries kept
        as rows arrive, so a frame costs the same with 10 thousand rows or 10 million.
        """
        with self.lock:
            d = self.ranks.get(r)
            if d is None or d.rows == 0:
                return np.empty(0), np.empty(0)
            rows = self.series_rows(r, column, points, steps=steps)
            return d.take(x, rows).astype(np.float64), d.take(column, rows).astype(np.float64)

    def series_rows(self, r: int, column: str, points: int, *, steps: tuple[float, float] | None = None) -> np.ndarray:
        """The rows :meth:`series` draws (to read other columns of the same rows)."""
        with self.lock:
            d = self.ranks.get(r)
            if d is None or d.rows == 0:
                return np.empty(0, np.int64)
            if len(d.segments) <= 1 and d.monotonic and d.rows >= 8 * BLOCK:
                return self._summary_rows(d, column, points, steps)
            return self._scan_rows(d, column, points, steps)

    def _present(self, d: RankData, column: str, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows in [lo, hi) whose cell holds a value (a number, or a literal NaN/Inf), and those values."""
        ys = d.span(column, lo, hi).astype(np.float64)
        present = ~np.isnan(ys)
        lit = [i - lo for i, c, _ in d.nonfinite if c == column and lo <= i < hi]
        if lit:
            present[lit] = True
        return np.flatnonzero(present) + lo, ys[present]

    def _scan_rows(self, d: RankData, column: str, points: int, steps: Any) -> np.ndarray:
        eff = d.effective()
        if steps is not None:
            st = d.col("step")
            eff = eff & (st >= steps[0]) & (st <= steps[1])
        rows, ys = self._present(d, column, 0, d.rows)
        keep = eff[rows]
        rows, ys = rows[keep], ys[keep]
        return rows if len(rows) <= points else rows[_pick(ys, max(1, points // 3))]

    def _summary_rows(self, d: RankData, column: str, points: int, steps: Any) -> np.ndarray:
        lo, hi = 0, d.rows
        if steps is not None:
            lo, hi = d.search_step(steps[0], "left"), d.search_step(steps[1], "right")
        if hi - lo <= 8 * BLOCK:
            rows, ys = self._present(d, column, lo, hi)
            return rows if len(rows) <= points else rows[_pick(ys, max(1, points // 3))]
        summ = d.summary(column)
        b0, b1 = -(-lo // BLOCK), hi // BLOCK
        out: list[np.ndarray] = []
        edge_buckets = max(1, points // 30)
        for a, b in ((lo, b0 * BLOCK), (b1 * BLOCK, hi)):  # partial blocks at both ends, from the rows
            rows, ys = self._present(d, column, a, b)
            if len(rows):
                out.append(rows[_pick(ys, edge_buckets)])
        groups = max(1, points // 3 - 2 * edge_buckets)
        edges = np.linspace(b0, b1, groups + 1).astype(np.int64)
        for ga, gb in zip(edges[:-1], edges[1:]):
            if ga == gb:
                continue
            picks = set()
            mins, maxs = summ.mins[ga:gb], summ.maxs[ga:gb]
            if not np.isnan(mins).all():
                picks.add(int(summ.argmin[ga + int(np.nanargmin(mins))]))
                picks.add(int(summ.argmax[ga + int(np.nanargmax(maxs))]))
            bad = summ.firstbad[ga:gb]
            bad = bad[bad >= 0]
            if len(bad):
                picks.add(int(bad.min()))
            out.append(np.fromiter(picks, dtype=np.int64, count=len(picks)))
        return np.unique(np.concatenate(out)) if out else np.empty(0, np.int64)


def _pick(ys: np.ndarray, buckets: int) -> np.ndarray:
    """Indices into ``ys`` of each bucket's minimum, maximum and first NaN/Inf, in order."""
    n = len(ys)
    edges = np.linspace(0, n, buckets + 1).astype(np.int64)
    out: list[int] = []
    for a, b in zip(edges[:-1], edges[1:]):
        if a == b:
            continue
        seg = ys[a:b]
        fin = np.isfinite(seg)
        pick = set()
        if fin.any():
            vals = np.where(fin, seg, np.nan)
            pick.add(a + int(np.nanargmin(vals)))
            pick.add(a + int(np.nanargmax(vals)))
        if not fin.all():
            pick.add(a + int(np.flatnonzero(~fin)[0]))
        out.extend(sorted(pick))
    return np.asarray(out, dtype=np.int64)
