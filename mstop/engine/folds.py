"""State that advances with the rows: folded in when a read round's batch is appended, read by the figures.

A fold takes the batch (never the store) and costs O(1) per batch of a rank; a figure reads the fold instead of
walking every rank's columns at every frame (nvitop's collector: each sample is added once, reading is only
reading). The store owns its folds (:attr:`mstop.engine.store.Store.folds`), feeds them in ``ingest_rows``,
forgets a rank's in ``reset_rank``, and freezes them with its snapshot.

Issue 39 step 3 begins here with the ranks' last rows, which the step, the clocks and the laggards share.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

EXACT_TIME, EXACT_STEP = 0, 1  # the store's exact columns: mstop.engine.store.EXACT


@dataclass
class Lasts:
    """Every rank with rows, in rank order, with its last row's time and step."""

    ranks: list[int]
    time: np.ndarray
    step: np.ndarray


class LastRows:
    """Each rank's last row (time, step), kept in rank order: a batch sets its rank's slot; a rank's first
    batch inserts one (O(ranks) once per rank)."""

    def __init__(self) -> None:
        self.ranks: list[int] = []
        self.time = np.empty(0)
        self.step = np.empty(0)
        self._pos: dict[int, int] = {}

    def add(self, r: int, exact: np.ndarray) -> None:
        """Fold in rank ``r``'s batch of exact columns (rows in file order: its last row is the newest)."""
        if not len(exact):
            return
        i = self._pos.get(r)
        if i is None:
            i = bisect.bisect_left(self.ranks, r)
            self.ranks.insert(i, r)
            self.time = np.insert(self.time, i, np.nan)
            self.step = np.insert(self.step, i, np.nan)
            self._pos = {q: k for k, q in enumerate(self.ranks)}
        self.time[i] = exact[-1, EXACT_TIME]
        self.step[i] = exact[-1, EXACT_STEP]

    def drop(self, r: int) -> None:
        """Rank ``r`` has no rows any more (its file is read again from the start)."""
        i = self._pos.get(r)
        if i is None:
            return
        del self.ranks[i]
        self.time = np.delete(self.time, i)
        self.step = np.delete(self.step, i)
        self._pos = {q: k for k, q in enumerate(self.ranks)}

    def read(self) -> Lasts:
        """A copy (the fold goes on advancing under a snapshot)."""
        return Lasts(list(self.ranks), self.time.copy(), self.step.copy())


class Folds:
    """The store's folds (one so far: :class:`LastRows`)."""

    def __init__(self) -> None:
        self.last = LastRows()

    def add(self, r: int, exact: np.ndarray) -> None:
        """A batch of rank ``r``'s rows was appended (its exact columns: time, step)."""
        self.last.add(r, exact)

    def reset(self, r: int) -> None:
        self.last.drop(r)

    def frozen(self) -> Folds:
        """A copy for a snapshot: what the folds held when it was taken."""
        f = Folds.__new__(Folds)
        f.last = LastRows()
        f.last.ranks, f.last.time, f.last.step = list(self.last.ranks), self.last.time.copy(), self.last.step.copy()
        f.last._pos = dict(self.last._pos)
        return f
