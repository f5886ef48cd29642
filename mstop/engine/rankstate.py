"""Each rank's standing as its events say it, in arrays across ranks: worked out again only for a rank whose
events (or sessions) changed.

The status, the liveness rule, the ranks table and ``summary`` ask the same questions of every rank at every
frame: did it abort, did the launcher lose it, did it finish, is it restarting, did its process end, when did
it last show a sign of life, what does its witness say of its process. Each answer is defined once, per rank,
here (and in :mod:`mstop.engine.processes` for the process); asked of 1,024 ranks in Python at every frame
they cost more than the rest of the frame (issue 39). Nearly all of them depend on a rank's events
alone, and events are rare beside rows: a rank's answers are kept with the key of what they read (its events'
stamp, its sessions, and its last row's time only where an answer reads it: an abort, an end, rows with no
session), and :func:`states` hands every rank's in arrays (one per store version).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import processes
from .store import RankData, Snapshot


@dataclass(frozen=True)
class One:
    """One rank's answers (see the module's docstring); times on the rank's own clock."""

    aborted: bool
    lost: dict[str, Any] | None
    finished: bool
    restarting: bool
    exit: dict[str, Any] | None  # its current process's exit event
    #: its last sign of life from events: a heartbeat, an event, the start of a session with no row yet
    event_life: float
    restart_start: float  # the start time of its newest session while that session has no row (else NaN)
    heartbeats: bool  # wrote heartbeats, or its start event promised them
    heartbeat_interval: float  # the interval its start event gives (NaN: none)
    process: dict[str, Any] | None  # processes.facts
    profile: dict[str, Any] | None  # its newest profile's shares (mstop.engine.profiles.rank_profile)
    started: bool  # has a start event
    start: dict[str, Any] | None  # its newest start event (the run's account of itself: figures.run_meta)
    #: its earliest start event's time, a session's first row standing for a start stamped by a clock that
    #: moved (figures.first_start); NaN: no start event
    first_start: float
    first_row_time: float  # its first row's time (NaN: no row)
    holding: dict[str, Any] | None  # its process's facts while stopped, traced or in D (processes.holding)
    #: what MFU is derived from, as its newest start event gives them (NaN: not given, or not a number)
    flops_per_token: float
    world_size: float
    peak_flops: float
    dropped: float  # rows its writer reported lost or refused (its ``dropped`` events)
    rejected: float  # of those, the rows it refused for bad input
    #: its current process's CPU seconds a second and run-delay share of late (processes.rates; NaN: unknown)
    rates: tuple[float, float] = (math.nan, math.nan)


@dataclass
class States:
    """Every rank of the store (rank order) and its answers, as arrays where figures add them up."""

    ranks: list[int]
    one: list[One]
    rows: np.ndarray  # int64: rows held
    last_time: np.ndarray  # its last row's time (NaN: no row)
    last_step: np.ndarray  # its last row's step (NaN: no row)
    aborted: np.ndarray
    lost: np.ndarray
    finished: np.ndarray
    restarting: np.ndarray
    exited: np.ndarray  # its current process's exit was seen
    started: np.ndarray
    heartbeats: np.ndarray
    heartbeat_interval: np.ndarray
    restart_start: np.ndarray
    life: np.ndarray  # the last sign of life, rows included (NaN: none), on the rank's own clock
    first_start: np.ndarray  # One.first_start
    first_row_time: np.ndarray  # One.first_row_time
    flops_per_token: np.ndarray  # One.flops_per_token ...
    world_size: np.ndarray
    peak_flops: np.ndarray
    dropped: np.ndarray
    rejected: np.ndarray
    #: what the ranks view shows of each (from its One, kept with it): its host (``?``: none), its host when its
    #: memory is the host's RAM (else None), its profile's shares, its process's pid, CPU, RSS, state and end
    host: np.ndarray = field(default_factory=lambda: np.empty(0, object))
    memory_host: np.ndarray = field(default_factory=lambda: np.empty(0, object))
    comm_share: np.ndarray = field(default_factory=lambda: np.empty(0))
    idle_share: np.ndarray = field(default_factory=lambda: np.empty(0))
    pid: np.ndarray = field(default_factory=lambda: np.empty(0))
    cpu: np.ndarray = field(default_factory=lambda: np.empty(0))
    rss: np.ndarray = field(default_factory=lambda: np.empty(0))
    proc_state: np.ndarray = field(default_factory=lambda: np.empty(0, object))
    ended: np.ndarray = field(default_factory=lambda: np.empty(0, object))

    def first(self, name: str) -> Any:
        """The first rank's (in rank order) answer ``name`` that is not None, else None (once per States)."""
        got = self._first.get(name, self)
        if got is self:
            got = self._first[name] = next((v for o in self.one if (v := getattr(o, name)) is not None), None)
        return got

    def index(self, rank: int) -> int | None:
        """Where ``rank`` is in these arrays (None: not in the store)."""
        i = int(np.searchsorted(self._ranks, rank)) if self.ranks else 0
        return i if i < len(self.ranks) and self.ranks[i] == rank else None

    def positions(self, ranks: list[int]) -> list[int]:
        """Where each of ``ranks`` (all in the store, in order) is in these arrays."""
        return np.searchsorted(self._ranks, ranks).tolist() if len(ranks) else []

    def __post_init__(self) -> None:
        self._ranks = np.asarray(self.ranks, dtype=np.int64)
        self._first: dict[str, Any] = {}


