"""The writer's life lock (mstop_writer._files.LifeLock) and its readers, in this process: a lock held reads as
a living writer, a lock let go (the process ended, however) as an ended one; only a rank of this kernel whose
start says it held one is recorded ended, once a session. A real rank that is PID 1 of its container:
tests/system/test_witness_processes.py."""

from __future__ import annotations

import json

from mstop.engine.reader import RunReader
from mstop.sources import read_once
from mstop.sources.files import lock_free
from mstop.sources.lifelocks import LifeLocks, boot_id
from mstop_writer._files import LifeLock
from tests.helpers.runs import steps, write_rank


def _run(tmp_path, *, life_lock=True, boot=None):
    run = tmp_path / "run"
    write_rank(run, 0, steps(1, 5, loss=1.0, step_time=1.0, session="s"))
    (run / "rank0.events.jsonl").write_text(json.dumps({
        "time": 1000.0, "kind": "start", "session": "s", "pid": 1, "life_lock": life_lock,
        "boot_id": boot or boot_id()}) + "\n")
    return run


def test_a_held_lock_is_a_living_writer_and_a_lock_let_go_an_ended_one(tmp_path):
    run = _run(tmp_path)
    path = str(run / "rank0.events.jsonl")
    life = LifeLock(path)
    assert life.keep() and life.held and lock_free(path) is False
    assert life.keep()  # held already: nothing done
    life.release()
    assert lock_free(path) is True and lock_free(str(run / "nothing")) is None


def test_a_silent_rank_whose_lock_is_free_is_recorded_ended_once(tmp_path):
    run = _run(tmp_path)
    path = str(run / "rank0.events.jsonl")
    store = read_once(str(run))  # its read looks at the lock: nobody holds it (the job is gone)
    (e,) = RunReader(store).events(0, "exit")
    assert e["found_ended"] and e["found_by"] == "life lock" and e["pid"] == 1
    assert any("ended with no word from its exit witness" in n for n in store.notes)
    assert LifeLocks(store).check({0: path}, now=2000.0) == 0  # ended already: not again


def test_a_lock_is_looked_at_before_the_silence_that_reads_a_rank_dead(tmp_path):
    """CI: a PID-1 rank beating every second read dead by its silence (3 heartbeats) in a read that looked at its
    lock a moment before 3 s of it: dead, and no word of how. The lock is looked at after 2 s."""
    import time

    t0 = time.time() + 60.0  # its last row ahead of this read's clock: the read itself looks at no lock
    run = tmp_path / "run"
    write_rank(run, 0, steps(1, 5, t0=t0 - 5.0, loss=1.0, step_time=1.0, session="s"))  # the last at t0
    (run / "rank0.events.jsonl").write_text(json.dumps({
        "time": t0 - 5.0, "kind": "start", "session": "s", "pid": 1, "life_lock": True, "boot_id": boot_id(),
        "heartbeat_interval": 1.0}) + "\n")
    store = read_once(str(run))
    assert not RunReader(store).events(0, "exit")
    path = str(run / "rank0.events.jsonl")
    fresh = LifeLocks(store)
    assert fresh.check({0: path}, now=t0 + 1.5) == 0  # a rank silent 1.5 s is not looked at
    assert fresh.check({0: path}, now=t0 + 2.5) == 1


def test_no_lock_said_another_kernel_or_a_lock_held_is_not_an_end(tmp_path):
    for kw in ({"life_lock": False}, {"boot": "another-machine"}):
        run = _run(tmp_path / str(kw), **kw)
        assert RunReader(read_once(str(run))).events(0, "exit") == [], kw
    run = _run(tmp_path / "held")
    life = LifeLock(str(run / "rank0.events.jsonl"))
    assert life.keep()
    try:
        assert RunReader(read_once(str(run))).events(0, "exit") == []  # its process lives (a stopped one too)
    finally:
        life.release()


def test_the_lock_goes_with_the_events_file_a_rotation_made(tmp_path, monkeypatch):
    """``mv rank0.events.jsonl rank0.events.jsonl.1``: at its next event the writer writes a new events file and
    holds its lock there (a reader looks at the file at the path), the moved one let go."""
    import os

    import mstop_writer._files as writer_files
    from mstop_writer import MetricsWriter

    monkeypatch.setattr(writer_files, "CHECK_INTERVAL", 0.0)  # it looks at its files at every line
    w = MetricsWriter(tmp_path, witness=False)  # the system's clock: it holds a life lock
    path = str(tmp_path / "rank0.events.jsonl")
    try:
        assert lock_free(path) is False
        os.rename(path, path + ".1")
        w.event("eval", step=1)  # looks at its file, writes a new one
        assert os.path.exists(path) and lock_free(path) is False and lock_free(path + ".1") is True
    finally:
        w.close()
    assert lock_free(path) is True
