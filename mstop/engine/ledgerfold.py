"""The goodput ledger's fold: each rank's rows split into the ledger's buckets once, as they arrive.

The ledger (mstop.engine.goodput) used to be worked out from every row of every rank at each reading: 3-6 s
of CPU at 20 M rows, and a definition that looked ahead (the run's median step time over all its rows, a
resume making an older session's rows ``recomputed`` after the fact: ``productive`` fell at every resume).
Here each row is classified once, by what came before it, so the ledger only grows with the rows, and the
figure read live equals the figure read from the same files later (definition 2, see docs/health.md):

- a rank's rows fall in blocks of :data:`BLOCK`; a row of block ``j`` is measured against the step time,
  the usual time between rows and the stall limit of block ``j - 1``, a row of block 0 against the rows so
  far (itself included): no row waits for later ones, none is classified again;
- a row that runs a step the rank had already reached before its session began is ``recomputed`` (the
  rows of the resumed session, not the older session's: what was done stays done);
- a checkpoint event found after its rows were classified moves them to ``checkpoint`` (exactly: the row is
  classified again);
- a digest's merged row (mstop.sources.followers.follower: its step and wait times summed over the ``w`` rows it
  stands for) counts as ``w`` steps: the block figures are a step's (its times over ``w``), and it is measured
  against ``w`` of them; it is slow when its time past ``w - 1`` median steps is over the stall limit (one
  hung step among them, as it would be read alone).

What is kept per rank (a :class:`RankLedger`): the classified rows' five sums, each complete block's three
figures (24 bytes a 64 rows; and the first block's rows' own), each session's latest time and the highest
step before it. Each session's
first row, its start-up and what lies between sessions are worked out when the ledger is read (they depend
on start, end and abort events that can arrive later): O(sessions) a rank.
"""

from __future__ import annotations

import bisect
import math
from array import array
from typing import Any, Protocol

import numpy as np

from .folds import WEIGHT, stands_for


class RankData(Protocol):
    """What the fold reads of a rank (mstop.engine.store.RankData: the store imports this module)."""

    segments: list[Any]
    ledger: RankLedger
    base: int
    spilled: tuple[Any, ...]
    extras: tuple[str, ...]

    @property
    def rows(self) -> int: ...

    def col(self, name: str) -> np.ndarray: ...

    def span(self, name: str, lo: int, hi: int) -> np.ndarray: ...

    def held(self, name: str) -> np.ndarray: ...

#: rows a block: a row is measured against the figures of the block before its own
BLOCK = 64
#: the fewest rows whose first block's figures are worked out in arrays (prefix_figures), a rank alone or ranks
#: together (settle_fresh); fewer go row by row
SHORT = 8
#: the sums a rank's classified rows (all but each session's first) add to, in this order
SUMS = ("productive", "input_wait", "checkpoint", "stalled", "recomputed")
#: the shortest stall limit (mstop.engine.figures.STALL_MIN_S is this one)
STALL_MIN_S = 30.0
#: a checkpoint written this long after a row's time still counts as saved during that row
_CK_SLACK = 1e-3


