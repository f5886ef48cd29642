"""Builders the tests of runs share (system/test_runs_live.py, unit/test_nan_shown.py, unit/test_runs.py,
unit/test_screen_words.py): plain functions and data, no fixtures."""

from __future__ import annotations

from mstop.app.runs import RunsApp
from mstop.app.widgets.runs import RunsTable
from mstop.sources.runs import RunsWatch
from tests.helpers.runs import NOW_RUNS


def app_for(root, follow=False, clock=lambda: NOW_RUNS):
    return RunsApp([RunsWatch(str(root))], label=str(root), clock=clock, follow=follow)


def table_rows(app) -> list[list[str]]:
    t = app.runs_screen.query_one(RunsTable)
    return [[str(c) for c in t.get_row_at(i)] for i in range(t.row_count)]


def title(app) -> str:
    return str(app.runs_screen.query_one("#runs-title").content)


async def settle(pilot, cond, tries=300):
    for _ in range(tries):
        await pilot.pause(0.02)
        if cond():
            return
    assert cond(), "the screen did not show what was expected in time"


