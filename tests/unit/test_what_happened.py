"""Issue 27: what mstop says is what happened. Deaths called within seconds of the pace, a culprit named,
incidents from the files' history, goodput that only falls as a stall grows; with real writer processes
killed by signals and real msrun data-parallel jobs on CPU (tests/helpers/msrun_job.py)."""

from __future__ import annotations

import time

import pytest

from mstop.engine.figures import Options, status
from mstop.engine.health import Health
from mstop.sources import read_once
from tests.helpers.runs import start, steps, write_events, write_rank
from tests.helpers.what_happened_common import _writer_run


def test_three_ranks_finish_and_one_dies(tmp_path):
    """Item 4: a 4-rank job whose ranks 0-2 end cleanly at step 1,500 and whose rank 3 died at 1,497."""
    run = tmp_path / "run"
    t0 = time.time() - 3000
    for r in range(3):
        _writer_run(run, [(1, 1500, True)], t0=t0, rank=r, world=4)
    end = _writer_run(run, [(1, 1497, False)], t0=t0, rank=3, world=4)
    store = read_once(str(run))
    opts = Options(clock=lambda: end + 100)
    assert status(store, opts) == "dead"
    (a,) = Health().alerts(store, opts)
    assert a.kind == "job_dead"
    assert a.message == "rank 3 died at step 1,497 (no end); ranks 0-2 finished: the job did not finish cleanly"


def test_a_lagging_rank_of_two(tmp_path):
    """Item 6: two ranks, rank 1 150 steps behind and alive: lagging against the leader."""
    t = time.time()
    for r, last in ((0, 400), (1, 250)):
        write_events(tmp_path, r, [start("s1", t=t - 450, world_size=2, heartbeat_interval=5),
                                   {"time": t - 1, "kind": "heartbeat", "session": "s1"}])
        write_rank(tmp_path, r, steps(1, last, t0=t - 1 - last, dt=1.0, step_time=1.0, loss=1.0))
    (a,) = [a for a in Health().alerts(read_once(str(tmp_path)), Options()) if a.kind == "lagging_rank"]
    assert a.rank == 1 and "150 steps behind the leading rank (400)" in a.message


def test_goodput_only_falls_as_a_stall_grows(tmp_path):
    """Item 7: a job that stops writing rows: second by second, while it may live (running, then stalled:
    no heartbeats promised, as a MindFormers log), goodput never rises and the stall's time is 'stalled';
    a job known dead (its writer promised heartbeats) ends when it was known dead: its last sign of life and
    the 15 s of silence the verdict waited (goodput definition 3: the wall never shrinks at the verdict)."""
    from mstop.engine.goodput import ledger

    run = tmp_path / "run"
    write_events(run, 0, [start("s1", t=999.0, world_size=1)])  # no heartbeats promised: never called dead
    write_rank(run, 0, steps(1, 200, t0=1000.0, dt=0.5, step_time=0.5, loss=1.0))
    end = 1100.0
    store = read_once(str(run))
    last_g, statuses = 1.0, []
    for k in range(0, 121):
        opts = Options(clock=lambda k=k: end + k)
        g = ledger(store, opts)
        assert g.goodput <= last_g + 1e-9, (k, g.goodput, last_g)
        assert sum(g.seconds.values()) == pytest.approx(g.wall)
        last_g = g.goodput
        statuses.append(status(store, opts))
        assert g.seconds["stalled"] == pytest.approx(k, abs=1.0)
    assert statuses[0] == "running" and statuses[-1] == "stalled" and "dead" not in statuses
    # the same rows from a writer that promised heartbeats: dead 15 s after the last row, and then the wall
    # ends there, when it was known dead, however much later it is read
    run2 = tmp_path / "run2"
    _writer_run(run2, [(1, 200, False)], t0=1000.0 - 0.5, dt=0.5)
    store2 = read_once(str(run2))
    assert status(store2, Options(clock=lambda: 1130.0)) == "dead"
    assert ledger(store2, Options(clock=lambda: 1130.0)).wall == pytest.approx(100.5 + 15, abs=1.0)
    assert ledger(store2, Options(clock=lambda: 9e6)).wall == pytest.approx(100.5 + 15, abs=1.0)


