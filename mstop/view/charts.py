"""Chart series for a frame: a column's drawn rows (the store's min/max downsampling) against the chosen
x axis, and the marks on the loss chart. Callers hold a snapshot or the store's lock."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..engine import figures
from ..engine.figures import MemoryScope
from ..engine.store import RankData, Store
from .frame import Series


def x_at(d: RankData, xaxis: str, rows: np.ndarray) -> np.ndarray:
    """The x values of some rows (only the tokens axis needs the whole column: a running sum)."""
    if xaxis == "tokens":
        tok = d.col("tokens").astype(np.float64)
        return np.cumsum(np.where(np.isnan(tok), 0.0, tok))[rows]
    return d.col("time" if xaxis == "time" else "step")[rows].astype(np.float64)


def series(store: Store, rank: int, col: str, points: int, steps: Any, xaxis: str) -> Series | None:
    """The column's drawn rows against the chosen x axis (None when the column is empty)."""
    rows = store.series_rows(rank, col, points, steps=steps)
    d = store.ranks[rank]
    ys = d.col(col)[rows].astype(np.float64)
    if not len(rows) or np.isnan(ys).all() and not np.isinf(ys).any():
        return None
    return Series(x_at(d, xaxis, rows), ys)


def per_second_series(store: Store, rank: int, col: str, points: int, steps: Any, xaxis: str) -> Series | None:
    """A per-step count over the step time (samples/s from ``samples``), row by row; None when empty."""
    rows = store.series_rows(rank, "step_time", points, steps=steps)
    d = store.ranks[rank]
    with np.errstate(all="ignore"):
        ys = d.col(col)[rows].astype(np.float64) / d.col("step_time")[rows].astype(np.float64)
    ok = np.isfinite(ys)
    if not ok.any():
        return None
    return Series(x_at(d, xaxis, rows)[ok], ys[ok])


def mfu_series(store: Store, opts: Any, rank: int, points: int, steps: Any, xaxis: str) -> Series | None:
    """Each row's MFU as the figures count it (the column, else derived: see figures.mfu_rows)."""
    rows = store.series_rows(rank, "step_time", points, steps=steps)
    d = store.ranks[rank]
    ys = figures.mfu_rows(d, opts)[rows]
    ok = np.isfinite(ys)
    if not ok.any():
        return None
    return Series(x_at(d, xaxis, rows)[ok], ys[ok])


def headroom_series(store: Store, worst: MemoryScope | None, fallback: int, points: int, steps: Any,
                    xaxis: str) -> Series | None:
    """1 - mem_peak / mem_total over the run for the worst memory scope: a rank, or a host (its ranks' peaks
    added up at each step, as the panel's figure counts them); the chart rank without one."""
    if worst is not None and worst.kind == "host":
        ranks = [r for r in figures.host_ranks(store, worst.host) if store.ranks[r].rows]
        if ranks:
            return _host_headroom(store, ranks, points, steps, xaxis)
    r = worst.rank if worst is not None and worst.kind == "rank" else fallback
    rows = store.series_rows(r, "mem_peak", points, steps=steps)
    if not len(rows):
        return None
    d = store.ranks[r]
    with np.errstate(all="ignore"):
        head = 1.0 - d.col("mem_peak")[rows].astype(np.float64) / d.col("mem_total")[rows].astype(np.float64)
    ok = np.isfinite(head)
    return Series(x_at(d, xaxis, rows[ok]), head[ok]) if ok.any() else None


def _host_headroom(store: Store, ranks: list[int], points: int, steps: Any, xaxis: str) -> Series | None:
    """A host's headroom at the drawn rows of its lowest rank: every rank's peak at that step added up
    (found by binary search, so a frame reads ``points`` rows per rank, not the run)."""
    d0 = store.ranks[ranks[0]]
    rows = store.series_rows(ranks[0], "mem_peak", points, steps=steps)
    if not len(rows):
        return None
    at = d0.col("step")[rows]
    used = d0.col("mem_peak")[rows].astype(np.float64)
    total = d0.col("mem_total")[rows].astype(np.float64)
    for r in ranks[1:]:
        d = store.ranks[r]
        st, peak = d.col("step"), d.col("mem_peak").astype(np.float64)
        if not (d.monotonic and len(d.segments) <= 1):  # on its current timeline only
            keep = d.effective()
            st, peak = st[keep], peak[keep]
        i = np.minimum(np.searchsorted(st, at), max(0, len(st) - 1))
        found = (len(st) > 0) & (st[i] == at) if len(st) else np.zeros(len(at), bool)
        used = used + np.where(found, peak[i] if len(st) else np.nan, np.nan)
    with np.errstate(all="ignore"):
        head = 1.0 - used / total
    ok = np.isfinite(head)
    return Series(x_at(d0, xaxis, rows[ok]), head[ok]) if ok.any() else None


