"""What the screen shows, computed from the store without any widget code.

The monitor asks for a :class:`View` each time it redraws; the figures come
from :mod:`mstop.figures` (no figure is computed twice), the chart series from
the store's downsampling. Nothing here imports textual, so the same view can
be tested, printed or drawn by another front end.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import fmt
from ..engine import figures
from ..engine.figures import MemoryScope, Options
from ..engine.store import BLOCK, Block, Store

#: x axes the charts can use (``x`` key).
X_AXES = ("step", "time", "tokens")
MEM_WARN, MEM_CRIT = 0.10, 0.05
DATA_WARN = 0.10


@dataclass
class Series:
    x: np.ndarray
    y: np.ndarray


@dataclass
class RankRow:
    rank: int
    host: str
    step: int | None
    step_time: float | None
    tokens_per_s: float | None
    headroom: float | None
    data_wait: float | None
    age: float | None


@dataclass
class View:
    """Everything one frame shows."""

    run_name: str | None = None
    device: str | None = None
    world_size: int | None = None
    ranks_seen: int = 0
    step: int | None = None
    total_steps: int | None = None
    eta: float | None = None
    elapsed: float | None = None
    steps_per_s: float | None = None
    tokens_seen: float | None = None
    since_last_row: float | None = None
    last_checkpoint: dict[str, Any] | None = None
    checkpoint_age: float | None = None
    status: str = "waiting"
    bad_rows: int = 0
    dropped_rows: int = 0  # reported by the writers' dropped events
    writer_errors: list[str] = field(default_factory=list)
    loss: float | None = None
    loss_ema: float | None = None
    loss_min: float | None = None
    loss_raw: Series | None = None
    loss_smooth: Series | None = None
    nan_steps: list[float] = field(default_factory=list)
    evals: list[tuple[float, str, float]] = field(default_factory=list)
    lr: Series | None = None
    grad_norm: Series | None = None
    lr_now: float | None = None
    grad_norm_now: float | None = None
    tokens_per_s: float | None = None
    samples_per_s: float | None = None
    step_time: float | None = None
    compile_s: float | None = None  # the newest session's first step (graph compilation), left out of windows
    throughput: Series | None = None
    mfu: float | None = None
    mfu_series: Series | None = None
    peak_flops: float | None = None
    peak_source: str | None = None
    mem_headroom: float | None = None
    mem_worst: MemoryScope | None = None  # whose headroom is the worst: a rank, or a host
    mem_used: float | None = None
    mem_peak: float | None = None
    mem_total: float | None = None
    mem_source: str | None = None
    headroom: Series | None = None  # of the worst rank (device memory) over the run
    notes: list[str] = field(default_factory=list)  # ssh host states, ranks found in two sources
    segment_starts: list[float] = field(default_factory=list)  # x of each restart/resume on the chart rank
    repeated_steps: int = 0
    repeated_seconds: float = 0.0  # wall time the repeated steps cost
    checkpoints: list[tuple[float, float]] = field(default_factory=list)  # (x, loss) marks on the loss chart
    incident_marks: list[tuple[float, float]] = field(default_factory=list)  # (x, loss) of past incidents
    alerts: list[Any] = field(default_factory=list)  # active health alerts (mstop.health.Alert)
    new_alerts: int = 0  # not yet seen (the a key)
    skew_note: str | None = None
    data_wait_frac: float | None = None
    data_worst_rank: int | None = None
    queue_depth: float | None = None
    ranks: list[RankRow] = field(default_factory=list)
    xaxis: str = "step"
    chart_rank: int | None = None
    custom: dict[str, Series | None] = field(default_factory=dict)
    # --baseline: its curves by step and the differences at this run's current step
    baseline: str | None = None  # its name, when one is chosen
    base_loss: Series | None = None  # smoothed, like this run's smoothed loss
    base_throughput: Series | None = None
    base_mfu: Series | None = None
    base_step: int | None = None  # the step the deltas are taken at
    base_loss_delta: float | None = None  # smoothed loss: this run − baseline
    base_loss_ema: float | None = None
    base_tps_change: float | None = None  # tokens/s: relative change (0.08 = +8 %)
    base_mfu_delta: float | None = None  # MFU: this run − baseline, as a fraction (0.02 = +2 pp)
    base_note: str | None = None  # why a delta or the overlay is missing


class EmaCache:
    """Per-frame state kept between frames, so a frame costs the same on a long run as on a short one:
    the debiased EMA of each rank's loss (extended as rows arrive, never recomputed) and the tokens seen."""

    _CHUNK = 128

    def __init__(self) -> None:
        self._state: dict[tuple[int, float], dict[str, Any]] = {}
        self._tokens: dict[int, tuple[int, int, float]] = {}

    def series(self, store: Store, rank: int, weight: float) -> tuple[np.ndarray, np.ndarray]:
        """(row indices, EMA values) over the rank's effective rows with finite loss."""
        d = store.ranks[rank]
        st = self._state.get((rank, weight))
        if st is None or st["segments"] != len(d.segments) or st["done"] > d.rows:
            st = self._state[(rank, weight)] = {"segments": len(d.segments), "done": 0, "acc": 0.0, "norm": 0.0,
                                                "idx": Block(np.int64), "ema": Block(np.float64)}
        done = st["done"]
        if d.rows > done:
            new = np.arange(done, d.rows)
            loss = d.col("loss")[done:]
            new = new[d.effective()[done:] & np.isfinite(loss)]
            vals = d.col("loss")[new].astype(np.float64)
            out = np.empty(len(vals))
            acc, norm = st["acc"], st["norm"]
            for a in range(0, len(vals), self._CHUNK):  # the recursion, vectorised a chunk at a time
                x = vals[a:a + self._CHUNK]
                if weight <= 0:
                    out[a:a + len(x)] = x
                    continue
                k = np.arange(len(x))
                scaled = np.cumsum(x * weight ** -k) * weight ** k  # sum_j<=i w^(i-j) x_j
                accs = weight ** (k + 1) * acc + (1 - weight) * scaled
                norms = weight ** (k + 1) * norm + (1 - weight) * (1 - weight ** (k + 1)) / (1 - weight)
                out[a:a + len(x)] = accs / norms
                acc, norm = float(accs[-1]), float(norms[-1])
            st["idx"].extend(new)
            st["ema"].extend(out)
            st.update(done=d.rows, acc=acc, norm=norm)
        return st["idx"].view(), st["ema"].view()

    def tokens_seen(self, store: Store, rank: int) -> float | None:
        """Σtokens over the rank's timeline, added up as rows arrive."""
        d = store.ranks[rank]
        done, segs, total = self._tokens.get(rank, (0, -1, 0.0))
        if segs != len(d.segments) or done > d.rows:
            done, total = 0, 0.0
        if d.rows > done:
            tok = d.col("tokens")[done:].astype(np.float64)
            tok = tok[d.effective()[done:]]
            total += float(np.nansum(tok))
            self._tokens[rank] = (d.rows, len(d.segments), total)
        return total or None


