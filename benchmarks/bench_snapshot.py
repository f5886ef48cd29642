"""How long a frame holds the store's lock: the snapshot, beside the whole frame built from it.

    python benchmarks/bench_snapshot.py

The monitor builds each frame from ``Store.snapshot()`` (rows shared, lists copied), so the reading
thread waits only for the snapshot, not for the frame. Printed per store shape: the median of 15.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

from bench_monitor import synthetic_store  # noqa: E402

from mstop.engine.figures import Options  # noqa: E402
from mstop.view import build_view  # noqa: E402


def main() -> int:
    for rows, ranks, header_only in ((80_000, 8, False), (10_000_000, 8, False), (2_048_000, 1024, True)):
        store = synthetic_store(rows, ranks=ranks)
        opts = Options(clock=lambda: 1.7e9 + 1e7)
        build_view(store, opts, header_only=header_only)
        snaps, frames = [], []
        for _ in range(15):
            t = time.perf_counter()
            store.snapshot()
            snaps.append(time.perf_counter() - t)
            store.version += 1  # a new version: nothing memoised is reused
            t = time.perf_counter()
            build_view(store, opts, header_only=header_only)
            frames.append(time.perf_counter() - t)
        what = "the ranks view's frame" if header_only else "a full frame"
        print(f"{ranks:>5} ranks x {rows // ranks:>9,} rows: lock held {1e3 * statistics.median(snaps):6.2f} ms "
              f"(snapshot) vs {1e3 * statistics.median(frames):6.1f} ms for {what} built from it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
