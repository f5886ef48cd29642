"""The goodput ledger (issue 16, part 1): where a job's wall time went, on runs where every bucket is known."""

from __future__ import annotations

import pytest

from mstop.engine import goodput
from mstop.engine.figures import Options
from mstop.engine.goodput import ledger
from mstop.sources import read_once
from tests.helpers.goodput_common import known_run, row
from tests.helpers.runs import start, write_events, write_rank, written_at


def test_every_bucket_of_a_known_run(tmp_path):
    run = known_run(tmp_path / "run")
    g = ledger(read_once(str(run)), Options(clock=lambda: 5000.0))
    assert g is not None and g.wall == pytest.approx(111.0)  # 1000 to the end event at 1111, not to now
    # A: step 1: 1 s (0 wait); steps 2-10: 1 s each less 0.25 s of wait (5 is 1 s at the median, its 2 s
    # over are the save); B runs 6-10 again (recomputed), then 11-12 count
    assert g.seconds == pytest.approx({
        "productive": 1.0 + 9 * 0.75 + 2 * 0.75,  # A's 1-10 (5's median share), B's 11-12
        "input_wait": 9 * 0.25 + 2 * 0.25,
        "compile": 9.0 + 4.0,
        "recomputed": 5.0,  # B's 6 (its first row: one median step) and 7-10, 1 s each
        "checkpoint": 2.0,
        "stalled": 10.0,
        "down": 1100.0 - 1031.0,  # A's last row to B's start
        "finished_early": 0.0,  # its one rank ended the job
    })
    assert sum(g.seconds.values()) == pytest.approx(g.wall)
    assert g.goodput == pytest.approx(g.seconds["productive"] / 111.0)
    assert g.largest_losses(2) == [("down", pytest.approx(69.0)), ("compile", pytest.approx(13.0))]


def test_a_rank_that_finished_before_another_waited_for_it_it_was_not_down(tmp_path):
    """Issue 58 item 9: a finished demo read ``lost: down 8 s``: a rank that finished its steps (its clean end)
    before the other is not down; its time after its end, to the job's end, is ``finished_early``. A rank that
    aborted is still down after its last sign of life (goodput definition 4)."""
    from tests.helpers.goodput_common import row as a_row

    for ended, bucket in ((True, "finished_early"), (False, "down")):
        run = tmp_path / f"run-{ended}"
        for r, last in ((0, 20), (1, 28)):  # rank 0 ends at 1020, rank 1 runs to 1028
            end = {"time": 1000.0 + last, "kind": "end", "session": "s"} if r == 1 or ended else {
                "time": 1000.0 + last, "kind": "abort", "session": "s", "error": "RuntimeError: x"}
            write_events(run, r, [start("s", t=1000.0, world_size=2), end])
            write_rank(run, r, [a_row(k, 1000.0 + k, session="s") for k in range(1, last + 1)])
        written_at(run, 1028.0)  # an old run: its files last written when its rows say
        g = ledger(read_once(str(run)), Options(clock=lambda: 5000.0))
        assert g is not None and g.wall == pytest.approx(28.0)
        assert g.seconds[bucket] == pytest.approx(8.0 / 2)  # rank 0's 8 s, the mean over the two ranks
        assert g.seconds["down" if ended else "finished_early"] == pytest.approx(0.0)
        assert sum(g.seconds.values()) == pytest.approx(g.wall)


def test_buckets_add_up_to_the_wall_time_while_running_and_ranks_that_differ_are_named(tmp_path):
    run = tmp_path / "run"
    known_run(run, 0)
    write_events(run, 1, [start("A", t=1000.0, world_size=2)])
    write_rank(run, 1, [row(s, 1000.0 + 2 * s, st=2.0) for s in range(1, 40)])  # rank 1: slow, never restarted
    store = read_once(str(run))
    g = ledger(store, Options(clock=lambda: 1115.0))
    assert g.wall == pytest.approx(115.0)  # rank 1 is still running (its last row 37 s ago): to now
    # rank 1 silent since 1078 (no heartbeats: stalled, not dead): the stall counts as it grows, up to an
    # hour past the job's last sign of life (rank 0's end at 1111)
    later = ledger(store, Options(clock=lambda: 1500.0))
    assert later.wall == pytest.approx(500.0) and later.seconds["stalled"] > g.seconds["stalled"] + 150  # mean of 2
    stalled = ledger(store, Options(clock=lambda: 5000.0))
    assert stalled.wall == pytest.approx(111.0 + goodput.STALL_HORIZON)
    assert sum(g.seconds.values()) == pytest.approx(g.wall)
    assert set(g.ranks) == {0, 1}  # they differ by more than a point
    assert g.public()["ranks"]["1"] == pytest.approx(g.ranks[1], abs=1e-4)


