"""Where a job's wall time went: the goodput ledger (issue 16), from the files that exist.

The wall time runs from the earliest session start of any rank to the job's end: its last sign of life
when it ended (finished, failed, dead), else the clock. Each rank's share of it is split into exclusive
buckets that add up to it, from its rows, sessions and events:

- ``productive``: the step time of rows on the run's current timeline (steps computed for the last time,
  not superseded by a later session), less their data wait and less what the buckets below take;
- ``input_wait``: the data-wait part of those rows;
- ``compile``: from a session's start to its first row, beyond the run's median step time (process start,
  graph compilation, warm-up);
- ``recomputed``: the step time of rows that a later session ran again (or will: it resumed before them);
- ``checkpoint``: a step that saved a checkpoint (a ``checkpoint`` event at its step), beyond the median,
  and the gap around a save made between steps;
- ``stalled``: time between rows beyond the later row's own step time (no step was running); a step that
  took longer than :func:`~mstop.engine.figures.stall_after` (a hang inside it), beyond the median; and
  after a session's last row while the rank still showed signs of life;
- ``down``: before a rank's first session, between one session's last sign of life and the next session's
  start (restarts, queue waits), and after its last sign of life.

The run's figure is the mean over ranks of each bucket (every rank's buckets add up to the same wall
time); ``goodput`` = productive / wall. Per rank goodput is given where ranks differ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import figures
from .figures import Options
from .store import RankData, Store

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

    @property
    def goodput(self) -> float | None:
        return self.seconds["productive"] / self.wall if self.wall > 0 else None

    def largest_losses(self, n: int = 2) -> list[tuple[str, float]]:
        """The ``n`` lost buckets with the most time, largest first (none that are empty)."""
        lost = sorted(((k, self.seconds[k]) for k in LOST if self.seconds[k] > 0), key=lambda kv: -kv[1])
        return lost[:n]

    def public(self) -> dict[str, Any]:
        """The ``goodput`` object of ``summary --json``: every bucket in seconds, the wall time, the fraction."""
        out: dict[str, Any] = {k: round(v, 3) for k, v in self.seconds.items()}
        out["wall"] = round(self.wall, 3)
        g = self.goodput
        out["goodput"] = None if g is None else round(g, 4)
        out["ranks"] = {str(r): round(v, 4) for r, v in sorted(self.ranks.items())}
        return out


def ledger(store: Store, opts: Options) -> Ledger | None:
    """The job's goodput ledger; None before any row (computed once per store version and clock second)."""
    key = (round(opts.clock()), figures.status(store, opts))
    seen = store.memo("goodput", dict)
    if key not in seen:
        seen.clear()
        seen[key] = _ledger(store, opts)
    return seen[key]


def _ledger(store: Store, opts: Options) -> Ledger | None:
    ranks = [d for _, d in sorted(store.ranks.items()) if d.rows]
    if not ranks:
        return None
    first = min(_session_span(d, k)[0] for d in ranks for k in range(len(d.segments)))
    end = _job_end(store, opts)
    wall = max(0.0, end - first)
    median = _median_step(ranks)
    hang = figures.stall_after(store)
    per_rank = {d.rank: _rank_ledger(d, first, end, median, hang) for d in ranks}
    seconds = {k: float(np.mean([b[k] for b in per_rank.values()])) for k in BUCKETS}
    out = Ledger(wall, seconds)
    g = out.goodput
    if g is not None and wall > 0:
        for r, b in per_rank.items():
            if abs(b["productive"] / wall - g) > RANK_SPREAD:
                out.ranks[r] = b["productive"] / wall
    return out


def _job_end(store: Store, opts: Options) -> float:
    """The job's last sign of life when it has ended; else now (on the rows' clock)."""
    lives = [t for d in store.ranks.values() if (t := figures.last_life(d)) is not None]
    last = max(lives) if lives else 0.0
    if figures.status(store, opts) in figures.ENDED:
        return last
    return max(last, opts.clock())


