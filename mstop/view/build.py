"""Building a frame: a snapshot of the store taken under its lock, then each part from the snapshot.

The reading thread adds rows while a frame is computed and drawn: only taking the snapshot (O(ranks))
holds the lock.
"""

from __future__ import annotations

from ..engine import figures
from ..engine.figures import Options
from ..engine.goodput import ledger
from ..engine.store import Snapshot
from . import charts, parts
from .frame import View


def build_view(store: Snapshot, opts: Options, *, points: int = 200, xaxis: str = "step", recent: bool = False,
               custom: tuple[str, ...] = (), header_only: bool = False) -> View:
    """One frame's content. ``points`` is the chart width in points; ``recent`` limits the charts to the
    last 10 % of the run (at least 200 steps); ``header_only`` builds the header alone (the once-a-second
    tick, and the ranks view, which shows no run-wide chart), the ranks table included."""
    snap = store.snapshot()
    now = opts.clock()
    v = View(xaxis=xaxis, now=now, chart_rank=figures.lowest_rank(snap))
    v.header = parts.header(snap, opts, now)
    g = ledger(snap, opts)  # kept in its open form: O(ranks changed) (mstop.engine.goodput)
    if g is not None:
        v.header.goodput, v.header.goodput_lost = g.goodput, g.largest_losses(2)
    v.ranks = parts.ranks(snap, opts)
    v.devices = parts.device_cells(snap) if snap.devices else []
    if header_only or v.chart_rank is None:
        v.throughput = parts.throughput(snap, opts)
        return v
    steps = charts.step_range(v.header.step, recent)
    v.loss = parts.loss(snap, opts, points=points, steps=steps, xaxis=xaxis)
    v.loss.custom = {c: charts.series(snap, v.chart_rank, c, points, steps, xaxis) for c in custom}
    v.throughput = parts.throughput(snap, opts)
    v.throughput.series = charts.series(snap, v.chart_rank, "tokens_per_s", points, steps, xaxis)
    if v.throughput.series is None and v.throughput.tokens_per_s is None:  # no tokens (a MindFormers log)
        v.throughput.series = charts.per_second_series(snap, v.chart_rank, "samples", points, steps, xaxis)
        v.throughput.series_of = "samples/s" if v.throughput.series is not None else "tokens/s"
    v.throughput.mfu_series = charts.series(snap, v.chart_rank, "mfu", points, steps, xaxis)
    if v.throughput.mfu_series is None and v.throughput.mfu is not None:  # derived, not written
        v.throughput.mfu_series = charts.mfu_series(snap, opts, v.chart_rank, points, steps, xaxis)
    v.memory = parts.memory(snap)
    v.memory.series = charts.headroom_series(snap, v.memory.worst, v.chart_rank, points, steps, xaxis)
    v.data = parts.data(snap)
    return v
