"""The monitor process following 1,024 ranks x 1 row/s with the ranks view open, for this checkout and
others in turn, against the same writer (issue 57: following must not cost more than it did).

    python benchmarks/bench_follow_trees.py [--rounds 2] [--seconds 25] [--tree DIR ...]

Each round runs every tree once, in the same order: a writer process appends a row a second to each of
1,024 rank files, the monitor (``run_all.FOLLOW``, the test pilot's app) follows them with that tree first
on the path, and its CPU over ``--seconds`` is printed as % of one core; last, each tree's median.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))

from bench_follow import start_writer  # noqa: E402
from run_all import FOLLOW, PY  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=25.0)
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--tree", action="append", default=[], help="another checkout to time beside this one")
    a = ap.parse_args()
    trees = [ROOT, *[os.path.abspath(t) for t in a.tree]]
    got: dict[str, list[float]] = {t: [] for t in trees}
    for _ in range(a.rounds):
        for t in trees:
            with tempfile.TemporaryDirectory() as tmp:
                w, ready = start_writer(tmp, a.ranks, 1.0, a.seconds + 60)
                ready.set()
                out = subprocess.run([PY, "-c", FOLLOW, tmp, str(a.seconds), "1", "0"], capture_output=True,
                                     text=True, env={**os.environ, "PYTHONPATH": t}, cwd=t)
                w.terminate()
                w.join()
            if out.returncode:
                raise RuntimeError(f"the monitor of {t} failed:\n{out.stderr[-3000:]}")
            got[t].append(float(out.stdout.strip().splitlines()[-1].split()[0]))
            print(f"  {t}: {got[t][-1]:.1f} % of a core", flush=True)
    for t in trees:
        print(f"{a.ranks:,} ranks x 1 row/s, ranks view open ({t}): median {statistics.median(got[t]):.1f} % "
              f"{[round(x, 1) for x in got[t]]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