def row_medians(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's median of its values that are not NaN (NaN where none; numpy's ``nanmedian`` value for value:
    the mean of the middle two, or of the middle one with itself), and how many there were: one sort for every
    row (np.nanmedian goes row by row in Python). mstop.engine.figures.row_medians is this one."""
    s = np.sort(v, axis=1)  # NaN last
    c = np.count_nonzero(~np.isnan(v), axis=1)
    i = np.arange(len(v))
    lo, hi = np.maximum(c - 1, 0) // 2, c // 2
    with np.errstate(invalid="ignore"):
        med = np.where(c > 0, (s[i, lo] + s[i, np.minimum(hi, v.shape[1] - 1)]) / 2, np.nan)
    return med, c


def block_figures(time: np.ndarray, st: np.ndarray, first: np.ndarray, same: np.ndarray, width: int,
                  before: np.ndarray, wt: np.ndarray | None = None) -> np.ndarray:
    """The figures of consecutive blocks of ``width`` rows of ranks (one a row of each array), (ranks,
    blocks, 3): each block's (median step time, usual time between rows beyond the step time, stall limit),
    from its rows' times and step times, which rows begin a session (``first``) and which follow a row of
    their own session (``same``: the gap to the row before is theirs). The arrays hold one row more before
    the blocks (its time only: the gap to the first block's first row; ``first`` and ``same`` of it are
    ignored). A figure a block has no rows for is the block before's (``before``, (ranks, 3), for the
    first). ``wt``: the rows each stands for (None: one each): figures a step's."""
    k, n = len(time), (time.shape[1] - 1) // width
    t = time.astype(np.float64)
    s = st[:, 1:].astype(np.float64).reshape(k, n, width)
    f = first[:, 1:].reshape(k, n, width)
    with np.errstate(invalid="ignore"):
        gap = np.diff(t, axis=1).reshape(k, n, width)
        ok = same[:, 1:].reshape(k, n, width) & np.isfinite(gap)
        excess = gap - np.minimum(np.where(s == s, s, 0.0), gap)
        if wt is not None:
            per = wt[:, 1:].reshape(k, n, width)
            s, gap, excess = s / per, gap / per, excess / per
        v = np.empty((3, k, n, width))  # the three kinds' values, medians found in one sort
        v[0] = np.where(~f & np.isfinite(s) & (s > 0), s, np.nan)
        v[1] = np.where(ok & np.isfinite(excess), excess, np.nan)
        v[2] = np.where(ok, gap, np.nan)
        med, count = row_medians(v.reshape(-1, width))
    med, count = med.reshape(3, k, n), count.reshape(3, k, n)
    out = np.empty((k, n, 3))
    m0, n0 = before[:, 0], before[:, 1]
    for j in range(n):  # a figure a block has no rows for is the block before's
        m0 = np.where(count[0, :, j] > 0, med[0, :, j], m0)
        n0 = np.where(count[1, :, j] >= 2, med[1, :, j], n0)
        iv = np.where(med[2, :, j] == med[2, :, j], med[2, :, j], 0.0)
        out[:, j, 0], out[:, j, 1] = m0, n0
        out[:, j, 2] = np.maximum(np.maximum(STALL_MIN_S, 10.0 * m0), 3.0 * iv)
    return out


