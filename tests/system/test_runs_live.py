"""A folder of runs (issue 17): the runs screen as a user sees it, its keys, and summary over every run.

The runs are written by the real MetricsWriter (tests/helpers/runs.py: runs_folder), in known states at NOW_RUNS."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from mstop.app.monitor import MonitorScreen
from mstop.app.runs import CompareScreen, RunsApp
from mstop.app.widgets import Header
from mstop.app.widgets.runs import RunsTable
from mstop.sources.runs import RunsWatch
from tests.helpers.common import ROOT
from tests.helpers.runs import RUNS, write_run
from tests.helpers.runs_common import app_for, settle, table_rows, title


def mstop(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "mstop", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


async def test_list_figures_agree_with_summary_of_each_run(folder):
    """The list reads only each run's last rows: its figures are still summary's, to the digit shown."""
    app = app_for(folder)
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(pilot, lambda: len(table_rows(app)) == len(RUNS))
        rows = {r.name: r for r in app.model.snapshot()[0]}
    out = mstop("summary", str(folder), "--json")
    assert out.returncode == 1 or out.returncode == 0, out.stderr
    summaries = {os.path.relpath(s["run_dir"], folder): s for s in json.loads(out.stdout)["runs"]}
    assert set(summaries) == set(RUNS)
    for name, s in summaries.items():
        r = rows[name]
        assert r.step == s["step"] and r.loss == pytest.approx(s["loss_ema"], rel=1e-9)
        assert r.tokens_per_s == pytest.approx(s["tokens_per_s"], rel=1e-9)
        assert r.mfu == pytest.approx(s["mfu"], rel=1e-6)


async def test_marked_runs_compare_on_screen_as_mstop_compare_prints_them(folder):
    app = app_for(folder)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot, lambda: len(table_rows(app)) == len(RUNS))
        await pilot.press("space", "space")  # base (the baseline; the cursor moves on), then lr-high
        await settle(pilot, lambda: "marked 2" in title(app))
        await pilot.press("c")
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen), tries=1000)
        shown = app.screen.text
    out = mstop("compare", str(folder / "base"), str(folder / "lr-high"))
    assert out.returncode == 0, out.stderr
    assert shown == out.stdout


def test_summary_of_a_folder_of_runs_and_the_worst_exit_code(folder):
    out = mstop("summary", str(folder), "--json")
    got = json.loads(out.stdout)
    assert sorted(os.path.relpath(s["run_dir"], folder) for s in got["runs"]) == sorted(RUNS)
    assert all(set(s) >= {"status", "loss_ema", "goodput", "alerts"} for s in got["runs"])
    assert out.returncode == 0
    fail = mstop("summary", str(folder), "--json", "--fail-on", "alert")
    assert fail.returncode == 1  # lr-high failed, seed2 stalled: their alerts fail it
    text = mstop("summary", str(folder))
    assert text.returncode == 0 and all(name in text.stdout for name in RUNS)


def test_bad_arguments_say_what_is_wrong(tmp_path):
    out = mstop("summry", str(tmp_path))
    assert out.returncode == 2 and "did you mean summary?" in out.stderr
    f = tmp_path / "file.csv"
    f.write_text("x\n")
    out = mstop("summary", str(f))
    assert out.returncode == 2 and "is a file" in out.stderr
    out = mstop(str(f))
    assert out.returncode == 2 and "is a file" in out.stderr


def test_summary_of_an_empty_folder_says_so_and_a_closed_pipe_is_no_traceback(tmp_path):
    (tmp_path / "sub").mkdir()
    out = mstop("summary", str(tmp_path))
    assert out.returncode == 0 and "waiting" in out.stdout
    assert f"no rank files (rank*.csv) nor MindFormers logs in {tmp_path}, nor runs below it" in out.stderr
    # the reader is gone before mstop writes (as `| head` leaves): a quiet exit 141, as a shell's SIGPIPE
    proc = subprocess.Popen([sys.executable, "-m", "mstop", "summary", str(ROOT / "tests/fixtures/snap-run"), "--json"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141 and "Traceback" not in err, err


async def test_a_nan_long_ago_is_in_the_lists_alerts_once_its_history_is_read(tmp_path):
    """Issue 27 #8: a NaN loss at step 350 of 2,000 (outside the files' ends the list reads first): '?' while
    the history is unread, then the alert summary shows, and alerts>0 keeps the run; the run's name shows."""
    from mstop_writer import MetricsWriter

    run = tmp_path / "runs" / "exp-7"
    now = [1_800_000_000.0]
    w = MetricsWriter(run, rank=0, world_size=1, run_name="llama-nan", heartbeat_interval=3600,
                      memory_interval=3600, clock=lambda: now[0])
    for s in range(1, 2001):
        now[0] += 1.0
        w.log(s, loss=float("nan") if s == 350 else 1.0, step_time=1.0)
    w.close()
    write_run(tmp_path / "runs" / "other", status="finished", note="", world=1, steps=30)
    js = json.loads(mstop("summary", str(run), "--json").stdout)
    assert [a["kind"] for a in js["alerts"]] == ["nan_loss"]
    app = RunsApp([RunsWatch(str(tmp_path / "runs"))], label="runs", clock=lambda: now[0] + 10, follow=False)
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(pilot, lambda: any(r[1].startswith("exp-7") and r[9].strip() == "1" for r in table_rows(app)),
                     tries=500)
        row = next(r for r in table_rows(app) if r[1].startswith("exp-7"))
        assert row[1] == "exp-7 · llama-nan"
        await pilot.press("slash", *"alerts>0", "enter")
        await settle(pilot, lambda: [r[1].split(" ")[0] for r in table_rows(app)] == ["exp-7"])


