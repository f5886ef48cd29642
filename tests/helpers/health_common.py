"""Builders the tests of health share (system/test_health_cli.py, system/test_hostile_input_processes.py,
unit/test_health.py): plain functions and data, no fixtures."""

from __future__ import annotations

import random

from mstop.engine.store import Store
from mstop.sources.local import LocalSource
from tests.helpers.runs import steps, write_rank


def noisy(seed: int, base=lambda s: 3.0 * s ** -0.2, sd=0.02):
    rng = random.Random(seed)
    return lambda s: round(base(s) * (1 + rng.gauss(0, sd)), 6)


def healthy(run, ranks=2, n=400, t0=1000.0, **over):
    """A healthy noisy run: the negative case of every rule."""
    for r in range(ranks):
        cols = dict(loss=noisy(r), grad_norm=noisy(100 + r, base=lambda s: 1.0, sd=0.05), step_time=1.0,
                    data_wait=0.02, tokens=100, mem_peak=40e9, mem_total=64e9, overflow=0, loss_scale=1024.0)
        cols.update(over)
        write_rank(run, r, steps(1, n, t0=t0, dt=1.0, **cols))
    return t0 + n  # the last row's time


def load(run) -> Store:
    store = Store()
    LocalSource(str(run), store).read_all()
    return store
