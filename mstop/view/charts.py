"""Chart series for a frame: a column's drawn rows (the store's min/max downsampling) against the chosen
x axis, and the marks on the loss chart. Callers hold a snapshot or the store's lock; the rows are read
through the engine's read door (mstop.engine.reader)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..engine import figures
from ..engine.figures import MemoryScope
from ..engine.reader import RunReader
from ..engine.store import Snapshot
from .frame import Series


def x_at(run: RunReader, rank: int, xaxis: str, rows: np.ndarray) -> np.ndarray:
    """The x values of some rows (only the tokens axis needs the whole column: a running sum)."""
    if xaxis == "tokens":
        tok = run.column(rank, "tokens")
        return np.cumsum(np.where(np.isnan(tok), 0.0, tok))[rows]
    return run.column(rank, "time" if xaxis == "time" else "step", rows)


def series(store: Snapshot, rank: int, col: str, points: int, steps: Any, xaxis: str) -> Series | None:
    """The column's drawn rows against the chosen x axis (None when the column is empty)."""
    rows = store.series_rows(rank, col, points, steps=steps)
    run = RunReader(store)
    ys = run.per_step(rank, col, rows)  # a digest's merged row: its step time a step
    if not len(rows) or np.isnan(ys).all() and not np.isinf(ys).any():
        return None
    return Series(x_at(run, rank, xaxis, rows), ys)


def per_second_series(store: Snapshot, rank: int, col: str, points: int, steps: Any, xaxis: str) -> Series | None:
    """A per-step count over the step time (samples/s from ``samples``), row by row; None when empty."""
    rows = store.series_rows(rank, "step_time", points, steps=steps)
    run = RunReader(store)
    with np.errstate(all="ignore"):
        ys = run.column(rank, col, rows) / run.column(rank, "step_time", rows)
    ok = np.isfinite(ys)
    if not ok.any():
        return None
    return Series(x_at(run, rank, xaxis, rows)[ok], ys[ok])


def mfu_series(store: Snapshot, opts: Any, rank: int, points: int, steps: Any, xaxis: str) -> Series | None:
    """Each row's MFU as the figures count it (the column, else derived: see figures.mfu_rows)."""
    rows = store.series_rows(rank, "step_time", points, steps=steps)
    run = RunReader(store)
    ys = run.mfu_rows(rank, opts)[rows]
    ok = np.isfinite(ys)
    if not ok.any():
        return None
    return Series(x_at(run, rank, xaxis, rows)[ok], ys[ok])


def headroom_series(store: Snapshot, worst: MemoryScope | None, fallback: int, points: int, steps: Any,
                    xaxis: str) -> Series | None:
    """1 - mem_peak / mem_total over the run for the worst memory scope: a rank, or a host (its ranks' peaks
    added up at each step, as the panel's figure counts them); the chart rank without one."""
    run = RunReader(store)
    if worst is not None and worst.kind == "host":
        ranks = [r for r in figures.host_ranks(store, worst.host) if run.rows(r)]
        if ranks:
            return _host_headroom(store, run, ranks, points, steps, xaxis)
    r = worst.rank if worst is not None and worst.kind == "rank" else fallback
    rows = store.series_rows(r, "mem_peak", points, steps=steps)
    if not len(rows):
        return None
    with np.errstate(all="ignore"):
        head = 1.0 - run.column(r, "mem_peak", rows) / run.column(r, "mem_total", rows)
    ok = np.isfinite(head)
    return Series(x_at(run, r, xaxis, rows[ok]), head[ok]) if ok.any() else None


def _host_headroom(store: Snapshot, run: RunReader, ranks: list[int], points: int, steps: Any,
                   xaxis: str) -> Series | None:
    """A host's headroom at the drawn rows of its lowest rank: every rank's peak at that step added up
    (found by binary search, so a frame reads ``points`` rows per rank, not the run)."""
    r0 = ranks[0]
    rows = store.series_rows(r0, "mem_peak", points, steps=steps)
    if not len(rows):
        return None
    at = run.column(r0, "step", rows)
    used = run.column(r0, "mem_peak", rows)
    total = run.column(r0, "mem_total", rows)
    for r in ranks[1:]:
        on_timeline = not run.single_timeline(r)  # on its current timeline only
        st, peak = run.column(r, "step", timeline=on_timeline), run.column(r, "mem_peak", timeline=on_timeline)
        i = np.minimum(np.searchsorted(st, at), max(0, len(st) - 1))
        found = (len(st) > 0) & (st[i] == at) if len(st) else np.zeros(len(at), bool)
        used = used + np.where(found, peak[i] if len(st) else np.nan, np.nan)
    with np.errstate(all="ignore"):
        head = 1.0 - used / total
    ok = np.isfinite(head)
    return Series(x_at(run, r0, xaxis, rows[ok]), head[ok]) if ok.any() else None


