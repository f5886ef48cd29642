"""``mstop compare`` and ``mstop report`` of two long runs, beside ``pandas.read_csv`` of the same files.

    python benchmarks/bench_compare.py [--ranks 8] [--rows 200000] [--repeats 3]

Both commands read every file once (as ``mstop summary`` does), then reduce the
equal-step window a chunk of ranks at a time; the report also draws seven PNGs.
Prints the median wall time of each, its peak RSS, and the floor: one process
that only ``pandas.read_csv``-s both runs' files.
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

FLOOR = ("import glob, sys, pandas as pd\n"
         "[pd.read_csv(f) for d in sys.argv[1:] for f in sorted(glob.glob(d + '/rank*.csv'))]")


#: runs a script or module and prints its own peak RSS (kB) last on stderr
WRAP = ("import resource, runpy, sys\n"
        "try:\n"
        "    if sys.argv[1] == '-c':\n"
        "        code = sys.argv[2]; sys.argv = ['-c', *sys.argv[3:]]; exec(code)\n"
        "    else:\n"
        "        sys.argv = ['mstop', *sys.argv[1:]]; runpy.run_module('mstop', run_name='__main__')\n"
        "finally:\n"
        "    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n")


def timed(args: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of ``python -c WRAP args``."""
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", WRAP, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    return wall, int(out.stderr.split()[-1]) / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    from gen_run import generate

    print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}; 2 runs x {a.ranks} ranks x "
          f"{a.rows:,} rows")
    with tempfile.TemporaryDirectory() as tmp:
        runs = [os.path.join(tmp, "a"), os.path.join(tmp, "b")]
        for i, r in enumerate(runs):
            generate(r, a.ranks, a.rows, seed=i)
        res: dict[str, list[tuple[float, float]]] = {"compare": [], "report": [], "floor": []}
        for k in range(a.repeats):
            res["floor"].append(timed(["-c", FLOOR, *runs]))
            res["compare"].append(timed(["compare", *runs]))
            res["report"].append(timed(["report", *runs, "--out", os.path.join(tmp, f"report{k}")]))
    floor = statistics.median(w for w, _ in res["floor"])
    print(f"pandas.read_csv floor: {floor:.2f} s, peak RSS {max(m for _, m in res['floor']):,.0f} MB")
    for name in ("compare", "report"):
        wall = statistics.median(w for w, _ in res[name])
        rss = max(m for _, m in res[name])
        print(f"mstop {name}: {wall:.2f} s ({wall / floor:.2f} x the pandas.read_csv floor of {floor:.2f} s), "
              f"peak RSS {rss:,.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
