"""The tests of tests/unit/test_inotify.py that take over a second each here: out of the developer's loop."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from mstop.engine.store import Store
from mstop.sources import read_once
from mstop.sources.local import LocalSource
from mstop.sources.watchers import InotifyWatcher
from mstop_writer import COLUMNS
from tests.helpers.common import wait_for
from tests.helpers.log_formats_common import LOSS_MONITOR
from tests.helpers.runs import steps, write_rank


@pytest.mark.parametrize("way", ["inotify", "watchdog", "poll"])
def test_every_watcher_tells_a_new_file_and_its_growth(tmp_path, way):
    """Issue 29: one watcher interface (mstop.sources.watchers), chosen by get_watcher: our own inotify
    reader, watchdog's native observer, its polling observer. Each wakes its waiter and names a created
    rank file, then its growth; none touches its source."""
    import time

    from mstop.sources.watchers import WatchdogWatcher, get_watcher

    w = get_watcher(str(tmp_path), polling=way == "poll", modifications=True, poll=0.1, direct=way == "inotify",
                    names=lambda n: n.startswith("rank"))
    assert isinstance(w, InotifyWatcher if way == "inotify" else WatchdogWatcher) and w.cheap == (way == "inotify")
    try:
        (tmp_path / "rank0.csv").write_text("time,step\n")
        (tmp_path / "other.txt").write_text("x\n")

        def seen(*attrs: str) -> set[str]:
            got: set[str] = set()
            deadline = time.monotonic() + 10
            while "rank0.csv" not in got and time.monotonic() < deadline:
                w.wait(0.5)
                took = w.take()
                for attr in attrs:
                    got |= getattr(took, attr)
            return got

        first = seen("changed", "modified")
        assert "rank0.csv" in first and (way == "inotify" or "other.txt" not in first)
        time.sleep(0.3)
        w.take()  # the creation's own modification, if it came apart
        with open(tmp_path / "rank0.csv", "a") as f:
            f.write("1,1\n")
        assert "rank0.csv" in seen("modified")
        w.wake()
        assert w.wait(5)
    finally:
        w.close()


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
        assert wait_for(lambda: store.rows == 5, timeout=20)  # read by its path at the next check
        # the job goes on writing: growth found at a second check with still no event means polling
        step, deadline = 5, time.monotonic() + 30
        while not src.state.fell_back and time.monotonic() < deadline:
            step += 1
            write_rank(real, 0, steps(step, step, loss=1.0))
            time.sleep(0.5)
        assert src.state.fell_back, src.state.notes
        assert wait_for(lambda: src.state.mode == "poll", timeout=10), (src.state.mode, src.state.notes)
        assert any("without file events" in n for n in src.state.notes)
        assert wait_for(lambda: store.rows == step, timeout=20)
        write_rank(real, 0, steps(step + 1, step + 1, loss=1.0))
        assert wait_for(lambda: store.rows == step + 1)
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
        # ~ 32 x 20 rows/s until the source switches (it looks every check_every seconds: on a loaded machine its
        # thread may look late, so the rows go on up to 30 s)
        n, deadline = 0, time.monotonic() + 30
        while time.monotonic() < deadline and src.state.mode == "inotify":
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
        assert wait_for(lambda: src.state.mode == "inotify", timeout=10), (src.state.mode, src.state.notes)
    finally:
        src.stop()


class _PlainJob:
    """A plain MindSpore job's worker log written as it trains (LossMonitor's line every 0.05 s, TimeMonitor's
    at the epoch's end, with the times it measured, as TimeMonitor does), followed live by mstop's own sources
    (``store``) while it runs. ``written``: when each step's line was written (on a loaded machine the steps
    take longer than 0.05 s, and the job's own account says so)."""

    def __init__(self, folder, steps: int) -> None:
        import threading

        from mstop.engine.store import Store
        from mstop.sources import Sources

        self.log = folder / "worker_0.log"
        self.log.write_text("")
        self.steps, self.stop = steps, threading.Event()
        self.written: list[float] = []
        self.thread = threading.Thread(target=self._train)
        self.store = Store()
        self.src = Sources([str(folder)], self.store, poll=0.1)

    def _step(self, f: Any, s: int) -> None:
        f.write(LOSS_MONITOR % (1, s, 2.0 - s / 1000) + "\n")
        f.flush()
        self.written.append(time.time())

    def _train(self) -> None:
        with open(self.log, "a") as f:
            for s in range(2, self.steps + 1):
                if self.stop.wait(0.05):
                    return
                self._step(f, s)
            epoch_ms = (time.time() - self.began) * 1000
            f.write(f"Train epoch time: {epoch_ms:.3f} ms, per step time: {epoch_ms / self.steps:.3f} ms\n")

    def pace(self) -> float:
        """Seconds between the step lines written so far, as the job ran them."""
        w = self.written
        return (w[-1] - w[0]) / (len(w) - 1)

    def __enter__(self) -> _PlainJob:
        # its first step is read before the others are written: every later read's rows have the read before
        # them to be spread from (the first rows a follow reads have none, however many they are: on a busy
        # machine the follow's first read came 0.4 s late and found 8 steps at one instant)
        self.began = time.time() - 0.05
        with open(self.log, "a") as f:
            self._step(f, 1)
        self.src.read_all()
        self.src.follow()
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self.src.stop()


