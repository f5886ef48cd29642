"""Issue 26, the job's side: whatever is planted at the names the writer reads or makes in its run directory
(``profile.request``, ``profile.plan``, the plan's temporary file, ``profile/``), a real training process
never blocks, finishes, writes every row, and changes nothing outside its run directory; the monitor's
``P`` never blocks nor writes through a link either."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from mstop_writer.profiling import PLAN_NAME, REQUEST_NAME
from tests.helpers.common import HELPERS, ROOT, read_events
from tests.helpers.hostile_job_common import plant, tree

STEPS = 300

JOB = """
import os, sys, time
sys.modules["mindspore"] = None
import mstop_writer.profiling as profiling
profiling.REQUEST_EVERY = 0.2
from mstop_writer import MetricsWriter

run, steps = sys.argv[1], int(sys.argv[2])
with MetricsWriter(run, rank=0, world_size=1, heartbeat_interval=0.5) as w:
    print(os.getpid(), flush=True)
    for s in range(1, steps + 1):
        w.log(s, loss=1.0 / s, step_time=0.01)
        if s == 5:
            print("READY", flush=True)
            sys.stdin  # never read
            time.sleep(0.3)
        time.sleep(0.01)
print("DONE", flush=True)
"""

def run_job(tmp_path: Path, name: str, kind: str, *, request: bool) -> tuple[Path, Path, str, str]:
    """Start the job, plant ``kind`` at ``name`` (``{pid}`` filled in) once it trains, and, with
    ``request``, also a valid request so rank 0 makes a plan; wait for the job. Returns the run dir, the
    outside dir, stdout, stderr."""
    run, outside = tmp_path / "run", tmp_path / "outside"
    run.mkdir()
    outside.mkdir()
    (outside / "target").write_text("7\n")
    (tmp_path / "job.py").write_text(JOB)
    before = tree(outside)
    if "{pid}" not in name:
        plant(run / name, kind, outside)  # there before the job starts
    p = subprocess.Popen([sys.executable, str(tmp_path / "job.py"), str(run), str(STEPS)], cwd=ROOT,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pid = int(p.stdout.readline())
        assert p.stdout.readline().strip() == "READY"
        if "{pid}" in name:
            plant(run / name.format(pid=pid), kind, outside)  # the pid is in the start event: guessable
        if request:
            (run / REQUEST_NAME).write_text("3\n")
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise AssertionError(f"the job blocked with {kind} at {name}: {err[-2000:]}") from None
    assert p.returncode == 0 and "DONE" in out, err[-3000:]
    assert tree(outside) == before, "the job changed something outside its run directory"
    return run, outside, out, err


def rows_and_end(run: Path) -> None:
    lines = (run / "rank0.csv").read_text().splitlines()
    assert len(lines) == STEPS + 1
    ev = read_events(run / "rank0.events.jsonl")
    assert ev[-1]["kind"] == "end" and ev[-1]["rows"] == STEPS


KINDS = ["fifo", "link-out", "link-stdin", "directory", "device"]

@pytest.mark.parametrize("kind", KINDS)
def test_a_request_name_that_is_not_a_regular_file_never_blocks_the_job(tmp_path, kind):
    run, outside, _, err = run_job(tmp_path, REQUEST_NAME, kind, request=False)
    rows_and_end(run)
    assert f"{REQUEST_NAME} in {run} is" in err and "not read, not written, not removed" in err
    assert err.count("not read, not written, not removed") == 1  # once, not every look
    assert os.path.lexists(run / REQUEST_NAME)  # left alone
    assert not (run / PLAN_NAME).exists()


@pytest.mark.parametrize("kind", KINDS)
def test_a_plan_name_planted_while_the_job_runs_never_blocks_it(tmp_path, kind):
    run, outside, _, err = run_job(tmp_path, PLAN_NAME, kind, request=False)
    rows_and_end(run)
    assert "not read, not written, not removed" in err


@pytest.mark.parametrize("kind", KINDS)
def test_a_request_over_a_planted_plan_replaces_the_plant_not_what_it_points_to(tmp_path, kind):
    run, outside, _, err = run_job(tmp_path, PLAN_NAME, kind, request=True)
    rows_and_end(run)
    ev = read_events(run / "rank0.events.jsonl")
    if kind == "directory":  # a directory is not renamed over: the request fails, and says so once
        assert "cannot plan the requested profile" in err
        assert not [e for e in ev if e["kind"] == "profile_request"]
        return
    plan = run / PLAN_NAME
    assert stat.S_ISREG(os.lstat(plan).st_mode) and json.loads(plan.read_text())["steps"] == 3
    (req,) = [e for e in ev if e["kind"] == "profile_request"]
    (prof,) = [e for e in ev if e["kind"] == "profile"]  # no MindSpore here: the window says why it did not open
    assert (prof["first_step"], prof["last_step"]) == (req["first_step"], req["last_step"]) and prof["error"]
    assert not (run / REQUEST_NAME).exists()  # taken


@pytest.mark.parametrize("kind", ["link-out", "fifo"])
def test_a_plant_at_the_old_temporary_name_is_never_written_through(tmp_path, kind):
    """``.profile.plan.<pid>`` was the temporary file's name (the pid is in the start event); the plan now
    goes through a new file of a random name made with O_EXCL."""
    run, outside, _, err = run_job(tmp_path, f".{PLAN_NAME}.{{pid}}", kind, request=True)
    rows_and_end(run)
    assert json.loads((run / PLAN_NAME).read_text())["steps"] == 3
    assert not [p for p in os.listdir(run) if p.startswith(f".{PLAN_NAME}.") and not os.path.islink(run / p)
                and not stat.S_ISFIFO(os.lstat(run / p).st_mode)]  # no temporary file left behind


def test_a_profile_directory_that_links_out_of_the_run_is_not_profiled_through(tmp_path):
    """profile/ a symlink to another directory: the window does not open, a profile event says why, and
    nothing is made in the other directory (README, "Profiles")."""
    run, outside = tmp_path / "run", tmp_path / "outside"
    run.mkdir()
    outside.mkdir()
    (run / "profile").symlink_to(outside)
    script = tmp_path / "job.py"
    script.write_text("import sys\nfrom mstop_writer import MetricsWriter\n"
                      "with MetricsWriter(sys.argv[1], rank=0, world_size=1, profile_steps=(3, 4)) as w:\n"
                      "    for s in range(1, 8):\n        w.log(s, loss=1.0, step_time=0.01)\n")
    out = subprocess.run([sys.executable, str(script), str(run)], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert os.listdir(outside) == []
    (prof,) = [e for e in read_events(run / "rank0.events.jsonl") if e["kind"] == "profile"]
    assert "is a symlink: not profiling through it" in prof["error"]
    assert len((run / "rank0.csv").read_text().splitlines()) == 8


@pytest.mark.slow
def test_a_real_mindspore_job_with_a_fifo_request_finishes(tmp_path):
    """The same with MstopCallback in a real Model.train (rank 0 looks for requests at its steps' ends)."""
    pytest.importorskip("mindspore", reason="a real job needs MindSpore: pip install -e '.[mindspore]'")
    run = tmp_path / "run"
    run.mkdir()
    os.mkfifo(run / REQUEST_NAME)
    p = subprocess.run([sys.executable, str(HELPERS / "profile_job.py"), str(run), "80"], cwd=tmp_path,
                       stdin=subprocess.PIPE, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "DONE" in p.stdout, p.stderr[-3000:]
    assert len((run / "rank0.csv").read_text().splitlines()) == 81
    assert "not read, not written, not removed" in p.stderr
    assert stat.S_ISFIFO(os.lstat(run / REQUEST_NAME).st_mode)


@pytest.mark.parametrize("kind", ["fifo", "link-out", "link-stdin"])
async def test_the_monitors_p_never_blocks_nor_writes_through_a_plant(tmp_path, kind):
    from mstop.app import MonitorApp
    from tests.helpers.app_common import settle
    from tests.helpers.runs import start, steps, write_events, write_rank

    run, outside = tmp_path / "run", tmp_path / "outside"
    outside.mkdir()
    (outside / "target").write_text("outside\n")
    write_events(run, 0, [start("s1", t=999.0, world_size=1)])
    write_rank(run, 0, steps(1, 20, t0=1000.0, dt=1.0, step_time=1.0, loss=1.0))
    plant(run / REQUEST_NAME, kind, outside)
    before = tree(outside)
    app = MonitorApp(str(run), follow=False, clock=lambda: 1030.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("P")
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        await pilot.press("q")
    assert tree(outside) == before
    assert stat.S_ISREG(os.lstat(run / REQUEST_NAME).st_mode) and (run / REQUEST_NAME).read_text() == "10\n"


