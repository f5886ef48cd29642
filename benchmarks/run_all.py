"""Every performance target in one table: figure, mstop, reference, ratio, target, met / missed.

    python benchmarks/run_all.py            # the issue's sizes (13 min here; 22 the first time: it generates runs)
    python benchmarks/run_all.py --quick    # smaller runs and fewer repeats (under 5 minutes)

Each figure is measured beside its reference in the same run (the machines here are noisy: medians of
interleaved repeats, and ratios). Whole-process figures time fresh processes, imports included. Generated
files are kept in ``--data`` (default: a folder in the temporary directory) and reused by later runs.

Figures:
- cold load: ``mstop summary --json`` of 8 ranks x 125,000 rows against the faster of ``pyarrow.csv`` and
  ``polars`` reading the same files, and against TensorBoard's ``EventAccumulator`` loading the same loss
  values from event files written by tensorboardX (one tag);
- first frame: the monitor's first full frame of 8 ranks x 200,000 rows against that reader + 0.5 s;
- a frame: one full redraw at 120 x 40 with 10,000 and with 10,000,000 rows stored;
- following: the whole monitor process following 64 ranks x 10 rows/s, and 1,024 ranks x 1 row/s with
  the ranks view open (its keys: main-thread CPU per key, without the test pilot's wait for a frame);
  the engine's latency from a row's write to the store (native events);
- 10,000 ranks: cold open, following at 0.2 rows/s per rank (CPU, metadata operations per second:
  every ``stat``, ``fstat``, ``lstat``, ``open``, ``listdir`` and ``scandir`` the process makes, counted
  by wrapping them), the ranks view's keys, bytes per stored row;
- the runs list: 1,000 runs x 8 ranks (2,000 rows each: the list reads tails) until the page on screen and
  every run's figures are known, against ``pandas.read_csv`` of the last 100 rows of every rank file;
- the writer: MstopCallback's overhead per step against ``LossMonitor(1)``'s, ``MetricsWriter.log()``
  against a bare formatted write;
- memory: peak resident memory of ``summary --json`` and of the monitor's first full frame on 1,024 ranks x
  5,000 and x 20,000 rows, beside pyarrow holding the same rows and mstop holding every row
  (``MSTOP_KEEP_ROWS=all``); the growth while 1,024 ranks are followed for an hour's rows (bench_hour.py);
- a hang's first look: a real 4-rank msrun job whose rank's input blocks, seconds from its last rows to the
  witnesses' first dumps and to the verdict naming the rank, beside MindSpore's collective timeout ending
  the job (bench_first_look.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(__file__))

from gen_run import generate  # noqa: E402

PY = sys.executable


@dataclass
class Row:
    """One figure of the table: what mstop measured, its reference in the same run, their ratio (None when
    the target is absolute), the target, and whether it is met (None: no target, only printed)."""

    figure: str
    mstop: str
    reference: str
    ratio: float | None
    target: str
    met: bool | None

    def cells(self) -> list[str]:
        ratio = "" if self.ratio is None else f"{self.ratio:.2f}"
        met = "n/a" if self.met is None else "met" if self.met else "MISSED"
        return [self.figure, self.mstop, self.reference, ratio, self.target, met]


def timed(cmd: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0


ARROW = "import glob, sys, pyarrow.csv as c; [c.read_csv(f) for f in sorted(glob.glob(sys.argv[1] + '/rank*.csv'))]"
POLARS = "import glob, sys, polars as pl; [pl.read_csv(f) for f in sorted(glob.glob(sys.argv[1] + '/rank*.csv'))]"


def readers(run_dir: str) -> dict[str, float]:
    """Whole-process time of each reference reader that imports here (one run each)."""
    out = {}
    for name, code in (("pyarrow", ARROW), ("polars", POLARS)):
        try:
            out[name] = timed([PY, "-c", code, run_dir])
        except subprocess.CalledProcessError:
            pass
    return out


def run_of(data: str, name: str, ranks: int, rows: int) -> str:
    path = os.path.join(data, name)
    if not os.path.exists(os.path.join(path, f"rank{ranks - 1}.csv")):
        shutil.rmtree(path, ignore_errors=True)
        generate(path, ranks, rows)
    return path


# -- cold load -------------------------------------------------------------------------------------------

TB_WRITE = """
import glob, os, sys
from tensorboardX import SummaryWriter
src, out = sys.argv[1], sys.argv[2]
for f in sorted(glob.glob(src + '/rank*.csv')):
    w = SummaryWriter(os.path.join(out, os.path.basename(f)[:-4]), max_queue=100000, flush_secs=3600)
    with open(f) as fh:
        next(fh)
        for line in fh:
            c = line.split(',')
            w.add_scalar('loss', float(c[3]), int(c[1]))
    w.close()
