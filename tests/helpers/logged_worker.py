"""A worker that writes a MindSpore-style log line (its pid in the prefix) to its standard output, which the
test points at a log file, and rows through the writer (so its exit witness watches it too); then waits.

    python logged_worker.py RUN_DIR RANK
"""

from __future__ import annotations

import os
import sys
import time

from mstop_writer import MetricsWriter


def main(run: str, rank: int) -> None:
    print(f"[WARNING] ME({os.getpid()},7f3a00000000,python):2026-12-03-10:00:00.000.000 [worker.py:1] rank {rank}",
          flush=True)
    w = MetricsWriter(run, rank=rank, world_size=2, heartbeat_interval=1.0)
    w.log(1, loss=1.0, step_time=0.01)
    print("ready", file=sys.stderr, flush=True)
    while True:
        time.sleep(0.2)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