async def test_filter_words_and_conditions_and_a_bad_filter_says_why(folder):
    app = app_for(folder)
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(pilot, lambda: len(table_rows(app)) == len(RUNS))
        await pilot.press("slash", *"status=running world_size>=4", "enter")
        await settle(pilot, lambda: len(table_rows(app)) == 1)
        assert table_rows(app)[0][1] == "recompute/seed1" and "1 match" in title(app)
        await pilot.press("slash", "ctrl+u", *"recompute", "enter")
        await settle(pilot, lambda: len(table_rows(app)) == 2)
        await pilot.press("slash", "ctrl+u", *"loss_ema<0.69", "enter")  # summary's name for the column
        await settle(pilot, lambda: [r[1] for r in table_rows(app)] == ["no-delay"])
        await pilot.press("slash", "ctrl+u", *"note~delay", "enter")
        await settle(pilot, lambda: [r[1] for r in table_rows(app)] == ["no-delay"])
        await pilot.press("slash", "ctrl+u", *"step>lots", "enter")
        await settle(pilot, lambda: "bad filter" in str(app.runs_screen.query_one("#runs-notes").content))
        assert "compares numbers" in str(app.runs_screen.query_one("#runs-notes").content)
        assert [r[1] for r in table_rows(app)] == ["no-delay"]  # the last good filter still holds
        await pilot.press("escape", "slash", "ctrl+u", "enter")  # empty: every run again
        await settle(pilot, lambda: len(table_rows(app)) == len(RUNS))


async def test_enter_opens_the_monitor_and_escape_returns_with_the_cursor_on_the_run(folder):
    app = app_for(folder)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, lambda: len(table_rows(app)) == len(RUNS))
        await pilot.press("down", "down", "enter")  # the third run by name: no-delay
        await settle(pilot, lambda: isinstance(app.screen, MonitorScreen))
        await settle(pilot, lambda: "no-delay" in str(app.screen.query_one(Header).content))
        await pilot.press("escape")
        await settle(pilot, lambda: app.screen is app.runs_screen)
        table = app.runs_screen.query_one(RunsTable)
        assert table.cursor_run.endswith("no-delay") and table_rows(app)[table.cursor_row][1] == "no-delay"
        # opened once: its whole history is read, so goodput is known now
        await settle(pilot, lambda: table_rows(app)[table.cursor_row][8] not in ("",))


async def test_a_run_appearing_and_a_run_finishing_while_the_list_is_open(tmp_path):
    root = tmp_path / "runs"
    now = time.time()
    write_run(root / "a", status="running", note="first", world=1, steps=20, t0=now - 20, clock_now=now)
    app = RunsApp([RunsWatch(str(root))], label=str(root), follow=True)
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(pilot, lambda: len(table_rows(app)) == 1)
        assert table_rows(app)[0][2] == "running"
        write_run(root / "b", status="finished", note="second", world=1, steps=20, t0=now - 100)
        await settle(pilot, lambda: len(table_rows(app)) == 2, tries=600)
        from mstop_writer import MetricsWriter

        events = root / "a" / "rank0.events.jsonl"
        session = json.loads(events.read_text().splitlines()[0])["session"]
        with open(events, "a") as f:  # the job ends: its end event
            f.write(json.dumps({"time": time.time(), "kind": "end", "session": session, "step": 19}) + "\n")
        await settle(pilot, lambda: {r[1]: r[2] for r in table_rows(app)}.get("a") == "finished", tries=600)
        assert MetricsWriter  # the runs are the writer's own files


