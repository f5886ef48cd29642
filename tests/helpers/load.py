"""A load of our own making, for checking the suite on a busy machine (issue 37): N processes that each keep a
core busy with pure-Python arithmetic for S seconds.

    python -m tests.helpers.load 2 3600 &   # both cores of this machine, for an hour
    python -m pytest                        # the suite beside it
"""

from __future__ import annotations

import multiprocessing
import sys
import time


def spin(seconds: float) -> None:
    end = time.time() + seconds
    x = 0
    while time.time() < end:
        for i in range(100_000):
            x = (x * 31 + i) % 1_000_003


def main(argv: list[str]) -> int:
    n, seconds = int(argv[0]), float(argv[1])
    procs = [multiprocessing.Process(target=spin, args=(seconds,)) for _ in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
