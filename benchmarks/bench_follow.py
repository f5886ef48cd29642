"""The engine following a live run: CPU use and latency from a row's write to the store.

    python benchmarks/bench_follow.py [--seconds 60]

A writer process appends rows (``time`` = the moment of writing) to N rank
files at a fixed rate; this process follows them with ``LocalSource`` and
recomputes the summary figures once a second, as the screen would. Reported
per configuration: the engine's CPU use (user + system time of this process
over the run, as % of one core; the writer is another process) and the
latency from a row's write to its arrival in the store (median and 95th
percentile, over the rows of 16 ranks: recording every row's latency would
itself cost more than the engine). Configurations: 64 ranks x 10 rows/s and 1,024 ranks x 1 row/s,
with native file events (inotify) and with polling every second.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import sys
import tempfile
import threading
import time

import numpy as np

from mstop.commands.summary import summarize
from mstop.engine.figures import Options
from mstop.engine.store import Store
from mstop.sources.local import LocalSource
from mstop_writer import COLUMNS


def writer(run_dir: str, ranks: int, rate: float, seconds: float, ready: mp.Event) -> None:
    fds = []
    for r in range(ranks):
        fd = os.open(os.path.join(run_dir, f"rank{r}.csv"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(fd, (",".join(COLUMNS) + "\n").encode())
        fds.append(fd)
    ready.wait()
    step, t0 = 0, time.time()
    while time.time() - t0 < seconds:
        step += 1
        due = t0 + step / rate
        for r, fd in enumerate(fds):  # spread the ranks' writes over the interval, as real ranks are
            now = time.time()
            os.write(fd, f"{now!r},{step},1,{2.0 / step!r},0.0003,,{1 / rate!r},0.001,,4096,8,,,1,1,2,,,s\n"
                     .encode())
            pause = due - (len(fds) - r - 1) / (len(fds) * rate) - time.time()
            if pause > 0:
                time.sleep(pause)
    for fd in fds:
        os.close(fd)


def start_writer(run_dir: str, ranks: int, rate: float, seconds: float) -> tuple[mp.Process, mp.Event]:
    """A writer process with its files created, waiting for the returned event to start writing."""
    ready = mp.Event()
    w = mp.Process(target=writer, args=(run_dir, ranks, rate, seconds, ready))
    w.start()
    while len(os.listdir(run_dir)) < ranks:
        time.sleep(0.01)
    return w, ready


def run(ranks: int, rate: float, seconds: float, poll: float | None) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        w, ready = start_writer(tmp, ranks, rate, seconds)
        store = Store()
        seen: dict[int, int] = {}
        latencies: list[np.ndarray] = []
        lock = threading.Lock()

        sampled = list(range(min(ranks, 16)))  # latency of 16 ranks: the bookkeeping must not be the cost

        def on_update() -> None:
            now = time.time()
            with store.lock, lock:
                for r in sampled:
                    d = store.ranks.get(r)
                    if d is None:
                        continue
                    n = d.rows
                    k = seen.get(r, 0)
                    if n > k:
                        latencies.append(now - d.col("time")[k:n])
                        seen[r] = n

        src = LocalSource(tmp, store, poll=poll, on_update=on_update)
        src.follow()
        time.sleep(0.5)
        ru0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
        ready.set()
        refreshes = 0
        while w.is_alive():
            summarize(store, tmp, Options())
            refreshes += 1
            time.sleep(1.0)
        w.join()
        time.sleep(max(1.5, (poll or 0) + 0.5))
        ru1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
        src.stop()
        cpu = (ru1.ru_utime - ru0.ru_utime + ru1.ru_stime - ru0.ru_stime) / (t1 - t0)
        lat = np.concatenate(latencies) if latencies else np.array([np.nan])
        return {"cpu": 100 * cpu, "p50": float(np.median(lat)) * 1e3, "p95": float(np.percentile(lat, 95)) * 1e3,
                "rows": store.rows, "refreshes": refreshes, "mode": src.state.mode}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="writing time per configuration (default: 60)")
    a = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}; {a.seconds:.0f} s per configuration")
    for ranks, rate in ((64, 10.0), (1024, 1.0)):
        for poll in (None, 1.0):
            res = run(ranks, rate, a.seconds, poll)
            target_cpu = 5 if ranks == 64 else 10
            target_lat = 200 + (poll or 0) * 1000
            print(f"  {ranks:5d} ranks x {rate:4.0f} rows/s, {res['mode']:7s}: CPU {res['cpu']:5.1f} % of a core "
                  f"(target < {target_cpu} %), latency p50 {res['p50']:6.1f} ms p95 {res['p95']:6.1f} ms "
                  f"(target < {target_lat:.0f} ms), {res['rows']:,} rows, {res['refreshes']} refreshes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