def test_a_mindformers_log_stalled_for_two_minutes_is_not_100_percent(tmp_path):
    from mstop.engine.goodput import ledger
    from tests.helpers.mflines import Log

    log = Log(t0=1_796_108_985.0)
    for s in range(1, 61):
        log.step(1, 1, s, 60, 5.0 - s * 0.01, samples_per_s=100.0, step_ms=1000.0)
    d = tmp_path / "output" / "log" / "rank_0"
    d.mkdir(parents=True)
    (d / "info.log").write_text(log.text())
    store = read_once(str(tmp_path / "output"))
    last = float(store.ranks[0].col("time")[-1])
    opts = Options(clock=lambda: last + 120)
    assert status(store, opts) == "stalled"
    g = ledger(store, opts)
    assert g.goodput < 0.4 and g.seconds["stalled"] >= 119


def test_one_checkpoint_saved_by_four_ranks_is_one_checkpoint(tmp_path):
    """Item 26: every rank writes its checkpoint of step 100 (a second apart); no_checkpoint's limit comes
    from the spacing of saves (here one), not of four events: no alert 15 minutes later."""
    t = time.time()
    for r in range(4):
        write_events(tmp_path, r, [start("s1", t=t - 1000, world_size=4, heartbeat_interval=5),
                                   {"time": t - 900 + r, "kind": "checkpoint", "step": 100, "path": f"ck{r}"},
                                   {"time": t - 1, "kind": "heartbeat", "session": "s1"}])
        write_rank(tmp_path, r, steps(1, 999, t0=t - 1000, dt=1.0, step_time=1.0, loss=1.0))
    assert not [a for a in Health().alerts(read_once(str(tmp_path)), Options()) if a.kind == "no_checkpoint"]


def test_a_throughput_drop_without_tokens_is_seen_in_step_time(tmp_path):
    """Item 30: a job that gives neither tokens nor samples (a CNN with no tokens_per_step) halves its pace:
    throughput_drop fires in steps/s, live and in the history."""
    t = time.time() - 400
    write_events(tmp_path, 0, [start("s1", t=t - 1, world_size=1)])
    write_rank(tmp_path, 0, steps(1, 300, t0=t, dt=1.0, step_time=1.0, loss=1.0))
    write_rank(tmp_path, 0, steps(301, 350, t0=t + 300, dt=2.0, step_time=2.0, loss=1.0))
    store = read_once(str(tmp_path))
    opts = Options(clock=lambda: t + 401)
    (a,) = [a for a in Health().alerts(store, opts) if a.kind == "throughput_drop"]
    assert a.message == "steps/s 0.5 is 50% of the run's median 1 (limit 70%)", a.message
    (i,) = [i for i in Health().incidents(store, opts) if i.kind == "throughput_drop"]
    assert i.message.startswith("steps/s 0.5 around step") and i.active




@pytest.mark.parametrize("ranks", [2, 4])
def test_a_relaunched_job_goes_dead_starting_running_in_that_order(tmp_path, ranks):
    """Issue 58 item 3: a job killed whole, then launched again, its ranks coming back one by one, read dead ->
    running -> starting -> running: the first rank back made it ``running`` among ranks still gone. Every step
    of the relaunch reads ``starting`` until a row of the new sessions comes; a rank restarted alone while the
    others go on writing rows is no relaunch (running)."""
    run = tmp_path / "run"
    for r in range(ranks):
        write_events(run, r, [start("A", t=999.0, world_size=ranks, pid=100 + r, heartbeat_interval=30),
                              {"time": 1021.0, "kind": "exit", "rank": r, "pid": 100 + r, "how": "signal",
                               "signal": "SIGKILL", "source": "witness"}])
        write_rank(run, r, steps(1, 20, t0=1000.0, session="A", loss=1.0, step_time=1.0))
    seen = [status(read_once(str(run)), Options(clock=lambda: 1030.0))]
    for r in range(ranks):  # back one by one, compiling
        write_events(run, r, [start("B", t=1028.0 + r / 10, world_size=ranks, pid=200 + r, heartbeat_interval=30)])
        seen.append(status(read_once(str(run)), Options(clock=lambda: 1030.0)))
    write_rank(run, 0, steps(11, 11, t0=1031.0, session="B", loss=1.0, step_time=1.0))
    seen.append(status(read_once(str(run)), Options(clock=lambda: 1032.5)))
    assert seen == ["dead"] + ["starting"] * ranks + ["running"], seen
    alone = tmp_path / "alone"  # rank 1 restarted while rank 0 goes on: running
    for r in (0, 1):
        write_events(alone, r, [start("A", t=999.0, world_size=2, pid=100 + r, heartbeat_interval=30)])
        write_rank(alone, r, steps(1, 20, t0=1000.0, session="A", loss=1.0, step_time=1.0))
    write_events(alone, 1, [start("B", t=1015.0, world_size=2, pid=201, heartbeat_interval=30)])
    assert status(read_once(str(alone)), Options(clock=lambda: 1021.0)) == "running"
