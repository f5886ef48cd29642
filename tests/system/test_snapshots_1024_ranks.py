"""The tests of tests/unit/test_snapshots.py that take over a second each here: out of the developer's loop."""

from __future__ import annotations

from mstop.app import MonitorApp
from tests.helpers.app_common import settle as loaded  # the first read is done on a thread: wait for it


def test_ranks_view_of_1024_ranks(snap_compare, tmp_path):
    """A straggler (517) and a dead rank (300) among 1,024: letters in the strip, the data wait metric."""
    from tests.helpers.runs import cluster_1024

    now = cluster_1024(tmp_path / "cluster")
    app = MonitorApp(str(tmp_path / "cluster"), follow=False, clock=lambda: now)
    assert snap_compare(app, terminal_size=(120, 40), run_before=loaded, press=["r", "m"])