# -- each answer, for one rank -------------------------------------------------------------------------------

def aborted(d: RankData) -> bool:
    """An ``abort`` event ends the rank's last session (no start after it, and no row of that session
    after it: a MindFormers log's ERROR line that training went on past is no end)."""
    if not d.aborts:
        return False
    s = last_session(d)
    last_row = d.last("time") if d.rows and d.segments and d.segments[-1].session == s else None
    for a in d.aborts:
        if a.get("session") is not None:
            if str(a["session"]) == s and (last_row is None or last_row <= float(a["time"])):
                return True
        elif d.last_start is None or float(a["time"]) >= float(d.last_start.get("time", 0.0)):
            return True  # an older writer's abort carries no session: the last start before it
    return False


def last_session(d: RankData) -> str | None:
    """The session of the rank's newest start event (or of its last rows)."""
    if d.last_start is not None:
        return str(d.last_start.get("session"))
    return d.segments[-1].session if d.segments else None


def _unnamed_rows(d: RankData) -> bool:
    """Whether the rank's newest rows carry no session (a CSV without the column, written by a job's own
    code): their session is then told by time, not by name."""
    return bool(d.rows) and d.segments[-1].session == ""


def lost(d: RankData) -> dict[str, Any] | None:
    """The ``lost`` event (msrun's scheduler timed the worker out) that ends the rank's last session, if
    any: no end of that session and no start after it."""
    s = last_session(d)
    if s is None or s in d.ends:
        return None
    return next((e for e in d.losts if str(e.get("session")) == s), None)


def finished_cleanly(d: RankData) -> bool:
    """Whether the rank's last session ended with an ``end`` event after its last row, or its process with
    status 0."""
    if processes.clean_exit(processes.exited(d)):
        return True  # its process ended with status 0: done, whether or not the writer was closed
    s = last_session(d)
    if s is None or s not in d.ends:
        return False
    if d.rows and (d.segments[-1].session == s or _unnamed_rows(d)):
        return d.ends[s] >= d.last("time")
    return True


def restart_start(d: RankData) -> float:
    """The time of the rank's newest start event while its session has no row yet (the start is then its
    life), else NaN."""
    start = d.last_start
    return float(start["time"]) if start is not None and str(start.get("session")) not in d.segment_of \
        else math.nan


def event_life(d: RankData) -> float:
    """The rank's last sign of life but its rows, on its own clock: a heartbeat, an event, the start of a
    session with no row yet (NaN: none)."""
    times = [t for t in (d.last_heartbeat, d.last_event_time, restart_start(d)) if t is not None and t == t]
    return max(times) if times else math.nan