def loss_marks(d: RankData, steps: list[float], xaxis: str) -> list[tuple[float, float]]:
    """(x, loss) at each of ``steps`` that has a finite loss on the rank's timeline: checkpoint and
    incident marks on the loss chart."""
    out = []
    for s in steps:
        i = figures.row_at_step(d, s)
        if i is not None:
            y = float(d.col("loss")[i])
            if math.isfinite(y):
                out.append((float(x_at(d, xaxis, np.array([i]))[0]), y))
    return out


def incident_marks(store: Store, incidents: list[Any], xaxis: str,
                   steps: tuple[int, int] | None = None) -> list[tuple[float, float]]:
    """(x, loss) of each past incident's first step on the lowest rank's timeline (within ``steps``)."""
    with store.lock:
        d = figures.job_rank(store)
        if d is None:
            return []
        return loss_marks(d, [i.first_step for i in incidents[-50:] if i.first_step is not None
                              and (steps is None or steps[0] <= i.first_step <= steps[1])], xaxis)


def step_range(step: int | None, recent: bool) -> tuple[int, int] | None:
    """The steps the charts show: all (None), or with ``recent`` the last 10 % of the run (at least 200)."""
    if not recent or step is None:
        return None
    return step - max(200, int(step * 0.1)), step


def ema_in(d: RankData, idx: np.ndarray, ema: np.ndarray, steps: tuple[int, int] | None) -> tuple[np.ndarray, ...]:
    """The smoothed loss's rows (and values) within a step range."""
    if steps is None or not len(idx):
        return idx, ema
    if d.monotonic and len(d.segments) <= 1:  # rows in the step range, by binary search
        st = d.col("step")
        lo, hi = np.searchsorted(st, steps[0], "left"), np.searchsorted(st, steps[1], "right")
        a, b = np.searchsorted(idx, lo), np.searchsorted(idx, hi)
        return idx[a:b], ema[a:b]
    ss = d.col("step")[idx]
    keep = (ss >= steps[0]) & (ss <= steps[1])
    return idx[keep], ema[keep]


def numeric_columns(store: Store) -> list[str]:
    """Columns that hold numbers on some rank (for the custom metrics filter): extras first."""
    from ..engine.parse import NUMERIC

    out = []
    with store.lock:
        for c in [*store.extra_columns, *(c for c in NUMERIC if c not in ("time", "step"))]:
            if any(d.rows and not np.isnan(d.col(c)).all() for d in store.ranks.values()):
                out.append(c)
    return out


#: the columns the g key lists, after the run's own extra columns
AT_STEP = ("loss", "lr", "grad_norm", "step_time", "data_wait", "tokens_per_s", "mfu", "mem_used", "mem_peak",
           "mem_total", "queue_depth", "overflow", "loss_scale")


def values_at_step(store: Store, step: float) -> dict[int, dict[str, float | None]]:
    """Every numeric column of every rank at ``step`` (the row on the current timeline), for ``g``."""
    out: dict[int, dict[str, float | None]] = {}
    with store.lock:
        for r, d in sorted(store.ranks.items()):
            if not d.rows:
                continue
            idx = np.flatnonzero(d.effective() & (d.col("step") == step))
            if not len(idx):
                continue
            i = int(idx[-1])
            literal = {c for j, c, _ in d.nonfinite if j == i}  # a cell that said NaN, not an empty one
            row = {}
            for c in (*AT_STEP, *store.extra_columns):
                val = float(d.col(c)[i])
                row[c] = None if math.isnan(val) and c not in literal else val
            out[r] = row
    return out


def rank_series(store: Store, rank: int, points: int = 200) -> dict[str, Series | None]:
    """One rank's step time and data wait (seconds) against step, for the ranks view's chart: what the
    rank's own timeline shows when the heat strip or the table picks it out."""
    with store.lock:
        d = store.ranks.get(rank)
        if d is None or not d.rows:
            return {"step_time": None, "data_wait": None}
        return {col: series(store, rank, col, points, None, "step") for col in ("step_time", "data_wait")}
