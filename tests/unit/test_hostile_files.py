"""Issue 26, reading files: rank files shaped as strangers shape them (no session column, a 100 GB hole,
unreadable modes), read without a traceback, without blocking, and with a word for what cannot be read."""

from __future__ import annotations

import json
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


