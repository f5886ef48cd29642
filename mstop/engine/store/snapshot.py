"""What reads the store, and a moment of it: :class:`Reads`, the reads a :class:`Store` and a :class:`Snapshot`
share, and :class:`Snapshot`, the store as it was at one moment (``Store.snapshot()``), another type: no lock,
no method that changes it. A reader that holds a Snapshot never waits for the reading thread and never takes
a lock; the rows it reads are views of the store's table as they were (rows are shared, never copied)."""

from __future__ import annotations

import contextlib
import math
from typing import Any, Callable

import numpy as np

from .rank import BLOCK, RankData


class Reads:
    """The reads of a run's rows and events, the same on the store (under its lock) and on a snapshot (with
    none). ``_guard``: the store's lock, or a snapshot's empty guard."""

    _guard: Any
    ranks: Any
    version: int

    def snapshot(self) -> Snapshot:
        """The run at this moment, as a :class:`Snapshot`."""
        raise NotImplementedError

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

    def changed_after(self, seen: int, rows: bool = False) -> frozenset[int] | None:
        """Of a snapshot: the ranks changed since snapshot number ``seen`` was taken, with ``rows`` those that
        only got rows too (None: not known, so older than the change log, or not a snapshot's)."""
        log = self.change_log
        if not log or self.changed is None or log[-1] is not self.changed or not log[0][0] <= seen + 1 \
                or seen > self.changed[0]:  # a later snapshot's: what this older one lacks is not known
            return None
        got: set[int] = set()
        for n, ranks, grown in log:
            if n > seen:
                got |= ranks
                if rows:
                    got |= grown
        return frozenset(got)

    def ledger_states(self, ranks: list[int]) -> list[Any]:
        """The ranks' goodput folds' states (mstop.engine.ledgerfold.RankLedger.state): of a snapshot's rank
        that only got rows, taken without making its record (mstop.engine.goodput reads every such rank)."""
        with self._guard:
            got = self.ranks
            if hasattr(got, "ledger_states"):
                return got.ledger_states(ranks)
            return [got[r].ledger.state() for r in ranks]

    def memo(self, key: str, compute: Callable[[], Any]) -> Any:
        """A value derived from the rows (the recent window, the headrooms), computed once per version of the
        store: a frame or a summary asks for it several times."""
        with self._guard:
            got = self._memo.get(key)
            if got is not None and got[0] == self.version:
                return got[1]
            value = compute()
            self._memo[key] = (self.version, value)
            return value

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
        with self._guard:
            return self.folds.total_rows()

    @property
    def rows_written(self) -> int:
        """The rows written that the rows held stand for, all ranks: :attr:`rows` and, for a digest's merged
        rows (mstop.sources.followers.follower), the rows each was merged from."""
        with self._guard:
            return self.folds.total_stood()

    def ranks_with(self, name: str) -> list[int]:
        """The ranks that have ``name`` (one of HAVING: writer errors, stack dumps, profiles, a literal NaN/Inf,
        several sessions), in rank order: what a frame looks for among few ranks, without a walk of all."""
        with self._guard:
            return sorted(self.having[name])

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
        with self._guard:
            d = self.ranks.get(r)
            if d is None or d.rows == 0:
                return np.empty(0), np.empty(0)
            rows = self.series_rows(r, column, points, steps=steps)
            return d.take(x, rows).astype(np.float64), d.take(column, rows).astype(np.float64)

    def series_rows(self, r: int, column: str, points: int, *, steps: tuple[float, float] | None = None) -> np.ndarray:
        """The rows :meth:`series` draws (to read other columns of the same rows)."""
        with self._guard:
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



#: what a snapshot leaves out of the store's state: its lock, and what only the feeding side reads
_NOT_SHARED = ("lock", "_guard", "_dirty", "_grown", "_snap_ranks", "_snap_arrays", "_frozen_ranks")


class Snapshot(Reads):
    """The store at one moment (``Store.snapshot()``): its reads, no lock, nothing that changes it. Its
    ranks are frozen (mstop.engine.store.frozen.FrozenRanks), its lists copies, its folds frozen; a
    snapshot's snapshot is itself."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.__dict__.update({k: v for k, v in state.items() if k not in _NOT_SHARED})
        self.__dict__["_guard"] = contextlib.nullcontext()

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a snapshot is not changed (its {name} is the store's at one moment)")

    def snapshot(self) -> Snapshot:
        """Itself (a reader given either may take a snapshot)."""
        return self
