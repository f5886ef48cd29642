"""State that advances with the rows: folded in when a read round's batch is appended, read by the figures.

A fold takes the batch (never the store) and costs O(batch) per batch of a rank; a figure reads the fold
instead of walking every rank's columns at every frame (nvitop's collector: each sample is added once, reading
is only reading). The store owns its folds (:attr:`mstop.engine.store.Store.folds`), feeds them in
``append``, forgets a rank's in ``reset_rank``, and freezes them with its snapshot.

Ranks live in slots in the order they first had rows (arrays that double when full: a new rank costs O(1),
not a shift of every other rank's); a read puts them in rank order with one index.

Issue 39 step 3 begins here: each rank's last row (the step, the clocks, the laggards) and its last
:data:`RING` rows (the recent window every live figure reads).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EXACT_TIME, EXACT_STEP = 0, 1  # the store's exact columns: mstop.engine.store.EXACT
#: rows each rank keeps in its ring: the recent window (mstop.engine.figures.WINDOW)
RING = 20
#: a MindFormers log's own FLOP/s per device, an extra column the window carries (mstop.engine.figures.ACHIEVED)
ACHIEVED = "train_throughput_per_npu"
#: the rows written each held row stands for (a digest's merged rows: mstop.sources.followers.follower), kept as a
#: numeric column of that name, which no file can give (a header's names never hold a control code) and
#: the charts never list; NaN (a row read as written) is 1
WEIGHT = "\x1frows"


def stands_for(weight: np.ndarray) -> np.ndarray:
    """WEIGHT's cells as the rows written each row stands for (float64): NaN, a row read as written, is 1."""
    weight = np.asarray(weight, np.float64)
    return np.where(np.isnan(weight), 1.0, weight)


#: the columns a merged row holds the sum of (its step time, wait, tokens and samples: a chart shows them a
#: step at a time, over WEIGHT); mstop.sources.followers.follower.SUMMED is this one
SUMMED = ("step_time", "data_wait", "tokens", "samples")
#: the float columns the window carries (the ring keeps only these)
WINDOW_FLOATS = ("step_time", "data_wait", "tokens", "samples", "mfu", "mem_peak", "mem_total")


@dataclass
class Lasts:
    """Every rank with rows, in rank order, with its last row's time and step."""

    ranks: list[int]
    time: np.ndarray
    step: np.ndarray
    #: when its rank file was last seen modified, on the source's clock (NaN: not known): RankData.csv_mtime
    mtime: np.ndarray


@dataclass
class Ring:
    """Every rank with rows, in rank order: its last :data:`RING` rows, right-aligned and NaN-padded (the oldest
    first), and how many rows it has in all."""

    ranks: list[int]
    exact: np.ndarray  # (ranks, RING, 2) float64
    floats: np.ndarray  # (ranks, RING, WINDOW_FLOATS) float32
    achieved: np.ndarray  # (ranks, RING) float64
    weight: np.ndarray  # (ranks, RING) float64: the rows written each stands for (NaN: 1)
    rows: np.ndarray  # (ranks,) int64
    #: whether the ring's rows are the rank's last steady rows as they are: one session (less its first row
    #: while the ring holds it: ``blank``), or a latest session longer than the ring, no profiled steps and no
    #: older session's rows among the last. The others are read from their columns (mstop.engine.figures).
    regular: np.ndarray  # (ranks,) bool
    blank: np.ndarray  # (ranks,) bool: one session of 2 to RING rows: its first row is in the ring, not the window
    latest_first: np.ndarray  # (ranks,) int64: the first row of the rank's latest session


