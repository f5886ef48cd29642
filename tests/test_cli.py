"""The ``mstop`` command as a user runs it."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_python_m_mstop_says_the_viewer_is_not_built_yet():
    proc = subprocess.run([sys.executable, "-m", "mstop", "runs/x"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2
    assert "the live monitor is not built yet" in proc.stderr and "mstop summary RUN_DIR" in proc.stderr


def test_version():
    proc = subprocess.run([sys.executable, "-m", "mstop", "--version"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("mstop 0.")
