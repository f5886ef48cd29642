"""Where a job's wall time went: the goodput ledger (issue 16), from the files that exist.

The wall time runs from the earliest session start of any rank to the job's end: the clock while rows
arrive (running), else its last sign of life (finished, failed, dead, stalled). Each rank's share of it
is split into exclusive buckets that add up to it, from its rows, sessions and events:

- ``productive``: the step time of rows on the run's current timeline (steps computed for the last time,
  not superseded by a later session), less their data wait and less what the buckets below take;
- ``input_wait``: the data-wait part of those rows;
- ``compile``: from a session's start to its first row, beyond the run's median step time (process start,
  graph compilation, warm-up);
- ``recomputed``: the step time of rows that a later session ran again (or will: it resumed before them);
- ``checkpoint``: a step that saved a checkpoint (a ``checkpoint`` event at its step), beyond the median,
  and the gap around a save made between steps;
- ``stalled``: time between rows beyond the later row's own step time and the rank's usual time between
  steps (no step was running); a step that
  took longer than :func:`~mstop.engine.figures.stall_after` (a hang inside it), beyond the median; and
  after a session's last row while the rank still showed signs of life;
- ``down``: before a rank's first session, between one session's last sign of life and the next session's
  start (restarts, queue waits), and after its last sign of life.

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
from . import figures, rankstate
from .clocks import Clocks, shifted
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


def ledger(store: Store, opts: Options) -> Ledger | None:
    """The job's goodput ledger; None before any row (computed once per store version and clock second)."""
    key = (round(opts.clock()), figures.status(store, opts))
    seen = store.memo("goodput", dict)
    if key not in seen:
        seen.clear()
        seen[key] = compute_ledger(store, opts)
    return seen[key]


def compute_ledger(store: Store, opts: Options, *, batch_rows: int | None = None) -> Ledger | None:
    """The ledger computed now (:func:`ledger` keeps it per store version and clock second); the one-session
    ranks' ledgers in passes of about ``batch_rows`` rows (default BATCH_ROWS), the same figures either way."""
    c = figures.rank_clocks(store, opts)  # a rank whose clock is off its peers' is laid on theirs
    ranks = [shifted(d, c.ranks.get(r, 0.0)) for r, d in sorted(store.ranks.items()) if d.rows]
    if not ranks:
        return None
    first = min(session_span(d, k)[0] for d in ranks for k in range(len(d.segments)))
    end = job_end(store, opts, c)
    until = end if figures.status(store, opts) in LIVE else None
    wall = max(0.0, end - first)
    median = median_step(ranks)
    hang = figures.stall_after(store)
    per_rank: dict[int, dict[str, float]] = {}
    for group in rank_groups([d for d in ranks if len(d.segments) == 1], batch_rows):
        if len(group) > 1:
            per_rank.update(batch_ledgers(group, first, end, median, hang, until))
    per_rank.update({d.rank: rank_ledger(d, first, end, median, hang, until) for d in ranks
                     if d.rank not in per_rank})
    per_rank = {d.rank: per_rank[d.rank] for d in ranks}
    seconds = {k: float(np.mean([b[k] for b in per_rank.values()])) for k in BUCKETS}
    out = Ledger(wall, seconds)
    g = out.goodput
    if g is not None and wall > 0:
        for r, b in per_rank.items():
            if abs(b["productive"] / wall - g) > RANK_SPREAD:
                out.ranks[r] = b["productive"] / wall
    return out


#: the longest a session's start-up (from its start event to its first row: process start, data loading,
#: graph compilation) is taken to be; a start event further from its first row was stamped by a clock that
#: moved (or is wrong), and the first row less its step time is the start instead
MAX_STARTUP = figures.MAX_STARTUP
#: rows of the one-session ranks whose ledgers are computed in one pass (see batch_ledgers): its arrays
#: are float64 temporaries over all their rows, so 10,000 ranks in one pass held gigabytes at once
BATCH_ROWS = 1 << 18


def rank_groups(ranks: list[RankData], batch_rows: int | None = None) -> list[list[RankData]]:
    """``ranks`` in consecutive groups of about ``batch_rows`` rows (default BATCH_ROWS; a larger rank is a
    group of its own)."""
    limit = batch_rows or BATCH_ROWS
    groups: list[list[RankData]] = [[]]
    rows = 0
    for d in ranks:
        if groups[-1] and rows + d.rows > limit:
            groups.append([])
            rows = 0
        groups[-1].append(d)
        rows += d.rows
    return groups


