"""The history scan for incidents while following a run whose every rank fires (issue 57 step 3): a scan of
the whole history (a fresh store: what every scan cost before the fold) beside the folded scan after each
read round of one new row per rank.

    python benchmarks/bench_incidents.py [--ranks 1024] [--rows 2000] [--rounds 5]

Each rank's input waits 30 % of its step (data_starvation fires on every rank from its 11th row on); the
run is written with benchmarks/gen_run.py's rows, the new rows appended to every file before each round.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mstop.engine.incidents import scan  # noqa: E402
from mstop.engine.rules import Rules  # noqa: E402
from mstop.engine.store import Store  # noqa: E402
from mstop.sources import read_once  # noqa: E402
from mstop.sources.local import LocalSource  # noqa: E402
from mstop_writer import COLUMNS  # noqa: E402


def row(step: int) -> str:
    """A row of a rank that waits 0.15 s of its 0.5 s step on input."""
    cells = {"time": repr(1.7e9 + 0.5 * step), "step": str(step), "loss": "2.0", "step_time": "0.5",
             "data_wait": "0.15", "tokens": "4096", "mem_peak": "5e10", "mem_total": "6.5e10", "session": "b"}
    return ",".join(cells.get(c, "") for c in COLUMNS) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    rules = Rules()
    with tempfile.TemporaryDirectory() as run:
        body = "".join(row(s) for s in range(1, a.rows + 1))
        for r in range(a.ranks):
            with open(os.path.join(run, f"rank{r}.csv"), "w") as f:
                f.write(",".join(COLUMNS) + "\n" + body)
        store = Store()
        src = LocalSource(run, store)
        src.keep_open()
        src.read_all()
        t = time.perf_counter()
        first = scan(store.snapshot(), rules)
        first_s = time.perf_counter() - t
        whole, folded = [], []
        for k in range(a.rounds):
            for r in range(a.ranks):
                with open(os.path.join(run, f"rank{r}.csv"), "a") as f:
                    f.write(row(a.rows + 1 + k))
            src.round(src.files)
            t = time.perf_counter()
            got = scan(store.snapshot(), rules)
            folded.append(time.perf_counter() - t)
            fresh = read_once(run).snapshot()  # the same rows, nothing kept: the scan of the whole
            t = time.perf_counter()
            want = scan(fresh, rules)
            whole.append(time.perf_counter() - t)
            assert len(got) == len(want) == a.ranks, (len(got), len(want))
        src.stop()
    print(f"{a.ranks:,} ranks x {a.rows:,} rows, every rank starving: {len(first):,} incidents")
    print(f"  first scan (nothing kept yet): {first_s:.3f} s")
    print(f"  a scan of the whole history, a fresh store: median {statistics.median(whole):.3f} s")
    print(f"  the folded scan after a round of one row per rank: median {statistics.median(folded):.3f} s "
          f"= {statistics.median(folded) / statistics.median(whole):.2f} x the whole scan")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