def last_life(d: RankData) -> float | None:
    """The rank's last sign of life on its own clock: a heartbeat, an event, a row, or the start of a session
    with no row yet (a start whose session has rows is not: its rows are newer, unless its clock is wrong)."""
    life = event_life(d)
    if d.rows:
        life = float(np.fmax(life, d.last("time")))
    return None if life != life else life


def restarting(d: RankData) -> bool:
    """The rank's newest start event belongs to a session with no rows yet (rows that carry no session
    belong to it once one is as late as the start event, or once their file was written since it: rows on
    a clock behind the start event's stayed ``starting`` for ever)."""
    s = last_session(d)
    if s is None or not d.segments or s in {seg.session for seg in d.segments}:
        return False
    if _unnamed_rows(d) and d.last_start is not None:
        t0 = float(d.last_start["time"])
        if d.csv_mtime is not None and d.csv_mtime >= t0:
            return False
        return d.last("time") < t0
    return True


#: the parts of a step a profile splits it into (compute + comm_not_overlapped + idle = the step; overlapped
#: communication is inside compute)
PROFILE_PARTS = ("compute", "comm_not_overlapped", "overlapped", "idle")


def profile_summary(d: RankData, e: dict[str, Any]) -> dict[str, Any] | None:
    """A ``profile`` event's shares of the step, with its steps and its top operators (None: no shares)."""
    sh = e.get("shares")
    if not isinstance(sh, dict) or not all(isinstance(sh.get(k), (int, float)) for k in PROFILE_PARTS):
        return None
    pipeline = {k: float(sh[k]) for k in ("stage", "bubble") if isinstance(sh.get(k), (int, float))}
    return {"rank": d.rank, "first_step": e.get("first_step"), "last_step": e.get("last_step"),
            "time": float(e["time"]), **{k: float(sh[k]) for k in PROFILE_PARTS}, **pipeline,
            "source": e.get("source"), "path": e.get("path"),
            "top_ops": [o for o in (e.get("top_ops") or []) if isinstance(o, dict)][:10]}


def rank_profile(d: RankData) -> dict[str, Any] | None:
    """The rank's newest profile (mstop.engine.figures.latest_profile), or None."""
    got = [p for p in (profile_summary(d, e) for e in d.profiles) if p is not None]
    return max(got, key=lambda p: p["time"]) if got else None


# -- kept, and in arrays ------------------------------------------------------------------------------------

def _key(d: RankData) -> tuple[Any, ...]:
    """What a rank's answers read: its events, its rows since they were last forgotten (their first row's
    time), whether it has rows, its sessions, and its last row's time where an answer compares with it (an
    abort, an end, rows that carry no session, a process in D)."""
    rows = d.rows
    t = d.last("time") if rows and (d.aborts or d.ends or _unnamed_rows(d) or _in_d(d)) else None
    m = d.csv_mtime if _unnamed_rows(d) else None  # restarting() reads it for rows that carry no session
    return d.ev_stamp, d.rows_epoch, rows > 0, len(d.segments), t, m


def _in_d(d: RankData) -> bool:
    """Whether one of the rank's processes was last seen in D: whether it holds the others up depends on the
    rank's last row (mstop.engine.processes.stuck_in_d)."""
    return any(p.get("state") == "D" for p in d.procs.values())


def _one(d: RankData) -> One:
    start = d.last_start
    hb = start.get("heartbeat_interval") if start else None
    hb_ok = isinstance(hb, (int, float)) and not isinstance(hb, bool) and hb > 0
    return One(aborted=aborted(d), lost=lost(d), finished=finished_cleanly(d), restarting=restarting(d),
               exit=processes.exited(d),
               event_life=event_life(d), restart_start=restart_start(d),
               heartbeats=d.last_heartbeat is not None or hb_ok,
               heartbeat_interval=float(hb) if hb_ok else math.nan,  # type: ignore[arg-type]
               process=processes.facts(d), profile=rank_profile(d) if d.profiles else None,
               started=bool(d.starts), start=start,
               first_start=_first_start(d), first_row_time=_first_row_time(d),
               holding=processes.holding(d), dropped=float(d.dropped), rejected=float(d.rejected),
               rates=processes.rates(processes.process(d), d.segments[-1].first_time if d.rows else -math.inf),
               **_mfu_terms(start or {}))


