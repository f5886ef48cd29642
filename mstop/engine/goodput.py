"""Where a job's wall time went: the goodput ledger (issue 16), from the files that exist.

The wall time runs from the earliest session start of any rank to the job's end: the clock while rows
arrive (running), else its last sign of life (finished, failed, dead, stalled). Each rank's share of it
is split into exclusive buckets that add up to it, from its rows, sessions and events:

- ``productive``: the step time of rows that ran a step for the first time, less their data wait and less
  what the buckets below take;
- ``input_wait``: the data-wait part of those rows;
- ``compile``: from a session's start to its first row, beyond one step at the median its next row is
  measured against (process start, graph compilation, warm-up);
- ``recomputed``: the step time of rows that ran a step the rank had already reached before their session
  began (a resume from an earlier checkpoint runs them again: the second run is the waste);
- ``checkpoint``: a step that saved a checkpoint (a ``checkpoint`` event at its step), beyond the median,
  and the gap around a save made between steps;
- ``stalled``: time between rows beyond the later row's own step time and the rank's usual time between
  steps (no step was running); a step that took longer than the stall limit (a hang inside it), beyond the
  median; and after a session's last row while the rank still showed signs of life;
- ``down``: before a rank's first session, between one session's last sign of life and the next session's
  start (restarts, queue waits), and after its last sign of life.

Definition 2 (issue 39): every row is classified once, when it arrives, against what came before it (the
median, the usual gap and the stall limit of its rank's previous block of rows, in the first block the rows so
far: mstop.engine.ledgerfold), so
the ledger never revises a classified row (``productive`` does not fall at a resume) and reading a run live or
from its files later gives the same figures. Definition 1 measured every row against the whole run's median
and counted an older session's rows as ``recomputed`` when a later one ran their steps again.

The run's figure is the mean over ranks of each bucket (every rank's buckets add up to the same wall
time); ``goodput`` = productive / wall. Per rank goodput is given where ranks differ.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import fmt
from . import figures, ledgerfold, rankstate
from .clocks import Clocks
from .figures import Options
from .store import RankData, Snapshot

#: the buckets, in the order they are shown
BUCKETS = ("productive", "input_wait", "compile", "recomputed", "checkpoint", "stalled", "down")
#: the buckets that are lost time (all but productive)
LOST = BUCKETS[1:]
#: ranks whose goodput differs from the run's by more than this are listed on their own
RANK_SPREAD = 0.01


@dataclass
class Ledger:
    """Seconds in each bucket (the mean over ranks), the wall time they add up to, and per rank goodput."""

    wall: float
    seconds: dict[str, float]
    ranks: dict[int, float] = field(default_factory=dict)  # rank -> goodput, where it differs from the run's
    #: no row was timed: every rank's rows carry one instant and no step time (a plain log read cold with no
    #: usable stamp): the steps' time is not known, so no share of the wall is (never a 0 %)
    untimed: bool = False

    @property
    def goodput(self) -> float | None:
        return self.seconds["productive"] / self.wall if self.wall > 0 and not self.untimed else None

    def largest_losses(self, n: int = 2) -> list[tuple[str, float]]:
        return largest_losses(self.seconds, self.wall, n)

    def public(self) -> dict[str, Any]:
        """The ``goodput`` object of ``summary --json``: every bucket in seconds, the wall time, the fraction."""
        out: dict[str, Any] = {k: round(v, 3) for k, v in self.seconds.items()}
        out["wall"] = round(self.wall, 3)
        g = self.goodput
        out["goodput"] = None if g is None else round(g, 4)
        out["ranks"] = {str(r): round(v, 4) for r, v in sorted(self.ranks.items())}
        return out


def largest_losses(seconds: Mapping[str, float], wall: float, n: int = 2) -> list[tuple[str, float]]:
    """The ``n`` lost buckets with the most time, largest first (none under half a percent of the wall
    time, nor under half a second, which the words would show as "0 s"); ``seconds`` is a ledger's buckets
    or summary's goodput object."""
    floor = max(0.5, 0.005 * wall)
    return sorted(((k, v) for k in LOST if (v := seconds[k]) >= floor), key=lambda kv: -kv[1])[:n]


