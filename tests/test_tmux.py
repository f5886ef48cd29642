"""The real monitor in a real terminal (tmux), read back with capture-pane."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid

import pytest

from tests.conftest import ROOT

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
