"""The monitor as a user sees it: rendered text of the header and panels, every key."""

from __future__ import annotations

import json
import sys

from mstop.app import MonitorApp
from mstop.app.widgets import Header
from tests.helpers.app_common import NOW, make_run, run, settle, text  # noqa: F401


async def test_alerts_panel_badge_acknowledge_and_on_alert(tmp_path):
    from mstop.app.screens import AlertsScreen
    from mstop.app.widgets import AlertsPanel

    run = make_run(tmp_path / "run", ranks=1, loss=lambda s: "nan" if s == 25 else 1.0)
    got = tmp_path / "alerts.jsonl"
    cmd = f"{sys.executable} -c \"import sys; open(sys.argv[1], 'a').write(sys.stdin.read() + chr(10))\" {got}"
    app = MonitorApp(str(run), follow=False, clock=lambda: NOW, on_alert=cmd)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        head = text(app.query_one(Header))
        assert "ALERTS 1 (1 new: a)" in head and app.query_one(Header).has_class("new-alerts")
        assert "!! nan_loss loss nan at step 25 on rank 0" in text(app.query_one(AlertsPanel))
        await settle(pilot, lambda: got.exists() and got.read_text().strip())
        sent = [json.loads(line) for line in got.read_text().splitlines()]
        assert sent == [{"kind": "nan_loss", "rank": 0, "step": 25, "message": "loss nan at step 25 on rank 0"}]
        await pilot.press("a")
        assert isinstance(app.screen, AlertsScreen)
        await pilot.press("escape")
        app.redraw()
        assert "ALERTS 1" in text(app.query_one(Header)) and "new" not in text(app.query_one(Header))
        app.redraw()  # the same alert again: not sent twice
        await pilot.pause(0.3)
        assert len(got.read_text().splitlines()) == 1