def losses_text(lost: list[tuple[str, float]]) -> str:
    """``recomputed 9 h 02 m, down 6 h 10 m``: the header's and summary's words for the largest losses."""
    return ", ".join(f"{k.replace('_', ' ')} {fmt.duration(v)}" for k, v in lost)


def ledger(store: Snapshot, opts: Options) -> Ledger | None:
    """The job's goodput ledger; None before any row (computed once per store version and clock second)."""
    key = (round(opts.clock()), figures.status(store, opts))
    seen = store.memo("goodput", dict)
    if key not in seen:
        seen.clear()
        seen[key] = compute_ledger(store, opts)
    return seen[key]


def compute_ledger(store: Snapshot, opts: Options) -> Ledger | None:
    """The ledger read now from each rank's fold (:func:`ledger` keeps it per store version and clock second):
    O(sessions) a rank, whatever the rows."""
    c = figures.rank_clocks(store, opts)  # a rank whose clock is off its peers' is laid on theirs
    ranks = [(d, c.ranks.get(r, 0.0)) for r, d in sorted(store.ranks.items()) if d.rows]
    if not ranks:
        return None
    end = job_end(store, opts, c)
    until = end if figures.status(store, opts) in LIVE else None
    spans = {d.rank: [_span(d, k, off, until) for k in range(len(d.segments))] for d, off in ranks}
    first = min(b for sp in spans.values() for b, _ in sp)
    wall = max(0.0, end - first)
    per_rank = {d.rank: rank_ledger(d, off, spans[d.rank], first, end) for d, off in ranks}
    seconds = {k: math.fsum(b[k] for b in per_rank.values()) / len(per_rank) for k in BUCKETS}
    out = Ledger(wall, seconds, untimed=all(_untimed(d) for d, _ in ranks))
    g = out.goodput
    if g is not None and wall > 0:
        for r, b in per_rank.items():
            if abs(b["productive"] / wall - g) > RANK_SPREAD:
                out.ranks[r] = b["productive"] / wall
    return out


def _untimed(d: RankData) -> bool:
    """Whether a rank's rows tell no time: more than one, all of one instant, none with a step time."""
    if d.rows < 2 or not d.segments or d.segments[0].first_time != d.last("time"):
        return False
    return not math.isfinite(d.last("step_time")) and not np.isfinite(d.col("step_time")).any()


def _span(d: RankData, k: int, off: float, until: float | None) -> tuple[float, float]:
    """:func:`session_span` on the reference clock (the rank's laid back by ``off``)."""
    begin, life = session_span(d, k, None if until is None else until + off)
    return begin - off, life - off


def rank_ledger(d: RankData, off: float, spans: list[tuple[float, float]], first: float,
                end: float) -> dict[str, float]:
    """One rank's buckets over [first, end]: its fold's classified rows, and session by session its first
    row, its start-up, its silence after its last row and what lies between sessions (O(sessions))."""
    fold = d.ledger
    b = dict(zip(ledgerfold.SUMS, fold.sums))
    b["compile"] = b["down"] = 0.0
    cursor = first  # how far this rank's time is accounted for
    for k, seg in enumerate(d.segments):
        begin, life = spans[k]
        begin = max(begin, cursor)
        life = min(max(life, begin), end)
        b["down"] += max(0.0, begin - cursor)
        t0 = min(max(seg.first_time - off, begin), end)
        gap0 = t0 - begin
        # the first row: one step, at the median it is measured against (the rows before it, fixed when it
        # came: the row after it must not take productive time back); the run's first row has none before
        # it: the median its next row is measured against (0 until that row comes: it only grows)
        at = min(seg.first_row, fold.settled - 1) if seg.first_row > 0 else min(1, fold.settled - 1)
        own0 = min(fold.figures_of(at)[0], gap0)
        b["compile"] += gap0 - own0
        b["recomputed" if seg.first_step <= fold.reached[k] else "productive"] += own0
        last = fold.sess_t[k] - off if k < len(fold.sess_t) else math.nan
        last = t0 if last != last else min(max(last, t0), end)
        b["stalled"] += max(0.0, life - last)  # alive after its last row: no step was written
        cursor = max(last, life)
    b["down"] += max(0.0, end - cursor)
    over = sum(b.values()) - max(0.0, end - first)
    for name in _OVERLAP:  # sessions that overlap (a start before the last one's end) counted once
        if over <= 1e-9:
            break
        take = min(b[name], over)
        b[name] -= take
        over -= take
    return {k: b[k] for k in BUCKETS}


