"""Issue 27, keys and text: Ctrl-C quits, a refused row reads as one, P refuses a run with no job, health
flags out of range are usage errors, a multi-line error is a line in the header and lines in the list."""

from __future__ import annotations

from tests.helpers.app_common import settle, toasts
from tests.helpers.runs import start, steps, write_events, write_rank


async def test_p_on_a_finished_run_refuses_with_the_reason(tmp_path):
    """Item 15: no job reads a profile request of a finished run."""
    from mstop.app import MonitorApp

    write_events(tmp_path, 0, [start("s1", t=999.0, world_size=1),
                               {"time": 1031.0, "kind": "end", "session": "s1", "rows": 30}])
    write_rank(tmp_path, 0, steps(1, 30, t0=1000.0, dt=1.0, step_time=1.0, loss=1.0))
    app = MonitorApp(str(tmp_path), follow=False, clock=lambda: 1040.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("P")
        await pilot.pause()
        said = toasts(app)
        assert any("the run is finished: there is no job to profile" in m for m in said), said
        assert type(app.screen).__name__ == "MonitorScreen"  # no dialog
    assert not (tmp_path / "profile.request").exists()


async def test_go_to_step_shows_every_figure_to_the_last_digit(tmp_path):
    """Item 23: `g` promised the last digit and printed tokens_per_s=6.1 k and 528 MiB."""
    from mstop.app import MonitorApp

    write_rank(tmp_path, 0, steps(1, 20, t0=1000.0, loss=lambda s: 1.0 / s, step_time=0.0401, tokens_per_s=6123.457,
                                  mem_used=553648128, tokens=4096))
    app = MonitorApp(str(tmp_path), follow=False, clock=lambda: 1030.0)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        await pilot.press("g", "1", "0", "enter")
        await pilot.pause()
        shown = str(app.screen.query_one("#step-values").content)
        assert "tokens_per_s=6123.457 tokens/s" in shown and "mem_used=553,648,128 B (528 MiB)" in shown, shown
        assert "step_time=0.0401 s (40.1 ms)" in shown and "loss=0.1 " in shown