"""
TB_READ = """
import glob, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
n = 0
for d in sorted(glob.glob(sys.argv[1] + '/rank*')):
    acc = EventAccumulator(d, size_guidance={'scalars': 0})
    acc.Reload()
    n += len(acc.Scalars('loss'))
print(n)
"""


def tensorboard_files(data: str, run_dir: str) -> str | None:
    out = os.path.join(data, "tb-" + os.path.basename(run_dir))
    if not os.path.isdir(out):
        try:
            subprocess.run([PY, "-c", TB_WRITE, run_dir, out + ".part"], check=True, capture_output=True)
        except subprocess.CalledProcessError:
            return None  # tensorboardX or tensorboard missing: that row says so
        os.rename(out + ".part", out)
    return out


def cold_load(data: str, repeats: int, tb_repeats: int) -> list[Row]:
    run = run_of(data, "cold-8x125000", 8, 125_000)
    tb = tensorboard_files(data, run)
    res: dict[str, list[float]] = {"mstop": [], "pyarrow": [], "polars": [], "tensorboard": []}
    for i in range(repeats):
        res["mstop"].append(timed([PY, "-m", "mstop", "summary", "--json", run]))
        for k, v in readers(run).items():
            res[k].append(v)
        if tb is not None and i < tb_repeats:  # about a minute each here
            res["tensorboard"].append(timed([PY, "-c", TB_READ, tb]))
    med = {k: statistics.median(v) for k, v in res.items() if v}
    name, floor = min(((k, med[k]) for k in ("pyarrow", "polars") if k in med), key=lambda kv: kv[1])
    rows = [Row("cold `mstop summary --json`, 8 x 125,000 rows", f"{med['mstop']:.2f} s",
                f"{name} {floor:.2f} s", med["mstop"] / floor, "<= 1.25 x", med["mstop"] / floor <= 1.25)]
    if "tensorboard" in med:
        speed = med["tensorboard"] / med["mstop"]
        rows.append(Row("the same loss values: TensorBoard's EventAccumulator / mstop", f"{med['mstop']:.2f} s",
                        f"TensorBoard {med['tensorboard']:.2f} s", speed, ">= 20 x faster", speed >= 20))
    else:
        rows.append(Row("TensorBoard's EventAccumulator", "", "tensorboard/tensorboardX not installed", None,
                        ">= 20 x faster", None))
    return rows


# -- the monitor's frames ---------------------------------------------------------------------------------

def first_frame(data: str, repeats: int) -> list[Row]:
    from bench_monitor import FIRST_FRAME

    run = run_of(data, "frame-8x200000", 8, 200_000)
    res: dict[str, list[float]] = {"monitor": [], "reader": []}
    for _ in range(repeats):
        t0 = time.time()
        out = subprocess.run([PY, "-c", FIRST_FRAME, run, str(8 * 200_000)], check=True, capture_output=True,
                             text=True).stdout
        res["monitor"].append(float(out.split()[0]) - t0)
        res["reader"].append(min(readers(run).values()))
    m, f = statistics.median(res["monitor"]), statistics.median(res["reader"])
    target = 1.25 * f + 0.5
    return [Row("monitor's first full frame, 8 x 200,000 rows", f"{m:.2f} s", f"faster reader {f:.2f} s",
                m / f, f"<= 1.25 x + 0.5 s = {target:.2f} s", m <= target)]


def frames(repeats: int) -> list[Row]:
    """A redraw's main-thread CPU (the app's work and Textual's compositing; the test pilot's idle wait for
    the next frame left out), beside its wall time through the pilot."""
    from bench_monitor import redraw_time

    def med(rows: int, charts: bool, cpu: bool) -> float:
        return statistics.median(asyncio.run(redraw_time(rows, repeats, charts=charts, cpu=cpu)) for _ in range(3))

    s, b, h = med(10_000, True, True), med(10_000_000, True, True), med(10_000_000, False, True)
    sw, bw = med(10_000, True, False), med(10_000_000, True, False)
    return [Row("a full redraw at 120 x 40 (every chart built), 10,000 rows: main-thread CPU", f"{s * 1e3:.1f} ms",
                f"wall through the pilot {sw * 1e3:.0f} ms", None, "<= 25 ms", s <= 0.025),
            Row("a full redraw, 10,000,000 rows: main-thread CPU", f"{b * 1e3:.1f} ms",
                f"10,000 rows: {s * 1e3:.1f} ms (wall {bw * 1e3:.0f} ms)", b / s, "<= 25 ms and ratio <= 1.10",
                b <= 0.025 and b / s <= 1.10),
            Row("a redraw whose series did not change (charts kept), 10,000,000 rows", f"{h * 1e3:.1f} ms", "",
                None, "<= 25 ms", h <= 0.025)]


# -- following --------------------------------------------------------------------------------------------

#: a monitor process following a run: CPU (whole process), metadata operations, keys (main-thread CPU)
FOLLOW = """
import asyncio, os, resource, statistics, sys, time
COUNT = [0]
def counted(f):
    def g(*a, **k):
        COUNT[0] += 1
        return f(*a, **k)
    return g
