"""The screen tells the truth at a glance: nothing on it contradicts the rest, every number is live or
says its age, axes read as numbers people use, the keys can be found (issue 14)."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers.common import ROOT
from tests.helpers.screen_truth_common import _run  # noqa: F401


def test_piped_text_has_no_trailing_spaces_and_cuts_no_cell(tmp_path):
    run = tmp_path / ("a-very-long-run-name-that-would-not-fit-in-eighty-columns-" + "x" * 40)
    _run(run, last=100)
    for args in (["summary", str(run)], ["compare", str(run), str(run)]):
        out = subprocess.run([sys.executable, "-m", "mstop", *args], cwd=ROOT, capture_output=True, text=True,
                             timeout=60, env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"})
        assert out.returncode == 0, out.stderr
        assert all(line == line.rstrip() for line in out.stdout.splitlines()), args
        assert "…" not in out.stdout, out.stdout
    assert run.name in subprocess.run([sys.executable, "-m", "mstop", "summary", str(run)], cwd=ROOT,
                                      capture_output=True, text=True, timeout=60).stdout


def test_monitor_help_lists_every_command():
    out = subprocess.run([sys.executable, "-m", "mstop", "tests/fixtures/snap-run", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=30).stdout
    assert all(f"mstop {c}" in out.replace("\n", " ") for c in ("summary", "compare", "report", "demo"))