def _median_step(ranks: list[RankData]) -> float:
    """The run's median step time: each rank's steady rows (first rows of sessions left out), pooled."""
    vals = [d.col("step_time")[d.steady()].astype(np.float64) for d in ranks]
    v = np.concatenate(vals) if vals else np.empty(0)
    v = v[np.isfinite(v) & (v > 0)]
    return float(np.median(v)) if len(v) else 0.0


def _session_rows(d: RankData, k: int) -> tuple[int, int]:
    seg = d.segments[k]
    end = d.segments[k + 1].first_row if k + 1 < len(d.segments) else d.rows
    return seg.first_row, end


def _session_span(d: RankData, k: int) -> tuple[float, float]:
    """When session ``k`` began (its start event, else its first row less that row's step time) and its last
    sign of life (its last row or its end or abort event; the rank's heartbeats for its last session)."""
    lo, hi = _session_rows(d, k)
    times = d.col("time")
    first_row, last_row = float(times[lo]), float(times[hi - 1])
    name = d.segments[k].session
    start = d.starts.get(name)
    st0 = float(d.col("step_time")[lo])
    begin = float(start["time"]) if start and isinstance(start.get("time"), (int, float)) else \
        first_row - (st0 if math.isfinite(st0) else 0.0)
    life = [last_row]
    if name in d.ends:
        life.append(float(d.ends[name]))
    life += [float(a["time"]) for a in d.aborts if str(a.get("session")) == name]
    if k == len(d.segments) - 1:
        life += [t for t in (d.last_heartbeat, d.last_event_time) if t is not None]
    return min(begin, first_row), max(life)


def _rank_ledger(d: RankData, first: float, end: float, median: float, hang: float) -> dict[str, float]:
    b = dict.fromkeys(BUCKETS, 0.0)
    times = d.col("time").astype(np.float64)
    st = np.nan_to_num(d.col("step_time").astype(np.float64), nan=0.0)
    dw = np.nan_to_num(d.col("data_wait").astype(np.float64), nan=0.0)
    eff = d.effective()
    ckpt_steps = {float(c["step"]) for c in d.checkpoints if isinstance(c.get("step"), (int, float))}
    ckpt_times = sorted(float(c["time"]) for c in d.checkpoints)
    steps = d.col("step")
    cursor = first  # how far this rank's time is accounted for
    for k in range(len(d.segments)):
        lo, hi = _session_rows(d, k)
        begin, life = _session_span(d, k)
        begin, life = max(begin, cursor), min(max(life, begin), end)
        b["down"] += max(0.0, begin - cursor)
        # the first row: from the session's start; beyond the median it is start-up and compilation
        prev = begin
        for i in range(lo, hi):
            t = min(float(times[i]), end)
            gap = max(0.0, t - prev)
            own = min(st[i], gap) if i > lo else min(median, gap)
            extra = gap - own  # no step ran (or, for the first row, start-up and compilation)
            ck = float(steps[i]) in ckpt_steps or any(prev < c <= t + 1e-6 for c in _near(ckpt_times, prev, t))
            if i == lo:
                b["compile"] += extra
            elif ck:
                b["checkpoint"] += extra
            else:
                b["stalled"] += extra
            if not eff[i]:
                b["recomputed"] += own
            else:
                over = max(0.0, own - median) if i > lo and (ck or own > hang) else 0.0
                b["checkpoint" if ck else "stalled"] += over
                wait = min(dw[i], own - over)
                b["input_wait"] += wait
                b["productive"] += own - over - wait
            prev = max(prev, t)
        tail = max(0.0, life - prev)
        b["stalled"] += tail  # after its last row, the rank was alive: no step was written
        cursor = max(prev, life)
    b["down"] += max(0.0, end - cursor)
    return b


def _near(times: list[float], lo: float, hi: float) -> list[float]:
    """The sorted ``times`` inside (lo, hi + a millisecond]."""
    import bisect

    i = bisect.bisect_right(times, lo)
    j = bisect.bisect_right(times, hi + 1e-3)
    return times[i:j]
