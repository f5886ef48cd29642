"""Run directories shaped the way clusters and strangers shape them: nothing may crash, hang, fool mstop
or reach the terminal as a control code, and every row written is shown, counted bad or reported dropped."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mstop.engine.figures import status
from mstop.engine.health import Health
from mstop_writer import MetricsWriter
from tests.helpers.app_common import settle
from tests.helpers.common import read_events
from tests.helpers.hostile_input_common import fifo_run, hostile_run, load, no_control, spiky_run
from tests.helpers.runs import start, steps, write_events, write_rank


async def test_escape_sequences_never_reach_the_screen(tmp_path):
    from mstop.app import MonitorApp

    hostile_run(tmp_path / "run")
    app = MonitorApp(str(tmp_path / "run"), clock=lambda: time.time(), follow=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        svg = app.export_screenshot()
        no_control(svg)
        header = str(app.query_one("#header").render())
        assert "\\x1b]2;PWNED" in header


async def test_the_monitor_and_its_baseline_never_hang_on_a_fifo(tmp_path):
    from mstop.app import MonitorApp

    run = tmp_path / "run"
    fifo_run(run)
    app = MonitorApp(str(run), clock=lambda: 1030.0, baseline=str(run))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        header = str(app.query_one("#header").render())
        assert "rank3.csv not followed: a FIFO" in header and app.monitor.session.baseline_store is not None
        await pilot.press("q")


def hung_or_dead(run: Path, beats_until: float | None) -> None:
    for r in range(3):
        write_rank(run, r, steps(1, 50, t0=1000.0, loss=1.0, step_time=1.0, data_wait=0.5))
        if beats_until is not None:
            write_events(run, r, [start("s1", 995.0)] + [{"time": t, "kind": "heartbeat", "session": "s1"}
                                                         for t in range(1060, int(beats_until) + 1, 30)])


def test_hung_job_stays_stalled_and_alive(tmp_path):
    hung_or_dead(tmp_path, beats_until=1290.0)  # rows stopped at 1050, heartbeats go on
    store, opts = load(tmp_path, clock=lambda: 1300.0)
    assert status(store, opts) == "stalled"
    stalled = [a for a in Health().alerts(store, opts) if a.kind == "stalled"]
    assert "all ranks alive: likely waiting in a collective" in stalled[0].message


def test_without_heartbeats_a_silent_job_is_stalled_and_says_why(tmp_path):
    hung_or_dead(tmp_path, beats_until=None)
    store, opts = load(tmp_path, clock=lambda: 1300.0)
    assert status(store, opts) == "stalled"
    stalled = [a for a in Health().alerts(store, opts) if a.kind == "stalled"]
    assert "no heartbeats to tell dead from hung" in stalled[0].message


def test_an_abort_ends_the_run_as_failed(tmp_path):
    with pytest.raises(RuntimeError):
        with MetricsWriter(tmp_path, witness=False) as w:
            for s in range(1, 6):
                w.log(s, loss=1.0)
            raise RuntimeError("CUDA out of memory")
    store, opts = load(tmp_path)
    assert status(store, opts) == "failed"
    failed = [a for a in Health().alerts(store, opts) if a.kind == "job_failed"]
    # raised after step 5 was written (in the step after it): "after step 5", never "at step 5"
    assert "rank 0 aborted after step 5: RuntimeError: CUDA out of memory" in failed[0].message
    assert [e for e in read_events(tmp_path / "rank0.events.jsonl") if e["kind"] == "abort"][0]["session"]


async def test_rank_ages_stay_live_without_new_rows(tmp_path):
    from mstop.app import MonitorApp

    hung_or_dead(tmp_path, beats_until=1290.0)
    now = [1060.0]
    app = MonitorApp(str(tmp_path), clock=lambda: now[0], follow=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)  # the first read is done (on a thread)
        await pilot.press("r")
        table = app.query_one("#ranks")
        await settle(pilot, cond=lambda: table.row_count > 0)
        first = str(table.get_row_at(0)[-1])
        now[0] = 1200.0
        app.monitor.tick()
        await settle(pilot, cond=lambda: str(table.get_row_at(0)[-1]) != first)
        assert "2 m 30 s" in str(table.get_row_at(0)[-1])


async def test_the_alerts_list_shows_past_incidents_and_the_chart_marks_them(tmp_path):
    from mstop.app import MonitorApp
    from mstop.app.screens import AlertsScreen

    now = time.time()
    spiky_run(tmp_path, now)
    app = MonitorApp(str(tmp_path), clock=lambda: now + 1, follow=False)
    async with app.run_test(size=(120, 40)) as pilot:
        deadline = time.monotonic() + 20  # the history is scanned on a worker thread, then the chart is redrawn
        while time.monotonic() < deadline and (300.0, 30.0) not in app.monitor.last_view.loss.incident_marks:
            await pilot.pause(0.05)
        assert (300.0, 30.0) in app.monitor.last_view.loss.incident_marks
        await pilot.press("a")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, AlertsScreen)
        text = str(screen.query_one("Static").render())
        assert "1 active alert" in text and "past incidents" in text
        assert "loss_spike       job       step 300: loss 30 at step 300" in text
        assert "data_starvation  rank 1    steps 103-166" in text




def test_thirty_thousand_refused_names_are_counted_not_listed(tmp_path, capsys):
    """Issue 58, item 11: a refused list of 30,000 names printed 30,013 lines. The table lists ten and counts
    the rest; ``--json`` keeps every one."""
    import json
    import os

    from mstop.cli import main

    run = tmp_path / "run"
    write_rank(run, 0, steps(1, 3, loss=1.0))
    for r in range(1, 301):
        os.mkfifo(run / f"rank{r}.csv")
    assert main(["summary", str(run)]) in (0, 1)
    out = capsys.readouterr().out
    listed = [ln for ln in out.splitlines() if "not followed" in ln]
    assert len(listed) == 11 and "and 290 more files (summary --json lists them all)" in listed[-1], listed
    assert len(out.splitlines()) < 60
    assert main(["summary", "--json", str(run)]) in (0, 1)
    assert len(json.loads(capsys.readouterr().out)["refused_files"]) == 300
