"""A writer process for the exit witness's tests (issue 38): writes rows, then does what it is told.

    python witness_job.py RUN_DIR RANK STEPS THEN [STACK_AFTER [WORLD_SIZE]]

THEN: ``finish`` (closes cleanly), ``hang`` (sleeps in a function named ``stuck_here`` until killed),
``segv`` (a NULL read through ctypes), ``raise`` (an uncaught exception). It prints ``ready PID`` once its
rows are written.
"""

from __future__ import annotations

import sys
import time

from mstop_writer import MetricsWriter


def stuck_here() -> None:
    while True:
        time.sleep(0.2)


def main(run: str, rank: int, steps: int, then: str, stack_after: float | None, world: int | None = None) -> None:
    w = MetricsWriter(run, rank=rank, world_size=world or rank + 1, heartbeat_interval=1.0, stack_after=stack_after)
    for s in range(1, steps + 1):
        time.sleep(0.01)
        w.log(s, loss=1.0 / s, step_time=0.01)
    print("ready", flush=True)
    if then == "finish":
        w.close()
    elif then == "hang":
        stuck_here()
    elif then == "segv":
        import ctypes

        ctypes.string_at(0)
    elif then == "raise":
        raise RuntimeError("told to fail")


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], int(a[1]), int(a[2]), a[3], float(a[4]) if len(a) > 4 and a[4] != "-" else None,
         int(a[5]) if len(a) > 5 else None)
