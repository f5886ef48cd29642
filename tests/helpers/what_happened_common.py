"""Builders the tests of what happened share (system/test_what_happened_real_jobs.py, unit/test_what_happened.py):
plain functions and data, no fixtures."""

from __future__ import annotations

from pathlib import Path


def _writer_run(run: Path, sessions: list[tuple[int, int, bool]], *, t0: float, rank: int = 0, world: int = 1,
                dt: float = 1.0) -> float:
    """Sessions of real MetricsWriter processes at a moving clock: (first step, last step, ended cleanly);
    each one after the previous, 30 s later. Returns the clock at the end."""
    from mstop_writer import MetricsWriter

    now = [t0]
    for first, last, clean in sessions:
        w = MetricsWriter(run, rank=rank, world_size=world, heartbeat_interval=5, memory_interval=3600,
                          clock=lambda: now[0], total_steps=sessions[-1][1])
        for s in range(first, last + 1):
            now[0] += dt
            w.log(s, loss=1.0 / s, step_time=dt)
            if s % 100 == 0:
                w.checkpoint(s, f"ck/{s}.ckpt")
        w.close(clean=clean)
        now[0] += 30.0
    return now[0]


