"""What a snapshot holds of the store: ranks frozen as they were (a rank that only grew since its last
frozen copy is made one only when a reader asks for it), a first read's progress, each rank's kept answers."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .rank import RankData
from .table import Held


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

    def ledger_states(self, ranks: list[int]) -> list[Any]:
        """The ranks' ledgers' states (RankLedger.state): of a rank that only got rows, as the snapshot took it,
        with no record made."""
        entries = self.entries
        return [g.ledger if type(g) is _Grown else g.ledger.state() for g in map(entries.__getitem__, ranks)]

    def __contains__(self, r: object) -> bool:
        return r in self.entries

    def __iter__(self) -> Iterator[int]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


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
    """Each rank's answers as mstop.engine.rankstate worked them out, the last of them in arrays, and each rank's
    share of the goodput ledger (mstop.engine.goodput)."""

    #: rank -> (what its answers read, its answers)
    per_rank: dict[int, tuple[Any, Any]] = field(default_factory=dict)
    #: (the snapshot they were worked out for, its ranks in order, their answers, where each rank is, the
    #: answers in arrays by name): the next snapshot's are worked out only where a rank changed
    arrays: tuple[int, list[int], list[Any], dict[int, int], dict[str, np.ndarray]] | None = None
    #: every rank's goodput ledger in its open form (mstop.engine.goodput.Parts), replaced whole
    ledger: Any = None
    #: the diagnosis's answers kept by what they read (mstop.engine.diagnosis): the ranks' settings compared
    #: (by their start events), the memory fit (by the rank and its rows)
    diagnosis: dict[str, tuple[Any, Any]] = field(default_factory=dict)