#: the buckets time counted twice by overlapping sessions is taken back from, in order
_OVERLAP = ("down", "stalled", "compile", "recomputed", "checkpoint", "input_wait", "productive")


#: the longest a session's start-up (from its start event to its first row: process start, data loading,
#: graph compilation) is taken to be; a start event further from its first row was stamped by a clock that
#: moved (or is wrong), and the first row less its step time is the start instead
MAX_STARTUP = figures.MAX_STARTUP
#: the statuses of a job that may still live: its wall time runs to now, and a rank that has not ended is
#: alive to now (the time since its last row is a stall, not downtime)
LIVE = ("running", "starting", "stalled")
#: the longest a stall counts past the job's last sign of life: a job silent for longer (a log with no
#: heartbeats, opened a year later) is taken as stopped then, not as stalled for the year
STALL_HORIZON = 3600.0


def job_end(store: Snapshot, opts: Options, c: Clocks | None = None) -> float:
    """The end of the wall time, one definition for every reader: now (on the rows' clock: the reference
    rank's) while the job may still live (running, starting, stalled: a hung job and a silent one alike,
    a stall up to STALL_HORIZON); else its last sign of life (finished, failed, dead: opening it a year
    later must not count the year), for a job dead by its silence that plus the silence the verdict waited
    (the moment it was known: the wall shrank at the verdict, 63 % -> 77 %). So goodput only falls as a stall
    grows, and the stall is ``stalled``."""
    c = c if c is not None else figures.rank_clocks(store, opts)
    lives = [t - c.ranks.get(r, 0.0) for r, t in figures.lives(store).items()]
    last = max(lives) if lives else 0.0
    status = figures.status(store, opts)
    if status not in LIVE:
        waited = figures.silence_verdict(store, opts)
        return last + waited if waited is not None else last
    now = opts.clock() + (c.own.get(c.reference, 0.0) if c.reference is not None else 0.0)  # the rows' clock
    if status == "stalled":  # a stall counts as it grows, up to STALL_HORIZON past the last sign of life
        return min(max(last, now), last + STALL_HORIZON)
    return max(last, now)


def _session_rows(d: RankData, k: int) -> tuple[int, int]:
    seg = d.segments[k]
    end = d.segments[k + 1].first_row if k + 1 < len(d.segments) else d.rows
    return seg.first_row, end


def session_span(d: RankData, k: int, until: float | None = None) -> tuple[float, float]:
    """When session ``k`` began (its start event, else its first row less that row's step time) and its last
    sign of life (its last row or its end or abort event; the rank's heartbeats for its last session; for the
    last session of a rank that has not ended while the job may live, ``until``: now)."""
    lo, hi = _session_rows(d, k)
    seg = d.segments[k]
    first_row, last_row = seg.first_time, d.at("time", hi - 1)
    name = seg.session
    start = d.starts.get(name)
    st0 = seg.first_step_time
    before = first_row - (st0 if math.isfinite(st0) else 0.0)
    begin = float(start["time"]) if start and isinstance(start.get("time"), (int, float)) else before
    if not first_row - MAX_STARTUP <= begin <= first_row:
        begin = before  # a start event after its first row, or days before it: a clock, not a start-up
    life = [last_row]
    if name in d.ends:
        life.append(float(d.ends[name]))
    life += [float(a["time"]) for a in d.aborts if str(a.get("session")) == name]
    if k == len(d.segments) - 1:
        life += [t for t in (d.last_heartbeat, d.last_event_time) if t is not None]
        if until is not None and name not in d.ends and not rankstate.aborted(d):
            life.append(until)
    return min(begin, first_row), max(life)


