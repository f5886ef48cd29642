"""Clocks that disagree: each rank's clock against the others', and the job's against this machine's.

A row's ``time`` is read off the writing host's clock. When that clock is wrong (never set: rows dated
1970; stepped back an hour by NTP mid-run; one host an hour off its peers), every age and duration computed
from row times is wrong with it: a job writing rows now reads as "no new row for 20789 d", a 100 s job as
goodput 3 % "down 1 h". Two witnesses say what the row times cannot:

- **ranks at equal steps**: the ranks of one job finish the same step at about the same moment (data
  parallel ones within a step time), so a rank whose rows of a step are an hour later than the lowest
  rank's reads a clock an hour ahead of it;
- **the files' modification times**: a rank file's mtime is the moment its last row was written, on this
  machine's clock (or, over ssh, on the host's, which the source's clock already follows); while following,
  it is the moment the rows arrived. It is trusted only for a file written within the stall limit by the
  clock (a file copied a year later, or a test's fixed clock, says nothing about the job's clock).

Offsets under :data:`SKEW_S` (or ten step times) are noise and taken as 0. Every figure that compares times
of several ranks, or a rank's time with the clock, corrects by these offsets; the header and ``summary``
say once which clock is off and by how much.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import fmt
from . import rankstate
from .store import Snapshot

#: the least disagreement between clocks that is called a skew (seconds; also at least 10 step times)
SKEW_S = 60.0
#: a rank file written later than its last row by less than this may have been copied since (a clock behind
#: by more, rows of 1970, is no copy)
COPIED_S = 365 * 86400.0


@dataclass
class Clocks:
    """What the witnesses say of the clocks.

    ``own``: per rank, seconds its clock reads ahead of the viewer's (the source's: this machine's, or the
    ssh host's), from its rank file written within the stall limit: ages and liveness read the rank's
    times as ``t - own[r]`` (:meth:`local`). ``ranks``: per rank, seconds its clock reads ahead of the
    reference rank's at equal steps: goodput lays every rank's history on the reference's clock (a job
    whose files were written long ago has no other witness)."""

    own: dict[int, float] = field(default_factory=dict)
    ranks: dict[int, float] = field(default_factory=dict)
    reference: int | None = None
    #: of ``own``'s ranks, those whose last session has ended (finished, aborted, exited): their files may have
    #: been copied since, which the file times cannot tell from a clock behind
    ended: frozenset[int] = frozenset()

    def local(self, rank: int, t: float) -> float:
        """Rank ``rank``'s time ``t`` on the viewer's clock."""
        return t - self.own.get(rank, 0.0)

    @property
    def job(self) -> float:
        """Seconds the job's clocks read ahead of the viewer's (the median rank's, by its file), 0 if none."""
        return float(np.median(list(self.own.values()))) if self.own else 0.0

    def notes(self) -> list[str]:
        """What the header and summary say of the clocks (nothing when they agree)."""
        out = []
        for r, off in sorted(self.own.items(), key=lambda kv: -abs(kv[1]))[:2]:
            # a file copied after the job (cp, rsync without -t) is written later than its rows too: the two
            # cannot be told apart from the files, and both are said
            copied = ", or its files were copied after they were written: cp -p keeps their times" \
                if -COPIED_S < off < 0 and r in self.ended else ""
            out.append(f"rank {r}'s clock is {_apart(off)} this machine (file times{copied}): ages use file times")
        if len(self.own) > 2:
            out.append(f"{_more(len(self.own) - 2)} from this machine's")
        for r, off in sorted(self.ranks.items(), key=lambda kv: -abs(kv[1]))[:2]:
            out.append(f"rank {r}'s clock is {_apart(off)} rank {self.reference}'s at equal steps: goodput "
                       f"lays its times on rank {self.reference}'s")
        if len(self.ranks) > 2:
            out.append(f"{_more(len(self.ranks) - 2)} from rank {self.reference}'s")
        return out


def _apart(off: float) -> str:
    return f"{fmt.duration(abs(off))} {'ahead of' if off > 0 else 'behind'}"


def clocks(store: Snapshot, clock: float, limit: float) -> Clocks:
    """The clocks of the store's ranks (see the module docstring); ``clock`` is the viewer's now and
    ``limit`` the stall limit (files written more recently than that witness their rank's clock). Computed
    once per store version and clock second."""
    key = round(clock)
    seen = store.memo("clocks", dict)
    if key not in seen:
        seen.clear()
        seen[key] = _clocks(store, clock, limit)
    return seen[key]


def _clocks(store: Snapshot, clock: float, limit: float) -> Clocks:
    last = store.folds.lasts()  # every rank's last (time, step): the store's fold
    ranks = last.ranks
    if not ranks:
        return Clocks()
    out = Clocks(reference=ranks[0])
    # a rank file written within the stall limit, its last row's time far from then (the folds' file times)
    with np.errstate(invalid="ignore"):
        off = last.time - last.mtime
        far = (np.abs(clock - last.mtime) <= limit) & (np.abs(off) > SKEW_S)
    for k in np.flatnonzero(far).tolist():
        out.own[ranks[k]] = float(off[k])
    if out.own:
        st = rankstate.states(store)
        done = st.finished | st.exited | st.aborted | st.lost
        out.ended = frozenset(r for r, d in zip(st.ranks, done.tolist()) if d and r in out.own)
    ref = store.ranks[ranks[0]]
    steps, times = ref.held("step"), ref.held("time")
    if ref.base and not (len(steps) and bool((last.step[1:] > steps[0]).all())):  # a step among those spilled
        steps, times = ref.col("step"), ref.col("time")
    if not ref.monotonic or not len(steps) or len(ranks) < 2:
        return out
    # each rank's last step against the reference's row of the same step
    i = np.minimum(np.searchsorted(steps, last.step[1:]), len(steps) - 1)
    same = steps[i] == last.step[1:]
    off = last.time[1:] - times[i]
    for k in np.flatnonzero(same & (np.abs(off) > SKEW_S)):  # the noise is at least SKEW_S: few are looked at
        r = ranks[int(k) + 1]
        if abs(float(off[k])) > _noise(store, r):
            out.ranks[r] = float(off[k])
    return out


def _noise(store: Snapshot, r: int) -> float:
    """The disagreement at equal steps that is not a skew: SKEW_S, or ten of the rank's step times."""
    d = store.ranks[r]
    st = d.span("step_time", d.rows - 8, d.rows)
    st = st[np.isfinite(st)]
    return max(SKEW_S, 10.0 * float(np.median(st))) if len(st) else SKEW_S


def _more(n: int) -> str:
    """``1 more rank's clock differs``, ``3 more ranks' clocks differ``."""
    return "1 more rank's clock differs" if n == 1 else f"{n:,} more ranks' clocks differ"
