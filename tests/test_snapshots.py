"""Snapshot tests of the monitor on a fixed run (tests/fixtures/snap-run) with a fixed clock.

Update after an intended change of the screen: ``pytest tests/test_snapshots.py --snapshot-update``,
then look at the SVGs in tests/__snapshots__/.
"""

from __future__ import annotations

from mstop.app import MonitorApp

RUN = "tests/fixtures/snap-run"
NOW = 10_000.0 + 600 * 6.0 + 20.0  # 20 s after the last row


def app() -> MonitorApp:
    return MonitorApp(RUN, follow=False, clock=lambda: NOW)


def test_monitor_120x40(snap_compare):
    assert snap_compare(app(), terminal_size=(120, 40))


def test_monitor_80x24(snap_compare):
    assert snap_compare(app(), terminal_size=(80, 24))


def test_ranks_view(snap_compare):
    assert snap_compare(app(), terminal_size=(120, 40), press=["r"])


def test_help_screen(snap_compare):
    assert snap_compare(app(), terminal_size=(120, 40), press=["question_mark"])


def test_ranks_view_of_1024_ranks(snap_compare, tmp_path):
    """A straggler (517) and a dead rank (300) among 1,024: letters in the strip, the data wait metric."""
    from tests.runs import cluster_1024

    now = cluster_1024(tmp_path / "cluster")
    app = MonitorApp(str(tmp_path / "cluster"), follow=False, clock=lambda: now)
    assert snap_compare(app, terminal_size=(120, 40), press=["r", "m"])
