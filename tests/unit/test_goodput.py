"""The goodput ledger (issue 16, part 1): where a job's wall time went, on runs where every bucket is known."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mstop.engine import figures, goodput
from mstop.engine.figures import Options
from mstop.engine.goodput import ledger
from mstop.sources import read_once
from tests.helpers.goodput_common import known_run, row  # noqa: F401
from tests.helpers.runs import start, write_events, write_rank


def test_every_bucket_of_a_known_run(tmp_path):
    run = known_run(tmp_path / "run")
    g = ledger(read_once(str(run)), Options(clock=lambda: 5000.0))
    assert g is not None and g.wall == pytest.approx(111.0)  # 1000 to the end event at 1111, not to now
    # A: step 1: 1 s (0 wait); steps 2-5: 1 + 1 + 1 + 1 (5 is 1 s at the median, its 2 s over are the save);
    # 6-10 recomputed; B: steps 6 (first) and 7-12 on the timeline
    assert g.seconds == pytest.approx({
        "productive": 1.0 + 3 * 0.75 + 0.75 + 1.0 + 6 * 0.75,  # A's 1-5 (5's median share), B's 6 and 7-12
        "input_wait": 4 * 0.25 + 6 * 0.25,
        "compile": 9.0 + 4.0,
        "recomputed": 5.0,  # A's 6-10, 1 s each (the 10 s gap before 8 is no step's time)
        "checkpoint": 2.0,
        "stalled": 10.0,
        "down": 1100.0 - 1031.0,  # A's last row to B's start
    })
    assert sum(g.seconds.values()) == pytest.approx(g.wall)
    assert g.goodput == pytest.approx(g.seconds["productive"] / 111.0)
    assert g.largest_losses(2) == [("down", pytest.approx(69.0)), ("compile", pytest.approx(13.0))]


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


rank_rows = st.lists(st.tuples(st.floats(0.0, 30.0), st.one_of(st.none(), st.floats(0.0, 5.0)),
                               st.one_of(st.none(), st.floats(0.0, 2.0))), min_size=1, max_size=25)

@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(rank_rows, st.booleans(), st.floats(-20.0, 20.0)), min_size=2, max_size=6),
       st.floats(0.0, 400.0))
def test_ranks_of_one_session_counted_all_at_once_equal_rank_by_rank(tmp_path_factory, ranks, now):
    """The buckets of many one-session ranks are computed in one pass over all their rows; each rank's
    equals what the rank-by-rank loop gives (times that go back, missing step times, checkpoints by step
    and by time, the job running or not)."""
    run = tmp_path_factory.mktemp("batch")
    for r, (rows, checkpoint, shift) in enumerate(ranks):
        t, out = 1000.0 + shift, []
        for k, (gap, st_, dw) in enumerate(rows):
            t += gap if k % 7 != 5 else -gap / 4  # now and then a time that goes back
            out.append({"time": t, "step": k + 1, "loss": 1.0, "step_time": st_, "data_wait": dw, "session": "A"})
        events = [start("A", t=995.0 + shift)]
        if checkpoint:
            events += [{"time": out[len(out) // 2]["time"] - 0.5, "kind": "checkpoint", "step": 2}]
        write_events(run, r, events)
        write_rank(run, r, out)
    store = read_once(str(run))
    opts = Options(clock=lambda: 1000.0 + now)
    ranks_ = [d for _, d in sorted(store.ranks.items()) if d.rows]
    first = min(goodput.session_span(d, 0)[0] for d in ranks_)
    end, median, hang = goodput.job_end(store, opts), goodput.median_step(ranks_), figures.stall_after(store)
    batch = goodput.batch_ledgers(ranks_, first, end, median, hang)
    for d in ranks_:
        one = goodput.rank_ledger(d, first, end, median, hang)
        assert batch[d.rank] == pytest.approx(one, rel=1e-9, abs=1e-9)
    # in groups of a few rows (BATCH_ROWS bounds the pass's temporaries), the job's ledger is the same
    whole = goodput.compute_ledger(store, opts)
    grouped = goodput.compute_ledger(store, opts, batch_rows=20)
    assert grouped.seconds == pytest.approx(whole.seconds, rel=1e-9, abs=1e-9)
    assert grouped.ranks == pytest.approx(whole.ranks, rel=1e-9, abs=1e-9)
    groups = goodput.rank_groups(ranks_, 20)
    assert [d for g in groups for d in g] == ranks_
    assert all(sum(d.rows for d in g) <= 20 or len(g) == 1 for g in groups)




@given(st.lists(st.lists(st.one_of(st.floats(-1.0, 1e6, width=32), st.just(float("nan")), st.just(0.0),
                                  st.sampled_from([0.5, 0.25, 1.0])), max_size=30), min_size=1, max_size=6),
       st.sampled_from([0, goodput.POOL_ROWS]))
def test_the_pooled_median_without_pooling_is_numpys(per_rank, pool_rows):
    """The run's median step time is found by a count of the rows' float32 bits and one bucket's values
    (pooling a float64 copy of every row of 10,000 ranks held 11 B a row at once), or from the pooled
    float32 values up to POOL_ROWS rows: either way the same figure as ``np.median`` of the pooled
    float64 copy of each rank's steady rows, ties and halves included."""
    from mstop.engine.parse import N_EXACT, NUMERIC, Rows
    from mstop.engine.store import Store

    store = Store()
    j = NUMERIC.index("step_time") - N_EXACT
    for r, times in enumerate(per_rank):
        n = len(times)
        if not n:
            continue
        exact = np.column_stack([1000.0 + np.arange(n), np.arange(1, n + 1, dtype=float)])
        floats = np.full((n, len(NUMERIC) - N_EXACT), np.nan, np.float32)
        floats[:, j] = times
        store.ingest_rows(r, Rows(exact, floats, {}, np.zeros(n, np.int32), ["s"]))
    ranks = list(store.ranks.values())
    pooled = np.concatenate([d.col("step_time")[d.steady()].astype(np.float64) for d in ranks] or [np.empty(0)])
    pooled = pooled[np.isfinite(pooled) & (pooled > 0)]
    saved = goodput.POOL_ROWS
    goodput.POOL_ROWS = pool_rows
    try:
        got = goodput.median_step(ranks)
    finally:
        goodput.POOL_ROWS = saved
    assert got == (float(np.median(pooled)) if len(pooled) else 0.0)