for name in ("stat", "lstat", "fstat", "open", "listdir", "scandir"):
    setattr(os, name, counted(getattr(os, name)))
from mstop.app import MonitorApp
async def main():
    run_dir, seconds, ranks_view, total = sys.argv[1], float(sys.argv[2]), sys.argv[3] == "1", int(sys.argv[4])
    app = MonitorApp(run_dir, poll=None)
    async with app.run_test(size=(120, 40)) as pilot:
        while app.monitor.session.store.rows < total:
            await pilot.pause(0.05)
        if ranks_view:
            await pilot.press("r")
        await pilot.pause(2)
        r0, t0, c0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic(), COUNT[0]
        await pilot.pause(seconds)
        r1, t1, c1 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic(), COUNT[0]
        cpu = 100 * (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / (t1 - t0)
        keys = []
        for k in (["down", "pagedown", "m", "up", "pageup", "m"] * 2 if ranks_view else []):
            c = time.thread_time()
            await pilot.press(k)
            keys.append(time.thread_time() - c)
            await pilot.pause(0.3)
        rows = app.monitor.session.store.rows
        with open("/proc/self/status") as f:  # this process's own peak (ru_maxrss carries the parent's over)
            hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
        print(cpu, (c1 - c0) / (t1 - t0), statistics.median(keys) if keys else -1, max(keys) if keys else -1,
              rows, hwm)
asyncio.run(main())
"""


def monitor_following(run_dir: str, seconds: float, ranks_view: bool, total: int = 0) -> dict[str, float]:
    got = subprocess.run([PY, "-c", FOLLOW, run_dir, str(seconds), "1" if ranks_view else "0", str(total)],
                         capture_output=True, text=True)
    if got.returncode:
        raise RuntimeError(f"the monitor following {run_dir} failed:\n{got.stderr[-3000:]}")
    out = got.stdout
    cpu, meta, key, key_max, rows, rss = (float(x) for x in out.strip().splitlines()[-1].split())
    return {"cpu": cpu, "meta": meta, "key": key, "key_max": key_max, "rows": rows, "rss_kb": rss}


def following(seconds: float) -> list[Row]:
    from bench_follow import run as engine_run
    from bench_follow import start_writer

    rows = []
    for ranks, rate, view, target in ((64, 10.0, False, 3.0), (1024, 1.0, True, 5.0)):
        with tempfile.TemporaryDirectory() as tmp:
            w, ready = start_writer(tmp, ranks, rate, seconds + 30)
            ready.set()
            got = monitor_following(tmp, seconds, view)
            w.terminate()
            w.join()
        engine = engine_run(ranks, rate, seconds, None)
        what = f"{ranks:,} ranks x {rate:g} rows/s" + (", ranks view open" if view else "")
        rows.append(Row(f"following {what}: the monitor process", f"{got['cpu']:.1f} % of a core",
                        f"engine alone {engine['cpu']:.1f} %", None, f"<= {target:g} %", got["cpu"] <= target))
        rows.append(Row(f"following {what}: latency p95 (native events)", f"{engine['p95']:.0f} ms",
                        f"p50 {engine['p50']:.0f} ms", None, "< 200 ms", engine["p95"] < 200))
        rows.append(Row(f"following {what}: metadata operations", f"{got['meta']:.0f} /s", "", None, "(printed)",
                        None))
        if view:
            rows.append(Row(f"a key with {ranks:,} ranks (main-thread CPU)", f"{got['key'] * 1e3:.0f} ms",
                            f"max {got['key_max'] * 1e3:.0f} ms", None, "<= 50 ms", got["key"] <= 0.050))
    return rows


# -- 10,000 ranks -----------------------------------------------------------------------------------------

def many_ranks(data: str, ranks: int, rows_each: int) -> str:
    """A run of ``ranks`` rank files of ``rows_each`` rows: one rank generated, its bytes copied."""
    path = os.path.join(data, f"ranks-{ranks}x{rows_each}")
    if os.path.exists(os.path.join(path, f"rank{ranks - 1}.csv")):
        return path
    shutil.rmtree(path, ignore_errors=True)
    generate(path, 1, rows_each)
    with open(os.path.join(path, "rank0.csv"), "rb") as f:
        body = f.read()
    with open(os.path.join(path, "rank0.events.jsonl")) as f:
        start = json.loads(f.readline())
    for r in range(ranks):
        with open(os.path.join(path, f"rank{r}.csv"), "wb") as f:
            f.write(body)
        with open(os.path.join(path, f"rank{r}.events.jsonl"), "w") as f:
            f.write(json.dumps({**start, "rank": r, "world_size": ranks, "host": f"node{r // 8}"}) + "\n")
    return path


def appender(run_dir: str, ranks: int, rate: float, seconds: float) -> subprocess.Popen:
    """A process appending a row to each rank file at ``rate`` rows/s per rank, spread over the interval."""
    code = """
import os, sys, time
d, ranks, rate, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
fds = [os.open(os.path.join(d, f"rank{r}.csv"), os.O_WRONLY | os.O_APPEND) for r in range(ranks)]
t0, step = time.time(), 10**6
while time.time() - t0 < seconds:
    step += 1
    for r, fd in enumerate(fds):
        pause = t0 + (step - 10**6 - 1 + r / ranks) / rate - time.time()
        if pause > 0:
            time.sleep(pause)
        os.write(fd, (f"{time.time()!r},{step},1,0.5,0.0003,1.25,0.5,0.01,,524288,128,1048576.0,0.41,"
                      "5e10,5.6e10,6.5e10,0,65536.0,bench\\n").encode())
"""
    return subprocess.Popen([PY, "-c", code, run_dir, str(ranks), str(rate), str(seconds)])


def ten_thousand(data: str, rows_each: int, seconds: float) -> list[Row]:
    from bench_monitor import FIRST_FRAME

    ranks = 10_000
    run = many_ranks(data, ranks, rows_each)
    t0 = time.time()
    out = subprocess.run([PY, "-c", FIRST_FRAME, run, str(ranks * rows_each)], check=True, capture_output=True,
                         text=True).stdout
    cold = float(out.split()[0]) - t0
    floor = min(readers(run).values())
    rows = [Row(f"10,000 ranks x {rows_each:,} rows: cold open (first full frame)", f"{cold:.1f} s",
                f"faster reader {floor:.1f} s", cold / floor, f"<= 1.25 x + 1 s = {1.25 * floor + 1:.1f} s",
                cold <= 1.25 * floor + 1)]
    work = os.path.join(data, "ranks-follow")
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(run, work)
    w = appender(work, ranks, 0.2, seconds + 600)
    try:
        got = monitor_following(work, seconds, True, ranks * rows_each)
    finally:
        w.terminate()
        w.wait()
        shutil.rmtree(work, ignore_errors=True)
    per_row = got["rss_kb"] * 1024 / max(got["rows"], 1)
    rows += [Row("10,000 ranks x 0.2 rows/s: the monitor process, ranks view open", f"{got['cpu']:.1f} % of a core",
                 "", None, "<= 15 %", got["cpu"] <= 15),
             Row("10,000 ranks: metadata operations while following", f"{got['meta']:.0f} /s",
                 "rows arriving: 2,000 /s", None, "<= 2,000 /s", got["meta"] <= 2000),
             Row("10,000 ranks: a key in the ranks view (main-thread CPU)", f"{got['key'] * 1e3:.0f} ms",
                 f"max {got['key_max'] * 1e3:.0f} ms", None, "<= 100 ms", got["key"] <= 0.100),
             Row("10,000 ranks: peak memory per stored row (whole process)", f"{per_row:.0f} B",
                 f"{got['rows']:,.0f} rows", None, "<= 100 B", per_row <= 100)]
    return rows


# -- memory bounded by time ---------------------------------------------------------------------------------

def peak(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(seconds, peak resident MB) of a fresh process: its ``VmHWM``, read every 20 ms while it runs (its
    ``ru_maxrss`` starts at this process's size: Linux carries it over fork and exec)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env)
    hwm = 0
    while p.poll() is None:
        try:
            with open(f"/proc/{p.pid}/status") as f:
                hwm = max(hwm, next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")))
        except (OSError, StopIteration):
            pass
        time.sleep(0.02)
    if p.returncode:
        raise RuntimeError(f"{cmd} ended with status {p.returncode}")
    return time.perf_counter() - t0, hwm / 1024


def memory(data: str, sizes: tuple[int, ...], hour_rows: int) -> list[Row]:
    """Peak memory of ``summary`` and of the monitor's first full frame on 1,024 ranks of each size, beside
    pyarrow holding the same files' rows and mstop holding every row (``MSTOP_KEEP_ROWS=all``: before step 6);
    then 1,024 ranks followed a row at a time for ``hour_rows`` rows (bench_hour.py)."""
    from bench_monitor import FIRST_FRAME

    rows = []
    every = {**os.environ, "MSTOP_KEEP_ROWS": "all"}
    for n in sizes:
        run = many_ranks(data, 1024, n)
        what = f"1,024 ranks x {n:,} rows"
        s_t, s_mb = peak([PY, "-m", "mstop", "summary", "--json", run])
        a_t, a_mb = peak([PY, "-c", ARROW, run])
        e_t, e_mb = peak([PY, "-m", "mstop", "summary", "--json", run], every)
        rows.append(Row(f"{what}: `summary --json` peak memory", f"{s_mb:.0f} MB ({s_t:.1f} s)",
                        f"every row held {e_mb:.0f} MB ({e_t:.1f} s); pyarrow {a_mb:.0f} MB ({a_t:.1f} s)",
                        None, "<= 600 MB", s_mb <= 600))
        f_t, f_mb = peak([PY, "-c", FIRST_FRAME, run, str(1024 * n)])
        g_t, g_mb = peak([PY, "-c", FIRST_FRAME, run, str(1024 * n)], every)
        rows.append(Row(f"{what}: the monitor's peak memory to its first full frame", f"{f_mb:.0f} MB ({f_t:.1f} s)",
                        f"every row held {g_mb:.0f} MB ({g_t:.1f} s)", None, "<= 600 MB", f_mb <= 600))
    got = subprocess.run([PY, os.path.join(os.path.dirname(__file__), "bench_hour.py"), "--rows", str(hour_rows)],
                         check=True, capture_output=True, text=True).stdout.split()
    filled, end, allheld, seconds = (float(x) for x in got[-4:])
    rows.append(Row(f"1,024 ranks followed for {hour_rows:,} rows each (a row a round, frames between): "
                    "memory growth after the window fills", f"{end - filled:+.0f} MB (to {end:.0f} MB)",
                    f"every row held: {allheld:+.0f} MB; {seconds:.0f} s", None, "<= 50 MB", end - filled <= 50))
    return rows


# -- the writer -------------------------------------------------------------------------------------------

def writer(steps: int, repeats: int, rows: int) -> list[Row]:
    import contextlib
    import io

    from bench_writer import bench_callbacks, bench_log

    try:
        with contextlib.redirect_stderr(io.StringIO()):
            cbs = bench_callbacks(steps, repeats)
    except ImportError:
        out = [Row("MstopCallback overhead / LossMonitor(1)'s", "", "mindspore not installed", None, "<= 0.5", None)]
    else:
        none, lm, mst, ratio = cbs["none"], cbs["LossMonitor"], cbs["MstopCallback"], cbs["ratio"]
        lmh, msh = cbs["LossMonitor_hooks"], cbs["MstopCallback_hooks"]
        out = [Row("MstopCallback overhead per step / LossMonitor(1)'s (wall, median of the repeats' ratios)",
                   f"+{mst - none:.0f} us", f"+{lm - none:.0f} us", ratio, "<= 0.5", ratio <= 0.5),
               Row("the same: the hooks' own time per step, inside the same runs", f"{msh:.0f} us",
                   f"{lmh:.0f} us", msh / lmh, "<= 0.5", msh / lmh <= 0.5)]
    lg = bench_log(rows, repeats)
    out.append(Row("MetricsWriter.log() / a bare formatted write", f"{lg['log']:.1f} us/row",
                   f"{lg['floor']:.1f} us/row", lg["log"] / lg["floor"], "<= 3 x", lg["log"] / lg["floor"] <= 3))
    from bench_writer import bench_devices, bench_witness

    wt = bench_witness(20.0, 3)
    out.append(Row("exit witness beside a rank: RSS / a bare python -I -S", f"{wt['rss'] / 2**20:.1f} MB",
                   f"{wt['floor_rss'] / 2**20:.1f} MB", wt["rss"] / wt["floor_rss"], "<= 15 MB",
                   wt["rss"] <= 15 * 2**20))
    out.append(Row("exit witness: share of a core / the bare program waking as often", f"{100 * wt['cpu']:.3f} %",
                   f"{100 * wt['floor_cpu']:.3f} %", wt["cpu"] / max(wt["floor_cpu"], 1e-9), "<= 0.1 %",
                   wt["cpu"] <= 0.001))
    out.append(Row("stacks in the job: StackDumps.step_end per step / one bare pwrite",
                   f"{wt['step_end'] * 1e6:.1f} us", f"{wt['pwrite'] * 1e6:.1f} us", wt["step_end"] / wt["pwrite"],
                   "—", None))

    dv = bench_devices(50, repeats)
    out.append(Row("NPU sampling, CPU a sample of 8 NPUs (stand-in npu-smi) / one bare npu-smi info; share of a "
                   "core at 10 s", f"{dv['sample'] * 1e3:.1f} ms = {100 * dv['core_share']:.2f} %",
                   f"{dv['floor'] * 1e3:.1f} ms", dv["sample"] / dv["floor"], "<= 1 % of a core",
                   dv["core_share"] <= 0.01))
    return out


def runs_list(data: str, runs: int, rows_each: int, repeats: int) -> list[Row]:
    """The runs list (the real RunsApp, headless) on ``runs`` runs x 8 ranks: until every run's figures are
    known, beside pandas reading the last 100 rows of every rank file (bench_runs.py's figures)."""
    from bench_runs import LIST, REFERENCE, child
    from gen_runs import generate_runs

    root = os.path.join(data, f"runs-{runs}x8x{rows_each}")
    if not os.path.exists(os.path.join(root, "done")):
        shutil.rmtree(root, ignore_errors=True)
        generate_runs(root, runs, 8, rows_each)
        open(os.path.join(root, "done"), "w").close()
    pages, alls, refs = [], [], []
    for _ in range(repeats):
        got = child(LIST, root)
        pages.append(got["PAGE"])
        alls.append(got["ALL"])
        refs.append(child(REFERENCE, root)["REF"])
    page, every, ref = (statistics.median(x) for x in (pages, alls, refs))
    what = f"runs list, {runs:,} runs x 8 ranks"
    return [Row(f"{what}: the page on screen", f"{page:.2f} s", f"pandas tails {ref:.2f} s", page / ref,
                "< 2 s", page < 2.0),
            Row(f"{what}: every run's figures known", f"{every:.2f} s", f"pandas tails {ref:.2f} s", every / ref,
                "<= 5 s", every <= 5.0)]


def first_look(repeats: int) -> list[Row]:
    """Issue 60: seconds from a real 4-rank job's hang to its first look and to the verdict naming the rank,
    beside the job's own end by MindSpore's collective timeout (before which no timed dump came)."""
    try:
        import mindspore  # noqa: F401
    except ImportError:
        return [Row("a hang's first look", "", "mindspore not installed", None, "<= 10 s", None)]
    from bench_first_look import bench_first_look

    got = bench_first_look(repeats)
    look, verdict, end = got["first_look"], got["verdict"], got["job_end"]
    return [Row("a hang's first look: the witnesses' dumps / MindSpore's collective timeout ending the job, s "
                "from the last rows", f"{look:.1f} s", f"{end:.1f} s", look / end, "<= 10 s", look <= 10),
            Row("the hang verdict naming the rank / the job's end, s from the last rows", f"{verdict:.1f} s",
                f"{end:.1f} s", verdict / end, "<= 10 s", verdict <= 10)]


def table(rows: list[Row]) -> str:
    head = ["figure", "mstop", "reference", "ratio", "target", "met"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r.cells()) + " |" for r in rows]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller runs, fewer repeats: under 5 minutes")
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "mstop-bench"),
                    help="where generated runs are kept between runs")
    ap.add_argument("--only", help="comma-separated parts: cold,first,frame,follow,ranks,runs,writer,memory,hang")
    a = ap.parse_args()
    os.makedirs(a.data, exist_ok=True)
    q = a.quick
    parts = {
        "cold": lambda: cold_load(a.data, 3 if q else 5, 1 if q else 3),
        "first": lambda: first_frame(a.data, 1 if q else 3),
        "frame": lambda: frames(3 if q else 5),
        "follow": lambda: following(8.0 if q else 30.0),
        "ranks": lambda: ten_thousand(a.data, 100 if q else 2000, 8.0 if q else 30.0),
        "runs": lambda: runs_list(a.data, 100 if q else 1000, 2000, 1 if q else 3),
        "writer": lambda: writer(500 if q else 2000, 5 if q else 11, 5000 if q else 20000),
        "memory": lambda: memory(a.data, (1000,) if q else (5000, 20000), 600 if q else 3600),
        "hang": lambda: first_look(1 if q else 3),
    }
    chosen = a.only.split(",") if a.only else list(parts)
    t0 = time.time()
    rows: list[Row] = []
    for name in chosen:
        t = time.time()
        got = parts[name]()
        rows += got
        print(f"[{name}: {time.time() - t:.0f} s]", file=sys.stderr, flush=True)
        for r in got:
            print("  " + " | ".join(r.cells()), file=sys.stderr, flush=True)
    cpu = platform.processor() or platform.machine()
    print(f"{time.strftime('%Y-%m-%d')}; {os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, "
          f"{'--quick' if q else 'full sizes'}, {time.time() - t0:.0f} s")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
