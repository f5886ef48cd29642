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
  start (restarts, queue waits), and after its last sign of life when it did not finish;
- ``finished_early``: after the end of a rank that finished its work (its last session's clean ``end``) while
  other ranks still ran: it waited for them, it was not down (definition 4, issue 58).

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
BUCKETS = ("productive", "input_wait", "compile", "recomputed", "checkpoint", "stalled", "down", "finished_early")
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
    time, nor under 0.05 s, which the words would show as "0.0 s"); ``seconds`` is a ledger's buckets or
    summary's goodput object. A short run's losses are said too: a 2.5 s run lost 0.4 s to its compile and
    0.4 s to input wait, and the words said none."""
    floor = max(0.05, 0.005 * wall)
    return sorted(((k, v) for k in LOST if (v := seconds[k]) >= floor), key=lambda kv: -kv[1])[:n]


def losses_text(lost: list[tuple[str, float]]) -> str:
    """``recomputed 9 h 02 m, down 6 h 10 m``: the header's and summary's words for the largest losses."""
    return ", ".join(f"{k.replace('_', ' ')} {fmt.span(v)}" for k, v in lost)


def ledger(store: Snapshot, opts: Options) -> Ledger | None:
    """The job's goodput ledger now; None before any row. Each rank's share is kept between readings in an
    open form (:class:`Parts`), worked out again only for the ranks whose rows, events or clock changed since
    the snapshot it was made of, those that only got rows in arrays: a reading is a few sums over arrays, so
    the header reads it at every frame."""
    c = figures.rank_clocks(store, opts)  # a rank whose clock is off its peers' is laid on theirs
    live = figures.status(store, opts) in LIVE
    p = _parts(store, c.ranks, live)
    if p is None:
        return None
    end = job_end(store, opts, c)
    first = float(p.begin.min())
    wall = max(0.0, end - first)
    b = p.fixed.copy()
    b[:, _DOWN] += p.begin - first  # before the rank's first session: down since the job's first start
    # to the job's end: alive (stalled), finished before the others, or down
    b[np.arange(len(b)), np.where(p.open, _STALLED, np.where(p.done, _FINISHED, _DOWN))] += end - p.upto
    for k in np.flatnonzero(p.upto > end).tolist():  # a rank's times past the job's end (clocks): as read
        r = p.ranks[k]
        b[k] = _taken(_exact(store.ranks[r], c.ranks.get(r, 0.0), live, first, end), end - first)
    for k in np.flatnonzero((p.over > 1e-9) & (p.upto <= end)).tolist():
        b[k] = _taken(b[k], end - first)  # sessions that overlap
    seconds = {name: math.fsum(b[:, i].tolist()) / len(b) for i, name in enumerate(BUCKETS)}
    out = Ledger(wall, seconds, untimed=bool(p.untimed.all()))
    g = out.goodput
    if g is not None and wall > 0:
        for k in np.flatnonzero(np.abs(b[:, 0] / wall - g) > RANK_SPREAD).tolist():
            out.ranks[p.ranks[k]] = float(b[k, 0]) / wall
    return out


@dataclass(frozen=True)
class Parts:
    """Every rank's share of the ledger in its open form, as of snapshot ``seen``: its buckets over its own
    span, from the start of its first session (``begin``) to its latest time (``upto``), before sessions
    that overlap are taken back (``over`` seconds: it moves with neither end). The ledger over the job's
    [first, end] adds ``begin - first`` to a rank's ``down``, and ``end - upto`` to its ``stalled`` when its
    last session may still live (``open``), else to its ``down``: exact while ``end >= upto``.

    A rank's buckets are its ``head`` (every session's start-up and first row, each session's silence but
    the last's), its fold's sums (mstop.engine.ledgerfold) and its last session's tail (its silence after
    its last row, to ``upto``). Rows alone (a read round's) move only the sums and the tail: for a rank
    marked ``fast`` those come from the rows' columns (the ledger's state, the folds' last times), for all
    such ranks at once in arrays, with no rank record made."""

    seen: int
    live: bool
    offs: dict[int, float]
    ranks: list[int]
    head: np.ndarray  # (ranks, BUCKETS)
    sums: np.ndarray  # (ranks, SUMS)
    begin: np.ndarray
    last_begin: np.ndarray  # the last session's start, after the sessions before it
    last_t0: np.ndarray  # its first row's time (its start at the latest)
    signs: np.ndarray  # its signs of life that are not rows (end, abort, heartbeat, event), -inf: none
    static_upto: np.ndarray  # the rank's latest time but its last session's rows
    off: np.ndarray
    open: np.ndarray
    done: np.ndarray  # its last session ended cleanly (an end event, no abort): its time after is finished_early
    fast: np.ndarray
    untimed: np.ndarray
    fixed: np.ndarray  # worked out: head + sums + tail
    upto: np.ndarray
    over: np.ndarray


#: what _statics gives, in Parts' order
_STATICS = ("head", "sums", "begin", "last_begin", "last_t0", "signs", "static_upto", "off", "open", "done", "fast",
            "untimed")


def _parts(store: Snapshot, offs: dict[int, float], live: bool) -> Parts | None:
    """The kept :class:`Parts` brought to this snapshot: the ranks that only got rows since, in arrays; the
    others changed since (events, their clock offset) worked out again from their records; all of them when a
    rank came or went, the job's liveness changed, or the change is not known (the kept ones are of a
    snapshot older than the change log)."""
    lasts = store.folds.lasts()  # every rank with rows, in order, and its last row's time
    ranks = lasts.ranks
    if not ranks:
        return None
    prev: Parts | None = store.answers.ledger
    seen = store.changed[0] if store.changed is not None else -2
    since = None
    if prev is not None and prev.live == live and prev.ranks == ranks:
        since = store.changed_after(prev.seen, rows=True)
    if prev is None or since is None:
        at = np.arange(len(ranks))
        grown = np.zeros(0, np.int64)
        arrays = {name: None for name in _STATICS}
    else:
        moved = {r for r in offs.keys() | prev.offs.keys() if offs.get(r) != prev.offs.get(r)}
        dirty = store.changed_after(prev.seen) or frozenset()  # changed by more than rows
        if not since and not moved:
            return prev
        order, want = np.asarray(ranks), np.fromiter(since | moved, np.int64)
        look = np.minimum(np.searchsorted(order, want), len(order) - 1)
        look = np.unique(look[order[look] == want])  # those with rows
        if not len(look):
            return prev
        quick = prev.fast[look] & ~np.isin(order[look], np.fromiter(dirty | moved, np.int64))
        at, grown = look[~quick], look[quick]
        arrays = {name: getattr(prev, name).copy() for name in _STATICS}
    for k in at.tolist():  # a record each: its events, sessions or clock changed
        r = ranks[k]
        got = _statics(store.ranks[r], offs.get(r, 0.0), live)
        for name, x in zip(_STATICS, got):
            if arrays[name] is None:
                arrays[name] = np.zeros((len(ranks), *np.shape(x)), np.asarray(x).dtype)
            arrays[name][k] = x
    sess = [_last_sess(store.ranks[ranks[k]].ledger.state()) for k in at.tolist()]
    if len(grown):  # rows alone: the sums and the last session's latest time, from the ledger's state
        states = store.ledger_states([ranks[k] for k in grown.tolist()])
        arrays["sums"][grown] = [st[1] for st in states]
        sess += [_last_sess(st) for st in states]
    look = np.concatenate([at, grown])
    fixed = prev.fixed.copy() if prev is not None and since is not None else np.zeros((len(ranks), len(BUCKETS)))
    upto = prev.upto.copy() if prev is not None and since is not None else np.zeros(len(ranks))
    fixed[look], upto[look] = _tail({name: v[look] for name, v in arrays.items()}, lasts.time[look],
                                    np.array(sess, np.float64))
    out = Parts(seen, live, dict(offs), list(ranks), **arrays, fixed=fixed, upto=upto,
                over=fixed.sum(axis=1) - (upto - arrays["begin"]))
    store.answers.ledger = out
    return out


def _last_sess(state: tuple[int, tuple[float, ...], float, tuple[float, ...]]) -> float:
    """The latest time the rows of a rank's last session reached, from its ledger's state (NaN: none)."""
    return state[3][-1] if state[3] else math.nan


def _statics(d: RankData, off: float, live: bool, first: float | None = None,
             end: float = math.inf) -> tuple[Any, ...]:
    """What :class:`Parts` keeps of rank ``d`` that rows alone do not move (_STATICS' order), from its record:
    its sessions laid on the reference clock (``off``); ``first`` and ``end`` bound an exact reading (else
    the rank's own first start, and none)."""
    fold = d.ledger
    until = end if live and end != math.inf else None
    spans = [_span(d, k, off, until) for k in range(len(d.segments))]
    begin = min(b for b, _ in spans)
    head, last_begin, last_t0 = _head(d, off, spans, begin if first is None else first, end)
    signs = [t - off for t in _signs(d, len(d.segments) - 1)]
    times = [t for sp in spans[:-1] for t in sp] + [spans[-1][0], *signs]
    times += [seg.first_time - off for seg in d.segments] + [t - off for t in fold.sess_t[:-1] if t == t]
    fast = (fold.settled >= 2 and fold.settled - 1 >= d.segments[-1].first_row
            and len(fold.sess_t) == len(d.segments) and bool(np.isfinite(d.held("step_time")).any()))
    return (head, np.array(fold.sums), begin, last_begin, last_t0, max(signs, default=-math.inf), max(times), off,
            live and still_open(d), finished(d), fast, _untimed(d))


def _head(d: RankData, off: float, spans: list[tuple[float, float]], first: float,
          end: float) -> tuple[np.ndarray, float, float]:
    """Rank ``d``'s buckets over [first, end] but its fold's sums and its last session's tail: session by
    session what lies before it, its start-up and its first row, and the silence after each session's last
    row but the last session's (O(sessions)); with the last session's start (after those before it) and its
    first row's time."""
    fold = d.ledger
    b = np.zeros(len(BUCKETS))
    cursor = first  # how far this rank's time is accounted for
    k_last = len(d.segments) - 1
    begin = t0 = first
    for k, seg in enumerate(d.segments):
        begin, life = spans[k]
        begin = max(begin, cursor)
        b[_DOWN] += begin - cursor
        t0 = min(max(seg.first_time - off, begin), end)
        gap0 = t0 - begin
        # the first row: one step, at the median it is measured against (the rows before it, fixed when it
        # came: the row after it must not take productive time back); the run's first row has none before
        # it: the median its next row is measured against (0 until that row comes: it only grows)
        at = min(seg.first_row, fold.settled - 1) if seg.first_row > 0 else min(1, fold.settled - 1)
        own0 = min(fold.figures_of(at)[0], gap0)
        b[_COMPILE] += gap0 - own0
        b[_RECOMPUTED if seg.first_step <= fold.reached[k] else _PRODUCTIVE] += own0
        if k == k_last:
            break
        life = min(max(life, begin), end)
        last = fold.sess_t[k] - off if k < len(fold.sess_t) else math.nan
        last = t0 if last != last else min(max(last, t0), end)
        b[_STALLED] += max(0.0, life - last)  # alive after its last row: no step was written
        cursor = max(last, life)
    return b, begin, t0


def _tail(a: dict[str, np.ndarray], last_row: np.ndarray, sess: np.ndarray,
          end: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Ranks' buckets (their ``head``, their fold's ``sums``, their last session's tail) and latest times,
    over arrays of what :class:`Parts` keeps (``a``), their last rows' times and their last sessions' latest
    times (their own clocks); to their own latest time, or to ``end`` (an exact reading)."""
    off = a["off"]
    row, s = last_row - off, sess - off
    last = np.fmax(s, a["last_t0"])  # the time its last session's rows reached, from its first row's
    life = np.fmax(np.fmax(a["signs"], row), a["last_begin"])
    upto = np.fmax(np.fmax(np.maximum(a["static_upto"], life), s), last)
    e = upto if end is None else np.full(len(upto), end)
    last = np.minimum(last, e)
    life = np.where(a["open"], e, np.minimum(life, e))  # a session that may live: alive to the end
    cursor = np.maximum(last, life)
    fixed = a["head"].copy()
    fixed[:, _SUMS] += a["sums"]
    fixed[:, _STALLED] += np.maximum(0.0, life - last)  # alive after its last row: no step was written
    fixed[np.arange(len(fixed)), np.where(a["done"], _FINISHED, _DOWN)] += np.maximum(0.0, e - cursor)
    return fixed, upto


def _exact(d: RankData, off: float, live: bool, first: float, end: float) -> np.ndarray:
    """Rank ``d``'s buckets over [first, end] read from its record (a rank with times past the job's end)."""
    a = {name: np.array([x]) for name, x in zip(_STATICS, _statics(d, off, live, first, end))}
    fixed, _ = _tail(a, np.array([d.last("time")]), np.array([_last_sess(d.ledger.state())]), end)
    return fixed[0]


def _taken(b: np.ndarray, wall: float) -> np.ndarray:
    """Buckets ``b`` with the time sessions that overlap (a start before the last one's end) counted twice
    taken back, from the buckets of _OVERLAP in order, so they add up to ``wall``."""
    over = float(b.sum()) - max(0.0, wall)
    if over <= 1e-9:
        return b
    b = b.copy()
    for i in _OVERLAP:
        take = min(b[i], over)
        b[i] -= take
        over -= take
        if over <= 1e-9:
            break
    return b


def _untimed(d: RankData) -> bool:
    """Whether a rank's rows tell no time: more than one, all of one instant, none with a step time."""
    if d.rows < 2 or not d.segments or d.segments[0].first_time != d.last("time"):
        return False
    return not math.isfinite(d.last("step_time")) and not np.isfinite(d.col("step_time")).any()


def _span(d: RankData, k: int, off: float, until: float | None) -> tuple[float, float]:
    """:func:`session_span` on the reference clock (the rank's laid back by ``off``)."""
    begin, life = session_span(d, k, None if until is None else until + off)
    return begin - off, life - off


_PRODUCTIVE, _COMPILE, _RECOMPUTED, _STALLED, _DOWN, _FINISHED = (
    BUCKETS.index(k) for k in ("productive", "compile", "recomputed", "stalled", "down", "finished_early"))
#: where the fold's sums (mstop.engine.ledgerfold.SUMS) go among the buckets
_SUMS = [BUCKETS.index(k) for k in ledgerfold.SUMS]
#: the buckets time counted twice by overlapping sessions is taken back from, in order
_OVERLAP = (_DOWN, _FINISHED, _STALLED, _COMPILE, _RECOMPUTED, BUCKETS.index("checkpoint"), BUCKETS.index("input_wait"),
            _PRODUCTIVE)


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
    sign of life (its last row, or a later sign: :func:`_signs`; for the last session of a rank that has not
    ended while the job may live, ``until``: now)."""
    lo, hi = _session_rows(d, k)
    seg = d.segments[k]
    first_row = seg.first_time
    start = d.starts.get(seg.session)
    st0 = seg.first_step_time
    before = first_row - (st0 if math.isfinite(st0) else 0.0)
    begin = float(start["time"]) if start and isinstance(start.get("time"), (int, float)) else before
    if not first_row - MAX_STARTUP <= begin <= first_row:
        begin = before  # a start event after its first row, or days before it: a clock, not a start-up
    life = [d.at("time", hi - 1), *_signs(d, k)]
    if k == len(d.segments) - 1 and until is not None and still_open(d):
        life.append(until)
    return min(begin, first_row), max(life)


def _signs(d: RankData, k: int) -> list[float]:
    """Session ``k``'s signs of life that are not rows: its end or abort events; the rank's heartbeats and
    latest event for its last session."""
    name = d.segments[k].session
    out = [float(d.ends[name])] if name in d.ends else []
    out += [float(a["time"]) for a in d.aborts if str(a.get("session")) == name]
    if k == len(d.segments) - 1:
        out += [t for t in (d.last_heartbeat, d.last_event_time) if t is not None]
    return out


def finished(d: RankData) -> bool:
    """Whether rank ``d``'s last session ended cleanly (its end event, no abort): it finished its work."""
    return bool(d.segments) and d.segments[-1].session in d.ends and not rankstate.aborted(d)


def still_open(d: RankData) -> bool:
    """Whether rank ``d``'s last session has not ended (no end event, no abort): while the job may live, it
    lives to now."""
    return bool(d.segments) and d.segments[-1].session not in d.ends and not rankstate.aborted(d)
