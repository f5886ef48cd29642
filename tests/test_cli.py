"""The ``mstop`` command as a user runs it."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def mstop(*args):
    return subprocess.run([sys.executable, "-m", "mstop", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def test_monitor_of_a_missing_directory_exits_2():
    proc = mstop("runs/does-not-exist")
    assert proc.returncode == 2 and "runs/does-not-exist: no such directory" in proc.stderr


def test_monitor_usage_errors_exit_2():
    proc = mstop("tests/fixtures/snap-run", "--poll", "0")
    assert proc.returncode == 2 and "must be positive" in proc.stderr


def test_version_and_help():
    assert mstop("--version").stdout.startswith("mstop 0.")
    out = mstop("--help").stdout
    assert "summary" in out and "demo" in out