def _last_value(d: Any, column: str) -> float | None:
    """The column's last value on the rank's timeline, reading backwards a chunk at a time."""
    eff = d.effective()
    col = d.col(column)
    end = d.rows
    while end > 0:
        start = max(0, end - 4096)
        vals = col[start:end]
        ok = np.flatnonzero(eff[start:end] & ~np.isnan(vals))
        if len(ok):
            return float(vals[ok[-1]])
        end = start
    return None


def _f(v: Any) -> float | None:
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f


def build_view(store: Store, opts: Options, *, points: int = 200, xaxis: str = "step", recent: bool = False,
               ema_cache: EmaCache | None = None, custom: tuple[str, ...] = (), header_only: bool = False) -> View:
    """Compute one frame's content. ``points`` is the chart width in points; ``recent`` limits the
    charts to the last 10 % of the run (at least 200 steps); ``header_only`` skips the charts' series."""
    v = View(xaxis=xaxis)
    now = opts.clock()
    with store.lock:
        v.status = figures.status(store, opts)
        v.bad_rows = store.bad_rows
        v.dropped_rows = figures.dropped_rows(store)
        v.writer_errors = figures.writer_errors(store)
        v.notes += [f"{name} not followed: {why}" for name, why in sorted(store.refused.items())[:3]]
        if len(store.refused) > 3:
            v.notes.append(f"{len(store.refused) - 3} more files not followed (mstop summary lists them)")
        if store.cut_events:
            v.notes.append(f"{store.cut_events} events had text or lists cut short")
        v.notes += store.notes[:3]
        ahead = figures.future_skew(store, opts)
        if ahead is not None:
            v.notes.append(f"row times are {fmt.duration(ahead)} ahead of this clock: ages use file times")
        v.ranks_seen = len(store.rank_files)
        v.step = figures.step(store)
        # the run's metadata: the lowest rank's latest start event
        meta = next((store.ranks[r].last_start for r in sorted(store.ranks) if store.ranks[r].last_start), None) or {}
        v.run_name, v.device = meta.get("run_name"), meta.get("device")
        v.world_size = meta.get("world_size") if isinstance(meta.get("world_size"), int) else None
        v.total_steps = meta.get("total_steps") if isinstance(meta.get("total_steps"), int) else None
        v.peak_flops = opts.peak_flops or _f(meta.get("peak_flops"))
        v.peak_source = "--peak-tflops" if opts.peak_flops else meta.get("peak_flops_source")
        v.mem_source = meta.get("memory_source")
        first_times = [float(e["time"]) for d in store.ranks.values() for e in d.starts.values()]
        v.elapsed = now - min(first_times) if first_times else None
        v.since_last_row = figures.seconds_since_last_row(store, opts) if store.rows else None
        spread = figures.clock_spread(store)
        if spread is not None and spread > 60:
            v.skew_note = (f"clocks differ by {spread:.0f} s between ranks at the same step"
                           + ("; ages use arrival times" if opts.arrival_clock else ""))
        v.loss, v.loss_ema = figures.loss(store), figures.loss_ema(store, opts)
        v.tokens_per_s = figures.tokens_per_s(store)
        v.compile_s = figures.compile_seconds(store)
        v.mfu = figures.mfu(store, opts)
        v.mem_headroom = figures.mem_headroom(store)
        heads = figures.headrooms(store)
        if heads:
            v.mem_worst = min(heads, key=heads.get)
        v.data_wait_frac = figures.data_wait_frac(store)
        v.last_checkpoint = figures.last_checkpoint(store)
        if v.last_checkpoint is not None:
            v.checkpoint_age = now - v.last_checkpoint["time"]
        w = figures.window(store)
        if w.ranks:
            st = w.cols["step_time"]
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # ranks with no step time yet
                per_rank = np.nanmedian(st, axis=1)
            v.step_time = figures.median(per_rank)
            if v.step_time:
                v.steps_per_s = 1.0 / v.step_time
                if v.total_steps and v.step is not None:
                    v.eta = max(0, v.total_steps - v.step) * v.step_time
            dwf = figures.rank_data_wait_frac(store)
            if not np.isnan(dwf).all():
                v.data_worst_rank = w.ranks[int(np.nanargmax(dwf))]
            tps = figures.rank_tokens_per_s(store)
            v.ranks = _rank_rows(store, w, tps, dwf, heads, now)
        r0 = figures.lowest_rank(store)
        if r0 is not None:
            v.chart_rank = r0
            d = store.ranks[r0]
            cache = ema_cache or EmaCache()
            v.tokens_seen = cache.tokens_seen(store, r0)
            if header_only:
                return v
            v.samples_per_s = figures.samples_per_s(store)
            v.queue_depth = _last_value(d, "queue_depth")
            v.mem_used, v.mem_peak, v.mem_total = _memory_of(store, v.mem_worst, r0)
            v.lr_now, v.grad_norm_now = _last_value(d, "lr"), _last_value(d, "grad_norm")
            steps = None
            if recent and v.step is not None:
                span = max(200, int(v.step * 0.1))
                steps = (v.step - span, v.step)
            v.loss_raw = _series(store, r0, "loss", points, steps, xaxis)
            v.loss_min = _min(store, r0, "loss")
            idx, ema = cache.series(store, r0, opts.ema_weight)
            if steps is not None and len(idx):
                if d.monotonic and len(d.segments) <= 1:  # rows in the step range, by binary search
                    st = d.col("step")
                    lo, hi = np.searchsorted(st, steps[0], "left"), np.searchsorted(st, steps[1], "right")
                    a, b = np.searchsorted(idx, lo), np.searchsorted(idx, hi)
                    idx, ema = idx[a:b], ema[a:b]
                else:
                    ss = d.col("step")[idx]
                    keep = (ss >= steps[0]) & (ss <= steps[1])
                    idx, ema = idx[keep], ema[keep]
            if len(idx):
                sel = evenly(len(idx), points)
                v.loss_smooth = Series(_x_at(d, xaxis, idx[sel]), ema[sel])
            eff = d.effective()
            bad = [i for i, c, _ in d.nonfinite if c == "loss" and eff[i]]
            v.nan_steps = _x_at(d, xaxis, np.asarray(bad, dtype=np.int64)).tolist() if bad else []
            for e in d.evals:
                for k, val in (e.get("metrics") or {}).items():
                    f = _f(val)
                    if f is not None and isinstance(e.get("step"), (int, float)):
                        v.evals.append((float(e["step"]), str(k), f))
            v.lr = _series(store, r0, "lr", points, steps, xaxis)
            v.grad_norm = _series(store, r0, "grad_norm", points, steps, xaxis)
            v.throughput = _series(store, r0, "tokens_per_s", points, steps, xaxis)
            v.mfu_series = _series(store, r0, "mfu", points, steps, xaxis)
            v.custom = {c: _series(store, r0, c, points, steps, xaxis) for c in custom}
            v.headroom = _headroom_series(store, v.mem_worst, r0, points, steps, xaxis)
            if len(d.segments) > 1:
                firsts = np.array([seg.first_row for seg in d.segments[1:]], dtype=np.int64)
                v.segment_starts = _x_at(d, xaxis, firsts).tolist()
                rep = ~d.effective()
                last = d.col("step")[d.effective()][-1] if d.effective().any() else -np.inf
                rep &= d.col("step") <= last
                v.repeated_steps = int(rep.sum())
                v.repeated_seconds = float(np.nansum(d.col("step_time")[rep].astype(np.float64)))
            st_all = d.col("step")
            eff_all = d.effective()
            for c in d.checkpoints[-50:]:  # the loss at each checkpoint's step, on the current timeline
                if isinstance(c.get("step"), (int, float)):
                    if d.monotonic and len(d.segments) <= 1:
                        i = int(np.searchsorted(st_all, c["step"]))
                        hit = [i] if i < d.rows and st_all[i] == c["step"] else []
                    else:
                        hit = np.flatnonzero(eff_all & (st_all == c["step"])).tolist()
                    if hit:
                        y = float(d.col("loss")[hit[-1]])
                        if math.isfinite(y):
                            v.checkpoints.append((float(_x_at(d, xaxis, np.array(hit[-1:]))[0]), y))
    return v


