"""Memory per stored row: 10,000,000 rows in the store, measured as the process's RSS growth.

    python benchmarks/bench_memory.py [--rows 10000000] [--ranks 8]

Rows are ingested in batches of 100,000 (as a long run is read), then the
resident set size growth of this process is divided by the row count, beside
the bytes the store says it allocated. Reference: the same rows as one
float64 pandas DataFrame (19 numeric columns), measured the same way.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys

import numpy as np

from mstop.engine.store import Batch, Store
from mstop.formats.parse import N_EXACT, NUMERIC, Rows


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--ranks", type=int, default=8)
    a = ap.parse_args()
    batch = 100_000
    per_rank = a.rows // a.ranks
    gc.collect()
    before = rss()
    store = Store()
    rng = np.random.default_rng(0)
    for r in range(a.ranks):
        for start in range(0, per_rank, batch):
            n = min(batch, per_rank - start)
            exact = np.empty((n, N_EXACT))
            exact[:, 0] = 1.7e9 + np.arange(start, start + n) * 0.5
            exact[:, 1] = np.arange(start + 1, start + n + 1)
            floats = rng.random((n, len(NUMERIC) - N_EXACT), dtype=np.float32)
            store.append(Batch.of(r, Rows(exact, floats, {}, np.zeros(n, np.int32), ["s"])))
    gc.collect()
    grown = rss() - before
    rows = store.rows
    print(f"{rows:,} rows in {a.ranks} ranks: RSS grew {grown / 1e6:,.0f} MB = {grown / rows:.1f} bytes/row; "
          f"store allocated {store.nbytes() / rows:.1f} bytes/row (target < 100)")
    del store
    gc.collect()
    import pandas as pd

    before = rss()
    df = pd.DataFrame(np.zeros((rows, len(NUMERIC) + 1)))
    print(f"reference, a float64 DataFrame of the same shape: {(rss() - before) / rows:.1f} bytes/row")
    del df
    return 0


if __name__ == "__main__":
    sys.exit(main())
