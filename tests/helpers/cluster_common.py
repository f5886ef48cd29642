"""Builders the tests of cluster share (system/test_cluster_at_scale.py, unit/test_cluster.py): plain functions and
data, no fixtures."""

from __future__ import annotations

import random

from mstop.engine.figures import Options
from mstop.engine.health import Health
from mstop.engine.store import Store
from mstop.sources.local import LocalSource
from tests.helpers.runs import steps, write_with_writer


def load(run) -> Store:
    store = Store()
    LocalSource(str(run), store).read_all()
    return store


def alerts(run, now):
    return Health().alerts(load(run), Options(clock=lambda: now))


def beats(t_last: float, every: float = 30.0, n: int = 4) -> list[dict]:
    return [{"time": t_last - every * k, "kind": "heartbeat", "session": "s1"} for k in range(n)][::-1]


def cluster(run, ranks, rows=60, t0=10_000.0, data_wait=None, last_step=None, heartbeat_at=None, t0_of=None,
            **options):
    base = t0
    for r in range(ranks):
        t0 = t0_of(r) if t0_of else base
        rng = random.Random(r)
        n = rows if last_step is None else last_step(r)
        dw = (lambda s, g=rng: abs(g.gauss(0.02, 0.005))) if data_wait is None else \
            (lambda s, r=r, g=rng: data_wait(r, s, g))
        hb = heartbeat_at(r) if heartbeat_at else t0 + n
        write_with_writer(run, r, ranks, steps(1, n, t0=t0, dt=1.0, loss=1.0, step_time=1.0, data_wait=dw, tokens=100),
                          beats=[b["time"] for b in beats(hb)], t_start=t0 - 5, host=f"node{r // 8}", **options)
    return base + rows