def incident_marks(store: Store, incidents: list[Any], xaxis: str) -> list[tuple[float, float]]:
    """(x, loss) of each past incident's first step on the lowest rank's timeline: marks on the loss chart."""
    out: list[tuple[float, float]] = []
    with store.lock:
        d = figures.job_rank(store)
        if d is None:
            return out
        eff, step, loss = d.effective(), d.col("step"), d.col("loss")
        for inc in incidents[-50:]:
            if inc.first_step is None:
                continue
            if d.monotonic and len(d.segments) <= 1:  # by binary search: a frame must not read every row
                i = int(np.searchsorted(step, inc.first_step))
                hit = [i] if i < d.rows and step[i] == inc.first_step else []
            else:
                hit = np.flatnonzero(eff & (step == inc.first_step))
            if len(hit):
                y = float(loss[hit[-1]])
                if math.isfinite(y):
                    out.append((float(_x_at(d, xaxis, hit[-1:])[0]), y))
    return out


def numeric_columns(store: Store) -> list[str]:
    """Columns that hold numbers on some rank (for the custom metrics filter): extras first."""
    from ..engine.parse import NUMERIC

    out = []
    with store.lock:
        for c in [*store.extra_columns, *(c for c in NUMERIC if c not in ("time", "step"))]:
            if any(d.rows and not np.isnan(d.col(c)).all() for d in store.ranks.values()):
                out.append(c)
    return out


