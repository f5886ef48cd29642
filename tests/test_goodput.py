"""The goodput ledger (issue 16, part 1): where a job's wall time went, on runs where every bucket is known."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mstop.engine import figures, goodput
from mstop.engine.figures import Options
from mstop.engine.goodput import BUCKETS, ledger
from mstop.sources import read_once
from tests.conftest import ROOT
from tests.runs import start, write_events, write_rank


def row(step: int, t: float, st: float = 1.0, dw: float = 0.0, session: str = "A") -> dict:
    return {"time": t, "step": step, "loss": 1.0, "step_time": st, "data_wait": dw, "tokens": 100,
            "session": session}


def known_run(path, rank: int = 0, shift: float = 0.0):
    """Session A starts at 1000: its first row at 1010 (10 s: 1 s a step, 9 s start-up and compile), steps 2-10
    each 1 s with 0.25 s of data wait, step 5 saving a checkpoint (3 s: 2 s over the median), a 10 s gap
    before step 8 with no step running. A dies after step 10 (its last row at 1031); session B starts at 1100, resumed
    from step 6 (A's steps 6-10 are recomputed: 5 s), its first row at 1105 (4 s compile), steps 7-12, ends
    at 1111 with an end event."""
    rows = [row(1, 1010.0 + shift)]
    t = 1010.0
    for s in range(2, 11):
        st = 3.0 if s == 5 else 1.0
        t += st + (10.0 if s == 8 else 0.0)
        rows.append(row(s, t + shift, st=st, dw=0.25))
    b_rows = [row(6, 1105.0 + shift, session="B")] + [row(s, 1105.0 + (s - 6) + shift, dw=0.25, session="B")
                                                      for s in range(7, 13)]
    write_events(path, rank, [start("A", t=1000.0 + shift, world_size=2),
                              {"time": 1016.0 + shift, "kind": "checkpoint", "step": 5, "path": "ck5"},
                              start("B", t=1100.0 + shift, world_size=2),
                              {"time": 1111.0 + shift, "kind": "end", "session": "B", "rows": 7}])
    write_rank(path, rank, rows + b_rows)
    return path


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


def test_summary_json_has_the_goodput_object(tmp_path):
    run = known_run(tmp_path / "run")
    out = subprocess.run([sys.executable, "-m", "mstop", "summary", str(run), "--json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    s = json.loads(out.stdout)
    assert set(s["goodput"]) == {*BUCKETS, "wall", "goodput", "ranks"}
    assert s["goodput"]["recomputed"] == 5.0 and s["goodput"]["wall"] == 111.0
    text = subprocess.run([sys.executable, "-m", "mstop", "summary", str(run)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60).stdout
    line = next(ln for ln in text.splitlines() if ln.startswith("goodput"))
    pct = f"{100 * s['goodput']['goodput']:.0f} %"
    assert line.split(None, 1)[1] == f"{pct} of 1 m 51 s · lost: down 1 m 09 s, compile 13 s"


def test_a_real_job_killed_and_resumed(tmp_path):
    """A real MindSpore job (examples/train_tiny_lm.py) killed with SIGKILL after a checkpoint (every 10 steps),
    then resumed with --resume: the steps after the checkpoint are recomputed (their step time, as the
    rows say), the time from the killed process's last sign of life to the new start is down, and the
    buckets add up to the wall time."""
    import csv
    import os
    import signal
    import time

    pytest.importorskip("mindspore", reason="a real job needs MindSpore: pip install -e '.[mindspore]'")
    run = tmp_path / "run"
    common = [sys.executable, "examples/train_tiny_lm.py", "--run-dir", str(run), "--dim", "16", "--layers", "1",
              "--seq-len", "8", "--batch", "2", "--ckpt-every", "10", "--steps", "30", "--epochs", "3",
              "--data-delay", "0.1"]  # about 10 steps a second: the kill lands between two checkpoints
    job = subprocess.Popen(common, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    csv_path = run / "rank0.csv"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and job.poll() is None:
        if csv_path.exists() and len(csv_path.read_text().splitlines()) > 13:  # the header and 13 steps
            break
        time.sleep(0.05)
    os.killpg(job.pid, signal.SIGKILL)
    job.wait(timeout=30)
    done = subprocess.run(common + ["--resume"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    store = read_once(str(run))
    d = store.ranks[0]
    starts = sorted(e["time"] for e in d.starts.values())
    saved = max(int(c["step"]) for c in d.checkpoints if c["time"] < starts[1])
    assert len(d.segments) == 2 and d.segments[1].first_step == saved + 1  # resumed from the last checkpoint
    g = ledger(store, Options())
    assert sum(g.seconds.values()) == pytest.approx(g.wall, rel=1e-9)
    rows = list(csv.DictReader(open(csv_path)))
    first = [r for r in rows if r["session"] == rows[0]["session"]]
    again = [float(r["step_time"]) for r in first if int(r["step"]) > saved]
    # the row times (wall clock) and step times (a monotonic clock) differ by microseconds: 2 %
    assert len(again) >= 1 and g.seconds["recomputed"] == pytest.approx(sum(again), rel=0.02)
    killed_life = max(float(first[-1]["time"]), *(float(c["time"]) for c in d.checkpoints if c["time"] < starts[1]))
    assert g.seconds["down"] == pytest.approx(starts[1] - killed_life, abs=1e-6)
    assert g.seconds["compile"] > 0 and g.seconds["checkpoint"] >= 0
    # input wait: the data wait of the rows that count; a session's first row is compile beyond one median step
    second = next(r for r in rows if r["session"] != rows[0]["session"])
    counted = [r for r in rows if (r["session"] != rows[0]["session"] or int(r["step"]) <= saved)
               and r is not rows[0] and r is not second]
    median = sorted(float(r["step_time"]) for r in counted)[len(counted) // 2]
    assert g.seconds["input_wait"] == pytest.approx(sum(float(r["data_wait"]) for r in counted), abs=2 * median)


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
    first = min(goodput._session_span(d, 0)[0] for d in ranks_)
    end, median, hang = goodput._job_end(store, opts), goodput._median_step(ranks_), figures.stall_after(store)
    batch = goodput._batch_ledgers(ranks_, first, end, median, hang)
    for d in ranks_:
        one = goodput._rank_ledger(d, first, end, median, hang)
        assert batch[d.rank] == pytest.approx(one, rel=1e-9, abs=1e-9)
    # in groups of a few rows (BATCH_ROWS bounds the pass's temporaries), the job's ledger is the same
    whole = goodput._ledger(store, opts)
    keep = goodput.BATCH_ROWS
    try:
        goodput.BATCH_ROWS = 20
        grouped = goodput._ledger(store, opts)
    finally:
        goodput.BATCH_ROWS = keep
    assert grouped.seconds == pytest.approx(whole.seconds, rel=1e-9, abs=1e-9)
    assert grouped.ranks == pytest.approx(whole.ranks, rel=1e-9, abs=1e-9)
    groups = goodput._groups(ranks_)
    assert [d for g in groups for d in g] == ranks_
    assert all(sum(d.rows for d in g) <= goodput.BATCH_ROWS or len(g) == 1 for g in groups)
