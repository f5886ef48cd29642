"""Builders the monitor's tests share in both tiers (plain functions, no fixtures): a run of known figures
(``make_run``, ``make_baseline``), the app on it at a fixed clock, waiting for it to draw (``settle``), and the
screen read as text."""

from __future__ import annotations

import re

from mstop.app import MonitorApp
from mstop.app.widgets import Chart, RanksTable
from tests.helpers.runs import start, steps, write_events, write_rank

NOW = 2000.0


def make_run(path, *, ranks=2, last=40, name="exp-1", loss=None):
    for r in range(ranks):
        write_events(path, r, [start("s1", t=900.0, run_name=name, device="Ascend910B3", world_size=ranks,
                                     total_steps=100, host=f"node{r}", memory_source="device",
                                     flops_per_token=6e9, peak_flops=313e12),
                               {"time": 1500.0, "kind": "checkpoint", "step": 30, "path": "/ck/step30.ckpt"}])
        write_rank(path, r, steps(1, last, t0=1000.0, dt=24.0, loss=loss or (lambda s: 4.0 / s ** 0.3),
                                  lr=1e-4, grad_norm=1.5, step_time=24.0, data_wait=0.5 * (r + 1), tokens=2048,
                                  samples=4, tokens_per_s=2048 / 24.0, mfu=0.41, mem_used=50e9, mem_peak=56e9 + r * 1e9,
                                  mem_total=64e9))
    return path


def text(widget) -> str:
    if isinstance(widget, Chart):
        return str(widget.render())  # as drawn: the title is fitted to the width there
    return str(widget.content)


async def settle(pilot, cond=None, tries=200):
    """Let the app draw: the first read (on a thread) done on every monitor screen, then ``cond`` or a few
    turns of the event loop."""
    from mstop.app.monitor import MonitorScreen

    for _ in range(1000):
        if not any(getattr(s, "reading", False) for s in pilot.app.screen_stack if isinstance(s, MonitorScreen)):
            break
        await pilot.pause(0.01)
    for _ in range(tries):
        await pilot.pause(0.02 if cond else 0)
        if cond is None or cond():
            return
    assert cond(), "the screen did not show what was expected in time"


def screen_lines(app: MonitorApp) -> list[str]:
    """The screen as the terminal shows it, one string per row (from Textual's own screenshot)."""
    import html

    rows: dict[float, list[tuple[float, str]]] = {}
    for m in re.finditer(r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>', app.export_screenshot()):
        rows.setdefault(float(m.group(2)), []).append((float(m.group(1)), html.unescape(m.group(3))))
    return ["".join(t for _, t in sorted(parts)).replace("\xa0", " ") for _, parts in sorted(rows.items())]


def app_for(path, **kw) -> MonitorApp:
    return MonitorApp(str(path), follow=False, clock=lambda: NOW, **kw)


def make_baseline(path, *, last=60):
    """A slower baseline: 30 s steps instead of 24, loss 0.1 higher at every step, MFU 33 % instead of 41."""
    for r in range(2):
        write_events(path, r, [start("s1", t=100.0, run_name="base", world_size=2, flops_per_token=6e9,
                                     peak_flops=313e12)])
        write_rank(path, r, steps(1, last, t0=200.0, dt=30.0, loss=lambda s: 4.0 / s ** 0.3 + 0.1, step_time=30.0,
                                  tokens=2048, tokens_per_s=2048 / 30.0, mfu=0.33))
    return path


def toasts(app) -> list[str]:
    """The messages of the notifications the app shows now (Textual keeps them in its own list)."""
    return [str(n.message) for n in app._notifications]


async def grouped_by_host(app, pilot) -> tuple[RanksTable, list[list[str]]]:
    """The ranks view opened (r) and grouped by host (h): its table, and the text of each of its rows."""
    await settle(pilot)
    await pilot.press("r")
    await settle(pilot, lambda: app.query_one(RanksTable).row_count > 0)
    await pilot.press("h")
    table = app.query_one(RanksTable)
    return table, [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
