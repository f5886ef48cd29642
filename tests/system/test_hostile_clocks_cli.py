"""Issue 26, clocks: row times no calendar holds, clocks stepped or skewed, times near 1.7e308. Nothing
crashes, every duration shown is bounded, and liveness is judged by what this machine saw arrive when the
rows' own times disagree with it."""

from __future__ import annotations

import re

import pytest

from tests.helpers.hostile_clocks_common import _write
from tests.helpers.runs import start, steps, write_events, write_rank


def _summary(run, *args: str) -> dict:
    import json
    import subprocess
    import sys

    from tests.helpers.common import ROOT

    out = subprocess.run([sys.executable, "-m", "mstop", "summary", str(run), "--json", *args], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_clock_stepped_back_an_hour_mid_run_is_said_and_the_run_is_running(tmp_path):
    """Issue 26 #22: NTP steps the host's clock back 1 h after step 50; the rows go on arriving."""
    import time

    now = time.time()
    times = [now - 100 + s for s in range(1, 51)] + [now - 50 - 3600 + s for s in range(1, 51)]
    _write(tmp_path, 0, times, beats=True)
    js = _summary(tmp_path)
    assert js["status"] == "running" and not [a for a in js["alerts"] if a["kind"] in ("stalled", "job_dead")]
    assert js["clocks"]["notes"] == ["rank 0's clock is 1 h 00 m behind this machine (file times): ages use file "
                                     "times"]


def test_rows_dated_1970_by_a_clock_never_set(tmp_path):
    """Issue 26 #23: a host whose clock was never set writes rows now, dated 1970."""
    _write(tmp_path, 0, [1000.0 + s for s in range(1, 31)], beats=True)
    js = _summary(tmp_path)
    assert js["status"] == "running" and js["clocks"]["ahead_s"]["0"] < -50 * 365 * 86400
    assert "rank 0's clock is over 10 years behind this machine" in js["clocks"]["notes"][0]
    assert not [a for a in js["alerts"] if a["kind"] == "stalled"]


def test_two_ranks_an_hour_apart(tmp_path):
    """Issue 26 #24: rank 1's clock reads an hour ahead; the job ran 100 s without a pause. Read live (its
    files written now) and afterwards (their modification times those of the end, long ago)."""
    import os
    import time

    now = time.time()
    for r, off in ((0, 0.0), (1, 3600.0)):
        _write(tmp_path, r, [now - 100 + off + s for s in range(1, 101)], world=2, end=True)
    live = _summary(tmp_path)
    assert live["goodput"]["goodput"] > 0.95 and live["goodput"]["wall"] < 110
    assert live["clocks"]["ranks_ahead_s"] == {"1": 3600.0}
    assert live["clocks"]["ahead_s"] == {"1": pytest.approx(3600.0, abs=1.0)}  # its file written a moment later
    for f in tmp_path.iterdir():
        os.utime(f, (now - 86400 * 30, now - 86400 * 30))  # the same run a month later
    later = _summary(tmp_path)
    assert later["status"] == "finished" and later["goodput"]["goodput"] > 0.95 and later["goodput"]["wall"] < 110
    assert "rank 1's clock is 1 h 00 m ahead of rank 0's at equal steps" in later["clocks"]["notes"][0]


def test_a_start_event_years_from_its_rows(tmp_path):
    """Issue 26 #25: a start event 10 years ahead, or 20 years behind, its rows."""
    import time

    now = time.time()
    year = 365.25 * 86400
    for name, start_at in (("ahead", now - 100 + 10 * year), ("behind", now - 100 - 20 * year)):
        _write(tmp_path / name, 0, [now - 100 + s for s in range(1, 101)], end=True, start_at=start_at)
        js = _summary(tmp_path / name)
        assert js["goodput"]["goodput"] > 0.95 and js["goodput"]["wall"] < 110, js["goodput"]


def test_times_near_the_largest_float_print_bounded(tmp_path):
    """Issue 26 #26: times near 1.7e308 give no 300-digit duration in summary, goodput or incidents."""
    import os
    import subprocess
    import sys

    from tests.helpers.common import ROOT
    from tests.helpers.runs import start, steps, write_events, write_rank

    write_events(tmp_path, 0, [start("s1", t=1.0e308, world_size=1)])
    write_rank(tmp_path, 0, steps(1, 30, t0=1.6e308, dt=1e306, step_time=1.0, loss=lambda s: 30.0 if s == 20 else 1.0,
                                  data_wait=0.5))
    out = subprocess.run([sys.executable, "-m", "mstop", "summary", str(tmp_path)], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, env={**os.environ, "COLUMNS": "300"})
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert not re.search(r"\d{16}", out.stdout), out.stdout


@pytest.mark.parametrize("t0", [1e17, 1e18, 1e300, 1.7e308])
async def test_row_times_past_any_calendar_draw_on_every_x_axis(tmp_path, t0):
    from mstop.app import MonitorApp
    from mstop.app.monitor import X_AXES
    from tests.helpers.app_common import screen_lines, settle

    run = tmp_path / "run"
    write_events(run, 0, [start("s1", t=t0, world_size=1)])
    write_rank(run, 0, steps(1, 50, t0=t0, dt=1.0, step_time=1.0, loss=1.0))
    app = MonitorApp(str(run), follow=False, clock=lambda: t0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        for _ in X_AXES:
            await pilot.press("x")
            await settle(pilot)
            screen = "\n".join(screen_lines(app))
            assert "step 50" in screen and "x: " in screen
            assert not re.search(r"\d{16}", screen)  # no 300-digit figure anywhere


