"""The figures people watch, each defined once: the screen, ``summary`` and ``compare`` use these.

Every function reads a :class:`~mstop.store.Store` and returns plain numbers
(None when unknown). Definitions (also in the README):

- recent window: each rank's last ``WINDOW`` rows on its current timeline.
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
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .store import RankData, Store

WINDOW = 20
EMA_WEIGHT = 0.9
STALL_MIN_S = 60.0


@dataclass
class Options:
    """Knobs that change figures: a peak override, the EMA weight, the clock."""

    peak_flops: float | None = None  # overrides the start events' peak (e.g. --peak-tflops)
    ema_weight: float = EMA_WEIGHT
    clock: Callable[[], float] = time.time


def _window(d: RankData) -> np.ndarray:
    """Row indices of the rank's recent window."""
    eff = np.flatnonzero(d.effective())
    return eff[-WINDOW:]


def _nanmedian(values: list[float]) -> float | None:
    vals = [v for v in values if v is not None and not math.isnan(v)]
    return float(np.median(vals)) if vals else None


def rank_tokens_per_s(d: RankData) -> float | None:
    w = _window(d)
    tok, st = d.col("tokens")[w].astype(np.float64), d.col("step_time")[w].astype(np.float64)
    ok = ~np.isnan(tok) & ~np.isnan(st)
    den = st[ok].sum()
    return float(tok[ok].sum() / den) if ok.any() and den > 0 else None


def tokens_per_s(store: Store) -> float | None:
    return _nanmedian([rank_tokens_per_s(d) for d in store.ranks.values() if d.rows])


def _mfu_scale(d: RankData, opts: Options) -> float | None:
    start = d.last_start or {}
    fpt, world = start.get("flops_per_token"), start.get("world_size")
    peak = opts.peak_flops or start.get("peak_flops")
    if not (isinstance(fpt, (int, float)) and isinstance(world, int) and world > 0 and peak):
        return None
    return float(fpt) / (world * float(peak))


def rank_mfu(d: RankData, opts: Options) -> float | None:
    w = _window(d)
    st = d.col("step_time")[w].astype(np.float64)
    if opts.peak_flops is None:
        m = d.col("mfu")[w].astype(np.float64)
        ok = ~np.isnan(m) & ~np.isnan(st)
        if ok.any() and st[ok].sum() > 0:
            return float((m[ok] * st[ok]).sum() / st[ok].sum())
    scale = _mfu_scale(d, opts)
    tps = rank_tokens_per_s(d)
    return tps * scale if scale is not None and tps is not None else None


def mfu(store: Store, opts: Options) -> float | None:
    return _nanmedian([rank_mfu(d, opts) for d in store.ranks.values() if d.rows])


def rank_data_wait_frac(d: RankData) -> float | None:
    w = _window(d)
    dw, st = d.col("data_wait")[w].astype(np.float64), d.col("step_time")[w].astype(np.float64)
    ok = ~np.isnan(dw) & ~np.isnan(st)
    den = st[ok].sum()
    return float(dw[ok].sum() / den) if ok.any() and den > 0 else None


def data_wait_frac(store: Store) -> float | None:
    vals = [v for v in (rank_data_wait_frac(d) for d in store.ranks.values() if d.rows) if v is not None]
    return max(vals) if vals else None


def _peak_and_total(d: RankData) -> tuple[float | None, float | None]:
    w = _window(d)
    peak, total = d.col("mem_peak")[w].astype(np.float64), d.col("mem_total")[w].astype(np.float64)
    peak = peak[~np.isnan(peak)]
    total = total[~np.isnan(total)]
    return (float(peak.max()) if len(peak) else None), (float(total[-1]) if len(total) else None)


def headrooms(store: Store) -> dict[str, float]:
    """Headroom per rank (``"rank 3"``) or, with host memory, per host (``"host node1"``)."""
    out: dict[str, float] = {}
    hosts: dict[str, list[tuple[float, float]]] = {}
    for r, d in store.ranks.items():
        if not d.rows:
            continue
        peak, total = _peak_and_total(d)
        if peak is None or not total:
            continue
        start = d.last_start or {}
        if start.get("memory_source") == "host":
            hosts.setdefault(str(start.get("host")), []).append((peak, total))
        else:
            out[f"rank {r}"] = 1.0 - peak / total
    for host, vals in hosts.items():
        out[f"host {host}"] = 1.0 - sum(p for p, _ in vals) / max(t for _, t in vals)
    return out


