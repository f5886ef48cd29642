"""The runs list on a folder of many long runs (issue 17), each figure beside its reference.

    python benchmarks/bench_runs.py                     # 1,000 runs x 8 ranks x 10,000 rows (13.6 GB)
    python benchmarks/bench_runs.py --runs 100 --keep /tmp/runs100

Figures, each from a new process (cold: imports included), medians of --repeats:
- list: from process start until the runs screen (the real RunsApp, headless) shows every run and the
  figures of the page on screen (40 rows); and until every run's figures are known.
- reference: pandas.read_csv of just the last 100 rows of every rank file (header + those rows).
- live: one refresh pass over every run with nothing new, and the CPU the list process uses while 10 runs
  grow by a row a second (whole process, over --live-seconds).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_runs import generate_runs  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LIST = r"""
import asyncio, os, sys, time
START = float(os.environ["BENCH_START"])
from mstop.app.runs import RunsApp
from mstop.sources.runs import RunsWatch
from mstop.app.widgets.runs import RunsTable

async def main():
    app = RunsApp([RunsWatch(sys.argv[1])], label="runs", clock=lambda: 1.7e9 + 6000)
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.runs_screen.query_one(RunsTable)
        page = shown = None
        while True:
            await pilot.pause(0.01)
            rows, _, _ = app.model.snapshot()
            total = len(app.model.runs())
            if page is None and total and table.row_count >= min(total, table.page_size) and all(
                    str(table.get_row_at(i)[3]) for i in range(table.row_count)):
                page = time.time() - START
            if total and len(rows) == total and app.model.read_count >= total:
                shown = time.time() - START
                break
        print("PAGE", page, "ALL", shown, "RUNS", total, flush=True)
        # one pass with nothing new: the cost of staying live
        t = time.perf_counter()
        for run in app.model.runs().values():
            run.read_at = 0.0
        app.model.refresh()
        print("PASS", time.perf_counter() - t, flush=True)
        if len(sys.argv) > 2:
            cpu0, wall0 = time.process_time(), time.monotonic()
            await pilot.pause(float(sys.argv[2]))
            print("CPU", (time.process_time() - cpu0) / (time.monotonic() - wall0), flush=True)

asyncio.run(main())
"""

REFERENCE = r"""
import io, os, sys, time
START = float(os.environ["BENCH_START"])
import pandas as pd
n = 0
for dirpath, _, names in os.walk(sys.argv[1]):
    for name in names:
        if not name.endswith(".csv"):
            continue
        with open(os.path.join(dirpath, name), "rb") as f:
            header = f.readline()
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - 32768))
            lines = f.read().split(b"\n")[1:-1][-100:]
        pd.read_csv(io.BytesIO(header + b"\n".join(lines) + b"\n"))
        n += 1
print("REF", time.time() - START, "FILES", n, flush=True)
"""


def child(code: str, *args: str) -> dict[str, float]:
    env = {**os.environ, "BENCH_START": repr(time.time())}
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=3600)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-3000:])
    got: dict[str, float] = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        for k, v in zip(parts[::2], parts[1::2]):
            got[k] = float(v) if v != "None" else float("nan")
    return got


def grow(root: str, runs: int, stop_after: float) -> subprocess.Popen:
    """A process appending a row a second to each of ``runs`` runs' rank 0 (the list's live load)."""
    code = (
        "import os, sys, time\n"
        "paths = sorted(os.path.join(d, 'rank0.csv') for d, _, n in os.walk(sys.argv[1]) if 'rank0.csv' in n)\n"
        f"paths = paths[:{runs}]\nend = time.time() + {stop_after}\nstep = 10**6\n"
        "while time.time() < end:\n"
        "    step += 1\n"
        "    for p in paths:\n"
        "        with open(p, 'a') as f:\n"
        "            f.write(f'{time.time()!r},{step},1,1.5,0.0003,1.25,0.5,0.01,,524288,128,1048576.0,0.41,'\n"
        "                    '52000000000,56000000000,65000000000,0,65536.0,bench\\n')\n"
        "    time.sleep(1.0)\n")
    return subprocess.Popen([sys.executable, "-c", code, root])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--live-seconds", type=float, default=10.0)
    ap.add_argument("--keep", metavar="DIR", help="write the runs here and keep them (reused when present)")
    a = ap.parse_args()
    root = a.keep or tempfile.mkdtemp(prefix="mstop-bench-runs-")
    try:
        if not os.path.isdir(os.path.join(root, "group00")):
            t = time.perf_counter()
            generate_runs(root, a.runs, a.ranks, a.rows)
            print(f"wrote {a.runs} runs x {a.ranks} ranks x {a.rows:,} rows in {time.perf_counter() - t:.0f} s")
        pages, alls, refs, passes = [], [], [], []
        for _ in range(a.repeats):  # interleaved: the machine's noise falls on both alike
            got = child(LIST, root)
            pages.append(got["PAGE"])
            alls.append(got["ALL"])
            passes.append(got["PASS"])
            refs.append(child(REFERENCE, root)["REF"])
        g = grow(root, 10, a.live_seconds + 30)
        try:
            cpu = child(LIST, root, str(a.live_seconds))["CPU"]
        finally:
            g.kill()
        med = statistics.median
        print(f"runs: {a.runs} x {a.ranks} ranks x {a.rows:,} rows; medians of {a.repeats}, whole processes, cold")
        print(f"  list, every run and the page's figures on screen: {med(pages):6.2f} s   (target < 2 s)")
        print(f"  list, every run's figures known:                   {med(alls):6.2f} s")
        print(f"  reference, pandas.read_csv of the last 100 rows of every file: {med(refs):6.2f} s")
        print(f"  ratio page / reference: {med(pages) / med(refs):.2f}; all / reference: {med(alls) / med(refs):.2f}")
        print(f"  one refresh pass with nothing new: {med(passes) * 1e3:.0f} ms")
        print(f"  live, 10 runs growing a row a second: {100 * cpu:.1f} % of a core (whole process)")
    finally:
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
