"""Issue 26, reading files: rank files shaped as strangers shape them (no session column, a 100 GB hole,
unreadable modes), read without a traceback, without blocking, and with a word for what cannot be read."""

from __future__ import annotations

import json
import os
import threading
import time

from mstop.engine.figures import Options, status
from mstop.engine.store import Store
from mstop.sources.local import LocalSource
from tests.helpers.common import wait_for


def test_a_csv_without_a_session_column_runs_finishes_and_restarts_by_time(tmp_path):
    """A job's own writer: a start event with a session, rows without the column. Rows arriving say
    running (not 'starting' for ever); an end event after them says finished; a new start after the last
    row says starting again."""
    t0 = time.time() - 30
    ev, csv = tmp_path / "rank0.events.jsonl", tmp_path / "rank0.csv"
    ev.write_text(json.dumps({"time": t0, "kind": "start", "session": "abc", "world_size": 1}) + "\n")
    csv.write_text("time,step,loss,step_time\n")
    store = Store()
    src = LocalSource(str(tmp_path), store)
    src.follow()
    opts = Options()
    try:
        assert wait_for(lambda: status(store, opts) == "starting")
        with open(csv, "a") as f:
            for s in range(1, 21):
                f.write(f"{time.time() - 21 + s},{s},{1 / s},1.0\n")
        assert wait_for(lambda: store.rows == 20)
        assert status(store, opts) == "running"
        with open(ev, "a") as f:
            f.write(json.dumps({"time": time.time(), "kind": "end", "session": "abc"}) + "\n")
        assert wait_for(lambda: status(store, opts) == "finished")
        with open(ev, "a") as f:
            f.write(json.dumps({"time": time.time() + 1, "kind": "start", "session": "def"}) + "\n")
        assert wait_for(lambda: status(store, opts) == "starting")
        with open(csv, "a") as f:
            f.write(f"{time.time() + 2},21,0.04,1.0\n")
        assert wait_for(lambda: status(store, opts) == "running")
    finally:
        src.stop()


def test_a_hole_after_good_rows_is_stepped_over_and_rows_after_it_are_read(tmp_path):
    """A hole in the middle (a preallocated or crashed file): the rows before and after it are read."""
    from mstop.sources import read_once
    from tests.helpers.runs import steps, write_rank

    write_rank(tmp_path, 0, steps(1, 10, loss=1.0))
    with open(tmp_path / "rank0.csv", "r+b") as f:
        f.seek(0, os.SEEK_END)
        f.truncate(f.tell() + (4 << 30))
    write_rank(tmp_path / "more", 0, steps(11, 12, loss=1.0), header=False)
    with open(tmp_path / "rank0.csv", "ab") as f:
        f.write(b"\n" + (tmp_path / "more" / "rank0.csv").read_bytes())
    store = read_once(str(tmp_path))
    assert store.ranks[0].col("step").tolist() == [float(s) for s in range(1, 13)] and store.bad_rows == 1


async def test_keys_work_and_q_quits_while_a_long_log_is_read(tmp_path, monkeypatch):
    """Issue 26 #18: the first read of a long MindFormers log (1,000,000 lines, about 10 s to parse here) is
    done on a thread: the screen says so, ? opens the help, Ctrl-C quits, and the reading stops. (The pilot takes
    about 2 s a key while the reader holds the GIL; in a terminal q ends mstop in about 0.5 s.)"""
    from benchmarks.bench_mflog import make
    from mstop.app import MonitorApp
    from mstop.app.screens import HelpScreen
    from tests.helpers.app_common import screen_lines

    make(str(tmp_path), 1_000_000)
    # read line by line (about 10 s here), not as arrays (about 3 s): long enough for the keys to land
    monkeypatch.setattr("mstop.engine.mflog.BULK_RUN", 10**9)
    app = MonitorApp(str(tmp_path / "output"), follow=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        assert app.reading
        assert "reading what is written so far" in "\n".join(screen_lines(app))
        await pilot.press("question_mark")
        await pilot.pause(0.2)
        assert isinstance(app.screen, HelpScreen) and app.monitor.reading
        await pilot.press("ctrl+c")  # quits from the help screen too (one key: a key takes ~2 s here)
    assert app.monitor.reading and app.store.rows < 1_000_000  # it quit while reading
    assert wait_for(lambda: not [t for t in threading.enumerate() if t.name == "mstop-load"], 5)


