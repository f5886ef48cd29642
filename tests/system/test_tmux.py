"""The real monitor in a real terminal (tmux), read back with capture-pane."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid

import pytest

from tests.helpers.common import HELPERS, ROOT, processes_with
from tests.helpers.tmux import screen as _screen
from tests.helpers.tmux import tmux as _tmux
from tests.helpers.tmux import until as _until

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="tmux is not installed (apt-get install tmux; .ci/run installs it)")


def test_monitor_in_tmux():
    sock = f"mstop-test-{uuid.uuid4().hex[:8]}"
    cmd = f"{sys.executable} -m mstop tests/fixtures/snap-run"
    # COLUMNS/LINES (set by some test runners) would override the terminal's real size
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX")}
    subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-x", "120", "-y", "40", "-c", str(ROOT), cmd],
                   check=True, env=env)
    try:
        expected = ["llama-7b baseline · Ascend910B3 · world 2 · ranks seen 2", "step 600 / 1,000",
                    "!! NaN/Inf at step 420", "MFU 36.3 %", "! warning", "! input-bound", "q quit"]
        screen = ""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the first frames may still be drawing
            screen = subprocess.run(["tmux", "-L", sock, "capture-pane", "-p"], capture_output=True,
                                    text=True).stdout
            if all(e in screen for e in expected):
                break
            time.sleep(0.2)
        missing = [e for e in expected if e not in screen]
        assert not missing, f"not on screen: {missing}\n{screen}"
        subprocess.run(["tmux", "-L", sock, "send-keys", "q"], check=True)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            alive = subprocess.run(["tmux", "-L", sock, "has-session"], capture_output=True).returncode == 0
            if not alive:
                break
            time.sleep(0.2)
        assert not alive, "q did not quit the monitor"
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)


def test_escape_sequences_in_a_run_do_not_reach_the_terminal(tmp_path):
    from tests.helpers.hostile_input_common import hostile_run

    hostile_run(tmp_path / "run")
    sock = f"mstop-test-{uuid.uuid4().hex[:8]}"
    _tmux(sock, f"{sys.executable} -m mstop {tmp_path / 'run'}")
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "PWNED" not in _screen(sock):
            time.sleep(0.2)
        time.sleep(1.5)  # a few more frames: a \x1b[2J would wipe the screen every second
        screen = _screen(sock)
        assert "\\x1b]2;PWNED" in screen and "status FINISHED" in screen
        title = subprocess.run(["tmux", "-L", sock, "display-message", "-p", "#{pane_title}"],
                               capture_output=True, text=True).stdout
        assert "PWNED" not in title
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)


def _jobs_of(marker: str) -> list[str]:
    return [cmd for _, cmd in processes_with(marker) if "train_tiny_lm.py" in cmd]


@pytest.mark.slow
def test_a_dropped_terminal_stops_the_demo_job(tmp_path):
    pytest.importorskip("mindspore", reason="mstop demo trains with MindSpore")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    sock = f"mstop-test-{uuid.uuid4().hex[:8]}"
    _tmux(sock, f"{sys.executable} -m mstop demo --steps 100000", {"TMPDIR": str(tmp)})
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not (_jobs_of(str(tmp)) and "status RUNNING" in _screen(sock)):
            time.sleep(0.5)
        assert _jobs_of(str(tmp)), f"the demo job did not start:\n{_screen(sock)}"
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)  # SIGHUP, as ssh gives
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _jobs_of(str(tmp)):
        time.sleep(0.2)
    assert not _jobs_of(str(tmp)), "training processes were left running"
    assert wait_gone(tmp), f"left behind: {list(tmp.iterdir())}"


def test_demo_into_a_pipe_says_why_and_draws_nothing(tmp_path):
    """``mstop demo --replay | cat`` in a real terminal: a clear message, exit 2, no screen drawn into the
    pipe (which garbled the pane: an 80x24 layout over 120x40), no job or run directory left."""
    sock = f"mstop-test-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "out"
    _tmux(sock, f"sh -c '{sys.executable} -m mstop demo --replay | cat > {out}; echo exit=$?; sleep 30'",
          {"TMPDIR": str(tmp_path)})
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "exit=" not in _screen(sock):
            time.sleep(0.2)
        screen = _screen(sock)
        assert "standard output is not one (a pipe or a file)" in screen, screen
        assert "mstop summary" in screen
        assert out.read_text() == ""  # nothing drawn into the pipe
        assert "\x1b" not in screen and "status" not in screen
        assert not any(p.name.startswith("mstop-") for p in tmp_path.iterdir() if p.name != "out")
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)
    proc = subprocess.run([sys.executable, "-m", "mstop", "tests/fixtures/snap-run"], cwd=ROOT, capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 2 and "the monitor draws on a terminal" in proc.stderr and proc.stdout == ""


def wait_gone(tmp) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(p.name.startswith("mstop-demo") for p in tmp.iterdir()):
        time.sleep(0.2)
    return not any(p.name.startswith("mstop-demo") for p in tmp.iterdir())


def test_demo_refuses_bad_counts():
    for args in (["--ranks", "0"], ["--ranks", "-1"], ["--steps", "0"], ["--ranks", "x"]):
        out = subprocess.run([sys.executable, "-m", "mstop", "demo", *args], cwd=ROOT, capture_output=True,
                             text=True, timeout=30)
        assert out.returncode == 2 and ("must be from" in out.stderr or "not a whole number" in out.stderr)


def test_runs_list_in_tmux_open_a_run_and_come_back(tmp_path):
    """``mstop runs/`` in a real terminal: every run listed, Enter opens one, Escape comes back, q quits."""
    shutil.copytree(ROOT / "tests" / "fixtures" / "snap-runs", tmp_path / "runs")
    ten_minutes_ago = time.time() - 600  # as a fresh clone's files are by the time this runs: a checkout hours
    for f in (tmp_path / "runs").rglob("*"):  # old made the stalled runs dead (the files' age witnesses the end)
        os.utime(f, (ten_minutes_ago, ten_minutes_ago))
    sock = f"mstop-test-{uuid.uuid4().hex[:8]}"
    _tmux(sock, f"{sys.executable} -m mstop {tmp_path / 'runs'}")
    try:
        _until(sock, ["5 runs", "base", "lr-high", "failed", "recompute/seed2", "stalled", "q quit"])
        subprocess.run(["tmux", "-L", sock, "send-keys", "Down", "Enter"], check=True)
        _until(sock, ["lr-high", "status FAILED", "esc runs"])
        subprocess.run(["tmux", "-L", sock, "send-keys", "Escape"], check=True)
        screen = _until(sock, ["5 runs", "recompute/seed1"])
        assert "status FAILED" not in screen
        subprocess.run(["tmux", "-L", sock, "send-keys", "q"], check=True)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and subprocess.run(["tmux", "-L", sock, "has-session"],
                                                             capture_output=True).returncode == 0:
            time.sleep(0.2)
        assert subprocess.run(["tmux", "-L", sock, "has-session"], capture_output=True).returncode != 0
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)


def test_log_pane_of_a_failed_real_job_in_tmux(tmp_path):
    """A real MindSpore job that failed, its output in train.log: in a real terminal the header names its error,
    L opens the log at the exception, / finds a line, escape closes it."""
    pytest.importorskip("mindspore", reason="a real job needs MindSpore: pip install -e '.[mindspore]'")
    run, log = tmp_path / "run", tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, str(HELPERS / "failing_job.py"), str(run), "15"], cwd=tmp_path,
                       stdout=out, stderr=subprocess.STDOUT, timeout=300)
    sock = f"mstop-test-{uuid.uuid4().hex[:8]}"
    _tmux(sock, f"{sys.executable} -m mstop {run}", width=200)  # wide: the pane's title shows "at line N"
    try:
        _until(sock, ["status FAILED", "ValueError: batch 15 holds a NaN label"])
        subprocess.run(["tmux", "-L", sock, "send-keys", "L"], check=True)
        screen = _until(sock, [f"rank 0's log: {log}", "2 error lines", "Traceback (most recent call last):",
                               "ValueError: batch 15 holds a NaN label: the input pipeline is broken"])
        assert "\x1b" not in screen and "at line 35" in screen  # at the exception
        subprocess.run(["tmux", "-L", sock, "send-keys", "/"], check=True)
        _until(sock, ["text to find (Enter: next line holding it"])
        time.sleep(0.3)  # the input takes the focus after it is drawn
        subprocess.run(["tmux", "-L", sock, "send-keys", "-l", "step 3 done"], check=True)
        subprocess.run(["tmux", "-L", sock, "send-keys", "Enter"], check=True)
        _until(sock, ["finding 'step 3 done'", "step 3 done"])
        subprocess.run(["tmux", "-L", sock, "send-keys", "Escape", "Escape"], check=True)
        _until(sock, ["status FAILED", "q quit"])
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)
