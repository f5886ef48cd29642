"""The live path at cluster scale, in one process: ``summarize()`` of 1,024 ranks x 20 rows (what a
followed run recomputes once a second) and one read round of 1,024 files with one new row each.

    python benchmarks/bench_live_summary.py

Run it at two commits (``git worktree add``) to compare; the figures are medians of 5.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mstop.commands.summary import summarize
from mstop.engine.figures import Options
from mstop.engine.store import Store
from mstop.sources.local import LocalSource
from mstop_writer import COLUMNS

RANKS, ROWS = 1024, 20


def row(t: float, step: int) -> str:
    cells = {"time": t, "step": step, "loss": 1.0, "step_time": 1.0, "data_wait": 0.01, "tokens": 100,
             "session": "s1"}
    return ",".join(str(cells.get(c, "")) for c in COLUMNS) + "\n"


def main() -> int:
    run = Path(tempfile.mkdtemp(prefix="mstop-bench-"))
    now = time.time()
    for r in range(RANKS):
        with open(run / f"rank{r}.csv", "w") as f:
            f.write(",".join(COLUMNS) + "\n" + "".join(row(now - 25 + s, s) for s in range(1, ROWS + 1)))
        with open(run / f"rank{r}.events.jsonl", "w") as f:
            f.write(json.dumps({"time": now - 30, "kind": "start", "session": "s1"}) + "\n")
            f.write(json.dumps({"time": now - 1, "kind": "heartbeat", "session": "s1"}) + "\n")
    store = Store()
    src = LocalSource(str(run), store)
    src.read_all()
    opts = Options()
    summarize(store, str(run), opts)
    times = []
    for _ in range(5):
        t = time.perf_counter()
        summarize(store, str(run), opts)
        times.append(time.perf_counter() - t)
    print(f"summarize, {RANKS} ranks x {ROWS} rows: {1e3 * statistics.median(times):.1f} ms (median of 5)")
    rounds = []
    for k in range(5):
        for r in range(RANKS):
            with open(run / f"rank{r}.csv", "a") as f:
                f.write(row(now + k, ROWS + 1 + k))
        t = time.perf_counter()
        src.read_all()
        rounds.append(time.perf_counter() - t)
    print(f"read round, {RANKS} files x 1 new row: {1e3 * statistics.median(rounds):.1f} ms (median of 5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
