"""The benchmarks still run against today's code (a benchmark that broke with a refactor measures nothing:
issue 39 found ``bench_monitor.redraw_time`` setting a store the monitor no longer takes). Tiny sizes: no
figure is judged here (benchmarks/run_all.py measures them)."""

from __future__ import annotations

import asyncio
import sys

from tests.helpers.common import ROOT


def test_the_monitors_redraw_benchmark_runs_on_a_tiny_store():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from bench_monitor import redraw_time
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    assert asyncio.run(redraw_time(2_000, 1, charts=True, cpu=True)) > 0