def loss_marks(run: RunReader, rank: int, steps: list[float], xaxis: str) -> list[tuple[float, float]]:
    """(x, loss) at each of ``steps`` that has a finite loss on the rank's timeline: checkpoint and
    incident marks on the loss chart."""
    out = []
    for s in steps:
        i = run.row_at_step(rank, s)
        if i is not None:
            y = float(run.column(rank, "loss", np.array([i]))[0])
            if math.isfinite(y):
                out.append((float(x_at(run, rank, xaxis, np.array([i]))[0]), y))
    return out


def incident_marks(store: Snapshot, incidents: list[Any], xaxis: str,
                   steps: tuple[int, int] | None = None) -> list[tuple[float, float]]:
    """(x, loss) of each past incident's first step on the lowest rank's timeline (within ``steps``)."""
    run = RunReader(store)
    r0 = figures.lowest_rank(run.snapshot)
    if r0 is None:
        return []
    return loss_marks(run, r0, [i.first_step for i in incidents[-50:] if i.first_step is not None
                                and (steps is None or steps[0] <= i.first_step <= steps[1])], xaxis)


def step_range(step: int | None, recent: bool) -> tuple[int, int] | None:
    """The steps the charts show: all (None), or with ``recent`` the last 10 % of the run (at least 200)."""
    if not recent or step is None:
        return None
    return step - max(200, int(step * 0.1)), step


def ema_in(run: RunReader, rank: int, idx: np.ndarray, ema: np.ndarray,
           steps: tuple[int, int] | None) -> tuple[np.ndarray, ...]:
    """The smoothed loss's rows (and values) within a step range."""
    if steps is None or not len(idx):
        return idx, ema
    if run.single_timeline(rank):  # rows in the step range, by binary search
        st = run.column(rank, "step")
        lo, hi = np.searchsorted(st, steps[0], "left"), np.searchsorted(st, steps[1], "right")
        a, b = np.searchsorted(idx, lo), np.searchsorted(idx, hi)
        return idx[a:b], ema[a:b]
    ss = run.column(rank, "step", idx)
    keep = (ss >= steps[0]) & (ss <= steps[1])
    return idx[keep], ema[keep]


def numeric_columns(store: Snapshot) -> list[str]:
    """Columns that hold numbers on some rank (for the custom metrics filter): extras first."""
    from ..formats.parse import NUMERIC

    out = []
    run = RunReader(store)
    for c in [*run.snapshot.extra_columns, *(c for c in NUMERIC if c not in ("time", "step"))]:
        if any(run.has_values(r, c) for r in run.with_rows()):
            out.append(c)
    return out


#: the columns the g key lists, after the run's own extra columns
AT_STEP = ("loss", "lr", "grad_norm", "step_time", "data_wait", "tokens_per_s", "mfu", "mem_used", "mem_peak",
           "mem_total", "queue_depth", "overflow", "loss_scale")


def values_at_step(store: Snapshot, step: float) -> dict[int, dict[str, float | None]]:
    """Every numeric column of every rank at ``step`` (the row on the current timeline), for ``g``."""
    out: dict[int, dict[str, float | None]] = {}
    run = RunReader(store)
    for r in run.with_rows():
        idx = np.flatnonzero(run.timeline(r) & (run.column(r, "step") == step))
        if not len(idx):
            continue
        i = int(idx[-1])
        literal = {c for j, c, _ in run.nonfinite(r) if j == i}  # a cell that said NaN, not an empty one
        row = {}
        at = np.array([i])
        for c in (*AT_STEP, *run.snapshot.extra_columns):
            val = float(run.per_step(r, c, at)[0])
            row[c] = None if math.isnan(val) and c not in literal else val
        out[r] = row
    return out


def rank_series(store: Snapshot, rank: int, points: int = 200) -> dict[str, Series | None]:
    """One rank's step time and data wait (seconds) against step, for the ranks view's chart: what the
    rank's own timeline shows when the heat strip or the table picks it out."""
    snap = store.snapshot()
    if not RunReader(snap).rows(rank):
        return {"step_time": None, "data_wait": None}
    return {col: series(snap, rank, col, points, None, "step") for col in ("step_time", "data_wait")}