def _first_row_time(d: RankData) -> float:
    """The time of the rank's first row (NaN: none): its session's, kept with the session."""
    return next((s.first_time for s in d.segments if s.first_row == 0), math.nan) if d.rows else math.nan


def _mfu_terms(start: dict[str, Any]) -> dict[str, float]:
    """The start event's FLOPs per token, world size and peak FLOP/s as figures.mfu reads them (NaN: not
    there, or not a positive number of the right kind)."""
    fpt, world, peak = start.get("flops_per_token"), start.get("world_size"), start.get("peak_flops")
    return {"flops_per_token": float(fpt) if isinstance(fpt, (int, float)) else math.nan,
            "world_size": float(world) if isinstance(world, int) and world > 0 else math.nan,
            "peak_flops": float(peak) if isinstance(peak, (int, float)) and peak > 0 else math.nan}


#: the longest start-up believed (a start event to its session's first row); see goodput.MAX_STARTUP
MAX_STARTUP = 6 * 3600.0


def _first_start(d: RankData) -> float:
    """The rank's earliest start event's time (NaN: none): a start after its session's first row, or more
    than MAX_STARTUP before it, was stamped by a clock that moved, and that first row stands for it."""
    out = math.nan
    for name, e in d.starts.items():
        t = float(e["time"])
        k = d.segment_of.get(name)
        if k is not None and d.segments[k].first_row < d.rows:
            row = d.segments[k].first_time
            if not row - MAX_STARTUP <= t <= row:
                t = row
        out = t if out != out else min(out, t)
    return out


def one(store: Snapshot, r: int) -> One:
    """Rank ``r``'s answers (it must be in the store)."""
    d = store.ranks[r]
    key = _key(d)
    got = store.answers.per_rank.get(r)
    if got is None or got[0] != key:
        got = store.answers.per_rank[r] = (key, _one(d))
    return got[1]


def states(store: Snapshot) -> States:
    """Every rank's answers, once per version of the store."""
    return store.memo("rank_states", lambda: _states(store))


#: the arrays of States that hold one figure per rank, from its One
_FLAGS = ("aborted", "finished", "restarting", "started", "heartbeats")
_FLOATS = ("event_life", "heartbeat_interval", "restart_start", "first_start", "first_row_time", "flops_per_token",
           "world_size", "peak_flops", "dropped", "rejected")
#: the arrays of States the ranks view reads, worked out from a rank's One by _shown
_SHOWN_FLOATS = ("comm_share", "idle_share", "pid", "cpu", "rss")
_SHOWN_TEXTS = ("host", "memory_host", "proc_state", "ended")


def _shown(o: One) -> tuple[tuple[float, ...], tuple[str | None, ...]]:
    """What the ranks view shows of a rank, from its answers: (_SHOWN_FLOATS, _SHOWN_TEXTS)."""
    s = o.start or {}
    host = str(s.get("host") or "?")
    memory_host = str(s.get("host")) if s.get("memory_source") == "host" else None
    comm = idle = pid = cpu = rss = math.nan
    state = ended = None
    if o.profile is not None:
        comm, idle = o.profile["comm_not_overlapped"], o.profile["idle"]
    f = o.process
    if f is not None:
        pid, cpu, rss = (math.nan if x is None else x for x in (f["pid"], f["cpu"], f["rss"]))
        state = f["state"]
        ex = f["exit"]
        if ex is not None:
            ended = ex.get("signal") or (f"exit {ex['code']}" if ex.get("how") == "exit" else "ended")
    return (comm, idle, pid, cpu, rss), (host, memory_host, state, ended)


