"""Builders the tests of screen truth share (system/test_screen_truth_cli.py, unit/test_screen_truth.py): plain
functions and data, no fixtures."""

from __future__ import annotations

from tests.helpers.runs import start, steps, write_events, write_rank


def _run(path, *, last=200, data_wait=lambda s: 0.01, end=False, dt=1.0, total=1000, beats=True):
    """A one-rank run; ``beats``: its start event promises heartbeats (every 30 s), as the writer's does."""
    write_events(path, 0, [start("s1", t=999.0, run_name="truth", total_steps=total, host="n0",
                                 **({"heartbeat_interval": 30} if beats else {}))])
    write_rank(path, 0, steps(1, last, t0=1000.0, dt=dt, step_time=dt, data_wait=data_wait, tokens=1000,
                              loss=lambda s: 3.0 / s ** 0.2, lr=1e-4))
    if end:
        write_events(path, 0, [{"time": 1000.0 + last * dt, "kind": "end", "session": "s1", "rows": last}])
    return path


def _axis_labels(chart_text: str, side: str) -> list[str]:
    """The tick labels of a chart's left or right axis, as drawn: the text before the first ``┤`` (left), or
    after the last ``├`` (right), of each line that has one."""
    out = []
    for line in chart_text.splitlines():
        if side == "left" and "┤" in line:
            out.append(line.split("┤", 1)[0].strip(" │"))
        elif side == "right" and "├" in line:
            out.append(line.rsplit("├", 1)[1].strip(" │"))
    return [lab for lab in out if lab]
