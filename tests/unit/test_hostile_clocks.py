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




def test_a_finished_run_copied_since_says_it_may_be_a_copy_not_only_a_clock(tmp_path):
    """Issue 58 item 9: a finished run whose files were copied (``cp``: each file written now, its rows two
    hours old) read as a host whose clock is two hours behind: the files cannot tell the two apart, and the
    note now says both; a running job's clock behind is only a clock."""
    import time

    from mstop.engine.figures import Options, rank_clocks
    from mstop.sources import read_once
    from tests.helpers.runs import start, steps, write_events, write_rank

    now = time.time()
    run = tmp_path / "copied"
    write_events(run, 0, [start("s", t=now - 7300, heartbeat_interval=30),
                          {"time": now - 7200, "kind": "end", "session": "s"}])
    write_rank(run, 0, steps(1, 99, t0=now - 7300, session="s", loss=1.0, step_time=1.0))
    notes = rank_clocks(read_once(str(run)), Options()).notes()
    assert notes == ["rank 0's clock is 2 h 00 m behind this machine (file times, or its files were copied after "
                     "they were written: cp -p keeps their times): ages use file times"], notes
    live = tmp_path / "live"
    _write(live, 0, [now - 10 - 3600 + s for s in range(1, 10)])
    assert all("copied" not in n for n in rank_clocks(read_once(str(live)), Options()).notes())