#: the statuses of a job that may still live: its wall time runs to now, and a rank that has not ended is
#: alive to now (the time since its last row is a stall, not downtime)
LIVE = ("running", "starting", "stalled")
#: the longest a stall counts past the job's last sign of life: a job silent for longer (a log with no
#: heartbeats, opened a year later) is taken as stopped then, not as stalled for the year
STALL_HORIZON = 3600.0


def job_end(store: Store, opts: Options, c: Clocks | None = None) -> float:
    """The end of the wall time, one definition for every reader: now (on the rows' clock: the reference
    rank's) while the job may still live (running, starting, stalled: a hung job and a silent one alike,
    a stall up to STALL_HORIZON); else its last sign of life (finished, failed, dead: opening it a year
    later must not count the year). So goodput only falls as a stall grows, and the stall is ``stalled``."""
    c = c if c is not None else figures.rank_clocks(store, opts)
    lives = [t - c.ranks.get(r, 0.0) for r, t in figures.lives(store).items()]
    last = max(lives) if lives else 0.0
    status = figures.status(store, opts)
    if status not in LIVE:
        return last
    now = opts.clock() + (c.own.get(c.reference, 0.0) if c.reference is not None else 0.0)  # the rows' clock
    if status == "stalled":  # a stall counts as it grows, up to STALL_HORIZON past the last sign of life
        return min(max(last, now), last + STALL_HORIZON)
    return max(last, now)


