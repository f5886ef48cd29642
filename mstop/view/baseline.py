"""A baseline run beside this one (``--baseline``, the b key): its curves by step, and the differences
at this run's current step. Runs are compared at equal steps, never at equal wall time."""

from __future__ import annotations

import numpy as np

from ..engine import figures
from ..engine.figures import Options
from ..engine.reader import RunReader
from ..engine.smoothing import ema_series, evenly
from ..engine.store import Snapshot
from . import charts
from .frame import BaselinePart, Series, View


def baseline_overlay(v: View, base: Snapshot, name: str, opts: Options, *, points: int = 200,
                     recent: bool = False) -> None:
    """Set ``v.baseline`` from a baseline run: its smoothed loss, tokens/s and MFU against step, and the
    differences at this run's current step: the smoothed loss there, tokens/s and MFU over the same steps
    (the last WINDOW steps) in both runs."""
    v.baseline = run_part(v, base, name, opts, points=points, recent=recent)


def run_part(v: View, base: Snapshot, name: str, opts: Options, *, points: int = 200,
             recent: bool = False) -> BaselinePart:
    """Another run beside this frame's (a baseline, or one of the runs overlaid): its curves by step and
    the differences at this run's current step."""
    b = BaselinePart(name)
    if v.xaxis != "step":
        b.note = "baseline drawn on the step axis only (x)"
    base = base.snapshot()
    r0 = figures.lowest_rank(base)
    if r0 is None:
        b.note = "baseline has no rows"
        return b
    idx, smooth = ema_series(base, r0, opts.ema_weight)
    st = RunReader(base).column(r0, "step", idx) if len(idx) else np.empty(0)
    if v.xaxis == "step":
        _curves(b, base, r0, st, smooth, points, charts.step_range(v.header.step, recent),
                v.throughput.series_of)
    _deltas(v, b, base, opts, st, smooth)
    return b


def _curves(b: BaselinePart, base: Snapshot, r0: int, st: np.ndarray, smooth: np.ndarray, points: int,
            steps: tuple[int, int] | None, throughput: str = "tokens/s") -> None:
    """The baseline's smoothed loss, throughput (tokens/s, or samples/s where this run's chart shows
    those) and MFU by step (within the recent steps when asked)."""
    keep = np.ones(len(st), bool) if steps is None else (st >= steps[0]) & (st <= steps[1])
    ks = np.flatnonzero(keep)
    if len(ks):
        sel = ks[evenly(len(ks), points)]
        b.loss = Series(st[sel], smooth[sel])
    if throughput == "samples/s":
        b.throughput = charts.per_second_series(base, r0, "samples", points, steps, "step")
    else:
        b.throughput = charts.series(base, r0, "tokens_per_s", points, steps, "step")
    b.mfu = charts.series(base, r0, "mfu", points, steps, "step")


def _deltas(v: View, b: BaselinePart, base: Snapshot, opts: Options, st: np.ndarray, smooth: np.ndarray) -> None:
    """This run minus the baseline at this run's current step (none past the baseline's last step)."""
    now, base_last = v.header.step, figures.step(base)
    if now is None:
        return
    if base_last is None or now > base_last:
        b.note = f"baseline ended at step {base_last}: no difference past it"
        return
    b.step = now
    at = np.flatnonzero(st <= now)
    if len(at) and v.loss.ema is not None:
        b.loss_ema = float(smooth[at[-1]])
        delta = v.loss.ema - b.loss_ema
        # float32 losses smoothed in float64: equal curves differ by ~1e-13, which reads as a difference
        b.loss_delta = 0.0 if abs(delta) < 1e-7 * max(1.0, abs(b.loss_ema)) else delta
    w = figures.step_window(base, now - figures.WINDOW + 1, now)
    if w.ranks:
        tps = figures.median(figures.rank_tokens_per_s(base, w))
        if tps and v.throughput.tokens_per_s is not None:
            b.tps_change = v.throughput.tokens_per_s / tps - 1.0
        sps = figures.median(figures.rank_samples_per_s(base, w))
        if sps and v.throughput.samples_per_s is not None:
            b.sps_change = v.throughput.samples_per_s / sps - 1.0
        mfu = figures.median(figures.rank_mfu(base, opts, w))
        if mfu is not None and v.throughput.mfu is not None:
            b.mfu_delta = v.throughput.mfu - mfu