def _memory_of(store: Store, worst: MemoryScope | None, fallback: int) -> tuple[float | None, ...]:
    """Used, peak and total bytes of the worst rank (or of the worst host, its ranks added up)."""
    if worst is not None and worst.kind == "rank":
        ranks = [worst.rank]
    elif worst is not None:
        ranks = [r for r, d in store.ranks.items() if d.last_start and str(d.last_start.get("host")) == worst.host]
    else:
        ranks = [fallback]
    used = peak = total = None
    for r in ranks:
        d = store.ranks[r]
        u, p, t = (_last_value(d, c) for c in ("mem_used", "mem_peak", "mem_total"))
        used = u if used is None else used + (u or 0)
        peak = p if peak is None else peak + (p or 0)
        total = t if total is None else max(total, t or 0)
    return used, peak, total


def _headroom_series(store: Store, worst: MemoryScope | None, fallback: int, points: int, steps: Any,
                     xaxis: str) -> Series | None:
    """1 - mem_peak / mem_total over the run for the worst rank (the chart rank when memory is per host)."""
    r = worst.rank if worst is not None and worst.kind == "rank" else fallback
    rows = store.series_rows(r, "mem_peak", points, steps=steps)
    if not len(rows):
        return None
    d = store.ranks[r]
    with np.errstate(all="ignore"):
        head = 1.0 - d.col("mem_peak")[rows].astype(np.float64) / d.col("mem_total")[rows].astype(np.float64)
    ok = np.isfinite(head)
    return Series(_x_at(d, xaxis, rows[ok]), head[ok]) if ok.any() else None


