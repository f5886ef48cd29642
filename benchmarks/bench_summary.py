"""Cold ``mstop summary`` of a large run against plain ``pandas.read_csv`` of the same files.

    python benchmarks/bench_summary.py [--ranks 8] [--rows 200000] [--repeats 5]

Each figure is the median wall time of ``--repeats`` fresh processes (imports
included), interleaved: ``mstop summary --json DIR``; a Python process that
imports pandas and reads every rank file with ``pandas.read_csv`` (the floor);
and an empty ``python -c pass`` (interpreter start-up). Target: summary <=
1.5 x floor + start-up. Also prints the store's bytes per row.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from gen_run import generate  # noqa: E402

FLOOR = "import glob, sys, pandas as pd; [pd.read_csv(f) for f in sorted(glob.glob(sys.argv[1] + '/rank*.csv'))]"


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        generate(tmp, a.ranks, a.rows)
        size = sum(os.path.getsize(os.path.join(tmp, f)) for f in os.listdir(tmp))
        res: dict[str, list[float]] = {"summary": [], "floor": [], "startup": []}
        for _ in range(a.repeats):
            res["summary"].append(timed([sys.executable, "-m", "mstop", "summary", "--json", tmp]))
            res["floor"].append(timed([sys.executable, "-c", FLOOR, tmp]))
            res["startup"].append(timed([sys.executable, "-c", "pass"]))
        med = {k: statistics.median(v) for k, v in res.items()}
        from mstop.engine.store import Store
        from mstop.sources.local import LocalSource

        store = Store()
        LocalSource(tmp, store).read_all()
        per_row = store.nbytes() / store.rows
    print(f"run: {a.ranks} ranks x {a.rows:,} rows ({size / 1e6:.0f} MB); medians of {a.repeats} fresh processes")
    print(f"  mstop summary --json       {med['summary']:6.2f} s")
    print(f"  pandas.read_csv (floor)    {med['floor']:6.2f} s")
    print(f"  python start-up            {med['startup']:6.2f} s")
    target = 1.5 * med["floor"] + med["startup"]
    print(f"  target 1.5 x floor + start-up = {target:.2f} s: {'met' if med['summary'] <= target else 'MISSED'}"
          f" (summary / floor = {med['summary'] / med['floor']:.2f})")
    print(f"  store: {per_row:.1f} bytes per row")
    return 0


if __name__ == "__main__":
    sys.exit(main())
