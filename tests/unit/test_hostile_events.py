"""Issue 26, events with wrong types: a profile event (or a start event's ``profile_steps``) with any field
of any JSON type, ``±Infinity`` and 400-digit numbers included, is read or counted bad by every reader
(``summary``, ``compare``, ``report``, the monitor's frame), never a traceback."""

from __future__ import annotations

from tests.helpers.hostile_events_common import CASES, HUGE, write  # noqa: F401
from tests.helpers.runs import start, steps, write_events, write_rank


async def test_the_monitor_shows_a_run_with_hostile_profile_events(tmp_path):
    from mstop.app import MonitorApp
    from tests.helpers.app_common import screen_lines, settle

    run = tmp_path / "run"
    write_events(run, 0, [start("s1", t=999.0, world_size=1), *(e for e in CASES.values() if e["kind"] != "start")])
    write_rank(run, 0, steps(1, 40, t0=1000.0, dt=1.0, step_time=1.0, tokens=100, loss=2.0))
    app = MonitorApp(str(run), follow=False, clock=lambda: 1041.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = "\n".join(screen_lines(app))
        assert "step 40" in screen and "5 bad events" in screen