def _x_at(d: Any, xaxis: str, rows: np.ndarray) -> np.ndarray:
    """The x values of some rows (only the tokens axis needs the whole column: a running sum)."""
    if xaxis == "tokens":
        return _x(d, "tokens")[rows]
    return d.col("time" if xaxis == "time" else "step")[rows].astype(np.float64)


def _x(d: Any, xaxis: str) -> np.ndarray:
    if xaxis == "tokens":
        tok = d.col("tokens").astype(np.float64)
        return np.cumsum(np.where(np.isnan(tok), 0.0, tok))
    return d.col("time" if xaxis == "time" else "step").astype(np.float64)


def _series(store: Store, rank: int, col: str, points: int, steps: Any, xaxis: str) -> Series | None:
    """The column's drawn rows (the store's downsampling) against the chosen x axis."""
    rows = store.series_rows(rank, col, points, steps=steps)
    d = store.ranks[rank]
    ys = d.col(col)[rows].astype(np.float64)
    if not len(rows) or np.isnan(ys).all() and not np.isinf(ys).any():
        return None
    return Series(_x_at(d, xaxis, rows), ys)


def _min(store: Store, rank: int, col: str) -> float | None:
    """The column's smallest finite value on the rank's timeline (block summaries on long runs)."""
    d = store.ranks[rank]
    if len(d.segments) <= 1 and d.rows >= 8 * BLOCK:
        summ = d.summary(col)
        tail = d.col(col)[summ.blocks * BLOCK:].astype(np.float64)
        cands = np.concatenate([summ.mins[~np.isnan(summ.mins)], tail[np.isfinite(tail)]])
        return float(cands.min()) if len(cands) else None
    a = d.col(col)[d.effective()]
    a = a[np.isfinite(a)]
    return float(a.min()) if len(a) else None


def _rank_rows(store: Store, w: Any, tps: np.ndarray, dwf: np.ndarray, heads: dict[str, float],
               now: float) -> list[RankRow]:
    rows = []
    last_t = w.cols["time"][:, -1]
    st = w.cols["step_time"][:, -1]
    for i, r in enumerate(w.ranks):
        d = store.ranks[r]
        start = w.starts[i]
        host = str(start.get("host") or "?")
        head = heads.get(MemoryScope("rank", rank=r))
        if head is None:
            head = heads.get(MemoryScope("host", host=host))
        rows.append(RankRow(
            rank=r, host=host, step=int(d.col("step")[-1]) if d.rows else None,
            step_time=None if math.isnan(st[i]) else float(st[i]),
            tokens_per_s=None if math.isnan(tps[i]) else float(tps[i]),
            headroom=head, data_wait=None if math.isnan(dwf[i]) else float(dwf[i]),
            age=None if math.isnan(last_t[i]) else now - float(last_t[i]),
        ))
    return rows