def median_step(ranks: list[RankData]) -> float:
    """The run's median step time: each rank's steady rows (first rows of sessions left out), pooled.

    Exact, without pooling them: a float64 copy of every rank's rows, pooled, was the monitor's peak
    memory at 10,000 ranks (11 B a row at once). A positive float32's bits, read as an integer, are in the
    order of its value, so a count of the rows by their top 16 bits finds which bucket holds the middle
    rows, and a second pass takes only that bucket's values: one rank's rows at a time, then a bucket.
    Up to POOL_ROWS rows (4 B a row at once) the float32 values are pooled instead: two passes over 1,024
    short ranks cost 60 ms of the frame's thread where one took 10.
    """
    def steady(d: RankData) -> np.ndarray:
        v = d.col("step_time")[d.steady()]
        return v[np.isfinite(v) & (v > 0)]

    if sum(d.rows for d in ranks) <= POOL_ROWS:
        return _middle(np.concatenate([np.ascontiguousarray(steady(d), np.float32) for d in ranks])
                       if ranks else np.empty(0, np.float32))
    counts = np.zeros(1 << 16, np.int64)
    for d in ranks:
        counts += np.bincount(np.ascontiguousarray(steady(d), np.float32).view(np.uint32) >> 16,
                              minlength=1 << 16)
    n = int(counts.sum())
    if not n:
        return 0.0
    ends = np.cumsum(counts)
    middle = sorted({(n - 1) // 2, n // 2})  # the one or two middle rows, by rank in the pooled order
    buckets = np.searchsorted(ends, middle, side="right")  # the buckets that hold them (one, or two beside)
    lo, hi = int(buckets[0]), int(buckets[-1])
    below = int(ends[lo - 1]) if lo else 0  # rows in the buckets under them
    # one more pass: every rank's values in those buckets, in order of size then (the buckets are ordered)
    vals = np.concatenate([v[(b >= lo) & (b <= hi)] for d in ranks
                           if len(v := np.ascontiguousarray(steady(d), np.float32))
                           for b in [v.view(np.uint32) >> 16]])
    part = np.partition(vals, [k - below for k in middle])
    return sum(float(part[k - below]) for k in middle) / len(middle)


#: the most rows whose step times median_step pools (16 MB of float32 at once); more are counted instead
POOL_ROWS = 1 << 22


def _middle(v: np.ndarray) -> float:
    """The median of ``v`` (0.0 when empty): its two middle values averaged in float64, as ``np.median`` of
    a float64 copy gives it."""
    n = len(v)
    if not n:
        return 0.0
    mid = n // 2
    part = np.partition(v, (mid - 1, mid) if n % 2 == 0 else mid)
    return (float(part[mid - 1]) + float(part[mid])) / 2.0 if n % 2 == 0 else float(part[mid])


def _session_rows(d: RankData, k: int) -> tuple[int, int]:
    seg = d.segments[k]
    end = d.segments[k + 1].first_row if k + 1 < len(d.segments) else d.rows
    return seg.first_row, end


def session_span(d: RankData, k: int, until: float | None = None) -> tuple[float, float]:
    """When session ``k`` began (its start event, else its first row less that row's step time) and its last
    sign of life (its last row or its end or abort event; the rank's heartbeats for its last session; for the
    last session of a rank that has not ended while the job may live, ``until``: now)."""
    lo, hi = _session_rows(d, k)
    times = d.col("time")
    first_row, last_row = float(times[lo]), float(times[hi - 1])
    name = d.segments[k].session
    start = d.starts.get(name)
    st0 = float(d.col("step_time")[lo])
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


def rank_ledger(d: RankData, first: float, end: float, median: float, hang: float,
                 until: float | None = None) -> dict[str, float]:
    """One rank's buckets over [first, end], session by session (array arithmetic: a long run is not read
    row by row in Python)."""
    b = dict.fromkeys(BUCKETS, 0.0)
    times = d.col("time").astype(np.float64)
    st = np.nan_to_num(d.col("step_time").astype(np.float64), nan=0.0)
    dw = np.nan_to_num(d.col("data_wait").astype(np.float64), nan=0.0)
    eff = d.effective()
    normal = _normal_gap(d, times, st)
    cursor = first  # how far this rank's time is accounted for
    for k in range(len(d.segments)):
        lo, hi = _session_rows(d, k)
        begin, life = session_span(d, k, until)
        begin = max(begin, cursor)
        life = min(max(life, begin), end)
        b["down"] += max(0.0, begin - cursor)
        t = np.maximum.accumulate(np.maximum(np.minimum(times[lo:hi], end), begin))
        prev = np.concatenate(([begin], t[:-1]))
        gap = t - prev
        own = np.minimum(st[lo:hi], gap)
        own += np.minimum(gap - own, normal)  # the loop's usual time outside the step belongs to the step
        own[0] = min(median, gap[0])  # the first row: one step; the rest is start-up and compilation
        extra = gap - own  # time in which no step ran
        saved = _saved(d, lo, t, prev)
        saved[0] = False
        b["compile"] += float(extra[0])
        b["checkpoint"] += float(extra[1:][saved[1:]].sum())
        b["stalled"] += float(extra[1:][~saved[1:]].sum())
        e = eff[lo:hi]
        b["recomputed"] += float(own[~e].sum())
        slow = saved | (own > hang)  # a save inside the step, or a hang: its time beyond the median
        slow[0] = False
        wait = np.where(e, np.minimum(dw[lo:hi], own), 0.0)  # the step's wait for data is input wait
        wait[0] = 0.0  # the first row's is start-up's (compile)
        # a slow step's time beyond a normal step (the median), or beyond its own data wait when that is longer
        over = np.where(slow & e, np.maximum(0.0, own - np.maximum(median, wait)), 0.0)
        b["checkpoint"] += float(over[saved].sum())
        b["stalled"] += float(over[~saved].sum())
        b["input_wait"] += float(wait.sum())
        b["productive"] += float(np.where(e, own - over - wait, 0.0).sum())
        b["stalled"] += max(0.0, life - float(t[-1]))  # alive after its last row: no step was written
        cursor = max(float(t[-1]), life)
    b["down"] += max(0.0, end - cursor)
    return b


def batch_ledgers(ranks: list[RankData], first: float, end: float, median: float,
                   hang: float, until: float | None = None) -> dict[int, dict[str, float]]:
    """The buckets of ranks of one session each, all at once: :func:`rank_ledger`'s arithmetic over their
    rows laid end to end, summed per rank (a Python loop of numpy calls per rank cost 0.6 s a ledger with
    1,024 short ranks; the monitor's header asks for one every 5 s)."""
    n = np.array([d.rows for d in ranks])
    starts = np.concatenate([[0], np.cumsum(n)[:-1]])
    last = starts + n - 1
    rid = np.repeat(np.arange(len(ranks)), n)
    times = np.concatenate([d.col("time") for d in ranks]).astype(np.float64)
    st = np.nan_to_num(np.concatenate([d.col("step_time") for d in ranks]).astype(np.float64), nan=0.0)
    dw = np.nan_to_num(np.concatenate([d.col("data_wait") for d in ranks]).astype(np.float64), nan=0.0)
    spans = np.array([session_span(d, 0, until) for d in ranks])
    begin = np.maximum(spans[:, 0], first)
    life = np.minimum(np.maximum(spans[:, 1], begin), end)
    within = rid[1:] == rid[:-1]  # pairs of rows of one rank
    raw = np.diff(times)
    excess = raw - np.minimum(st[1:], raw)
    keep = within & np.concatenate([d.steady() for d in ranks])[1:] & np.isfinite(excess)
    normal = _medians(excess[keep], rid[1:][keep], len(ranks))
    normal[n < 3] = 0.0
    t = np.maximum(np.minimum(times, end), begin[rid])
    for r in np.unique(rid[1:][within & (np.diff(t) < 0)]):  # a time that goes back: the running maximum
        t[starts[r]:last[r] + 1] = np.maximum.accumulate(t[starts[r]:last[r] + 1])
    prev = np.empty_like(t)
    prev[1:] = t[:-1]
    prev[starts] = begin
    gap = t - prev
    own = np.minimum(st, gap)
    own += np.minimum(gap - own, normal[rid])
    own[starts] = np.minimum(median, gap[starts])
    extra = gap - own
    saved = np.zeros(len(t), bool)
    for r, d in enumerate(ranks):
        if d.checkpoints:
            saved[starts[r]:last[r] + 1] = _saved(d, 0, t[starts[r]:last[r] + 1], prev[starts[r]:last[r] + 1])
    saved[starts] = False
    later = np.ones(len(t), bool)
    later[starts] = False
    slow = saved | (own > hang)
    slow[starts] = False
    wait = np.minimum(dw, own)
    wait[starts] = 0.0
    over = np.where(slow, np.maximum(0.0, own - np.maximum(median, wait)), 0.0)

    def per(w: np.ndarray) -> np.ndarray:
        return np.bincount(rid, weights=w, minlength=len(ranks))

    stalled = per(np.where(later & ~saved, extra, 0.0)) + per(np.where(saved, 0.0, over))
    stalled += np.maximum(0.0, life - t[last])
    cols = {"productive": per(own - over - wait), "input_wait": per(wait), "compile": extra[starts],
            "recomputed": np.zeros(len(ranks)),
            "checkpoint": per(np.where(later & saved, extra, 0.0)) + per(np.where(saved, over, 0.0)),
            "stalled": stalled, "down": (begin - first) + np.maximum(0.0, end - np.maximum(t[last], life))}
    return {d.rank: {k: float(cols[k][r]) for k in BUCKETS} for r, d in enumerate(ranks)}


def _saved(d: RankData, lo: int, t: np.ndarray, prev: np.ndarray) -> np.ndarray:
    """Which of the rows from ``lo`` (ending at ``t``, the one before at ``prev``) a checkpoint names by
    its step, or saw a checkpoint written during them."""
    ck_steps = np.array([float(c["step"]) for c in d.checkpoints if isinstance(c.get("step"), (int, float))])
    ck_times = np.sort(np.array([float(c["time"]) for c in d.checkpoints], dtype=np.float64))
    return np.isin(d.col("step")[lo:lo + len(t)].astype(np.float64), ck_steps) | (
        np.searchsorted(ck_times, t + 1e-3, "right") > np.searchsorted(ck_times, prev, "right"))


def _medians(values: np.ndarray, groups: np.ndarray, k: int) -> np.ndarray:
    """``numpy.median`` of each group's values (0 for a group without any), all groups in one sort."""
    order = np.lexsort((values, groups))
    v = values[order]
    counts = np.bincount(groups, minlength=k)
    offs = np.concatenate([[0], np.cumsum(counts)[:-1]])
    out = np.zeros(k)
    has = counts > 0
    lo, hi = offs + (counts - 1) // 2, offs + counts // 2
    out[has] = (v[lo[has]] + v[hi[has]]) / 2
    return out


def _normal_gap(d: RankData, times: np.ndarray, st: np.ndarray) -> float:
    """The rank's usual time between one row and the next beyond the later row's step time (the median over
    its steady rows): the loop's own time outside the step (a MindFormers log's per-step time is the network
    call alone), not a stall."""
    if d.rows < 3:
        return 0.0
    gap = np.diff(times)
    excess = gap - np.minimum(st[1:], gap)
    steady = d.steady()[1:]
    v = excess[steady & np.isfinite(excess)]
    return float(np.median(v)) if len(v) else 0.0
