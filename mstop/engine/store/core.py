"""The store itself: its one lock and version, the one door rows enter by (:meth:`Store.append` of a
:class:`Batch`), the events' door, and its snapshots."""

from __future__ import annotations

import copy
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...formats.parse import Rows
from .. import door, spill
from ..folds import ACHIEVED, WEIGHT, Folds
from ..ledgerfold import RankLedger, settle_fresh
from ..spill import SpillFile
from .frozen import FrozenRanks, KeptAnswers, Progress, _Grown
from .rank import (
    _HAVING_EVENTS,
    _LEDGER_FLOATS,
    _LISTED,
    EVENT_STAMPS,
    EXACT,
    FLOAT_COLS,
    FLOAT_INDEX,
    HAVING,
    STACKS_KEPT,
    RankData,
    _proc,
    _profiled_span,
    _session_codes,
)
from .snapshot import Reads, Snapshot
from .table import Table

#: How many snapshots' changed ranks a snapshot remembers (Store.changed_after).
CHANGE_LOG = 32


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

    def file_time(self, r: int, kind: str, mtime: float | None) -> Batch:
        self.times.append((r, kind, mtime))
        return self


class Store(Reads):
    """The rows and events of every rank of one run (thread-safe). ``spill``: how many rows it holds in memory
    (mstop.engine.spill; default: what the environment sets, read now)."""

    def __init__(self, spill_budget: spill.SpillBudget | None = None) -> None:
        self.lock = threading.RLock()
        self._guard = self.lock  # what its reads (Reads) take
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
        #: of a snapshot: (how many were taken before it, the ranks changed since the one before it, those
        #: changed by rows alone)
        self.changed: tuple[int, frozenset[int], frozenset[int]] | None = None
        #: the last CHANGE_LOG snapshots' ``changed``, oldest first (a snapshot holds the log as it took it):
        #: a reader that skipped snapshots still learns which ranks changed since the one it last read
        self.change_log: tuple[tuple[int, frozenset[int], frozenset[int]], ...] = ()
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

    def snapshot(self) -> Snapshot:
        """The store as it is now (a :class:`Snapshot`), taken under the lock in O(ranks) (rows are shared,
        never copied): a frame is computed from it while the reading thread goes on adding rows."""
        with self.lock:
            self.checkpoints_seen()  # folded here, once per change, not by every snapshot again
            state = dict(self.__dict__)
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
            state["ranks"] = self._snap_ranks = FrozenRanks(ranks)
            # the ranks whose answers (mstop.engine.rankstate) may have changed, and those that only got rows
            state["changed"] = (self._snaps, frozenset(self._dirty), frozenset(self._grown - self._dirty))
            state["change_log"] = self.change_log = (*self.change_log[-(CHANGE_LOG - 1):], state["changed"])
            self._snaps += 1
            self._dirty = set()
            self._grown = set()
            state["_memo"] = dict(self._memo)
            state["folds"] = self.folds.frozen()
            state["having"] = {name: frozenset(got) for name, got in self.having.items()}
            for name in ("ignored_files", "refused", "notes", "rank_files", "owners", "duplicates", "extra_columns",
                         "devices"):
                state[name] = copy.copy(getattr(self, name))
            return Snapshot(state)

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
            whole: dict[int, Rows] = {}  # other parts, of distinct ranks, in order
            odd: dict[int, set[int]] = {}
            for r, rows, lo, hi in batch.parts:
                d = self.ranks.get(r)
                if rows.nonfinite and id(rows) not in odd:
                    odd[id(rows)] = {i for i, _, _ in rows.nonfinite}
                if (hi - lo == 1 and d is not None and r not in seen and not rows.extra and not rows.bad
                        and d.segments and d.held_rows and lo not in odd.get(id(rows), ())
                        and d.segments[-1].session == rows.session_names[int(rows.session_codes[lo])]):
                    self._append_parts(whole)
                    seen.add(r)
                    plain.append((d, rows, lo))
                    continue
                self._append_plain(plain)
                seen.clear()
                if r in whole:
                    self._append_parts(whole)
                whole[r] = rows if hi - lo == len(rows) else rows.part(lo, hi)
            self._append_parts(whole)
            self._append_plain(plain)

    def _append_parts(self, parts: dict[int, Rows]) -> None:
        """Rows of distinct ranks (each in file order), each appended on its own, in order; their ledgers
        settled together where they can be (a first read's: ledgerfold.settle_fresh, in arrays)."""
        landed = [got for r, rows in parts.items() if (got := self._land(r, rows)) is not None]
        parts.clear()
        alone = settle_fresh([x[0] for x in landed])
        for d in alone:
            d.ledger.settle(d)
        for x in landed:
            self._landed(*x)

    def _land(self, r: int, rows: Rows) -> tuple[RankData, Rows, int, int, bool] | None:
        """Rows of rank ``r`` into the table (its ledger not yet settled): (the rank, the rows, its rows and
        sessions before them, whether they mix sessions), None when none came."""
        self.bad_rows += rows.bad
        if not len(rows):
            if rows.bad:
                self.version += 1
            return None
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
        return d, rows, base, segments_before, mixed

    def _landed(self, d: RankData, rows: Rows, base: int, segments_before: int, mixed: bool) -> None:
        """What rank ``d`` keeps of rows landed (and settled) beside the table: its literal NaNs, its folds,
        its spill."""
        r = d.rank
        weight = rows.weights
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
        from ..devices import KEEP

        with self.lock:
            self.bad_device_rows += bad
            grouped: dict[tuple[str, int, int], list[Any]] = {}
            for s in samples:
                grouped.setdefault(s.key, []).append(s)
            for key, new in grouped.items():
                self.devices[key] = (self.devices.get(key, ()) + tuple(new))[-KEEP:]
            if samples or bad:
                self.version += 1

    def take_events(self, by_rank: dict[int, list[dict[str, Any]]]) -> None:
        """Events of several ranks at once, under one hold of the lock: no snapshot sees some ranks' without
        the others' (a wait-for graph half read would name the wrong rank)."""
        with self.lock:
            for r, items in by_rank.items():
                self.ingest_events(r, items)

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

