"""Building a frame: a snapshot of the store taken under its lock, then each part from the snapshot.

The reading thread adds rows while a frame is computed and drawn: only taking the snapshot (O(ranks))
holds the lock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..engine import figures
from ..engine.figures import Options
from ..engine.store import Snapshot
from . import charts, parts
from .frame import View


@dataclass
class GoodputCache:
    """The goodput ledger, read again at most every ``every`` seconds of the clock, or 20 times as long as
    the last reading took (O(sessions) a rank: at most 5 % of a core), or when the status changes; read in
    the frame. The live session's (mstop.live.goodput) reads a large run's on a thread instead."""

    every: float = 5.0
    at: float | None = None
    status: str | None = None
    value: Any = None
    cost: float = 0.0  # seconds the last reading took

    def get(self, store: Snapshot, opts: Options, status: str) -> Any:
        now = opts.clock()
        if self.at is None or status != self.status or abs(now - self.at) >= max(self.every, 20 * self.cost):
            if self.start(store, opts):
                self.at, self.status = now, status
        return self.value

    def start(self, store: Snapshot, opts: Options) -> bool:
        """Read the ledger of ``store`` (a snapshot): here, now. Whether a reading began (``value`` and
        ``cost`` are set when it is done)."""
        self.read(store, opts)
        return True

    def read(self, store: Snapshot, opts: Options) -> None:
        from ..engine.goodput import ledger

        t = time.perf_counter()
        self.value = ledger(store, opts)
        self.cost = time.perf_counter() - t


@dataclass
class Carry:
    """What a frame keeps for the next one, so a frame on a long run costs what it does on a short one: the
    goodput ledger, read again every few seconds. (The smoothed loss and the tokens seen are the store's
    folds, extended as rows arrive: mstop.engine.smoothing, mstop.engine.folds.)"""

    goodput: GoodputCache = field(default_factory=GoodputCache)


def build_view(store: Snapshot, opts: Options, *, points: int = 200, xaxis: str = "step", recent: bool = False,
               carry: Carry | None = None, custom: tuple[str, ...] = (), header_only: bool = False) -> View:
    """One frame's content. ``points`` is the chart width in points; ``recent`` limits the charts to the
    last 10 % of the run (at least 200 steps); ``header_only`` builds the header alone (the once-a-second
    tick, and the ranks view, which shows no run-wide chart), the ranks table included."""
    snap = store.snapshot()
    carry = carry or Carry()
    now = opts.clock()
    v = View(xaxis=xaxis, now=now, chart_rank=figures.lowest_rank(snap))
    v.header = parts.header(snap, opts, now)
    g = carry.goodput.get(snap, opts, v.header.status)
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
