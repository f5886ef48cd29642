"""Issue 26, clocks: row times no calendar holds, clocks stepped or skewed, times near 1.7e308. Nothing
crashes, every duration shown is bounded, and liveness is judged by what this machine saw arrive when the
rows' own times disagree with it."""

from __future__ import annotations

from mstop import fmt
from tests.helpers.hostile_clocks_common import _write


def test_every_duration_shown_is_bounded():
    for s in (1e9, 1e17, 1e300, 1.7e308):
        assert len(fmt.duration(s)) <= 14 and len(fmt.coarse(s)) <= 14
    assert fmt.duration(20789 * 86400) == "over 10 years"
    assert fmt.duration(3 * 86400 + 4 * 3600) == "3 d 04 h"
    assert fmt.clock_tick(1e17) == "--:--" and fmt.clock_tick(1e300, elapsed_from=0.0) == "--:--"


async def test_the_monitor_follows_a_run_whose_clock_went_back(tmp_path):
    import time

    from mstop.app import MonitorApp
    from tests.helpers.app_common import screen_lines, settle

    now = time.time()
    _write(tmp_path, 0, [now - 60 + s for s in range(1, 51)] + [now - 10 - 3600 + s for s in range(1, 10)])
    app = MonitorApp(str(tmp_path), poll=0.05)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        screen = "\n".join(screen_lines(app))
        assert "status RUNNING" in screen and "clock is 1 h 00 m behind this machine" in screen, screen[:600]
        assert "stalled" not in screen


