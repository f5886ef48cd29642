"""Cold ``mstop summary --json`` and the monitor's first full frame of 10,000 ranks x 300 rows, beside pyarrow
reading the same files, in the same run (issue 57's figures that went backwards).

    python benchmarks/bench_cold10k.py [--repeats 3] [--frames 1] [--tree DIR ...]

Each figure is the median wall time of fresh processes (imports included), interleaved with the reference:
``pyarrow.csv.read_csv`` of every rank file. ``--tree``: other checkouts of mstop (an older commit's
worktree) timed in the same rounds, each by its own ``python -m mstop`` with that tree first on the path, so
a before/after is read against one reference on one machine at one time.
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

from run_all import ARROW, PY, many_ranks  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(cmd: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env, cwd=cwd)
    return time.perf_counter() - t0


def first_frame(run: str, rows: int, env: dict[str, str], cwd: str) -> float:
    """Seconds from the process's start to the monitor's first full frame (bench_monitor.FIRST_FRAME)."""
    from bench_monitor import FIRST_FRAME

    t0 = time.time()
    out = subprocess.run([PY, "-c", FIRST_FRAME, run, str(rows)], check=True, capture_output=True, text=True,
                         env=env, cwd=cwd).stdout
    return float(out.split()[0]) - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--frames", type=int, default=1, help="first frames timed per tree (0: none)")
    ap.add_argument("--rows", type=int, default=300)
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "mstop-bench"))
    ap.add_argument("--tree", action="append", default=[], help="another checkout to time beside this one")
    a = ap.parse_args()
    run = many_ranks(a.data, 10_000, a.rows)
    trees = [ROOT, *[os.path.abspath(t) for t in a.tree]]
    envs = {t: {**os.environ, "PYTHONPATH": t} for t in trees}
    got: dict[str, list[float]] = {"pyarrow": [], **{f"summary {t}": [] for t in trees}}
    for _ in range(a.repeats):
        got["pyarrow"].append(timed([PY, "-c", ARROW, run]))
        for t in trees:
            got[f"summary {t}"].append(timed([PY, "-m", "mstop", "summary", "--json", run], env=envs[t], cwd=t))
    ref = statistics.median(got["pyarrow"])
    print(f"10,000 ranks x {a.rows} rows, {a.repeats} rounds (medians)")
    print(f"  pyarrow reading the files: {ref:.2f} s  {[round(x, 2) for x in got['pyarrow']]}")
    for t in trees:
        v = statistics.median(got[f"summary {t}"])
        print(f"  cold summary --json ({t}): {v:.2f} s = {v / ref:.2f} x pyarrow  "
              f"{[round(x, 2) for x in got[f'summary {t}']]}")
    for t in trees:
        frames = [first_frame(run, 10_000 * a.rows, envs[t], t) for _ in range(a.frames)]
        if frames:
            v = min(frames)
            print(f"  first full frame ({t}): {v:.2f} s = {v / ref:.2f} x pyarrow (best of {len(frames)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
