"""Issue 31, part 1: each rank's own log beside its figures (the L pane), and the last error in the header.

A real MindSpore job that fails with a Python traceback, its output in a file as ``> train.log 2>&1`` puts
it: the writer records the file in its start event, the header names the last error from it, ``L`` opens
the log at that error and ``n``/``N`` jump between error lines. msrun's worker logs for a job read from its
logs. The log parser's rules on MindSpore's, MindFormers' and Python's own error lines.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.app_common import settle, text
from tests.helpers.common import HELPERS, ROOT, read_events


def _failing_job(tmp_path: Path) -> tuple[Path, Path]:
    pytest.importorskip("mindspore", reason="a real job needs MindSpore: pip install -e '.[mindspore]'")
    run, log = tmp_path / "run", tmp_path / "train.log"
    with open(log, "wb") as out:  # as `python train.py > train.log 2>&1` does
        done = subprocess.run([sys.executable, str(HELPERS / "failing_job.py"), str(run), "15"], cwd=tmp_path,
                              stdout=out, stderr=subprocess.STDOUT, timeout=300)
    assert done.returncode != 0
    return run, log


async def test_a_failed_real_job_s_traceback_is_named_and_opened(tmp_path):
    """The writer records where its output goes; the header names the last error of the failed rank's log;
    L opens the log at that error; n and N move between the error lines."""
    from mstop.app import MonitorApp
    from mstop.app.screens import LogScreen
    from mstop.app.widgets import Header

    run, log = _failing_job(tmp_path)
    (start,) = [e for e in read_events(run / "rank0.events.jsonl") if e["kind"] == "start"]
    assert start["logs"] == [str(log)]
    app = MonitorApp(str(run), follow=False)
    async with app.run_test(size=(200, 40)) as pilot:  # wide: the header cuts a long note in its middle
        await settle(pilot, lambda: "train.log" in text(app.query_one(Header)))
        head = text(app.query_one(Header))
        assert "rank 0's log (train.log, L opens it): ValueError: batch 15 holds a NaN label" in head, head
        await pilot.press("L")
        await settle(pilot, lambda: isinstance(app.screen, LogScreen))
        pane = app.screen.pane
        assert pane.path == str(log) and "step 14 done" in pane.lines
        assert pane.lines[pane.at].startswith("ValueError: batch 15 holds a NaN label")
        first_error = pane.errors[0]
        assert pane.lines[first_error] == "Traceback (most recent call last):"
        await pilot.press("n")  # wraps around to the first error line
        assert pane.at == first_error
        await pilot.press("N")
        assert pane.lines[pane.at].startswith("ValueError")
        await pilot.press("slash")
        await pilot.press(*"step 3 done", "enter")
        assert pane.lines[pane.at] == "step 3 done"
        title = str(app.screen.query_one("#log-title").content)
        assert f"rank 0's log: {log}" in title and "2 error lines" in title, title
        await pilot.press("escape")
        await settle(pilot, lambda: not isinstance(app.screen, LogScreen))


def test_summary_json_names_the_failed_rank_s_error_line_and_log(tmp_path):
    import json

    run, log = _failing_job(tmp_path)
    out = subprocess.run([sys.executable, "-m", "mstop", "summary", "--json", str(run)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    js = json.loads(out.stdout)
    assert js["status"] == "failed"
    assert js["log_path"] == str(log)
    assert js["error_line"].startswith("ValueError: batch 15 holds a NaN label")




async def test_the_log_pane_over_ssh(server, tmp_path):
    """The same failed job watched as testhost:/path (a real OpenSSH server on 127.0.0.1): L reads the log
    on that host, opens at its exception, and follows what is appended while it is open."""

    from mstop.app import MonitorApp
    from mstop.app.screens import LogScreen
    from mstop.sources.followers import log_follower

    ast_source = Path(log_follower.__file__).read_text()
    import ast

    ast.parse(ast_source, feature_version=(3, 6))  # the remote python3 may be 3.6
    run, log = _failing_job(tmp_path)
    app = MonitorApp(f"testhost:{run}", follow=False, connection=server.connection())
    async with app.run_test(size=(200, 40)) as pilot:
        from mstop.app.widgets import Header

        await settle(pilot, lambda: "rank 0's log" in text(app.query_one(Header)))
        note = app.monitor.session.culprit_error("failed")  # read on the other host, on a thread
        assert note[0].startswith("rank 0's log (train.log, L opens it): ValueError: batch 15 holds a NaN")
        await pilot.press("L")
        await settle(pilot, lambda: isinstance(app.screen, LogScreen))
        pane = app.screen.pane
        await settle(pilot, lambda: pane.at is not None)  # read on a thread: the screen never waits on ssh
        assert pane.path == f"testhost:{log}" and "step 14 done" in pane.lines, (pane.path, pane.problem)
        assert pane.lines[pane.at].startswith("ValueError: batch 15 holds a NaN label")
        with open(log, "a") as f:
            f.write("RuntimeError: appended while the pane is open\n")
        await settle(pilot, lambda: pane.lines[-1] == "RuntimeError: appended while the pane is open")
        assert pane.lines[pane.errors[-1]] == "RuntimeError: appended while the pane is open"
        await pilot.press("escape")


@pytest.mark.slow
async def test_a_real_msrun_job_s_worker_log_in_the_pane(tmp_path):
    """A real 2-worker msrun job (tests/helpers/msrun_job.py, CPU): each writer records msrun's worker_<R>.log as its
    log; the ranks view's rank 1, then L, shows that file, following it as the job trains."""
    from mstop.app import MonitorApp
    from mstop.app.screens import LogScreen
    from tests.helpers.msrun import Msrun

    job = Msrun(tmp_path, 2000, workers=2)
    try:
        job.at_step(1, 20)
        app = MonitorApp(str(job.run))
        async with app.run_test(size=(140, 40)) as pilot:
            await settle(pilot, lambda: len(app.monitor.session.store.ranks) == 2)
            await pilot.press("r")
            await settle(pilot)
            await pilot.press("down")
            await settle(pilot, lambda: app.monitor.selected_rank == 1)
            await pilot.press("L")
            await settle(pilot, lambda: isinstance(app.screen, LogScreen))
            pane = app.screen.pane
            assert pane.path == str(job.logs / "worker_1.log")
            seen = max(int(x.split()[1]) for x in pane.lines if x.startswith("STEP "))
            job.at_step(1, seen + 10)
            await settle(pilot, lambda: max(int(x.split()[1]) for x in pane.lines if x.startswith("STEP "))
                         >= seen + 10)  # following while the job trains
            await pilot.press("escape")
    finally:
        job.stop()