def mem_headroom(store: Store) -> float | None:
    h = headrooms(store)
    return min(h.values()) if h else None


def _loss_rank(store: Store) -> RankData | None:
    present = [r for r, d in store.ranks.items() if d.rows]
    return store.ranks[min(present)] if present else None


def loss(store: Store) -> float | None:
    """The last non-empty loss of the lowest rank (NaN when that cell said NaN)."""
    d = _loss_rank(store)
    if d is None:
        return None
    vals = d.col("loss")
    present = ~np.isnan(vals)
    for i, c, _ in d.nonfinite:
        if c == "loss":
            present[i] = True
    idx = np.flatnonzero(present & d.effective())
    return float(vals[idx[-1]]) if len(idx) else None


def loss_ema(store: Store, opts: Options) -> float | None:
    d = _loss_rank(store)
    if d is None:
        return None
    vals = d.col("loss")[d.effective()].astype(np.float64)
    vals = vals[np.isfinite(vals)]
    return ema(vals, opts.ema_weight)


def ema(values: np.ndarray, weight: float) -> float | None:
    """The last value of a debiased EMA (TensorBoard's smoothing) of finite values."""
    if not len(values):
        return None
    if weight <= 0:
        return float(values[-1])
    k = min(len(values), max(1, int(math.ceil(np.log(1e-12) / np.log(weight)))))  # older terms < 1e-12
    tail = values[-k:]
    w = weight ** np.arange(k - 1, -1, -1, dtype=np.float64)
    num = (1 - weight) * float((w * tail).sum())
    return num / (1 - weight ** len(values))


def step(store: Store) -> int | None:
    lasts = [d.col("step")[-1] for d in store.ranks.values() if d.rows]
    return int(max(lasts)) if lasts else None


def last_row_time(store: Store) -> float | None:
    ts = [float(np.nanmax(d.col("time"))) for d in store.ranks.values() if d.rows]
    return max(ts) if ts else None


def stall_after(store: Store) -> float:
    """Seconds without a new row after which a running job counts as stalled."""
    step_times, intervals = [], []
    for d in store.ranks.values():
        w = _window(d)
        if len(w):
            st = d.col("step_time")[w].astype(np.float64)
            st = st[~np.isnan(st)]
            if len(st):
                step_times.append(float(np.median(st)))
        if len(w) > 1:
            intervals.append(float(np.median(np.diff(d.col("time")[w]))))
    med_step = float(np.median(step_times)) if step_times else 0.0
    med_int = float(np.median(intervals)) if intervals else 0.0
    return max(STALL_MIN_S, 10 * med_step, 3 * med_int)


def status(store: Store, opts: Options) -> str:
    """``waiting`` (no rank files), ``starting`` (started, no rows yet), ``running``,
    ``stalled`` (no new row for longer than :func:`stall_after`), ``finished``
    (every rank's last session ended after its last row)."""
    if not store.ranks:
        return "waiting"
    with_rows = [d for d in store.ranks.values() if d.rows]
    if not with_rows:
        return "starting" if any(d.starts for d in store.ranks.values()) else "waiting"
    if all(_finished(d) for d in store.ranks.values() if d.rows or d.starts):
        return "finished"
    if all(_restarting(d) for d in with_rows):
        return "starting"
    last = last_row_time(store)
    if last is not None and opts.clock() - last > stall_after(store):
        return "stalled"
    return "running"


def _last_session(d: RankData) -> str | None:
    if d.last_start is not None:
        return str(d.last_start.get("session"))
    return d.segments[-1].session if d.segments else None


def _finished(d: RankData) -> bool:
    s = _last_session(d)
    if s is None or s not in d.ends:
        return False
    if d.rows and d.segments[-1].session == s:
        return d.ends[s] >= float(d.col("time")[-1])
    return True


def _restarting(d: RankData) -> bool:
    """The rank's newest start event belongs to a session with no rows yet."""
    s = _last_session(d)
    return s is not None and bool(d.segments) and s not in {seg.session for seg in d.segments}


def last_checkpoint(store: Store) -> dict[str, Any] | None:
    best = None
    for d in store.ranks.values():
        for c in d.checkpoints:
            key = (c["step"] if isinstance(c["step"], (int, float)) else -1, c["time"])
            if best is None or key > best[0]:
                best = (key, c)
    return dict(best[1]) if best else None


def segments(store: Store) -> int:
    return max((len(d.segments) for d in store.ranks.values()), default=0)


def repeated_steps(store: Store) -> int:
    return max((d.repeated_steps() for d in store.ranks.values()), default=0)