def values_at_step(store: Store, step: float) -> dict[int, dict[str, float | None]]:
    """Every numeric column of every rank at ``step`` (the row on the current timeline), for ``g``."""
    out: dict[int, dict[str, float | None]] = {}
    with store.lock:
        for r, d in sorted(store.ranks.items()):
            if not d.rows:
                continue
            eff = d.effective()
            idx = np.flatnonzero(eff & (d.col("step") == step))
            if not len(idx):
                continue
            i = int(idx[-1])
            row = {}
            for c in ("loss", "lr", "grad_norm", "step_time", "data_wait", "tokens_per_s", "mfu", "mem_used",
                      "mem_peak", "mem_total", "queue_depth", "overflow", "loss_scale", *store.extra_columns):
                val = float(d.col(c)[i])
                row[c] = None if math.isnan(val) and not any(j == i and cc == c for j, cc, _ in d.nonfinite) \
                    else val
            out[r] = row
    return out


def evenly(n: int, points: int) -> np.ndarray:
    """Indices of at most ``points`` of ``n`` rows, spread evenly, first and last included (for lines
    that are not min/max-bucketed by the store: smoothed curves, derived values)."""
    return np.unique(np.linspace(0, n - 1, min(points, n)).astype(np.int64))


def rank_series(store: Store, rank: int, points: int = 200) -> dict[str, Series | None]:
    """One rank's step time and data wait (seconds) against step, for the ranks view's chart: what the
    rank's own timeline shows when the heat strip or the table picks it out."""
    with store.lock:
        d = store.ranks.get(rank)
        if d is None or not d.rows:
            return {"step_time": None, "data_wait": None}
        return {col: _series(store, rank, col, points, None, "step") for col in ("step_time", "data_wait")}


def baseline_overlay(v: View, base: Store, name: str, opts: Options, cache: EmaCache, *, points: int = 200,
                     recent: bool = False) -> None:
    """Fill ``v.base_*`` from a baseline run: its smoothed loss, tokens/s and MFU against step (runs are
    compared at equal steps, never at equal wall time), and the differences at this run's current step:
    the smoothed loss there, tokens/s and MFU over the same steps (the last WINDOW steps) in both runs."""
    v.baseline = name
    if v.xaxis != "step":
        v.base_note = "baseline drawn on the step axis only (x)"
    with base.lock:
        r0 = figures.lowest_rank(base)
        if r0 is None:
            v.base_note = "baseline has no rows"
            return
        d = base.ranks[r0]
        base_last = figures.step(base)  # its furthest rank's current step
        steps = None
        if recent and v.step is not None:
            span = max(200, int(v.step * 0.1))
            steps = (v.step - span, v.step)
        idx, ema = cache.series(base, r0, opts.ema_weight)
        st = d.col("step")[idx].astype(np.float64) if len(idx) else np.empty(0)
        if v.xaxis == "step":
            keep = np.ones(len(idx), bool) if steps is None else (st >= steps[0]) & (st <= steps[1])
            ks = np.flatnonzero(keep)
            if len(ks):
                sel = ks[evenly(len(ks), points)]
                v.base_loss = Series(st[sel], ema[sel])
            v.base_throughput = _series(base, r0, "tokens_per_s", points, steps, "step")
            v.base_mfu = _series(base, r0, "mfu", points, steps, "step")
        now = v.step
        if now is None:
            return
        if now > base_last:
            v.base_note = f"baseline ended at step {base_last}: no difference past it"
            return
        v.base_step = now
        at = np.flatnonzero(st <= now)
        if len(at) and v.loss_ema is not None:
            v.base_loss_ema = float(ema[at[-1]])
            delta = v.loss_ema - v.base_loss_ema
            # float32 losses smoothed in float64: equal curves differ by ~1e-13, which reads as a difference
            v.base_loss_delta = 0.0 if abs(delta) < 1e-7 * max(1.0, abs(v.base_loss_ema)) else delta
        w = figures.step_window(base, now - figures.WINDOW + 1, now)
        if w.ranks:
            tps = figures.median(figures.rank_tokens_per_s(base, w))
            if tps and v.tokens_per_s is not None:
                v.base_tps_change = v.tokens_per_s / tps - 1.0
            mfu = figures.median(figures.rank_mfu(base, opts, w))
            if mfu is not None and v.mfu is not None:
                v.base_mfu_delta = v.mfu - mfu
