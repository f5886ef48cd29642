"""Following a live run directory, and ``mstop summary`` end to end as a user runs it."""

from __future__ import annotations

import os
import threading
import time

import pytest

from mstop.engine.store import Store
from mstop.sources.local import LocalSource
from mstop_writer import COLUMNS, MetricsWriter
from tests.helpers.common import wait_for
from tests.helpers.runs import steps, write_rank


@pytest.fixture(params=["direct", "watchdog"])
def native(request, monkeypatch):
    """Native file events read by our own inotify reader, or through watchdog's observer (its busy
    threshold for the switch to scans then applies to both, so the switching is tested on each)."""
    import mstop.sources.local as local

    monkeypatch.setattr(local, "DIRECT_EVENTS", request.param == "direct")
    monkeypatch.setattr(local, "BUSY_EVENTS_DIRECT", local.BUSY_EVENTS)
    return request.param


@pytest.mark.parametrize("poll", [None, 0.05])
def test_follows_a_run_as_it_is_written(tmp_path, poll, native):
    store = Store()
    updates = threading.Event()
    src = LocalSource(str(tmp_path), store, poll=poll, on_update=updates.set)
    src.follow()
    writers = [MetricsWriter(tmp_path, rank=r, world_size=4, heartbeat_interval=3600) for r in range(4)]
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


@pytest.mark.parametrize("poll", [None, 0.05])
def test_a_followed_file_rewritten_in_place_with_more_bytes(tmp_path, poll, native):
    """Issue 26 #8: open(p, "w") with more bytes than before, while followed: the 20 old rows are
    forgotten and the 40 new ones read, not 20 stale rows kept and the new ones read from the old offset."""
    write_rank(tmp_path, 0, steps(1, 20, loss=1.0, session="old"))
    store = Store()
    src = LocalSource(str(tmp_path), store, poll=poll)
    src.follow()
    try:
        assert wait_for(lambda: store.rows == 20)
        time.sleep(0.3)  # a kept descriptor and an event watch in place
        rows = "".join(",".join("" if r.get(c) is None else str(r[c]) for c in COLUMNS) + "\n"
                       for r in steps(1, 40, loss=2.0, session="new"))
        with open(tmp_path / "rank0.csv", "w") as f:  # one write: no read round sees it empty
            f.write(",".join(COLUMNS) + "\n" + rows)
        assert wait_for(lambda: store.resets >= 1 and store.rows == 40)
        d = store.ranks[0]
        assert d.col("loss").tolist() == [2.0] * 40 and store.bad_rows == 0
    finally:
        src.stop()


def test_files_growing_without_events_switch_to_polling(tmp_path, native):
    """As on NFS: the directory's watch never hears of these writes (the files live elsewhere)."""
    real, run = tmp_path / "elsewhere", tmp_path / "run"
    write_rank(real, 0, steps(1, 2, loss=1.0))
    run.mkdir()
    (run / "rank0.csv").symlink_to(real / "rank0.csv")
    store = Store()
    src = LocalSource(str(run), store)
    src.follow()
    try:
        assert wait_for(lambda: store.rows == 2)
        write_rank(real, 0, steps(3, 5, loss=1.0))
        assert wait_for(lambda: store.rows == 5, timeout=20)
        assert src.state.fell_back and src.state.mode == "poll"
        assert any("without file events" in n for n in src.state.notes)
        write_rank(real, 0, steps(6, 6, loss=1.0))
        assert wait_for(lambda: store.rows == 6)
    finally:
        src.stop()


def test_busy_runs_are_scanned_and_quiet_ones_evented(tmp_path, native):
    for r in range(32):
        write_rank(tmp_path, r, [])
    store = Store()
    src = LocalSource(str(tmp_path), store)
    src.follow()
    try:
        assert wait_for(lambda: src.state.mode == "inotify")
        n, deadline = 0, time.monotonic() + 6
        while time.monotonic() < deadline and src.state.mode == "inotify":  # ~ 32 x 20 rows/s
            n += 1
            for r in range(32):
                write_rank(tmp_path, r, steps(n, n, loss=1.0))
            time.sleep(0.05)
        assert src.state.mode == "inotify+scan"
        assert wait_for(lambda: store.rows == 32 * n)
        assert wait_for(lambda: src.state.mode == "inotify", timeout=10)  # quiet again
        write_rank(tmp_path, 0, steps(n + 1, n + 1, loss=1.0))
        assert wait_for(lambda: store.rows == 32 * n + 1)
    finally:
        src.stop()


def test_a_run_directory_removed_and_made_again_is_followed_again(tmp_path, native):
    """The directory goes away (a cleanup, a remount) and comes back with new files: it is said to be
    missing meanwhile, and then watched and read again, new appends included."""
    import shutil

    run = tmp_path / "run"
    write_rank(run, 0, steps(1, 3, loss=1.0))
    store = Store()
    src = LocalSource(str(run), store)
    src.follow()
    try:
        assert wait_for(lambda: store.rows == 3)
        shutil.rmtree(run)
        assert wait_for(lambda: src.state.missing, timeout=10)
        write_rank(run, 0, steps(1, 2, loss=2.0, session="again"))
        write_rank(run, 1, steps(1, 1, loss=2.0, session="again"))
        assert wait_for(lambda: not src.state.missing and store.ranks[0].rows == 2 and 1 in store.ranks
                        and store.ranks[1].rows == 1, timeout=15)
        write_rank(run, 1, steps(2, 2, loss=2.0, session="again"), header=False)
        assert wait_for(lambda: store.ranks[1].rows == 2, timeout=10)
        assert src.state.mode == "inotify"
    finally:
        src.stop()