class Folds:
    """Each rank's last row and last :data:`RING` rows, folded in batch by batch.

    A snapshot (:meth:`frozen`) shares the arrays; the live folds copy them before their next write (copy on
    write): the store's lock is held O(1) here for a snapshot, and the copy is made once per snapshot that
    rows followed, by the thread that adds them."""

    ARRAYS = ("exact", "floats", "achieved", "weight", "rows", "stood", "segments", "latest_first", "old_until",
              "profiled_", "tokens", "mtime")
    is_frozen = False

    def __init__(self, float_index: dict[str, int]) -> None:
        """``float_index``: where each WINDOW_FLOATS column is among a batch's float columns."""
        self.take = np.array([float_index[c] for c in WINDOW_FLOATS], dtype=np.int64)
        self.slot: dict[int, int] = {}
        self.rank_of: list[int] = []
        cap = 8
        self.exact = np.full((cap, RING, 2), np.nan)
        self.floats = np.full((cap, RING, len(WINDOW_FLOATS)), np.nan, np.float32)
        self.achieved = np.full((cap, RING), np.nan)
        self.weight = np.full((cap, RING), np.nan)
        self.rows = np.zeros(cap, np.int64)
        self.stood = np.zeros(cap, np.int64)  # the rows written its rows stand for (more than rows: a digest's)
        self.segments = np.zeros(cap, np.int64)
        self.latest_first = np.zeros(cap, np.int64)  # the first row of the rank's latest session
        self.old_until = np.zeros(cap, np.int64)  # rows up to the last one of an older session appended
        self.profiled_ = np.zeros(cap, bool)
        self.tokens = np.zeros(cap)  # Σtokens over the rank's timeline (its effective rows)
        self.mtime = np.full(cap, np.nan)  # its rank file's modification time (RankData.csv_mtime; NaN: none)
        self._order: tuple[list[int], np.ndarray] | None = None
        self._frozen: Folds | None = None
        self._lasts: tuple[int, Lasts] | None = None
        self._shared = False  # a snapshot holds these arrays: copy them before the next write
        self._changes = 0  # bumps with each batch, profile and reset: a snapshot is taken again only after one

    def _own(self) -> None:
        """Copy the arrays a snapshot shares before writing into them."""
        if self._shared:
            for name in self.ARRAYS:
                setattr(self, name, getattr(self, name).copy())
            self._shared = False

    def _slot(self, r: int) -> int:
        i = self.slot.get(r)
        if i is not None:
            return i
        i = len(self.rank_of)
        if i == len(self.rows):  # full: double every array
            for name in self.ARRAYS:
                setattr(self, name, _grown(getattr(self, name), 2 * i))
        self.slot[r] = i
        self.rank_of.append(r)
        self._order = None
        return i

    def add(self, r: int, exact: np.ndarray, floats: np.ndarray, achieved: np.ndarray | None, *,
            segments: int = 1, latest_first: int = 0, mixed: bool = False, tokens: float | None = None,
            weight: np.ndarray | None = None) -> None:
        """Fold in a batch of rank ``r``'s rows (in file order): its exact columns (time, step), its float
        columns, its ACHIEVED column when the file has one, the rows written each stands for (``weight``,
        None: one each); and after it, the rank's sessions, the first row
        of its latest, and whether the batch held rows of an older session (``mixed``). ``tokens``: the
        rank's Σtokens over its timeline when the batch changed which rows are on it (a resume cuts older
        rows: the store adds them up again), else None and the batch's tokens are added."""
        k = len(exact)
        if not k:
            return
        self._own()
        i = self._slot(r)
        if not self.rows[i]:
            self._order = None  # a rank with rows again (after a reset)
        ach = achieved[-RING:] if achieved is not None else np.full(min(k, RING), np.nan)
        wt = weight[-RING:] if weight is not None else np.full(min(k, RING), np.nan)
        for ring, new in ((self.exact, exact[-RING:]), (self.floats, floats[-RING:][:, self.take]),
                          (self.achieved, ach), (self.weight, wt)):
            if k >= RING:
                ring[i] = new
            else:
                ring[i, :-k] = ring[i, k:]
                ring[i, -k:] = new
        self.rows[i] += k
        self.stood[i] += k if weight is None else int(stands_for(weight).sum())
        if tokens is not None:
            self.tokens[i] = tokens
        else:
            tok = floats[:, self.take[WINDOW_FLOATS.index("tokens")]]
            if k > 1:
                self.tokens[i] += float(np.nansum(tok, dtype=np.float64))
            elif tok[0] == tok[0]:  # one row (the usual batch while following): not NaN
                self.tokens[i] += float(tok[0])
        self.segments[i], self.latest_first[i] = segments, latest_first
        if mixed:
            self.old_until[i] = self.rows[i]
        self._changes += 1

    def add_rows(self, ranks: list[int], exact: np.ndarray, floats: np.ndarray,
                 weight: np.ndarray | None = None) -> None:
        """Fold in one row of each of ``ranks`` (each once, each rank's row of its latest session, no ACHIEVED
        column; ``weight``: the rows written each stands for, None: one): the usual read round while following,
        folded in with array operations, not rank by rank."""
        if not ranks:
            return
        self._own()
        slots = np.fromiter((self._slot(r) for r in ranks), np.int64, len(ranks))
        if not self.rows[slots].all():
            self._order = None  # a rank with rows again (after a reset)
        for ring, new in ((self.exact, exact), (self.floats, floats[:, self.take])):
            ring[slots, :-1] = ring[slots, 1:]
            ring[slots, -1] = new
        for ring in (self.achieved, self.weight):
            ring[slots, :-1] = ring[slots, 1:]
            ring[slots, -1] = np.nan
        self.rows[slots] += 1
        if weight is None:
            self.stood[slots] += 1
        else:
            self.weight[slots, -1] = weight
            self.stood[slots] += stands_for(weight).astype(np.int64)
        tok = floats[:, self.take[WINDOW_FLOATS.index("tokens")]].astype(np.float64)
        self.tokens[slots] += np.where(tok == tok, tok, 0.0)
        self._changes += 1

    def file_time(self, r: int, mtime: float) -> None:
        """Rank ``r``'s file was last modified at ``mtime`` (the store's RankData.csv_mtime, kept here too so
        that the clocks read every rank's at once)."""
        self._own()
        i = self._slot(r)  # first: a new slot may grow the arrays
        self.mtime[i] = mtime
        self._changes += 1

    def profiled(self, r: int) -> None:
        """Some of rank ``r``'s steps ran under the profiler: its window is read from its columns."""
        i = self.slot.get(r)
        if i is not None and not self.profiled_[i]:
            self._own()
            self.profiled_[i] = True
            self._changes += 1

    def reset(self, r: int) -> None:
        """Rank ``r`` has no rows any more (its file is read again from the start)."""
        i = self.slot.get(r)
        if i is None:
            return
        self._own()
        self.exact[i] = np.nan
        self.floats[i] = np.nan
        self.achieved[i] = np.nan
        self.weight[i] = np.nan
        self.stood[i] = 0
        self.rows[i] = self.segments[i] = self.latest_first[i] = self.old_until[i] = 0
        self.tokens[i] = 0.0
        self.mtime[i] = np.nan  # profiled_ stays: its profile events are not the rows read again
        self._order = None
        self._changes += 1

    def order(self) -> tuple[list[int], np.ndarray]:
        """The ranks with rows in rank order, and their slots."""
        if self._order is None:
            have = sorted(r for r, i in self.slot.items() if self.rows[i])
            self._order = (have, np.array([self.slot[r] for r in have], dtype=np.int64))
        return self._order

    def lasts(self) -> Lasts:
        """Each rank's last row (copies, read again only after a change: the step, the clocks and the
        laggards share one per frame; not to be written to)."""
        if self._lasts is None or self._lasts[0] != self._changes:
            ranks, slots = self.order()
            last = self.exact[slots, -1]
            self._lasts = (self._changes, Lasts(list(ranks), last[:, EXACT_TIME].copy(), last[:, EXACT_STEP].copy(),
                                                self.mtime[slots]))
        return self._lasts[1]

    def total_rows(self) -> int:
        """Rows held, all ranks."""
        return int(self.rows[:len(self.rank_of)].sum())

    def total_stood(self) -> int:
        """The rows written that the rows held stand for, all ranks (more than held: a digest's merged rows)."""
        return int(self.stood[:len(self.rank_of)].sum())

    def tokens_of(self, r: int) -> float | None:
        """Σtokens over rank ``r``'s timeline (None: no tokens, or no rows)."""
        i = self.slot.get(r)
        return float(self.tokens[i]) or None if i is not None else None

    def ring(self) -> Ring:
        """Each rank's ring in rank order (copies)."""
        ranks, slots = self.order()
        rows, segs = self.rows[slots], self.segments[slots]
        single = segs <= 1
        latest = ~single & (rows - self.latest_first[slots] > RING) & ~self.profiled_[slots] & \
            (rows - self.old_until[slots] >= RING)
        return Ring(list(ranks), self.exact[slots], self.floats[slots], self.achieved[slots], self.weight[slots], rows,
                    single | latest, single & (rows > 1) & (rows <= RING), self.latest_first[slots])

    def frozen(self) -> Folds:
        """The folds as they are now, for a snapshot (the same one again while nothing was added)."""
        if self.is_frozen:
            return self
        if self._frozen is None or self._frozen._changes != self._changes:
            self.order()  # worked out here, where the next snapshots share it, not by each snapshot's reader
            f = Folds.__new__(Folds)
            f.__dict__.update(self.__dict__)
            f.slot, f.rank_of, f._frozen, f.is_frozen = dict(self.slot), list(self.rank_of), None, True
            self._shared = True
            self._frozen = f
        return self._frozen


def _grown(a: np.ndarray, cap: int) -> np.ndarray:
    out = np.full((cap, *a.shape[1:]), np.nan if a.dtype.kind == "f" else 0, a.dtype)
    out[:len(a)] = a
    return out