def _written(arrays: dict[str, np.ndarray] | None, n: int, ones: list[Any], new: list[int]) -> dict[str, np.ndarray]:
    """The answers' arrays with positions ``new`` written from their ``ones`` (copies when any is: a States
    may hold the old ones; made when there are none)."""
    if arrays is None:
        arrays = {name: np.zeros(n, bool) for name in (*_FLAGS, "lost", "exited")}
        arrays.update({name: np.full(n, np.nan) for name in (*_FLOATS, *_SHOWN_FLOATS)})
        arrays.update({name: np.full(n, None, object) for name in _SHOWN_TEXTS})
    elif new:
        arrays = {name: v.copy() for name, v in arrays.items()}
    for k in new:  # rows alone (every read round) leave a rank's answers as they were: nothing to write
        o = ones[k]
        for name in _FLAGS:
            arrays[name][k] = getattr(o, name)
        for name in _FLOATS:
            arrays[name][k] = getattr(o, name)
        arrays["lost"][k], arrays["exited"][k] = o.lost is not None, o.exit is not None
        nums, texts = _shown(o)
        for name, x in zip(_SHOWN_FLOATS, nums):
            arrays[name][k] = x
        for name, x in zip(_SHOWN_TEXTS, texts):
            arrays[name][k] = x
    return arrays


def _states(store: Snapshot) -> States:
    prev = store.answers.arrays
    # a snapshot's: the ranks changed since the snapshot the kept arrays were built from (frames skip some)
    since = store.changed_after(prev[0]) if prev is not None else None
    if prev is not None and since is not None and len(store.ranks) == len(prev[1]) and all(r in prev[3] for r in since):
        # no rank new: only the changed ranks are looked at
        _, ranks, old_ones, at, old = prev
        ones, arrays = list(old_ones), old  # copied below before any is written (a States may hold them)
        look: Any = sorted(at[r] for r in since)
    else:
        ranks = sorted(store.ranks)
        at = {r: k for k, r in enumerate(ranks)}
        ones, arrays, look = [None] * len(ranks), None, range(len(ranks))  # type: ignore[list-item]
    n = len(ranks)
    cache, by_rank = store.answers.per_rank, store.ranks
    new = []  # the positions whose answers are not those the arrays hold
    for k in look:  # a key and a lookup a rank (about a microsecond): worked out anew only where it changed
        r = ranks[k]
        d = by_rank[r]
        key = _key(d)
        got = cache.get(r)
        if got is None or got[0] != key:
            got = cache[r] = (key, _one(d))
        if ones[k] is not got[1] or arrays is None:
            ones[k] = got[1]
            new.append(k)
    arrays = _written(arrays, n, ones, new)
    store.answers.arrays = (store.changed[0] if store.changed is not None else -2, ranks, ones, at, arrays)
    rows = np.zeros(n, np.int64)
    last = np.full((n, 2), np.nan)
    lasts = store.folds.lasts()  # every rank with rows: its last row (the store's fold)
    if lasts.ranks:
        at = np.searchsorted(np.asarray(ranks), lasts.ranks)
        last[at, 0], last[at, 1] = lasts.time, lasts.step
        rows[at] = store.folds.rows[store.folds.order()[1]]
    with np.errstate(invalid="ignore"):
        life = np.fmax(arrays["event_life"], last[:, 0])
    return States(ranks=ranks, one=ones, rows=rows, last_time=last[:, 0], last_step=last[:, 1],
                  aborted=arrays["aborted"], lost=arrays["lost"], finished=arrays["finished"],
                  restarting=arrays["restarting"], exited=arrays["exited"], started=arrays["started"],
                  heartbeats=arrays["heartbeats"], heartbeat_interval=arrays["heartbeat_interval"],
                  restart_start=arrays["restart_start"], life=life, first_start=arrays["first_start"],
                  first_row_time=arrays["first_row_time"], flops_per_token=arrays["flops_per_token"],
                  world_size=arrays["world_size"], peak_flops=arrays["peak_flops"], dropped=arrays["dropped"],
                  rejected=arrays["rejected"], **{name: arrays[name] for name in (*_SHOWN_FLOATS, *_SHOWN_TEXTS)})

