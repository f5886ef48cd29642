"""The profiler window (issue 16, part 2): MindSpore's Profiler for a few steps, a profile event per rank,
profiled steps out of the figures, and a running job asked for a profile by a request file."""

from __future__ import annotations

import time

import pytest

from mstop_writer.profiling import REQUEST_NAME, shares, step_trace_rows, trace_rows


def test_step_trace_time_csv_is_read_in_its_columns_and_units(tmp_path):
    """CONSTRUCTED in the format MindSpore 2.10's AscendStepTraceTimeViewer writes (its headers; µs)."""
    path = tmp_path / "step_trace_time.csv"
    path.write_text("Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
                    "Communication(Not Overlapped and Exclude Receive),Preparing\n"
                    "3,384000.000,336000.000,60000.000,396000.000,480000.000,1100000.000,100000.000,"
                    "236000.000,2000.000\n"
                    "4,390000.000,330000.000,58000.000,388000.000,480000.000,1100000.000,100000.000,"
                    "230000.000,2000.000\n")
    rows = step_trace_rows(str(path))
    assert [r["step"] for r in rows] == [3, 4]
    assert rows[0]["compute"] == pytest.approx(0.384) and rows[0]["wall"] == pytest.approx(1.2)
    sh = shares(rows)  # the practitioner's case: 1.2 s a step, 32 % compute, 28 % communication, 40 % idle
    assert (round(sh["compute"], 2), round(sh["comm_not_overlapped"], 2), round(sh["idle"], 2)) == (0.32, 0.28, 0.4)
    assert sh["bubble"] == pytest.approx(0.2 / 2.4, abs=1e-6)


def test_trace_rows_split_a_step_into_exclusive_parts():
    """Compute 0-4 ms, an AllReduce 3-6 ms (1 ms overlapped), nothing 6-10 ms, in a 10 ms step."""
    ops = [{"name": "MatMul-op0", "start": 1.000, "end": 1.004, "comm": False},
           {"name": "AllReduce-op1", "start": 1.003, "end": 1.006, "comm": True}]
    (row,) = trace_rows(ops, 2, 2, {1: 1.000, 2: 1.010})
    assert row["compute"] == pytest.approx(0.004) and row["comm_not_overlapped"] == pytest.approx(0.002)
    assert row["overlapped"] == pytest.approx(0.001) and row["idle"] == pytest.approx(0.004)


async def test_the_monitor_shows_the_breakdown_and_p_asks_the_job_for_a_profile(tmp_path):
    """The time line of the throughput panel, from the run's profile event; P, Enter writes profile.request
    with the count given (a real job takes it: the test above)."""
    from mstop.app import MonitorApp
    from tests.helpers.app_common import screen_lines, settle
    from tests.helpers.runs import start, steps, write_events, write_rank

    run = tmp_path / "run"
    write_events(run, 0, [start("s1", t=999.0, run_name="prof", world_size=1),
                          {"time": 1060.0, "kind": "profile", "session": "s1", "step": 14, "first_step": 10,
                           "last_step": 14, "source": "trace_view.json", "path": "profile/rank0",
                           "shares": {"compute": 0.32, "comm_not_overlapped": 0.28, "overlapped": 0.05,
                                      "idle": 0.40}, "top_ops": [{"name": "MatMul", "seconds": 0.1}]}])
    write_rank(run, 0, steps(1, 60, t0=1000.0, dt=1.0, step_time=1.0, data_wait=0.1, tokens=100, loss=1.0))
    app = MonitorApp(str(run), follow=False, clock=lambda: 1120.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = "\n".join(screen_lines(app))
        assert "compute 32 %  comm 28 %  idle 40 %" in screen and "████▒▒▒░░░░░  data wait 10.0 %" in screen
        assert "profile: steps 10-14, 1 m 00 s ago" in screen
        await pilot.press("P")
        await pilot.pause()
        await pilot.press("backspace", "backspace", "7", "enter")
        await pilot.pause()
    assert (run / REQUEST_NAME).read_text() == "7\n"


def test_a_request_gives_every_rank_the_same_steps(tmp_path):
    """Rank 0 turns profile.request into profile.plan, far enough ahead (steps of 0.1 s, ranks looking every
    5 s: 71 steps); rank 1 plans the same steps at its next look; a plan older than the process is ignored."""
    from mstop_writer.profiling import PLAN_NAME, ProfileWindow

    said = []
    w0 = ProfileWindow(str(tmp_path), 0, lambda kind, **f: said.append((0, kind, f)))
    w1 = ProfileWindow(str(tmp_path), 1, lambda kind, **f: said.append((1, kind, f)))
    (tmp_path / REQUEST_NAME).write_text("4\n")
    w1.check_request(100, 0.1)  # rank 1 alone does nothing with a request
    assert w1.window is None and (tmp_path / REQUEST_NAME).exists()
    w0.check_request(100, 0.1)
    assert not (tmp_path / REQUEST_NAME).exists() and (tmp_path / PLAN_NAME).exists()
    assert w0.window == (171, 174)
    w1._next_look = 0.0
    w1.check_request(101, 0.1)
    assert w1.window == (171, 174)
    assert [(r, k, f["first_step"], f["last_step"]) for r, k, f in said] == [(0, "profile_request", 171, 174),
                                                                             (1, "profile_request", 171, 174)]
    later = ProfileWindow(str(tmp_path), 1, lambda kind, **f: None)  # a process started after the plan
    later.started = time.time() + 10
    later.check_request(102, 0.1)
    assert later.window is None


def test_a_plan_is_as_far_ahead_as_the_fastest_recent_steps_need(tmp_path):
    """One slow step (a load spike, a checkpoint) when the request is taken: the plan is set from the fastest
    of the recent steps, not from that one (planned from a 1.5 s step, 6 steps ahead, the other rank, looking
    every 5 s at 0.05 s a step, passed the window before it looked: a real two-rank job seen so)."""
    from mstop_writer.profiling import ProfileWindow

    w0 = ProfileWindow(str(tmp_path), 0, lambda kind, **f: None)
    for t in (0.05, 0.06, float("nan"), -1.0, "x", 0.05, 0.07):
        w0.pace(t)
    (tmp_path / REQUEST_NAME).write_text("3\n")
    w0.check_request(500, 1.5)
    assert w0.window == (500 + 141, 500 + 143)  # ceil(7 / 0.05) + 1 steps ahead


