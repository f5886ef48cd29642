"""Memory while following: 1,024 ranks, a row each a read round, for an hour's rows (3,600 at 1 row/s).

    python benchmarks/bench_hour.py [--ranks 1024] [--rows 3600] [--frame-every 30]

The engine as the monitor drives it, without files or a screen: every round appends one row to every rank
(Store.append of a round's Batch, the following path), a frame is built from a snapshot every ``--frame-every`` rounds
and the incidents scanned every 300. The rows vary as a real job's do
(loss, lr, grad norm, step and data time, tokens/s, memory). Printed last: the resident MB when the window
filled (a chunk after every rank first spilled: from then on a rank holds between its share of the budget and
a chunk more, and now the most), the highest resident MB after it, the growth of the same run holding every row
(``MSTOP_KEEP_ROWS=all``) from that round to its end, and the seconds the spilling run took.
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import time

import numpy as np


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def follow(ranks: int, rounds: int, frame_every: int, filled_at: int | None) -> tuple[float, float, int]:
    """(MB when filled, highest MB after, the round it filled) of one run in this process."""
    from mstop.engine import incidents
    from mstop.engine.figures import Options
    from mstop.engine.rules import Rules
    from mstop.engine.store import FLOAT_INDEX, Batch, Store
    from mstop.formats.parse import N_EXACT, NUMERIC, Rows
    from mstop.view import build_view

    store = Store()
    opts = Options(clock=lambda: 1.7e9 + rounds + 10)
    rng = np.random.default_rng(0)
    nf = len(NUMERIC) - N_EXACT
    varying = [FLOAT_INDEX[c] for c in ("loss", "lr", "grad_norm", "step_time", "data_wait", "tokens_per_s",
                                        "mem_used", "mem_peak")]
    const = np.full(nf, np.nan, np.float32)
    const[FLOAT_INDEX["tokens"]], const[FLOAT_INDEX["mem_total"]], const[FLOAT_INDEX["epoch"]] = 524288, 6.5e10, 1
    filled_mb, after, filled = None, 0.0, filled_at
    for k in range(rounds):
        floats = np.tile(const, (ranks, 1))
        floats[:, varying] = rng.random((ranks, len(varying)), dtype=np.float32) + 0.5
        batches = []
        for r in range(ranks):
            exact = np.array([[1.7e9 + k + r / ranks, k + 1.0]])
            batches.append((r, Rows(exact.reshape(1, N_EXACT), floats[r:r + 1], {}, np.zeros(1, np.int32), ["s"])))
        store.append(Batch.round(batches))
        if k % frame_every == 0:
            build_view(store.snapshot(), opts, points=80)
        if k % 300 == 299:
            incidents.scan(store.snapshot(), Rules())
        if filled is None and all(d.base for d in store.ranks.values()):
            # a chunk later: each rank holds the most it will (its share + a chunk)
            filled = k + store.spill_budget.chunk_rows
        if filled is not None and k == filled:
            gc.collect()
            filled_mb = rss_mb()
        elif filled is not None and k > filled and k % 50 == 0:
            after = max(after, rss_mb())
    gc.collect()
    after = max(after, rss_mb())
    held = store.table.live
    print(f"held rows {held:,}, spilled chunks {sum(len(d.spilled) for d in store.ranks.values()):,}, "
          f"read-back cache {store.spill.cached_bytes / 1e6:.1f} MB, file {store.spill.written / 1e6:.0f} MB",
          file=sys.stderr)
    return (filled_mb if filled_mb is not None else after), after, (filled if filled is not None else rounds - 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--rows", type=int, default=3600)
    ap.add_argument("--frame-every", type=int, default=30)
    ap.add_argument("--filled-at", type=int, help=argparse.SUPPRESS)  # the every-row run: measured from there
    a = ap.parse_args()
    if a.filled_at is not None:  # the run holding every row, in its own process
        filled_mb, end, _ = follow(a.ranks, a.rows, a.frame_every, a.filled_at)
        print(filled_mb, end)
        return 0
    t0 = time.time()
    filled_mb, end, at = follow(a.ranks, a.rows, a.frame_every, None)
    seconds = time.time() - t0
    env = {**os.environ, "MSTOP_KEEP_ROWS": "all"}
    got = subprocess.run([sys.executable, __file__, "--ranks", str(a.ranks), "--rows", str(a.rows), "--frame-every",
                          str(a.frame_every), "--filled-at", str(at)], env=env, check=True, capture_output=True,
                         text=True).stdout.split()
    all_filled, all_end = float(got[0]), float(got[1])
    print(f"window filled at row {at + 1}: {filled_mb:.0f} MB; highest after {end:.0f} MB "
          f"({end - filled_mb:+.0f} MB); every row held: {all_filled:.0f} -> {all_end:.0f} MB "
          f"({all_end - all_filled:+.0f} MB); {seconds:.0f} s", file=sys.stderr)
    print(filled_mb, end, all_end - all_filled, seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