def test_a_plain_job_followed_live_has_a_pace_an_eta_and_a_step_time(tmp_path):
    """Issue 40 item 5: a plain LossMonitor/TimeMonitor job followed live showed ``n/a steps/s``, no ETA,
    ``step time n/a`` and a compile time that was TimeMonitor's mean (30.8 ms, really ~2 s). Its lines have
    no stamps: each read's lines are spread over the time since the last read (the file's times), so the
    pace is the job's; the step time is that pace until the epoch's TimeMonitor line; no compile figure."""
    from mstop.engine.figures import Options, compile_seconds, seconds_per_step, status, step_time
    from tests.helpers.common import wait_for

    with _PlainJob(tmp_path, 400) as job:  # 20 steps/s: an epoch of 400 steps is longer than the test
        assert wait_for(lambda: job.store.rows >= 60, timeout=30)
        snap = job.store.snapshot()
        pace, truth = seconds_per_step(snap), job.pace()
        # 0.05 s a step (more on a loaded machine: the job's own times), read every 0.1 s
        assert pace is not None and 0.6 * truth < pace < 2 * truth, (pace, truth)
        assert step_time(snap) == pytest.approx(pace)  # no TimeMonitor line yet: the pace
        assert compile_seconds(snap) is None
        assert status(snap, Options()) == "running"


def test_a_plain_jobs_goodput_followed_live_is_the_one_read_afterwards(tmp_path):
    """Issue 40 item 3: following a plain msrun job (its LossMonitor lines, no stamps) the live goodput read
    6 % where the same run reopened read 90 %: a read's lines all at one instant left no step any time.
    Followed to its epoch's end (TimeMonitor's line), then read again from the file: the same goodput within
    a few points (live, a read's lines share the read's interval; afterwards, TimeMonitor's step time)."""
    from mstop.engine.figures import Options
    from mstop.engine.goodput import ledger
    from tests.helpers.common import Starved, wait_for

    starved = Starved(0.05)  # the reads the machine let the follow make: a late read lumps its lines
    with _PlainJob(tmp_path, 60) as job:
        job.thread.join()
        assert wait_for(lambda: job.store.rows == 60, timeout=30)
        time.sleep(0.3)
        end = os.stat(job.log).st_mtime
        live = ledger(job.store.snapshot(), Options(clock=lambda: end)).goodput
    late = starved.stop() / (end - job.began)  # the share of the job's time the follow could not read in: 0 quiet
    # the job's own steps' unevenness on a loaded machine: the time between its lines beyond twice their median
    # gap (live those gaps are seen as they were, a stall; read afterwards TimeMonitor's mean spaces them)
    gaps = [b - a for a, b in zip(job.written, job.written[1:])]
    median = sorted(gaps)[len(gaps) // 2]
    uneven = sum(max(0.0, g - 2 * median) for g in gaps) / (end - job.began)
    reopened = ledger(read_once(str(tmp_path)), Options(clock=lambda: end)).goodput
    assert live > 0.7 and reopened > 0.7 and abs(live - reopened) < 0.1 + late + uneven, (live, reopened, late,
                                                                                         uneven)
