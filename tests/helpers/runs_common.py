"""What tests/unit/test_runs.py and tests/system/test_runs.py share."""

from __future__ import annotations

import pytest

from mstop.app.runs import RunsApp
from mstop.app.widgets.runs import RunsTable
from mstop.sources.runs import RunsWatch
from tests.helpers.runs import NOW_RUNS, runs_folder


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return runs_folder(tmp_path_factory.mktemp("runs") / "runs")


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


