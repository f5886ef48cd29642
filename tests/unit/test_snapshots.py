"""Snapshot tests of the monitor on a fixed run (tests/fixtures/snap-run) with a fixed clock.

Update after an intended change of the screen: ``pytest tests/test_snapshots.py --snapshot-update``,
then look at the SVGs in tests/__snapshots__/.
"""

from __future__ import annotations

from mstop.app import MonitorApp
from tests.helpers.app_common import settle as loaded  # the first read is done on a thread: wait for it
from tests.helpers.snapshots_common import NOW, RUN, app


def test_monitor_120x40(snap_compare):
    assert snap_compare(app(), terminal_size=(120, 40), run_before=loaded)


def test_monitor_80x24(snap_compare):
    assert snap_compare(app(), terminal_size=(80, 24), run_before=loaded)


def test_ranks_view(snap_compare):
    assert snap_compare(app(), terminal_size=(120, 40), run_before=loaded, press=["r"])


def test_monitor_with_a_baseline(snap_compare, tmp_path):
    """The fixture run against a slower baseline whose loss is 0.1 higher: overlay and differences."""
    from tests.helpers.runs import start, steps, write_events, write_rank

    base = tmp_path / "baseline"
    for r in range(2):
        write_events(base, r, [start("b1", t=9_000.0, run_name="baseline", world_size=2)])
        write_rank(base, r, steps(1, 1000, session="b1", t0=9_000.0, dt=7.0, step_time=7.0, tokens=32768,
                                  loss=lambda s: 4.0 * s ** -0.15 + 0.1, tokens_per_s=32768 / 7.0, mfu=0.3))
    assert snap_compare(MonitorApp(RUN, follow=False, clock=lambda: NOW, baseline=str(base)), terminal_size=(120, 40),
                        run_before=loaded)


def test_monitor_no_color(snap_compare, monkeypatch):
    """NO_COLOR: every distinction colour makes is made by a glyph or text too (raw ••, smoothed ▀▄,
    checkpoint C, warnings written out)."""
    monkeypatch.setenv("NO_COLOR", "1")
    assert snap_compare(app(), terminal_size=(120, 40), run_before=loaded)


def runs_app():
    from mstop.app.runs import RunsApp
    from mstop.sources.runs import RunsWatch
    from tests.helpers.runs import NOW_RUNS

    return RunsApp([RunsWatch("tests/fixtures/snap-runs")], label="tests/fixtures/snap-runs", clock=lambda: NOW_RUNS,
                   follow=False)


async def runs_read(pilot) -> None:
    """Every run's tail and whole history read (the alerts and goodput columns are final)."""
    model = pilot.app.runs_screen.model
    for _ in range(500):
        rows, _, _ = model.snapshot()
        if rows and all(r.history for r in rows):
            break
        await pilot.pause(0.02)
    await pilot.pause()


def test_runs_list_120x40(snap_compare):
    """A folder of runs (tests/fixtures/snap-runs, written by MetricsWriter): one marked as the baseline."""
    assert snap_compare(runs_app(), terminal_size=(120, 40), run_before=runs_read, press=["space"])


def test_runs_list_80x24(snap_compare):
    assert snap_compare(runs_app(), terminal_size=(80, 24), run_before=runs_read)


def test_help_screen(snap_compare):
    assert snap_compare(app(), terminal_size=(120, 40), run_before=loaded, press=["question_mark"])
