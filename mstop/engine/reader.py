"""The read door (issue 39, step 1): a read-only snapshot of the store with named reads.

Everything above the engine (sources' glue, ``view/``, ``commands/``, the live session) reads a run through
a :class:`RunReader`, never through the store's layout (``RankData``, its blocks, ``.col()``): the layout can
then change (a columnar store, rows bounded by time) without touching a reader. The reads are the ones readers
need: the ranks, a rank's column (whole, at some rows, or on its current timeline), its last values, its
segments (process starts), its events by kind, its newest start.

A reader holds a :class:`~mstop.engine.store.Snapshot` (taken under the store's lock in O(ranks): rows are
shared, never copied), never the store; the arrays it hands out are read-only views.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import rankstate
from .folds import SUMMED, WEIGHT, stands_for
from .store import Reads, Segment, Snapshot

#: event kinds a rank keeps, by the name readers ask for
_EVENTS = {"checkpoint": "checkpoints", "eval": "evals", "abort": "aborts", "lost": "losts",
           "writer_error": "writer_errors", "devices": "device_events", "profile": "profiles", "exit": "exits",
           "stack": "stacks"}


def _frozen(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v


class RunReader:
    """Named, read-only reads of one moment of a run (a snapshot of its store)."""

    def __init__(self, run: Reads) -> None:
        """``run``: a store (a snapshot of it is taken now) or a snapshot."""
        self._store = run.snapshot()

    @staticmethod
    def count(run: Reads) -> int:
        """How many ranks a store (or a snapshot) holds, without taking a snapshot (a cheap check for a refresh
        loop)."""
        return len(run.ranks)

    @property
    def snapshot(self) -> Snapshot:
        """The moment it reads, for the engine's figures (which take a snapshot)."""
        return self._store

    # -- the ranks ----------------------------------------------------------------------------------------

    @property
    def ranks(self) -> list[int]:
        """Every rank the run has rows or events of, in order."""
        return sorted(self._store.ranks)

    def has(self, rank: int) -> bool:
        return rank in self._store.ranks

    def rows(self, rank: int) -> int:
        """Rows held of the rank (0 for a rank not there)."""
        d = self._store.ranks.get(rank)
        return d.rows if d is not None else 0

    def with_rows(self) -> list[int]:
        """The ranks with at least one row, in order."""
        return [r for r, d in sorted(self._store.ranks.items()) if d.rows]

    # -- a rank's columns ---------------------------------------------------------------------------------

    def per_step(self, rank: int, name: str, rows: Any) -> np.ndarray:
        """:meth:`column` of ``rows``, a step at a time: a digest's merged row holds the sum of the SUMMED
        columns over the rows it stands for (mstop.sources.followers.follower), shown over them."""
        col = self.column(rank, name, rows)
        d = self._store.ranks.get(rank)
        if name not in SUMMED or d is None or WEIGHT not in d.extras or not len(col):
            return col
        return col / stands_for(self.column(rank, WEIGHT, rows))

    def column(self, rank: int, name: str, rows: Any = None, *, timeline: bool = False) -> np.ndarray:
        """Rank ``rank``'s column ``name`` (NaN: missing; an unknown column is all NaN) as float64: every row,
        the rows ``rows`` selects (indices or a mask), or with ``timeline`` only the rows on its current
        timeline (a resume cuts the rows it ran again). Empty for a rank not there."""
        d = self._store.ranks.get(rank)
        if d is None:
            return np.empty(0)
        if not timeline and rows is not None and np.asarray(rows).dtype.kind in "iu":
            col = d.take(name, np.asarray(rows))  # the rows asked for, read back only where they are
        else:
            col = d.col(name)
            if timeline:
                col = col[d.effective()]
            if rows is not None:
                col = col[rows]
        return _frozen(np.asarray(col, dtype=np.float64))

    def has_values(self, rank: int, name: str) -> bool:
        """Whether the rank's column holds a value (not NaN) in some row: read in its own type,
        not widened (the custom metrics filter asks it of every column of every rank)."""
        d = self._store.ranks.get(rank)
        return d is not None and d.rows > 0 and d.has_values(name)

    def last(self, rank: int, name: str) -> float | None:
        """The rank's last row's value of ``name`` (None: no row)."""
        d = self._store.ranks.get(rank)
        if d is None or not d.rows:
            return None
        return d.last(name)

    def timeline(self, rank: int) -> np.ndarray:
        """The mask of the rank's rows on its current timeline (mstop.engine.store.RankData.effective)."""
        d = self._store.ranks.get(rank)
        return _frozen(d.effective()) if d is not None else np.empty(0, bool)

    def segments(self, rank: int) -> list[Segment]:
        """The rank's process starts (sessions): where each one's rows begin and its first step."""
        d = self._store.ranks.get(rank)
        return list(d.segments) if d is not None else []

    def single_timeline(self, rank: int) -> bool:
        """Its steps never go down and it has one session: a step is then found by binary search."""
        d = self._store.ranks.get(rank)
        return d is not None and d.monotonic and len(d.segments) <= 1

    def row_at_step(self, rank: int, step: float) -> int | None:
        """The row of ``step`` on the rank's current timeline, or None (mstop.engine.figures.row_at_step)."""
        from .figures import row_at_step

        d = self._store.ranks.get(rank)
        return row_at_step(d, step) if d is not None and d.rows else None

    def last_value(self, rank: int, name: str) -> float | None:
        """The column's last value on the rank's timeline, empty cells skipped (None: none)."""
        from .figures import last_value

        d = self._store.ranks.get(rank)
        return last_value(d, name) if d is not None and d.rows else None

    def minimum(self, rank: int, name: str) -> float | None:
        """The column's smallest finite value on the rank's timeline (None: none)."""
        from .figures import minimum

        d = self._store.ranks.get(rank)
        return minimum(d, name) if d is not None and d.rows else None

    def nonfinite(self, rank: int) -> list[tuple[int, str, float]]:
        """(row, column, value) of each NaN/Inf the rank's rows hold."""
        d = self._store.ranks.get(rank)
        return list(d.nonfinite) if d is not None else []

    # -- a rank's events ----------------------------------------------------------------------------------

    def start(self, rank: int) -> dict[str, Any] | None:
        """The rank's newest start event (a copy), or None."""
        d = self._store.ranks.get(rank)
        return dict(d.last_start) if d is not None and d.last_start is not None else None

    def events(self, rank: int, kind: str) -> list[dict[str, Any]]:
        """The rank's kept events of ``kind`` (checkpoint, eval, abort, lost, writer_error, devices, profile,
        exit, stack), oldest first, as copies."""
        d = self._store.ranks.get(rank)
        if d is None or kind not in _EVENTS:
            return []
        return [dict(e) for e in getattr(d, _EVENTS[kind])]

    def crash(self, rank: int) -> str | None:
        """How the rank's current process crashed and where its stack is (``crashed (Segmentation fault): its
        Python stack at the crash is in the stacks view``: processes.Where.crash_words), when its newest stack
        dump is a crash's (its faulthandler's, on a fatal signal); else None."""
        from . import processes

        d = self._store.ranks.get(rank)
        w = processes.where(d, stuck_only=False) if d is not None and d.stacks else None
        return w.crash_words if w is not None and w.reason == "fatal" else None

    def process(self, rank: int) -> dict[str, Any] | None:
        """The rank's current process as its exit witness saw it last (mstop.engine.processes.facts)."""
        return rankstate.one(self._store, rank).process if rank in self._store.ranks else None

    def answers(self) -> rankstate.States:
        """Every rank's standing (aborted, lost, finished, its process, its last sign of life...) in arrays,
        kept per rank until its events change (mstop.engine.rankstate): not to be written to."""
        return rankstate.states(self._store)

    def mfu_rows(self, rank: int, opts: Any) -> np.ndarray:
        """The rank's MFU per row: its column, or derived as the figures derive it (mstop.engine.figures)."""
        from .figures import mfu_rows

        d = self._store.ranks.get(rank)
        return _frozen(np.asarray(mfu_rows(d, opts), dtype=np.float64)) if d is not None else np.empty(0)

    def profile(self, rank: int) -> dict[str, Any] | None:
        """The rank's newest profile's shares (mstop.engine.rankstate.rank_profile), or None."""
        return rankstate.one(self._store, rank).profile if rank in self._store.ranks else None

    def rejected(self) -> int:
        """Rows the writers refused for bad input, all ranks (of the dropped ones they reported)."""
        return int(rankstate.states(self._store).rejected.sum())

    def empty(self) -> bool:
        """No rank at all: no rank file read (or none found yet)."""
        return not self._store.ranks