def prefix_figures(t: np.ndarray, st: np.ndarray, first: np.ndarray, same: np.ndarray,
                   wt: np.ndarray | None) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Each row's figures from the rows up to it, of ranks' first rows (one a row of each array, (ranks,
    rows)): (ranks, rows, 3), as the rows of a lower-triangular matrix (one sort for the three kinds); with
    the values they are medians of (step times, gaps, their excess: a step's). ``first``: which rows begin a
    session; ``same``: which follow a row of their own session."""
    k, upto = t.shape
    with np.errstate(invalid="ignore"):
        stv = np.where(~first & (st == st) & (st > 0), st, np.nan)
        gap = np.full((k, upto), np.nan)
        gap[:, 1:] = t[:, 1:] - t[:, :-1]
        ok = ~first & np.isfinite(gap) & same
        ok[:, 0] = False
        gapv = np.where(ok, gap, np.nan)
        exv = np.where(ok, gap - np.minimum(np.nan_to_num(st, nan=0.0), gap), np.nan)
        if wt is not None:  # a step's figures (a digest's merged rows: the module's docstring)
            stv, gapv, exv = stv / wt, gapv / wt, exv / wt
    upper = np.triu(np.ones((upto, upto), bool), 1)  # [i, j]: row j comes after row i
    v = np.stack([stv, exv, gapv], axis=1)[:, :, None, :]  # (ranks, kind, 1, row)
    med, count = row_medians(np.where(upper, np.nan, v).reshape(-1, upto))
    med, count = med.reshape(k, 3, upto), count.reshape(k, 3, upto)
    m = np.where(count[:, 0] > 0, med[:, 0], 0.0)
    normal = np.where(count[:, 1] >= 2, med[:, 1], 0.0)
    hang = np.maximum(np.maximum(STALL_MIN_S, 10.0 * m), 3.0 * np.where(count[:, 2] > 0, med[:, 2], 0.0))
    return np.stack([m, normal, hang], axis=2), (stv, gapv, exv)


def steps_of(gap: np.ndarray, st: np.ndarray, dw: np.ndarray,
             normal: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows' time between them (``gap``) split: the step's own (its step time ``st`` as far as the gap allows,
    and the loop's usual time outside the step, ``normal``), the time no step ran, and the data wait ``dw``
    within the step's own; of any shape (a rank's rows, or ranks' rows)."""
    own = np.minimum(st, gap)
    own += np.minimum(gap - own, normal)  # the loop's usual time outside the step belongs to the step
    return own, gap - own, np.minimum(dw, own)


def classify(t: np.ndarray, prev: np.ndarray, st: np.ndarray, dw: np.ndarray, m: np.ndarray, normal: np.ndarray,
             hang: np.ndarray, saved: np.ndarray, redo: np.ndarray, wt: np.ndarray | None = None) -> list[float]:
    """The rows' seconds in the five :data:`SUMS`, summed: each row ran from ``prev`` (the time its session
    had reached) to ``t``; ``st``/``dw`` its step time and data wait (0: not given), ``m``/``normal``/``hang``
    its block's figures, ``saved`` whether a checkpoint was written in it, ``redo`` whether it ran a step
    done before (recomputed); ``wt`` the rows each stands for (None: one each; the module's docstring). The
    arithmetic of :func:`_one`, row by row."""
    gap = t - prev
    if wt is not None:  # figures of w steps
        normal, hang, m = normal * wt, hang + m * (wt - 1.0), m * wt
    own, extra, wait = steps_of(gap, st, dw, normal)
    if redo.any():
        count = ~redo
        recomputed = float(own[redo].sum())
    else:
        count, recomputed = None, 0.0
    slow = saved | (own > hang)
    over = np.maximum(0.0, own[slow] - np.maximum(m[slow], wait[slow]))
    if count is not None:
        over *= count[slow]
        wait *= count
        own *= count
    lost = extra.copy()
    lost[slow] += over
    ck = float(lost[saved].sum()) if saved.any() else 0.0
    wait_s = float(wait.sum())
    return [float(own.sum()) - float(over.sum()) - wait_s, wait_s, ck, float(lost.sum()) - ck, recomputed]


def _one(t: float, prev: float, st: float, dw: float, m: float, normal: float, hang: float, saved: bool,
         redo: bool, w: float = 1.0) -> tuple[float, float, float, float, float]:
    """:func:`classify` of one row, in plain Python (the usual row while following: numpy's calls on
    one-element arrays cost ten times more)."""
    if w != 1.0:
        normal, hang, m = normal * w, hang + m * (w - 1.0), m * w
    gap = t - prev
    own = min(st, gap)
    own += min(gap - own, normal)
    extra = gap - own
    if redo:
        return 0.0, 0.0, extra if saved else 0.0, 0.0 if saved else extra, own
    wait = min(dw, own)
    over = max(0.0, own - max(m, wait)) if saved or own > hang else 0.0
    return own - over - wait, wait, extra + over if saved else 0.0, 0.0 if saved else extra + over, 0.0


def _num(v: Any) -> float:
    """A cell as a float, 0 for a missing one (NaN)."""
    f = float(v)
    return f if f == f else 0.0


class RankLedger:
    """One rank's folded ledger (see the module's doc). A frozen copy (:meth:`frozen`) has its own sums and
    session times and shares the lists that only grow (the blocks' figures, the steps reached)."""

    __slots__ = ("settled", "sums", "blocks", "early", "warm", "sess_t", "reached", "top", "saved", "ck_times",
                 "ck_steps")

    def __init__(self) -> None:
        self.settled = 0  # rows classified (the rows before it)
        self.sums = [0.0] * 5
        self.blocks = Figures()  # each complete block's figures
        self.early = Figures()  # the first block's rows': each the rows up to it
        self.warm: _Warm | None = _Warm()  # what the first block's rows' figures are worked out from
        self.top = -math.inf  # the highest step of its classified rows
        self.sess_t: list[float] = []  # per session: the latest time its rows reached (NaN: none classified)
        self.reached: list[float] = []  # per session: the highest step of the rank's rows before its first row
        self.saved: set[int] = set()  # classified rows a checkpoint was written in
        self.ck_times: list[float] = []  # the rank's checkpoint times, sorted
        self.ck_steps: set[float] = set()  # the steps its checkpoints name

    def frozen(self) -> RankLedger:
        """This ledger as it is now, for reading only (a snapshot's rank): O(sessions)."""
        return self.frozen_at(self.state())

    def state(self) -> tuple[int, tuple[float, ...], float, tuple[float, ...]]:
        """What rows alone change of it (its rows classified, their sums, the highest step, each session's
        latest time), taken as it is now: with a frozen copy of the same rank made before those rows, all a
        snapshot needs to make this ledger's frozen copy later (mstop.engine.store.FrozenRanks)."""
        return self.settled, tuple(self.sums), self.top, tuple(self.sess_t)

    def frozen_at(self, state: tuple[int, tuple[float, ...], float, tuple[float, ...]]) -> RankLedger:
        """A frozen copy of this ledger with ``state`` (:meth:`state`, taken of it or of the same rank's ledger
        after rows alone arrived): the lists that only grow are shared."""
        c = RankLedger.__new__(RankLedger)
        settled, sums, c.top, sess_t = state
        c.settled, c.sums, c.sess_t = settled, list(sums), list(sess_t)
        c.blocks, c.early, c.reached, c.saved, c.ck_times, c.ck_steps = (
            self.blocks, self.early, self.reached, self.saved, self.ck_times, self.ck_steps)
        c.warm = None
        return c

    # -- what a row is measured against ---------------------------------------------------------------------

    def figures_of(self, row: int) -> tuple[float, float, float]:
        """The figures row ``row`` is measured against: the block's before its own, in block 0 the rows so
        far."""
        return self.early[row] if row < BLOCK else self.blocks[row // BLOCK - 1]

    def _extend_early(self, d: RankData, upto: int) -> None:
        """The figures of the first block's rows before ``upto`` not yet worked out, each from the rows up to
        it (sorted lists, a row at a time: at most BLOCK rows a rank)."""
        w = self.warm
        if w is None:
            return
        lo = len(self.early)
        if lo == 0 and upto >= SHORT:  # a first read: every row's figures at once (the same arithmetic)
            self._early_at_once(d, upto)
            return
        firsts = {s.first_row for s in d.segments}
        a = max(lo - 1, 0)  # the row before: its time and session (plain Python values: a row costs ~1 us)
        times = d.span("time", a, upto).tolist()
        sts = d.span("step_time", a, upto).tolist()
        sess = d.span("session", a, upto).tolist()
        wt = _weights(d, a, upto)
        wts = wt.tolist() if wt is not None else [1.0] * (upto - a)
        for i in range(lo, upto):
            k = i - a
            self.early.append(w.add(times[k], sts[k], i in firsts, bool(i) and sess[k] == sess[k - 1],
                                    times[k - 1], wts[k]))
        if upto > lo:
            w.last = (float(times[upto - 1 - a]), int(sess[upto - 1 - a]))
        if len(self.early) == BLOCK:
            self.warm = None

    def _early_at_once(self, d: RankData, upto: int) -> None:
        """:meth:`_extend_early` of rows 0..``upto - 1`` with arrays (prefix_figures: a cold read of 10,000
        ranks went row by row in Python for 0.6 s)."""
        t = d.span("time", 0, upto).astype(np.float64)
        sess = d.span("session", 0, upto)
        same = np.zeros(upto, bool)
        same[1:] = sess[1:] == sess[:-1]
        wt = _weights(d, 0, upto)
        figs, values = prefix_figures(t[None], d.span("step_time", 0, upto).astype(np.float64)[None],
                                      _first_rows(d, 0, upto)[None], same[None], None if wt is None else wt[None])
        self.early.add(figs[0])
        w = self.warm
        if w is not None:
            w.st, w.gap, w.excess = (sorted(v[0][v[0] == v[0]].tolist()) for v in values)
            w.last = (float(t[upto - 1]), int(sess[upto - 1]))
        if len(self.early) == BLOCK:
            self.warm = None

    def _extend_blocks(self, d: RankData, upto: int) -> None:
        """The figures of every complete block of rows before ``upto`` (the first block's: its last row's)."""
        nb = upto // BLOCK
        if nb and not self.blocks:
            self._extend_early(d, BLOCK)
            self.blocks.append(self.early[BLOCK - 1])
        b0, width = len(self.blocks), BLOCK
        if nb <= b0:
            return
        a = b0 * BLOCK
        b = a + (nb - b0) * width
        lo = a - 1  # the row before the blocks (block 0's figures are its last row's): the gap to their first row
        time = d.span("time", lo, b)
        st = d.span("step_time", lo, b)
        sess = d.span("session", lo, b)
        f = _first_rows(d, lo, b)
        same = np.zeros(b - lo, bool)
        same[1:] = (sess[1:] == sess[:-1]) & ~f[1:]
        wt = _weights(d, lo, b)
        before = np.array([self.blocks[len(self.blocks) - 1]])
        self.blocks.add(block_figures(time[None], st[None], f[None], same[None], width, before,
                                      None if wt is None else wt[None])[0])

    # -- classifying rows --------------------------------------------------------------------------------

    def settle_row(self, d: RankData, k: int, t: float, step: float, st: float, dw: float, w: float = 1.0) -> None:
        """Classify rank ``d``'s last row, given its session index and values (following: a row a round, its
        values at hand; ``w`` the rows written it stands for), when it is the only row not yet classified;
        else as :meth:`settle`."""
        n = d.rows
        i = self.settled
        if n - i != 1 or (i and i % BLOCK == 0) or len(self.sess_t) < len(d.segments) or \
                (i < BLOCK and (len(self.early) != i or self.warm is None)):
            self.settle(d)  # a block's first row (the last block's figures), or a session met for the first time
            return
        if i < BLOCK:  # the first block: this row's figures from the rows up to it (_extend_early's, one row)
            warm = self.warm
            prev_t, prev_k = warm.last  # row i - 1's
            warm.last = (t, k)
            self.early.append(warm.add(t, st, any(seg.first_row == i for seg in d.segments), prev_k == k, prev_t,
                                       w))
            if len(self.early) == BLOCK:
                self.warm = None
        self._classify_one(d, i, k, t, step, st, dw, w)

    def settle(self, d: RankData) -> None:
        """Classify rank ``d``'s rows not yet classified."""
        n = d.rows
        lo = self.settled
        if lo >= n:
            return
        if lo < BLOCK:
            self._extend_early(d, min(n, BLOCK))
        self._extend_blocks(d, n)
        segs = d.segments
        while len(self.sess_t) < len(segs):  # sessions met for the first time: what the rank reached before
            k = len(self.sess_t)
            fr = segs[k].first_row
            self.sess_t.append(math.nan)
            before = self.top if fr <= lo else max(self.top, float(np.max(d.span("step", lo, fr))))
            self.reached.append(before)  # the rows before it: the classified ones' highest, and the batch's
        if n - lo == 1 and lo >= d.base:
            self._settle_one(d, lo)
            return
        sess = d.span("session", lo, n).astype(np.int64)
        bounds = np.flatnonzero(np.diff(sess)) + 1
        starts = [0, *bounds.tolist()]
        stops = [*bounds.tolist(), n - lo]
        # the rows lo.. (indexed by row - lo)
        times, steps = d.span("time", lo, n), d.span("step", lo, n)
        st_col, dw_col = d.span("step_time", lo, n), d.span("data_wait", lo, n)
        wt = _weights(d, lo, n)
        figs = np.concatenate([self.early.table(), self.blocks.table()])  # row i < BLOCK: early[i], else
        # blocks[i // BLOCK - 1]
        self.top = max(self.top, float(np.max(steps)))
        for a, b in zip(starts, stops):  # runs of rows of one session
            k = int(sess[a])
            rows = np.arange(lo + a, lo + b)
            tt = times[a:b].astype(np.float64)
            reached = self.sess_t[k]
            if reached != reached:  # the session's first row: its own, worked out at reading
                run = np.maximum.accumulate(tt)
                prev = np.concatenate(([run[0]], run[:-1]))
                skip = 1 if segs[k].first_row == lo + a else 0
            else:
                run = np.maximum.accumulate(np.maximum(tt, reached))
                prev = np.concatenate(([reached], run[:-1]))
                skip = 0
            self.sess_t[k] = float(run[-1])
            if skip >= len(rows):
                continue
            rows, t, prev = rows[skip:], run[skip:], prev[skip:]
            f = figs[np.where(rows < BLOCK, rows, BLOCK + rows // BLOCK - 1)]
            step = steps[rows - lo]
            saved = self._saved_rows(step, t, prev)
            redo = step <= self.reached[k]
            part = classify(t, prev, np.nan_to_num(st_col[rows - lo].astype(np.float64), nan=0.0),
                            np.nan_to_num(dw_col[rows - lo].astype(np.float64), nan=0.0),
                            f[:, 0], f[:, 1], f[:, 2], saved, redo, wt[rows - lo] if wt is not None else None)
            for i in range(5):
                self.sums[i] += part[i]
            if saved.any():
                self.saved.update(rows[saved].tolist())
        self.settled = n

    def _settle_one(self, d: RankData, i: int) -> None:
        """Classify row ``i`` alone (following: a row a round), in plain Python."""
        j = i - d.base  # a held row
        w = float(d.held(WEIGHT)[j]) if WEIGHT in d.extras else 1.0
        self._classify_one(d, i, int(d.held("session")[j]), float(d.held("time")[j]), float(d.held("step")[j]),
                           float(d.held("step_time")[j]), float(d.held("data_wait")[j]), 1.0 if w != w else w)

    def _classify_one(self, d: RankData, i: int, k: int, t: float, step: float, st: float, dw: float,
                      w: float = 1.0) -> None:
        """Classify row ``i`` (session index ``k``, its values given, standing for ``w`` rows) alone: its block's
        figures are known."""
        if step > self.top:
            self.top = step
        reached = self.sess_t[k]
        if reached != reached:
            self.sess_t[k] = t
            if d.segments[k].first_row == i:  # a session's first row: worked out at reading
                self.settled = i + 1
                return
            prev = t
        else:
            prev = reached
            t = max(t, reached)
            self.sess_t[k] = t
        m, normal, hang = self.figures_of(i)
        saved = step in self.ck_steps or self._saved_between(prev, t)
        part = _one(t, prev, _num(st), _num(dw), m, normal, hang, saved,
                    step <= self.reached[k], w)
        s = self.sums
        s[0] += part[0]
        s[1] += part[1]
        s[2] += part[2]
        s[3] += part[3]
        s[4] += part[4]
        if saved:
            self.saved.add(i)
        self.settled = i + 1

    def _saved_between(self, prev: float, t: float) -> bool:
        ck = self.ck_times
        return bool(ck) and bisect.bisect_right(ck, t + _CK_SLACK) > bisect.bisect_right(ck, prev)

    def _saved_rows(self, step: np.ndarray, t: np.ndarray, prev: np.ndarray) -> np.ndarray:
        """Which rows (steps ``step``, from ``prev`` to ``t``) a checkpoint names by step or was written in."""
        if not self.ck_times:
            return np.zeros(len(t), bool)
        ck = np.array(self.ck_times)
        out = np.searchsorted(ck, t + _CK_SLACK, "right") > np.searchsorted(ck, prev, "right")
        if self.ck_steps:
            out |= np.isin(step, np.fromiter(self.ck_steps, float, len(self.ck_steps)))
        return out

    # -- checkpoints found later --------------------------------------------------------------------------

    def checkpoint(self, d: RankData, step: Any, time: float) -> None:
        """A checkpoint event of rank ``d``: rows classified before it that it names (by step, or written
        during them) are classified again as saved."""
        bisect.insort(self.ck_times, time)
        has_step = isinstance(step, (int, float)) and math.isfinite(step)
        if has_step:
            self.ck_steps.add(float(step))
        n = self.settled
        if not n:
            return
        # the rows it may name: all, or only those held when no spilled row can (a checkpoint read after its
        # rows names recent ones: the old rows are not read back from the spill file for it)
        lo = _may_name_from(d, time, float(step) if has_step else None)
        times, steps = d.span("time", lo, n), d.span("step", lo, n)
        st_col, dw_col = d.span("step_time", lo, n), d.span("data_wait", lo, n)
        wt = _weights(d, lo, n)
        sess = d.span("session", lo, n).astype(np.int64)
        first = _first_rows(d, lo, n)
        before = _spilled_session_times(d) if lo else {}
        # each row's start: the time its session had reached before it (its running maximum)
        prev = np.full(n - lo, np.nan)
        t = np.full(n - lo, np.nan)
        for k in np.unique(sess).tolist():
            rows = np.flatnonzero(sess == k)
            tt = times[rows].astype(np.float64)
            b = before.get(k)
            if b is not None:  # its rows before lo reached b
                tt = np.maximum(tt, b)
            run = np.maximum.accumulate(tt)
            t[rows] = run
            prev[rows[1:]] = run[:-1]
            if b is not None:
                prev[rows[0]] = b
        hit = ~first & ((prev < time) & (time <= t + _CK_SLACK))
        if has_step:
            hit |= ~first & (steps == float(step))
        for j in np.flatnonzero(hit).tolist():
            i = lo + j
            if i in self.saved:
                continue
            k = int(sess[j])
            m, normal, hang = self.figures_of(i)
            args = (float(t[j]), float(prev[j]), _num(st_col[j]), _num(dw_col[j]), m, normal, hang)
            redo = float(steps[j]) <= self.reached[k]
            w = float(wt[j]) if wt is not None else 1.0
            before, after = _one(*args, False, redo, w), _one(*args, True, redo, w)
            for x in range(5):
                self.sums[x] += after[x] - before[x]
            self.saved.add(i)


class Figures:
    """A list of (median step time, usual gap beyond it, stall limit), 24 bytes each in one buffer (a tuple of
    three floats is 136: 10,000 ranks' first blocks held 87 MB as tuples). Appended to only: a frozen
    ledger shares it and reads the entries it had."""

    __slots__ = ("a",)

    def __init__(self) -> None:
        self.a = array("d")

    def __len__(self) -> int:
        return len(self.a) // 3

    def __getitem__(self, i: int) -> tuple[float, float, float]:
        a = self.a
        return a[3 * i], a[3 * i + 1], a[3 * i + 2]

    def append(self, f: tuple[float, float, float]) -> None:
        self.a.extend(f)

    def add(self, fs: np.ndarray) -> None:
        """Entries as an (n, 3) array."""
        self.a.frombytes(np.ascontiguousarray(fs, np.float64).tobytes())

    def table(self) -> np.ndarray:
        """The entries as a (n, 3) array (a copy)."""
        return np.array(self.a, dtype=np.float64).reshape(-1, 3)


class _Warm:
    """A rank's first block's values so far, each kind sorted: its steady step times, its gaps between rows
    of one session and their excess over the later row's step time."""

    __slots__ = ("st", "gap", "excess", "last")

    def __init__(self) -> None:
        self.st: list[float] = []
        self.gap: list[float] = []
        self.excess: list[float] = []
        self.last: tuple[float, int] = (math.nan, -1)  # the time and session of the last row worked out

    def add(self, t: float, st: float, first: bool, same: bool, prev_t: float,
            w: float = 1.0) -> tuple[float, float, float]:
        """Take in a row (its time, step time, whether it begins a session, whether the row before it is of its
        session, that row's time, the rows it stands for) and give its figures: the medians of the values up to
        it (a step's)."""
        w = 1.0 if w != w else w
        if not first and st == st and st > 0:
            bisect.insort(self.st, st / w)
        if same and not first:
            gap = t - prev_t
            if gap == gap and abs(gap) != math.inf:
                bisect.insort(self.gap, gap / w)
                bisect.insort(self.excess, (gap - min(st if st == st else 0.0, gap)) / w)
        m = _median(self.st) if self.st else 0.0
        normal = _median(self.excess) if len(self.excess) >= 2 else 0.0
        return m, normal, max(STALL_MIN_S, 10.0 * m, 3.0 * (_median(self.gap) if self.gap else 0.0))


def _median(v: list[float]) -> float:
    """The median of a sorted list (its two middle values averaged, as numpy does)."""
    n = len(v)
    return (v[(n - 1) // 2] + v[n // 2]) / 2


def _may_name_from(d: RankData, time: float, step: float | None) -> int:
    """The first row a checkpoint at ``time`` (naming ``step``) may name: the first held one when every
    spilled row is too old for it and holds another step, else 0."""
    for c in d.spilled:
        if not c.tmax + _CK_SLACK < time or (step is not None and c.smin <= step <= c.smax):
            return 0
    return d.base


def _spilled_session_times(d: RankData) -> dict[int, float]:
    """Per session: the latest time of its spilled rows."""
    out: dict[int, float] = {}
    for c in d.spilled:
        for k, t in (c.sess_tmax or {}).items():
            out[k] = max(out.get(k, t), t)
    return out


def _weights(d: RankData, lo: int, hi: int) -> np.ndarray | None:
    """The rows written each of rank ``d``'s rows ``lo``..``hi - 1`` stands for (a digest's merged rows), None
    when every row is one as written."""
    if WEIGHT not in d.extras:
        return None
    return stands_for(d.span(WEIGHT, lo, hi))


def _first_rows(d: RankData, lo: int, hi: int) -> np.ndarray:
    """Which of rank ``d``'s rows ``lo``..``hi - 1`` begin a session."""
    out = np.zeros(hi - lo, bool)
    for s in d.segments:
        if lo <= s.first_row < hi:
            out[s.first_row - lo] = True
    return out


#: ranks whose first block's prefix medians are worked out in one sort (a (ranks, 3, BLOCK, BLOCK) array)
_FRESH_CHUNK = 256


def settle_fresh(ds: list[RankData]) -> list[RankData]:
    """Settle together the ranks of ``ds`` whose rows all arrived at once (a first read: nothing classified
    yet, one session from row 0, SHORT rows or more, none merged, nothing spilled, no checkpoint known),
    grouped by their count of rows, each group in arrays: the arithmetic of :meth:`RankLedger.settle` (its
    first block's prefix medians, its blocks' figures, its rows' classes) for all of them at once, value for
    value. A rank a row of which was slow or saved is settled on its own. The others are returned, to be
    settled one by one (a cold read of 10,000 ranks settled each in Python: 6 s of 12)."""
    groups: dict[int, list[RankData]] = {}
    rest = []
    for d in ds:
        f = d.ledger
        if (f.settled == 0 and f.warm is not None and not len(f.early) and not f.ck_times and not f.ck_steps
                and len(d.segments) == 1 and d.segments[0].first_row == 0 and d.rows >= SHORT and not d.base
                and WEIGHT not in d.extras):
            groups.setdefault(d.rows, []).append(d)
        else:
            rest.append(d)
    for n, group in groups.items():
        for a in range(0, len(group), _FRESH_CHUNK):
            rest += _settle_group(group[a:a + _FRESH_CHUNK], n)
    return rest


def _settle_group(ds: list[RankData], n: int) -> list[RankData]:
    """:func:`settle_fresh` of ranks of ``n`` rows each; those a row of which was slow, returned unsettled."""
    t = np.stack([d.span("time", 0, n) for d in ds]).astype(np.float64)
    st = np.stack([d.span("step_time", 0, n) for d in ds]).astype(np.float64)
    dw = np.stack([d.span("data_wait", 0, n) for d in ds]).astype(np.float64)
    steps = np.stack([d.span("step", 0, n) for d in ds])
    k, b, e = len(ds), n // BLOCK * BLOCK, min(n, BLOCK)
    first, same = np.zeros((k, max(b - BLOCK + 1, BLOCK)), bool), np.ones((k, max(b - BLOCK + 1, BLOCK)), bool)
    first[:, 0] = True  # row 0 begins the session (of the blocks' arrays, the row before them: not read)
    early, values = prefix_figures(t[:, :e], st[:, :e], first[:, :e], same[:, :e], None)
    if b:
        m = b - BLOCK + 1
        blocks = block_figures(t[:, BLOCK - 1:b], st[:, BLOCK - 1:b], first[:, :m], same[:, :m], BLOCK,
                               early[:, BLOCK - 1], None)
        table = np.concatenate([early, early[:, BLOCK - 1:], blocks], axis=1)
    else:  # fewer rows than a block: the first block's figures so far, its values kept for the rows to come
        table = early
    # the rows after the first (row i < BLOCK measured against table[i], else table[BLOCK + i // BLOCK - 1]),
    # each from the time its session had reached: classify's arithmetic (steps_of), every rank at once
    run = np.maximum.accumulate(t, axis=1)
    rows = np.arange(1, n)
    f = table[:, np.where(rows < BLOCK, rows, BLOCK + rows // BLOCK - 1)]
    own, extra, wait = steps_of(run[:, 1:] - run[:, :-1], np.nan_to_num(st[:, 1:], nan=0.0),
                                np.nan_to_num(dw[:, 1:], nan=0.0), f[:, :, 1])
    slow = (own > f[:, :, 2]).any(axis=1)  # a hung step: its share over the median, on its own
    own_s, wait_s, lost_s = own.sum(axis=1), wait.sum(axis=1), extra.sum(axis=1)
    out = []
    for i, d in enumerate(ds):
        if slow[i]:
            out.append(d)
            continue
        led = d.ledger
        led.early.add(early[i])
        if b:
            led.blocks.add(table[i, BLOCK:])
            led.warm = None
        else:  # as RankLedger._early_at_once keeps them
            led.warm.st, led.warm.gap, led.warm.excess = (sorted(v[i][v[i] == v[i]].tolist()) for v in values)
            led.warm.last = (float(t[i, n - 1]), int(d.span("session", n - 1, n)[0]))
        ws = float(wait_s[i])
        led.sums = [0.0 + (float(own_s[i]) - 0.0 - ws), 0.0 + ws, 0.0, 0.0 + (float(lost_s[i]) - 0.0), 0.0]
        led.sess_t.append(float(run[i, -1]))
        led.reached.append(-math.inf)
        led.top = float(np.max(steps[i]))
        led.settled = n
    return out
