"""The screen tells the truth at a glance: nothing on it contradicts the rest, every number is live or
says its age, axes read as numbers people use, the keys can be found (issue 14)."""

from __future__ import annotations

import subprocess
import sys

from mstop.app import MonitorApp
from tests.helpers.app_common import settle, text
from tests.helpers.common import ROOT
from tests.helpers.runs import start, steps, write_events, write_rank
from tests.helpers.screen_truth_common import (
    _axis_labels,
    _run,
)


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


async def test_a_custom_bytes_chart_has_distinct_labels_in_one_format(tmp_path):
    """mem_used between 528.1 and 528.9 MiB: the axis's labels differ (never ``528 MiB`` twice)."""
    run = tmp_path / "run"
    write_events(run, 0, [start("s1", t=999.0, total_steps=1000)])
    write_rank(run, 0, steps(1, 200, t0=1000.0, step_time=1.0, loss=1.0,
                             mem_used=lambda s: (528.1 + 0.004 * s) * 2**20))
    app = MonitorApp(str(run), follow=False, clock=lambda: 1201.0)
    async with app.run_test(size=(160, 60)) as pilot:
        await settle(pilot)
        await pilot.press("slash")  # the metrics chooser: filter to mem_used, pick it, back
        await pilot.press(*"mem_used", "enter", "space", "escape")
        await settle(pilot)
        labels = _axis_labels(text(app.query_one("#custom-chart")), "left")
        assert len(labels) >= 2 and len(set(labels)) == len(labels), labels
        assert all(lab.endswith(" MiB") for lab in labels), labels
        assert len({len(lab.split()[0].split(".")[-1]) for lab in labels}) == 1, labels


