"""Builders the tests of hostile clocks share (system/test_hostile_clocks_cli.py, unit/test_hostile_clocks.py):
plain functions and data, no fixtures."""

from __future__ import annotations


def _write(run, rank: int, times: list[float], *, world: int = 1, end: bool = False, beats: bool = False,
           start_at: float | None = None) -> None:
    """Rank ``rank``'s files written now by the real MetricsWriter, its clock reading ``times`` for its
    rows (the start event at ``start_at``, else a second before the first row)."""
    from mstop_writer import MetricsWriter

    now = [start_at if start_at is not None else times[0] - 1.0]
    w = MetricsWriter(run, rank=rank, world_size=world, heartbeat_interval=3600, memory_interval=3600,
                      clock=lambda: now[0])
    for s, t in enumerate(times, 1):
        now[0] = t
        w.log(s, loss=1.0 / s, step_time=1.0)
        if beats:
            w.event("heartbeat", step=s, session=w.session)
    w.close(clean=end)


