"""The figures people watch, each defined once: the screen, ``summary`` and ``compare`` use these.

Every function reads a :class:`~mstop.engine.store.Store` and returns plain numbers
(None when unknown). Definitions (also in the README):

- recent window: each rank's last ``WINDOW`` rows on its current timeline, each session's first row (its
  graph compilation) left out.
- ``tokens_per_s``: per rank Σtokens / Σstep_time over the window; the median over ranks.
- ``mfu``: per rank the step_time-weighted mean of ``mfu`` over the window (or,
  where the column is empty, derived from tokens/s and the ``start`` event's
  FLOPs per token, world size and peak); the median over ranks.
- ``data_wait_frac``: per rank Σdata_wait / Σstep_time over the window; the maximum over ranks.
- ``mem_headroom``: per rank 1 − max(mem_peak) / mem_total over the window; with
  host memory, per host: the sum over that host's ranks; the minimum.
- ``loss``: the last non-empty loss of the lowest rank present; ``loss_ema``:
  TensorBoard-style debiased exponential moving average of that rank's losses,
  NaN/Inf skipped, weight ``EMA_WEIGHT``.
- ``step``: the maximum over ranks of each rank's last step.
- ``status``: see :func:`status`.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .. import fmt
from ..formats.logstate import SOURCE_PLAIN
from . import door, ledgerfold, rankstate
from .clocks import Clocks, clocks
from .folds import ACHIEVED, RING, WEIGHT, WINDOW_FLOATS, Lasts, stands_for
from .rankstate import PROFILE_PARTS, profile_summary
from .store import BLOCK, EXACT_INDEX, RankData, Snapshot

WINDOW = RING  # rows: the window is read from the store's ring of each rank's last rows (engine.folds)
EMA_WEIGHT = 0.9
STALL_MIN_S = ledgerfold.STALL_MIN_S
#: the writer's default seconds between heartbeats (a start event may say otherwise)
HEARTBEAT_S = 30.0
#: rows whose times lie further ahead of this machine's clock than this cannot be trusted for ages
FUTURE_S = 60.0


@dataclass
class Options:
    """Knobs that change figures: a peak override, the EMA weight, the clock."""

    peak_flops: float | None = None  # overrides the start events' peak (e.g. --peak-tflops)
    ema_weight: float = EMA_WEIGHT
    clock: Callable[[], float] = time.time
    #: live following: "stalled" and ages use when rows *arrived* (our own clock), so hosts whose clocks
    #: are minutes apart raise no false alarm; a one-shot summary can only use the rows' own times
    arrival_clock: Callable[[], float] | None = None
    #: a job is dead when no rank showed a sign of life for this many heartbeat intervals (the rules' dead_after)
    dead_after: float = 3.0
    #: seconds between heartbeats when no start event says (the writer's default)
    heartbeat_s: float = HEARTBEAT_S

    def local_now(self) -> float:
        """This machine's clock (for file times and arrival times, never the hosts' clocks)."""
        return (self.arrival_clock or time.time)()


@dataclass
class Window:
    """Every rank's recent window as (ranks x WINDOW) tables, NaN-padded: figures over 1,024
    ranks are a few vectorised reductions instead of thousands of small ones."""

    ranks: list[int]
    cols: dict[str, np.ndarray]
    hosts: np.ndarray  # per rank its newest start event's host ("?": none), as the ranks view names it
    memory_hosts: np.ndarray  # per rank its host when its memory is the host's RAM, else None


_COLS = ("time", *WINDOW_FLOATS)


def window(store: Snapshot) -> Window:
    """The recent windows of all ranks with rows (computed once per version of the store)."""
    return store.memo("window", lambda: _window(store))


def _window(store: Snapshot) -> Window:
    """From the store's ring of each rank's last rows (mstop.engine.folds): its last WINDOW steady rows. A rank
    of one session has them in its ring (less its first, compilation, row while that is there); so has a
    resumed rank whose latest session has more rows than the window and no profiled steps. Only the others'
    (a session just resumed, a profile's steps) are read from their columns."""
    ring = store.folds.ring()
    ranks = ring.ranks
    exacts, floats, achieved = ring.exact, ring.floats, ring.achieved
    time, step = exacts[:, :, EXACT_INDEX["time"]].copy(), exacts[:, :, EXACT_INDEX["step"]].copy()
    cols = {"time": time, "step": step, ACHIEVED: achieved.copy(), WEIGHT: ring.weight.copy()}
    for j, c in enumerate(WINDOW_FLOATS):
        cols[c] = floats[:, :, j].astype(np.float64)
    names = ("time", "step", ACHIEVED, *_COLS[1:])
    blank = np.flatnonzero(ring.blank)  # the ring holds row 0, the compilation row: not in the window
    for c in names:
        cols[c][blank, WINDOW - ring.rows[blank]] = np.nan
    for i in np.flatnonzero(~ring.regular):  # a session just resumed, a profile's steps: from the columns
        d = store.ranks[ranks[i]]
        idx = np.flatnonzero(d.steady())[-WINDOW:]  # a resume cut older rows; each session's first row is out
        k = len(idx)
        ach = d.take(ACHIEVED, idx) if ACHIEVED in d.extras else np.full(k, np.nan)
        for c in (*names, WEIGHT):
            cols[c][i] = np.nan
        cols["time"][i, WINDOW - k:] = d.take("time", idx)
        cols["step"][i, WINDOW - k:] = d.take("step", idx)
        cols[ACHIEVED][i, WINDOW - k:] = ach
        if WEIGHT in d.extras:
            cols[WEIGHT][i, WINDOW - k:] = d.take(WEIGHT, idx)
        for c in _COLS[1:]:
            cols[c][i, WINDOW - k:] = d.take(c, idx)
    return _window_of(store, ranks, cols)


def _window_of(store: Snapshot, ranks: list[int], cols: dict[str, np.ndarray]) -> Window:
    """A Window of ``ranks``' ``cols``, with their hosts from their answers (kept until their events change)."""
    st = rankstate.states(store)
    at = np.asarray(st.positions(ranks), np.int64)
    return Window(ranks, cols, st.host[at], st.memory_host[at])


def per_step(w: Window, column: str) -> np.ndarray:
    """A summed column of the window a step at a time: a digest's merged row (mstop.sources.followers.follower) holds
    the sum over the rows it stands for (its WEIGHT), so its step time is their mean; a row as written is one
    step. Sums over the window (Σtokens / Σstep_time) take the columns as they are."""
    wt = w.cols.get(WEIGHT)
    if wt is None or np.isnan(wt).all():
        return w.cols[column]
    return w.cols[column] / stands_for(wt)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """Per rank Σnum / Σden over rows where both are known; NaN where nothing is."""
    ok = ~np.isnan(num) & ~np.isnan(den)
    n, d = np.where(ok, num, 0.0).sum(axis=1), np.where(ok, den, 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok.any(axis=1) & (d > 0), n / np.where(d > 0, d, 1.0), np.nan)


def row_medians(a: np.ndarray) -> np.ndarray:
    """Each row's median of its known values (NaN: unknown; a row with none gives NaN): numpy's
    ``nanmedian(a, axis=1)`` value for value, without its masked-array path, which cost a frame at 1,024 ranks
    several milliseconds a call (mstop.engine.ledgerfold.row_medians, without the counts)."""
    if a.ndim != 2 or not a.shape[1]:
        return np.full(a.shape[0] if a.ndim else 0, np.nan)
    return ledgerfold.row_medians(a)[0]


def median(values: np.ndarray) -> float | None:
    """The median of the known values (NaN = unknown); None when there is none."""
    v = values[~np.isnan(values)]
    return float(np.median(v)) if len(v) else None


def prev_window_stats(vals: np.ndarray, w: int, js: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, standard deviation (ddof 0) and count of the finite values among the ``w`` values before each
    position in ``js`` (every ``js >= w``), computed window by window, two passes (exact)."""
    if not len(js):
        return np.empty(0), np.empty(0), np.empty(0, np.int64)
    hists = np.lib.stride_tricks.sliding_window_view(vals, w)[js - w]
    finite = np.isfinite(hists)
    count = finite.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(finite, hists, 0.0).sum(axis=1) / count
        std = np.sqrt((np.where(finite, hists - mean[:, None], 0.0) ** 2).sum(axis=1) / count)
        # a window of one value repeated has no deviation: its sum's rounding (ten times 0.1 is not 1.0) must
        # not make one, nor move its mean off that value
        top = np.where(finite, hists, -np.inf).max(axis=1)
        flat = (count > 0) & (top == np.where(finite, hists, np.inf).min(axis=1))
    return np.where(flat, top, mean), np.where(flat, 0.0, std), count


def spike_rows(vals: np.ndarray, w: int, k: float, start: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions ``j >= start`` whose finite value is above the mean of the finite values among the ``w``
    before it by more than ``k`` of their standard deviations (at least ``w // 2`` of them, deviation > 0),
    with that mean and the number of deviations: the spike rule over a whole history.

    Running sums (centred) screen every position in one pass; the positions they cannot rule out are then
    decided by :func:`spikes_at`, the live rule's own decision for its recent rows. A window by
    window computation of a million rows takes seconds; pandas' rolling windows cost its import.

    The sums round: centring absorbs a value far smaller than the centre, and a difference of two long
    prefix sums keeps their rounding, not the window's. So a position is ruled out only when it stays under
    the limit with every such error against it (its deviation raised, the deviation lowered by their bounds);
    a window of one repeated value (found exactly, by counting changes) never fires and is ruled out."""
    n = len(vals)
    js = np.arange(max(start, w), n)
    if not len(js):
        return js, np.empty(0), np.empty(0)
    fin = np.isfinite(vals)
    centre = float(vals[fin].mean()) if fin.any() else 0.0
    v = np.where(fin, vals - centre, 0.0)
    s1, s2, c = (np.concatenate([[0.0], np.cumsum(a)]) for a in (v, v * v, fin.astype(np.float64)))
    # changes[i]: rows i-1, i differ, or either is not finite; a window with none holds one value only
    changes = np.concatenate([[0, 0], np.cumsum((vals[1:] != vals[:-1]) | ~fin[1:] | ~fin[:-1])])
    flat = changes[js] - changes[js - w + 1] == 0
    cnt = c[js] - c[js - w]
    eps = 8 * np.finfo(np.float64).eps
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        mean = (s1[js] - s1[js - w]) / cnt
        sq = (s2[js] - s2[js - w]) / cnt
        var = sq - mean * mean
        mean_err = eps * ((np.abs(s1[js]) + np.abs(s1[js - w])) / cnt + np.sqrt(np.abs(sq)) + abs(centre))
        dev_err = mean_err + eps * (np.abs(v[js]) + abs(centre))
        var_err = eps * ((np.abs(s2[js]) + np.abs(s2[js - w])) / cnt + np.abs(sq)) + 2 * np.abs(mean) * mean_err
        low_sd = np.sqrt(np.maximum(var - var_err, 0.0))
        near = fin[js] & (cnt >= max(1, w // 2)) & ~flat & ~(v[js] - mean + dev_err <= 0.99 * k * low_sd)
    return spikes_at(vals, w, k, js[near])


def spikes_at(vals: np.ndarray, w: int, k: float, js: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Of positions ``js`` (each ``>= w``), those the spike rule fires on, with the mean of the finite values
    among the ``w`` before each and how many standard deviations above it the value is: the rule's one
    decision, for the live alert's recent rows and the history's screened ones."""
    mean, std, count = prev_window_stats(vals, w, js)
    x = vals[js]
    with np.errstate(invalid="ignore", divide="ignore"):
        hit = np.isfinite(x) & (count >= max(1, w // 2)) & (std > 0) & (x > mean + k * std)
        z = (x - mean) / np.where(std > 0, std, 1.0)
    return js[hit], mean[hit], z[hit]


def step_rows(store: Snapshot, first: float, last: float) -> dict[int, np.ndarray]:
    """Per rank (in rank order), its rows with ``first <= step <= last`` on its current timeline; ranks
    without any are left out."""
    out = {}
    for r in sorted(store.ranks):
        d = store.ranks[r]
        if not d.rows:
            continue
        step = d.col("step")
        idx = np.flatnonzero(d.steady() & (step >= first) & (step <= last))  # compilation steps left out
        if len(idx):
            out[r] = idx
    return out


def rows_window(store: Snapshot, rows: dict[int, np.ndarray]) -> Window:
    """The given rows of each rank as a :class:`Window` (right-aligned, NaN-padded)."""
    ranks = list(rows)
    width = max((len(idx) for idx in rows.values()), default=0)
    cols = {c: np.full((len(ranks), width), np.nan) for c in (*_COLS, ACHIEVED, WEIGHT)}
    for i, r in enumerate(ranks):
        d, idx = store.ranks[r], rows[r]
        k = len(idx)
        cols["time"][i, width - k:] = d.take("time", idx)
        for c in _COLS[1:]:
            cols[c][i, width - k:] = d.take(c, idx)
        for c in (ACHIEVED, WEIGHT):
            if c in d.extras:
                cols[c][i, width - k:] = d.take(c, idx)
    return _window_of(store, ranks, cols)


def step_window(store: Snapshot, first: float, last: float) -> Window:
    """Every rank's rows with ``first <= step <= last`` on its current timeline, as a :class:`Window`:
    figures over an equal-step window (``mstop compare``, the baseline's differences) use the same
    functions as the live figures over the recent window."""
    return rows_window(store, step_rows(store, first, last))


def rank_tokens_per_s(store: Snapshot, w: Window | None = None) -> np.ndarray:
    """Per rank (in :attr:`Window.ranks` order): Σtokens / Σstep_time over the window (default: the
    recent window)."""
    w = w or window(store)
    return _ratio(w.cols["tokens"], w.cols["step_time"])


def tokens_per_s(store: Snapshot) -> float | None:
    return median(rank_tokens_per_s(store))


def rank_samples_per_s(store: Snapshot, w: Window | None = None) -> np.ndarray:
    """Per rank (in :attr:`Window.ranks` order): Σsamples / Σstep_time over the window (default: the recent
    window): the throughput of a run without tokens (a MindFormers log, an image model)."""
    w = w or window(store)
    return _ratio(w.cols["samples"], w.cols["step_time"])


def samples_per_s(store: Snapshot) -> float | None:
    """Per rank Σsamples / Σstep_time over the recent window; the median over ranks (like tokens/s)."""
    return median(rank_samples_per_s(store))


def compile_seconds(store: Snapshot) -> float | None:
    """The step time of the newest session's first row (graph compilation) on the lowest rank, when the
    session has more rows: shown beside the figures it is left out of."""
    d = job_rank(store)
    if d is None or (d.last_start or {}).get("source") == SOURCE_PLAIN:  # TimeMonitor's step time is the
        return None  # epoch's mean: its first row's is no compilation's
    rows = d.compile_rows()
    if not rows or rows[-1] != d.segments[-1].first_row:
        return None
    v = d.segments[-1].first_step_time
    return v if math.isfinite(v) else None


def _peak(start: dict[str, Any], opts: Options) -> float:
    """The peak FLOP/s MFU is measured against: ``--peak-tflops``, else the start event's; NaN when unknown."""
    peak = opts.peak_flops or start.get("peak_flops")
    return float(peak) if isinstance(peak, (int, float)) and peak > 0 else math.nan


def _mfu_scale(start: dict[str, Any], opts: Options) -> float:
    fpt, world = start.get("flops_per_token"), start.get("world_size")
    if not (isinstance(fpt, (int, float)) and isinstance(world, int) and world > 0):
        return math.nan
    return float(fpt) / (world * _peak(start, opts))


def mfu_rows(d: RankData, opts: Options) -> np.ndarray:
    """Each row's MFU as :func:`rank_mfu` defines it: the ``mfu`` column, else (or with ``--peak-tflops``)
    derived from the row's tokens / step_time and the start event's FLOPs per token, world size and peak;
    for a MindFormers log, from its FLOP/s per device and the peak."""
    written = d.col("mfu").astype(np.float64)
    with np.errstate(all="ignore"):
        derived = d.col("tokens").astype(np.float64) / d.col("step_time") * _mfu_scale(d.last_start or {}, opts)
        if ACHIEVED in d.extras:
            achieved = d.col(ACHIEVED).astype(np.float64) * 1e12 / _peak(d.last_start or {}, opts)
            derived = np.where(np.isnan(derived), achieved, derived)
    if opts.peak_flops is not None:
        return _at_most_one(derived)
    return _at_most_one(np.where(np.isnan(written), derived, written))


def _at_most_one(v: np.ndarray) -> np.ndarray:
    """MFU above 1 is more than the device can do (a wrong peak or FLOPs per token): never a figure, so
    never drawn nor counted (:func:`mfu_missing` says why the run has none)."""
    with np.errstate(invalid="ignore"):
        return np.where(door.mfu_too_high(v), np.nan, v)


def rank_mfu(store: Snapshot, opts: Options, w: Window | None = None) -> np.ndarray:
    """Per rank: the step_time-weighted mean of ``mfu`` over the window, else derived from tokens/s (or, for
    a MindFormers log, from its FLOP/s per device: step_time-weighted too); NaN where that is above 1."""
    return _at_most_one(_rank_mfu_as_given(store, opts, w))


def _rank_mfu_as_given(store: Snapshot, opts: Options, w: Window | None = None) -> np.ndarray:
    w = w or window(store)
    st = w.cols["step_time"]
    answers = rankstate.states(store)  # each rank's start event's terms, in arrays (kept until events change)
    at = answers.positions(w.ranks)
    given = opts.peak_flops  # --peak-tflops overrides every start event's (_peak)
    peak = answers.peak_flops[at] if not given else np.full(len(at), float(given) if given > 0 else math.nan)
    with np.errstate(all="ignore"):
        scale = answers.flops_per_token[at] / (answers.world_size[at] * peak)  # _mfu_scale, for every rank
    derived = rank_tokens_per_s(store, w) * scale
    achieved = w.cols.get(ACHIEVED)
    if achieved is not None and not np.isnan(achieved).all():
        flops = _ratio(achieved * st, np.where(np.isnan(achieved), np.nan, st)) * 1e12
        derived = np.where(np.isnan(derived), flops / peak, derived)
    if opts.peak_flops is not None:
        return derived
    weighted = _ratio(w.cols["mfu"] * st, np.where(np.isnan(w.cols["mfu"]), np.nan, st))
    return np.where(np.isnan(weighted), derived, weighted)


def mfu(store: Snapshot, opts: Options) -> float | None:
    return median(rank_mfu(store, opts))


def mfu_missing(store: Snapshot, opts: Options) -> str | None:
    """Why the run has no MFU, naming what is missing (MFU = tokens/s x FLOPs per token / (ranks x peak));
    None when it has one."""
    if mfu(store, opts) is not None:
        return None
    over = median(_rank_mfu_as_given(store, opts))
    if over is not None and over > 1:
        return f"{fmt.pct(over)} is over 100 %: the peak or the FLOPs per token is wrong"
    meta = run_meta(store)
    missing = []
    if tokens_per_s(store) is None:
        missing.append("no tokens (tokens_per_step)")
    if not isinstance(meta.get("flops_per_token"), (int, float)) or not meta["flops_per_token"]:
        missing.append("no FLOPs per token (n_params or flops_per_token)")
    if not (opts.peak_flops or (isinstance(meta.get("peak_flops"), (int, float)) and meta["peak_flops"])):
        missing.append("no peak (--peak-tflops)")
    return ", ".join(missing) if missing else "no rows with all of its figures yet"


def rank_data_wait_frac(store: Snapshot, w: Window | None = None) -> np.ndarray:
    """Per rank: Σdata_wait / Σstep_time over the window."""
    w = w or window(store)
    return _ratio(w.cols["data_wait"], w.cols["step_time"])


def data_wait_frac(store: Snapshot) -> float | None:
    v = rank_data_wait_frac(store)
    v = v[~np.isnan(v)]
    return float(v.max()) if len(v) else None


def headrooms(store: Snapshot) -> dict[MemoryScope, float]:
    """Headroom per rank (``"rank 3"``) or, with host memory, per host (``"host node1"``); cached until the
    store changes (a frame asks three times: 2 ms each at 1,024 ranks). Not to be written to."""
    return store.memo("headrooms", lambda: headrooms_of(rank_memory(window(store))))


def rank_headrooms(store: Snapshot) -> np.ndarray:
    """Each window rank's headroom (figures.window's ranks, in order): its own, or its host's when its memory
    is the host's RAM (NaN: no memory figures)."""
    def compute() -> np.ndarray:
        w, heads = window(store), headrooms(store)
        if not heads:
            return np.full(len(w.ranks), np.nan)
        peaks, totals = _peaks_totals(w)
        with np.errstate(all="ignore"):
            own = np.where(~np.isnan(peaks) & (totals > 0) & np.equal(w.memory_hosts, None).astype(bool),
                           1.0 - peaks / totals, np.nan)  # as headrooms_of has it, for the ranks it lists
        out = own.copy()
        lack = np.isnan(own)  # a host's RAM, or no figure of its own: its host's
        for host in set(w.hosts[lack].tolist()):  # a few hosts, not a rank at a time
            h = heads.get(_scope("host", host))
            if h is not None:
                out[lack & (w.hosts == host)] = h
        return out
    return store.memo("rank_headrooms", compute)


def _peaks_totals(w: Window) -> tuple[np.ndarray, np.ndarray]:
    """Per window rank: its highest peak in the window and its last total (NaN: none)."""
    # a cell that says inf is no memory reading (a headroom of -inf would be nonsense on every screen)
    peak = np.where(np.isfinite(w.cols["mem_peak"]), w.cols["mem_peak"], np.nan)
    has_peak = ~np.isnan(peak).all(axis=1)
    peaks = np.where(has_peak, np.nanmax(np.where(np.isnan(peak), -np.inf, peak), axis=1), np.nan)
    total = np.where(np.isfinite(w.cols["mem_total"]), w.cols["mem_total"], np.nan)
    last = np.where(np.isnan(total), -1, np.arange(total.shape[1])).max(axis=1) if total.size else \
        np.full(len(w.ranks), -1)
    totals = np.where(last >= 0, total[np.arange(len(w.ranks)), np.maximum(last, 0)], np.nan)
    return peaks, totals


@dataclass
class RankMemory:
    """The ranks with both a peak and a total in a window, as arrays: each one's rank, its host when its memory
    is the host's RAM (else None), its peak and its total."""

    ranks: np.ndarray
    hosts: np.ndarray
    peaks: np.ndarray
    totals: np.ndarray

    @staticmethod
    def joined(parts: list[RankMemory]) -> RankMemory:
        """Several windows' ranks (compare's runs) as one."""
        if not parts:
            return RankMemory(np.empty(0, np.int64), np.empty(0, object), np.empty(0), np.empty(0))
        return RankMemory(*(np.concatenate([getattr(m, f) for m in parts]) for f in ("ranks", "hosts", "peaks",
                                                                                     "totals")))


def rank_memory(w: Window) -> RankMemory:
    """The ranks of the window with both a peak and a total."""
    peaks, totals = _peaks_totals(w)
    with np.errstate(invalid="ignore"):
        ok = np.flatnonzero(~np.isnan(peaks) & (totals > 0))
    return RankMemory(np.asarray(w.ranks, np.int64)[ok], w.memory_hosts[ok], peaks[ok], totals[ok])


class MemoryScope(str):
    """Whose memory a headroom is: one rank's device memory (``kind`` "rank", ``rank``), or a host's RAM that
    its ranks share (``kind`` "host", ``host``). It reads as its label, ``"rank 3"`` or ``"host node1"``,
    wherever a string is expected; code asks its fields instead of splitting the label again."""

    kind: str
    rank: int | None
    host: str | None

    def __new__(cls, kind: str, rank: int | None = None, host: str | None = None) -> MemoryScope:
        obj = super().__new__(cls, f"rank {rank}" if kind == "rank" else f"host {host}")
        obj.kind, obj.rank, obj.host = kind, rank, host
        return obj


#: the scopes made so far (a scope is a value: 10,000 ranks made 10,000 new ones every frame)
_SCOPES: dict[tuple[str, Any], MemoryScope] = {}


def _scope(kind: str, who: Any) -> MemoryScope:
    got = _SCOPES.get((kind, who))
    if got is None:
        if len(_SCOPES) > 1_000_000:  # ranks and hosts of many runs read in one process: start again
            _SCOPES.clear()
        got = _SCOPES[(kind, who)] = MemoryScope(kind, rank=who) if kind == "rank" else MemoryScope(kind, host=who)
    return got


def headrooms_of(mem: RankMemory) -> dict[MemoryScope, float]:
    """Headroom, 1 − peak / total, per rank, or per host for host memory (that host's ranks' peaks added up);
    the ranks in the window's order, then the hosts in the order their first rank comes."""
    own = np.equal(mem.hosts, None).astype(bool)
    out = dict(zip([_scope("rank", r) for r in mem.ranks[own].tolist()],
                   (1.0 - mem.peaks[own] / mem.totals[own]).tolist()))
    hosts: dict[str, list[tuple[float, float]]] = {}
    for host, p, t in zip(mem.hosts[~own].tolist(), mem.peaks[~own].tolist(), mem.totals[~own].tolist()):
        hosts.setdefault(host, []).append((p, t))
    for host, vals in hosts.items():
        out[_scope("host", host)] = 1.0 - sum(p for p, _ in vals) / max(t for _, t in vals)
    return out


def mem_headroom(store: Snapshot) -> float | None:
    h = headrooms(store)
    return min(h.values()) if h else None


def lowest_rank(store: Snapshot) -> int | None:
    """The lowest rank that has rows: the rank whose loss and charts stand for the job (None without rows)."""
    got = lasts(store).ranks
    return got[0] if got else None


def job_rank(store: Snapshot) -> RankData | None:
    """The rows of :func:`lowest_rank` (None without rows)."""
    r = lowest_rank(store)
    return None if r is None else store.ranks[r]




#: Rows examined at a time when searching a long history backwards.
_CHUNK = 4096


def _tail_rows(d: RankData, keep: Callable[[np.ndarray, np.ndarray], np.ndarray], need: int,
               column: str = "loss") -> tuple[np.ndarray, bool]:
    """The last ``need`` effective row indices where ``keep(rows, values of column)`` holds, searching
    backwards in chunks (a figure must not cost O(rows) per frame on a 10-million-row run); and whether
    the search reached the first row."""
    eff = d.effective()
    found: list[np.ndarray] = []
    total = 0
    end = d.rows
    base = d.base  # the held rows first: the spilled ones are read back only when these hold too few
    while end > 0 and total < need:
        start = max(base if end > base else 0, end - _CHUNK)
        rows = np.arange(start, end)
        sel = rows[eff[start:end] & keep(rows, d.span(column, start, end))]
        found.append(sel)
        total += len(sel)
        end = start
    idx = np.concatenate(found[::-1]) if found else np.empty(0, np.int64)
    return idx[-need:], end == 0


def loss(store: Snapshot) -> float | None:
    """The last non-empty loss of the lowest rank (NaN when that cell said NaN)."""
    d = job_rank(store)
    return last_value(d, "loss") if d is not None else None


def shown_loss(store: Snapshot, opts: Options) -> float | None:
    """The loss a list or table shows in one figure ("loss (smoothed)"): the smoothed loss, unless the last
    loss is NaN/Inf, then that: a run whose loss went NaN must not read as a healthy smoothed figure (the
    EMA skips NaN, so it keeps the last finite losses' value)."""
    last = loss(store)
    if last is not None and not math.isfinite(last):
        return last
    return loss_ema(store, opts)


def loss_ema(store: Snapshot, opts: Options) -> float | None:
    """Debiased EMA of the lowest rank's finite losses (only the terms that still weigh are read)."""
    d = job_rank(store)
    if d is None:
        return None
    need = _ema_terms(opts.ema_weight)
    idx, everything = _tail_rows(d, lambda rows, vals: np.isfinite(vals), need)
    vals = d.take("loss", idx).astype(np.float64)
    return ema(vals, opts.ema_weight, complete=everything)


def _ema_terms(weight: float) -> int:
    """How many recent terms of an EMA weigh more than 1e-12."""
    return 1 if weight <= 0 else max(1, int(math.ceil(np.log(1e-12) / np.log(weight))))


def ema(values: np.ndarray, weight: float, *, complete: bool = True) -> float | None:
    """The last value of a debiased EMA (TensorBoard's smoothing) of finite values.

    ``complete``: ``values`` is the whole series (so the debiasing term is
    exact); otherwise it is a tail long enough that older terms do not count.
    """
    if not len(values):
        return None
    if weight <= 0:
        return float(values[-1])
    k = min(len(values), _ema_terms(weight))
    tail = values[-k:]
    w = weight ** np.arange(k - 1, -1, -1, dtype=np.float64)
    num = (1 - weight) * float((w * tail).sum())
    return num / (1 - weight ** len(values)) if complete else num


def lasts(store: Snapshot) -> Lasts:
    """The ranks' last rows: the store's fold (mstop.engine.folds), read again only after rows came."""
    return store.folds.lasts()


def tokens_seen(store: Snapshot, rank: int) -> float | None:
    """Σtokens over rank ``rank``'s timeline (the store's fold: added up as rows arrive, again at a resume)."""
    return store.folds.tokens_of(rank)


def step(store: Snapshot) -> int | None:
    """The highest step any rank reached."""
    got = lasts(store)
    return int(got.step.max()) if len(got.ranks) else None


def last_row_time(store: Snapshot) -> float | None:
    """The newest row's ``time`` over all ranks."""
    t = window(store).cols["time"][:, -1]  # windows are right-aligned: the last column is each rank's last row
    t = t[~np.isnan(t)]
    return float(t.max()) if len(t) else None


#: the least silence the header calls out while a job runs (see :func:`quiet_for`)
QUIET_S = 5.0


def usual_interval(store: Snapshot) -> float | None:
    """The job's usual time between two rows: the median over ranks of each rank's median interval over the
    recent window (None before two rows)."""
    def compute() -> float | None:
        t = window(store).cols["time"]
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return median(row_medians(np.diff(t, axis=1))) if t.shape[1] > 1 else None
    return store.memo("usual_interval", compute)


def quiet_for(store: Snapshot, opts: Options) -> float | None:
    """Seconds since the last row when that is well past the job's pace (over QUIET_S and 20 usual
    intervals), while it is not yet stalled: the header says so at once (a killed job must not show a live
    ETA and pace for a minute); None otherwise."""
    if not store.rows:
        return None
    since = seconds_since_last_row(store, opts)
    usual = usual_interval(store) or 0.0
    return since if since > max(QUIET_S, 20.0 * usual) else None


def pace_basis(d: RankData) -> tuple[str, np.ndarray]:
    """What a job's pace is counted in, and per row how much of it a step did: tokens when the rows give
    them, else samples, else steps (one a row; a digest's merged row, those it stands for)."""
    for unit, col in (("tokens/s", "tokens"), ("samples/s", "samples")):
        v = d.col(col).astype(np.float64)
        if np.isfinite(v).any():
            return unit, v
    return "steps/s", row_weights(d, np.arange(d.rows))


def row_weights(d: RankData, idx: np.ndarray) -> np.ndarray:
    """The rows written each of rank ``d``'s rows ``idx`` stands for: 1, or a digest's merged row's count."""
    if WEIGHT not in d.extras:
        return np.ones(len(idx))
    return stands_for(d.take(WEIGHT, idx))


def recent_pace(store: Snapshot, unit: str) -> float | None:
    """The job's pace over the recent window in ``unit`` (:func:`pace_basis`)."""
    if unit == "tokens/s":
        return tokens_per_s(store)
    if unit == "samples/s":
        return samples_per_s(store)
    st = step_time(store)
    return 1.0 / st if st else None


def stall_after(store: Snapshot) -> float:
    """Seconds without a new row after which a running job counts as stalled:
    max(60 s, 10 x the median step time, 3 x the median interval between rows)."""
    return store.memo("stall_after", lambda: _stall_after(window(store)))


def _stall_after(w: Window) -> float:
    st = per_step(w, "step_time")
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN ranks
        med_step = median(row_medians(st)) or 0.0
        med_int = median(row_medians(np.diff(w.cols["time"], axis=1))) or 0.0
    return max(STALL_MIN_S, 10 * med_step, 3 * med_int)


STATUSES = ("waiting", "starting", "running", "stalled", "dead", "failed", "finished")


def status(store: Snapshot, opts: Options) -> str:
    """``waiting`` (no rank files), ``starting`` (started, no rows yet), ``running``,
    ``stalled`` (no new row for longer than :func:`stall_after`, but alive or unknown), ``dead`` (no rank
    showed a sign of life for :func:`dead_after` although heartbeats were seen: killed, not hung; or msrun's
    scheduler timed a worker out: a ``lost`` event),
    ``failed`` (an ``abort`` event ends a rank's last session), ``finished`` (every rank's last session
    ended after its last row). Computed once per store version and tenth of a second of the clocks (a
    frame or a summary asks several times)."""
    key = (opts.dead_after, opts.heartbeat_s, round(opts.clock(), 1),
           round(opts.arrival_clock(), 1) if opts.arrival_clock is not None else None, store.arrival,
           store.life_arrival, store.mtime)
    seen = store.memo("status", dict)  # this version's statuses, by clock and settings
    if key not in seen:
        seen.clear()  # only the newest moment is asked again
        seen[key] = _status(store, opts)
    return seen[key]


def _status(store: Snapshot, opts: Options) -> str:
    if not store.ranks:
        return "waiting"
    st = rankstate.states(store)  # every rank's answers, in arrays (worked out again only where events changed)
    with_rows = st.rows > 0
    if st.aborted.any():
        return "failed"
    if st.lost.any():
        return "dead"  # the launcher lost a worker (timed out): it exited abnormally or stopped
    judged = with_rows | st.started
    if with_rows.any() and st.finished[judged].all():
        return "finished"
    ended = _ended_processes(st)
    if ended is not None:
        return ended
    starting = not with_rows.any() or _relaunching(st, with_rows)
    if heartbeats_seen(store) and seconds_since_life(store, opts) > dead_after(store, opts, starting=starting):
        return "dead"  # killed (kill -9, a lost node), not hung: no heartbeat, no row, no event for that long
    if not with_rows.any():
        return "starting" if st.started.any() else "waiting"
    if starting:
        return "starting"
    if seconds_since_last_row(store, opts) > stall_after(store):
        return "stalled"
    return "running"


def _relaunching(st: rankstate.States, with_rows: np.ndarray) -> bool:
    """Whether the job is coming back: a rank began a new session (no row in it yet) and no rank wrote a row
    since the earliest such start (a relaunch brings its ranks back one by one: the first back made it read
    ``running`` among ranks still gone, then ``starting``, then running again; issue 58). A rank restarted
    alone while the others go on writing rows is no relaunch."""
    back = st.restarting & with_rows
    if not back.any():
        return False
    if back[with_rows].all():
        return True
    starts = st.restart_start[back]
    starts = starts[np.isfinite(starts)]
    if not len(starts):
        return True
    with np.errstate(invalid="ignore"):
        return not bool((st.last_time[with_rows & ~back] > float(starts.min())).any())


def _ended_processes(st: rankstate.States) -> str | None:
    """``dead`` or ``failed`` as soon as every rank's process has ended (their exit witnesses say so within
    a tenth of a second: no heartbeat deadline to wait for) and not every one of them cleanly: ``failed``
    when each that did not end cleanly exited with an error code, ``dead`` when one was killed or its end
    is unknown. None while a rank's process runs (or nobody watched it end)."""
    judged = ((st.rows > 0) | st.started) & ~st.finished
    if not judged.any() or not st.exited[judged].all():
        return None
    hows = [st.one[k].exit.get("how") for k in np.flatnonzero(judged)]  # type: ignore[union-attr]
    return "failed" if all(h == "exit" for h in hows) else "dead"


def silence_verdict(store: Snapshot, opts: Options) -> float | None:
    """A job called ``dead`` by its silence alone (no heartbeat, row or event for :func:`dead_after`; not a
    launcher's ``lost`` nor the exit witnesses' word): the seconds of silence the verdict waited. None for
    any other status or reason. The goodput ledger ends such a job at its last sign of life plus these, the
    moment it was known dead: live and reopened alike, and the wall never shrinks at the verdict."""
    if status(store, opts) != "dead":
        return None
    st = rankstate.states(store)
    if st.lost.any() or _ended_processes(st) is not None:
        return None
    with_rows = st.rows > 0
    starting = not with_rows.any() or _relaunching(st, with_rows)
    return dead_after(store, opts, starting=starting)


def heartbeats_seen(store: Snapshot) -> bool:
    """Whether a dead job can be told from a hung one: a rank wrote heartbeats, or its writer said in its start
    event that it would (``heartbeat_interval``): none within the limit is then a death, not a silence."""
    return bool(rankstate.states(store).heartbeats.any())


def heartbeat_interval(store: Snapshot, opts: Options) -> float:
    """Seconds between heartbeats: the longest a start event gives, else ``opts.heartbeat_s``."""
    given = rankstate.states(store).heartbeat_interval
    return float(np.nanmax(given)) if (given == given).any() else opts.heartbeat_s


#: the least silence that is a death while a session starts (no row yet): graph compilation holds the GIL in
#: stretches, and the writer's heartbeat thread waits for it (3.5 s at a time measured compiling a 300-layer
#: network on CPU for 25 s)
STARTUP_DEAD_S = 30.0


def dead_after(store: Snapshot, opts: Options, *, starting: bool = False) -> float:
    """Seconds without any sign of life after which a rank (or the whole job) is dead: ``dead_after``
    heartbeat intervals; at least STARTUP_DEAD_S while ``starting`` (a session with no row yet)."""
    limit = opts.dead_after * heartbeat_interval(store, opts)
    return max(limit, STARTUP_DEAD_S) if starting else limit


def lives(store: Snapshot) -> dict[int, float]:
    """Every rank's last sign of life (mstop.engine.rankstate.last_life), ranks with none left out: from the
    ranks' kept answers, not a walk of their events."""
    st = rankstate.states(store)
    have = np.flatnonzero(st.life == st.life)
    return dict(zip((st.ranks[k] for k in have), st.life[have].tolist()))


def rank_clocks(store: Snapshot, opts: Options) -> Clocks:
    """The ranks' clocks against each other and the job's against the viewer's (mstop.engine.clocks)."""
    return clocks(store, opts.clock(), stall_after(store))


def seconds_since_life(store: Snapshot, opts: Options) -> float:
    """Age of the newest sign of life of any rank (arrival on our clock while following live), each rank's
    times read on the viewer's clock (mstop.engine.clocks)."""
    if opts.arrival_clock is not None and store.life_arrival is not None:
        return opts.arrival_clock() - store.life_arrival
    c = rank_clocks(store, opts)
    seen = [c.local(r, t) for r, t in lives(store).items()]
    if not seen:
        return 0.0
    return _age(store, opts, max(seen))


def seconds_since_last_row(store: Snapshot, opts: Options) -> float:
    """Age of the newest row: by its arrival on our clock when following live, else by its time column read
    on the viewer's clock (mstop.engine.clocks: a rank's clock off its peers', the job's off the files'
    modification times), or by the files' modification times when the rows' times lie in the future."""
    if opts.arrival_clock is not None and store.arrival is not None:
        return opts.arrival_clock() - store.arrival
    c = rank_clocks(store, opts)
    if not c.own:
        last = last_row_time(store)
        return 0.0 if last is None else _age(store, opts, last)
    last = store.folds.lasts()  # every rank's last row: a clock off shifts the few ranks it is known for
    if not last.ranks:
        return 0.0
    times = last.time.copy()
    ranks = np.asarray(last.ranks)
    for r in c.own:  # its clock's offset: the few ranks it is known for (ranks are in order)
        k = int(np.searchsorted(ranks, r))
        if k < len(ranks) and ranks[k] == r:
            times[k] = c.local(r, float(times[k]))
    return _age(store, opts, max(times.tolist()))


def _age(store: Snapshot, opts: Options, t: float) -> float:
    """Seconds since ``t`` on the clock; for a time from the future (a host clock set wrong), the files'
    modification time on this machine's clock tells instead."""
    age = opts.clock() - t
    if age < -FUTURE_S and store.mtime is not None:
        return opts.local_now() - store.mtime
    return age


def future_skew(store: Snapshot, opts: Options) -> float | None:
    """How far the newest row's time lies ahead of the clock, when more than FUTURE_S (else None)."""
    last = last_row_time(store)
    if last is None:
        return None
    ahead = last - opts.clock()
    return ahead if ahead > FUTURE_S else None


def writer_errors(store: Snapshot) -> list[str]:
    """What the writers said they failed at (first of each message, oldest first)."""
    seen: dict[str, float] = {}
    for r in store.ranks_with("writer_errors"):
        for e in store.ranks[r].writer_errors:
            msg = str(e.get("message"))
            seen.setdefault(f"rank {r}: {msg}" if len(store.ranks) > 1 else msg, float(e["time"]))
    return sorted(seen, key=seen.get)


def _refusal(e: dict[str, Any]) -> bool:
    """A writer_error that is a row the writer refused (bad input), not a failure of the writer."""
    return e.get("reason") == "rejected" or str(e.get("message", "")).startswith("row for step ")


def writer_failures(store: Snapshot) -> list[str]:
    """What the writers failed at, rows they refused left out (those are :func:`refused_rows`)."""
    seen: dict[str, float] = {}
    for r in store.ranks_with("writer_errors"):
        for e in store.ranks[r].writer_errors:
            if not _refusal(e):
                msg = str(e.get("message"))
                seen.setdefault(f"rank {r}: {msg}" if len(store.ranks) > 1 else msg, float(e["time"]))
    return sorted(seen, key=seen.get)


def refused_rows(store: Snapshot) -> tuple[int, str | None]:
    """Rows the writers refused for bad input (their dropped events' count), and what the first refusal
    said (``row for step 'abc' not written: ...``)."""
    n = int(rankstate.states(store).rejected.sum())
    first = [e for r in store.ranks_with("writer_errors") for e in store.ranks[r].writer_errors if _refusal(e)]
    first.sort(key=lambda e: float(e["time"]))
    if first and not n:
        n = len(first)  # the dropped event that counts them is not written yet (at most a second later)
    return n, (str(first[0].get("message")) if first else None)


def refused_cells(store: Snapshot) -> tuple[int, str | None]:
    """Cells the store refused at the door (mstop.engine.door: a data wait longer than its step, MFU over
    1, a negative duration or count), all reasons, and the most common reason with its first example."""
    got = store.refused_cells
    if not got:
        return 0, None
    reason, (n, first) = max(got.items(), key=lambda kv: kv[1][0])
    more = f"; {len(got) - 1} more reason{'s' if len(got) > 2 else ''}" if len(got) > 1 else ""
    return sum(n for n, _ in got.values()), f"{reason}: {n:,}, first {first}{more}"


def dropped_rows(store: Snapshot) -> int:
    """Rows the writers reported as lost (I/O errors) or refused (bad input), all ranks."""
    return int(rankstate.states(store).dropped.sum())


def clock_spread(store: Snapshot) -> float | None:
    """How far apart the ranks' clocks look: the spread of their last rows' times among ranks at the
    same last step (None with fewer than two such ranks)."""
    w = window(store)
    if len(w.ranks) < 2:
        return None
    last_t = w.cols["time"][:, -1]
    steps = lasts(store).step  # the window's ranks, in the same order (the store's fold)
    top = steps == steps.max()
    t = last_t[top & ~np.isnan(last_t)]
    return float(t.max() - t.min()) if len(t) >= 2 else None


def checkpoint_times(store: Snapshot) -> list[float]:
    """When the job saved checkpoints, one time per save (the earliest rank's): a checkpoint of a step is one
    save whichever ranks write it (4 ranks saving step 500 is one checkpoint, not four a second apart);
    events without a step count one each (the store's fold of checkpoint events: Snapshot.checkpoints_seen)."""
    by_step, other, _ = store.checkpoints_seen()
    return sorted(list(by_step.values()) + other)


def last_checkpoint(store: Snapshot) -> dict[str, Any] | None:
    """The checkpoint of the highest step (then the latest), any rank."""
    best = store.checkpoints_seen()[2]
    return dict(best) if best is not None else None


def segments(store: Snapshot) -> int:
    """The most sessions a rank ran (0: no rows yet)."""
    return max((len(store.ranks[r].segments) for r in store.ranks_with("resumed")),
               default=1 if lowest_rank(store) is not None else 0)  # a rank with rows has a session


def repeated_steps(store: Snapshot) -> int:
    """The most rows of older sessions a later one ran again, over the ranks (only a resumed rank has any)."""
    return repeated(store)[0]


#: the most resumed ranks a frame counts repeated steps over (each a pass over its rows); past it the frame
#: gives the job rank's count and says so
REPEATED_RANKS = 1024


def repeated(store: Snapshot, limit: int | None = None) -> tuple[int, float, int | None, bool]:
    """The count the header and ``summary`` give of steps a resume ran again: the most any rank repeated,
    the seconds they cost, that rank (the lowest of those with the most), and whether the ranks differ (they
    reached different steps before the restart: the count then says whose it is). With more than ``limit``
    resumed ranks (a frame's bound), the job rank's count, said as its own (the last item True)."""
    if limit is not None and len(store.ranks_with("resumed")) > limit:
        d = job_rank(store)
        n = d.repeated_steps() if d is not None else 0
        return (n, repeated_seconds(d), d.rank, True) if d is not None and n else (0, 0.0, None, False)

    def compute() -> tuple[int, float, int | None, bool]:
        counts = {r: store.ranks[r].repeated_steps() for r in store.ranks_with("resumed")}
        if not counts or not max(counts.values()):
            return 0, 0.0, None, False
        top = max(counts.values())
        rank = min(r for r, n in counts.items() if n == top)
        return top, repeated_seconds(store.ranks[rank]), rank, len(set(counts.values())) > 1
    return store.memo("repeated", compute)  # once a version of the store: a frame asks, summary asks again


def repeated_seconds(d: RankData) -> float:
    """The wall time a rank's repeated steps cost (their step times added up)."""
    return float(np.nansum(d.col("step_time")[d.repeated_rows()].astype(np.float64)))


def last_value(d: RankData, column: str) -> float | None:
    """The column's last value on the rank's timeline, read backwards a chunk at a time: empty cells skipped,
    a cell that said NaN or Inf is a value (the header's grad norm is NaN when the last one was, not the last
    finite one's)."""
    literal = [i for i, c, _ in d.nonfinite if c == column]

    def present(rows: np.ndarray, vals: np.ndarray) -> np.ndarray:
        ok = ~np.isnan(vals)
        if literal:
            ok |= np.isin(rows, literal)
        return ok

    idx, _ = _tail_rows(d, present, 1, column)
    return d.at(column, int(idx[-1])) if len(idx) else None


def minimum(d: RankData, column: str) -> float | None:
    """The column's smallest finite value on the rank's timeline (block summaries on long runs)."""
    if len(d.segments) <= 1 and d.rows >= 8 * BLOCK:
        summ = d.summary(column)
        tail = d.span(column, summ.blocks * BLOCK, d.rows).astype(np.float64)
        cands = np.concatenate([summ.mins[~np.isnan(summ.mins)], tail[np.isfinite(tail)]])
        return float(cands.min()) if len(cands) else None
    a = d.col(column)[d.effective()]
    a = a[np.isfinite(a)]
    return float(a.min()) if len(a) else None


def run_meta(store: Snapshot) -> dict[str, Any]:
    """The run's own account of itself: the lowest rank's latest ``start`` event (run name, device, world
    size, total steps, peak FLOP/s, memory source); empty before any."""
    return rankstate.states(store).first("start") or {}


def source(store: Snapshot) -> dict[str, Any] | None:
    """Where a run's figures come from when it is not mstop's writer (a MindFormers log): its kind and the
    figures it cannot give; None for a writer's run."""
    meta = run_meta(store)
    kind = meta.get("source")
    if not isinstance(kind, str):
        return None
    cannot = meta.get("cannot_give")
    return {"kind": kind, "cannot_give": [str(c) for c in cannot] if isinstance(cannot, list) else []}


def latest_profile(store: Snapshot) -> dict[str, Any] | None:
    """The newest profile of any rank (mstop_writer.profiling): where its steps' time went, as shares."""
    got = [o.profile for o in rankstate.states(store).one if o.profile is not None]
    return max(got, key=lambda p: p["time"]) if got else None


def profile_shares(store: Snapshot, first: float, last: float) -> dict[str, Any] | None:
    """For an equal-step window: per rank the profile inside it or nearest to it, then each share's mean over
    ranks, and which steps the profiles covered (None without profiles)."""
    picked = []
    for d in (store.ranks[r] for r in store.ranks_with("profiles")):
        cands = [p for p in (profile_summary(d, e) for e in d.profiles) if p is not None
                 and isinstance(p["first_step"], (int, float)) and isinstance(p["last_step"], (int, float))]
        if cands:
            def distance(p: dict[str, Any]) -> float:
                return max(0.0, first - p["last_step"], p["first_step"] - last)
            picked.append(min(cands, key=lambda p: (distance(p), -p["time"])))
    if not picked:
        return None
    out: dict[str, Any] = {k: float(np.mean([p[k] for p in picked])) for k in PROFILE_PARTS}
    out["steps"] = sorted({(int(p["first_step"]), int(p["last_step"])) for p in picked})
    return out


#: statuses of a run that is no longer running: its elapsed time is over, it has no ETA
ENDED = ("finished", "dead", "failed")


def elapsed(store: Snapshot, opts: Options, now: float) -> float | None:
    """Seconds the run has taken: since its earliest ``start`` event (else its first row) while it goes on;
    for a run that ended (finished, dead or failed), from then to its last sign of life (its end: opening it an
    hour later changes nothing, and the figure does not shrink when the run finishes)."""
    first = first_start(store)
    if first is None:
        first = first_row_time(store)
    if first is None:
        return None
    if status(store, opts) in ENDED:  # to its last sign of life (its end): it never shrinks at the finish
        seen = list(lives(store).values())
        return max(seen) - first if seen else None
    return now - first


#: the longest start-up believed (a start event to its session's first row); see goodput.MAX_STARTUP
MAX_STARTUP = rankstate.MAX_STARTUP


def first_start(store: Snapshot) -> float | None:
    """The time of the run's earliest ``start`` event on any rank, or None before one. A start event after
    its session's first row, or more than MAX_STARTUP before it, was stamped by a clock that moved: that
    session's first row stands for it (each rank's: mstop.engine.rankstate)."""
    t = rankstate.states(store).first_start
    return float(np.nanmin(t)) if (t == t).any() else None


def first_row_time(store: Snapshot) -> float | None:
    """The time of the run's earliest row on any rank (each rank's first row, kept with its answers), or None
    before any row."""
    t = rankstate.states(store).first_row_time
    return float(np.nanmin(t)) if (t == t).any() else None


def row_at_step(d: RankData, step: float) -> int | None:
    """The row of ``step`` on the rank's current timeline (by binary search on a plain run: a frame must
    not read every row), or None."""
    if d.monotonic and len(d.segments) <= 1:
        i = d.search_step(step)
        return i if i < d.rows and d.at("step", i) == step else None
    hit = np.flatnonzero(d.effective() & (d.col("step") == step))
    return int(hit[-1]) if len(hit) else None


def time_at_step(store: Snapshot, rank: int | None, step: float) -> float | None:
    """The row time of ``step`` on a rank's timeline (the lowest rank's for None), or None."""
    d = store.ranks.get(rank) if rank is not None else job_rank(store)
    hit = row_at_step(d, step) if d is not None and d.rows else None
    t = d.at("time", hit) if hit is not None else math.nan
    return t if math.isfinite(t) else None


#: how a start event's host that is no name reads (str of None, "", 0, False): the answers' arrays show it as
#: "?", so a host spelled so is looked for rank by rank
_NO_NAME = frozenset({"?", "None", "", "0", "0.0", "False", "[]", "{}"})


def host_ranks(store: Snapshot, host: str) -> list[int]:
    """The ranks whose latest start event names ``host``, in rank order (a host's memory is theirs together):
    from the answers' arrays (the host each rank's ranks-view row shows), not a walk of every rank."""
    if host in _NO_NAME:
        return sorted(r for r, d in store.ranks.items() if d.last_start and str(d.last_start.get("host")) == host)
    st = rankstate.states(store)
    return [st.ranks[k] for k in np.flatnonzero(st.host == host).tolist()]


def rank_step_time(w: Window) -> np.ndarray:
    """Per rank of the window, the median step time over its rows (NaN for a rank with none)."""
    if not w.ranks:
        return np.empty(0)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # ranks with no step time yet
        return row_medians(per_step(w, "step_time"))


def step_time(store: Snapshot) -> float | None:
    """The median over ranks of each rank's median step time in the recent window; for a plain MindSpore
    log followed before its epoch's TimeMonitor line (no step time yet), the pace of its LossMonitor lines
    (one a step, printed at the step's end: the time between them is the step's wall time)."""
    got = median(rank_step_time(window(store)))
    if got is None and run_meta(store).get("source") == SOURCE_PLAIN:
        return _pace_of_rows(store)
    return got


def seconds_per_step(store: Snapshot) -> float | None:
    """The job's real pace: per rank the median over the recent window of the time between rows per step
    between them, then the median over ranks; else the step time. A MindFormers log's per-step time is the
    network's compute alone (2 steps/s real against 86 from the compute), and a log may print every N steps."""
    def compute() -> float | None:
        got = _pace_of_rows(store)
        return got if got is not None else step_time(store)
    return store.memo("seconds_per_step", compute)


def _rank_paces(store: Snapshot) -> np.ndarray:
    """Per rank of the window, the median over its recent rows of the time between rows per step between
    them (NaN where no two rows tell it); once a store version (the pace and the ETA both read it)."""
    def compute() -> np.ndarray:
        w = window(store)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            dt, ds = np.diff(w.cols["time"], axis=1), np.diff(w.cols["step"], axis=1)
            # rows of one instant (a log's lines timed by when they were read) tell no pace between them
            per = np.where((ds > 0) & (dt > 0), dt / np.where(ds > 0, ds, 1.0), np.nan)
            return row_medians(per) if per.size else np.full(len(w.ranks), np.nan)
    return store.memo("rank_paces", compute)


def _pace_of_rows(store: Snapshot) -> float | None:
    """Per rank the median over the recent window of the time between rows per step between them, then
    the median over ranks; None when no two rows tell it."""
    got = median(_rank_paces(store))
    return got if got is not None and got > 0 else None


def eta(store: Snapshot, opts: Options, seconds_per_step: float | None) -> float | None:
    """Seconds to the run's ``total_steps`` (from its start event): the job is done when its last rank is,
    so each rank's steps to go at its own pace (``seconds_per_step`` where its own is not known), the longest
    (the leading rank's said 11 s with 390 steps left on another). None unless the run is running (a
    stalled, finished or dead run has no time to go that anyone could trust)."""
    total, now = run_meta(store).get("total_steps"), step(store)
    if not seconds_per_step or not isinstance(total, int) or not total or now is None:
        return None
    if status(store, opts) != "running":
        return None
    w = window(store)
    if not w.ranks:
        return max(0, total - now) * seconds_per_step
    paces = _rank_paces(store)
    paces = np.where(np.isfinite(paces) & (paces > 0), paces, seconds_per_step)
    with np.errstate(invalid="ignore"):
        togo = np.maximum(0.0, total - w.cols["step"][:, -1]) * paces
    return float(np.nanmax(togo)) if np.isfinite(togo).any() else max(0, total - now) * seconds_per_step


def memory_bytes(store: Snapshot, scope: MemoryScope | None, fallback: int) -> tuple[float | None, ...]:
    """Used, peak and total bytes of a memory scope: a rank, or a host (its ranks' bytes added up); of rank
    ``fallback`` when there is no scope."""
    if scope is not None and scope.kind == "rank":
        ranks = [scope.rank]
    elif scope is not None:
        ranks = host_ranks(store, scope.host)
    else:
        ranks = [fallback]
    used = peak = total = None
    for r in ranks:
        u, p, t = (last_value(store.ranks[r], c) for c in ("mem_used", "mem_peak", "mem_total"))
        used = u if used is None else used + (u or 0)
        peak = p if peak is None else peak + (p or 0)
        total = t if total is None else max(total, t or 0)
    return used, peak, total
