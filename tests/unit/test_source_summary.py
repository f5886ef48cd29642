"""Following a live run directory, and ``mstop summary`` end to end as a user runs it."""

from __future__ import annotations

import os
import threading

import pytest

from mstop.engine.store import Store
from mstop.sources.local import LocalSource
from mstop_writer import MetricsWriter
from tests.helpers.common import wait_for
from tests.helpers.runs import steps, write_rank


@pytest.mark.parametrize("poll", [None, 0.05])
def test_follows_a_run_as_it_is_written(tmp_path, poll, native):
    store = Store()
    updates = threading.Event()
    src = LocalSource(str(tmp_path), store, poll=poll, on_update=updates.set)
    src.follow()
    writers = [MetricsWriter(tmp_path, rank=r, world_size=4, heartbeat_interval=3600, witness=False) for r in range(4)]
    try:
        for s in range(1, 51):
            for w in writers:
                w.log(s, loss=1.0 / s, step_time=0.1)
        assert wait_for(lambda: store.rows == 200)
        assert sorted(store.ranks) == [0, 1, 2, 3] and all(store.ranks[r].rows == 50 for r in range(4))
        assert wait_for(lambda: all(store.ranks[r].last_start is not None for r in range(4)))
        assert src.state.mode == ("poll" if poll else "inotify")
        for w in writers:
            w.close()
        assert wait_for(lambda: all(store.ranks[r].ends for r in range(4)))
    finally:
        for w in writers:
            w.close()
        src.stop()


@pytest.mark.parametrize("poll", [None, 0.05])
def test_live_truncation_and_replacement(tmp_path, poll, native):
    """rsync's replacement (a longer copy with the same start) continues; a truncation in place (what
    copytruncate does) starts again: with native events the kept descriptor cannot see either, the
    events make the file looked at by its path."""
    write_rank(tmp_path, 0, steps(1, 10, loss=1.0))
    store = Store()
    src = LocalSource(str(tmp_path), store, poll=poll)
    src.follow()
    try:
        assert wait_for(lambda: store.rows == 10)
        data = (tmp_path / "rank0.csv").read_bytes()
        tmp = tmp_path / ".rank0.csv.tmp"
        with open(tmp, "wb") as f:  # rsync: a longer copy with the same start replaces the file
            f.write(data)
        write_rank(tmp_path / "x", 0, steps(11, 12, loss=1.0), header=False)
        with open(tmp, "ab") as f:
            f.write((tmp_path / "x" / "rank0.csv").read_bytes())
        os.replace(tmp, tmp_path / "rank0.csv")
        assert wait_for(lambda: store.rows == 12)
        assert store.resets == 0
        write_rank(tmp_path, 0, steps(1, 3, loss=2.0, session="new"), mode="w")  # truncated and rewritten
        assert wait_for(lambda: store.resets == 1 and store.rows == 3)
        assert store.ranks[0].col("loss").tolist() == [2.0, 2.0, 2.0]
    finally:
        src.stop()


