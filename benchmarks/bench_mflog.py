"""Reading a MindFormers info.log cold, beside pandas reading the same values from a CSV (issue 15).

    python benchmarks/bench_mflog.py [LINES]      # default 1,000,000 lines (about 270 MB), 3 repeats

Then the same for MindSpore's own LossMonitor lines in an msrun worker log (issue 28: ``epoch: 1 step: 10,
loss is 2.302585``, one a step, TimeMonitor's ``epoch time: ..., per step time: ...`` closing each epoch of
1,000 steps), beside pandas reading epoch, step and loss from a CSV.

The log is made of MFLossMonitor's two lines per step (the step line and its progress line, as in the kit's
captured info.log: half the lines are step lines); the CSV holds those steps' values, one row per step:
the timestamp as text, epoch, step, steps per epoch, loss, mean loss, per_step_time, lr, overflow as
``False``, loss scale, global norm, TFLOP/s, samples/s/p. The reference is ``pandas.read_csv`` on it
(timestamps parsed); mstop's figure is ``read_once`` on the log's ``output/`` (files read, lines parsed,
rows in the store). Also printed: the floor of any line-by-line reading in Python here, a loop that
only splits the lines and matches each step line with one compiled regular expression, keeping nothing.
"""

from __future__ import annotations

import os
import random
import re
import statistics
import sys
import tempfile
import time


def make(folder: str, lines: int) -> tuple[str, str]:
    n = lines // 2
    rnd = random.Random(0)
    log_dir = os.path.join(folder, "output", "log", "rank_0")
    os.makedirs(log_dir)
    csv_path = os.path.join(folder, "ref.csv")
    with open(os.path.join(log_dir, "info.log"), "w") as f, open(csv_path, "w") as g:
        g.write("time,epoch,step,steps,loss,mean,per_step_time,lr,overflow,loss_scale,global_norm,tflops,sps\n")
        for i in range(1, n + 1):
            ms = 1000 + i * 9
            s, m = divmod(ms, 1000)
            h, s2 = divmod(s, 3600)
            mi, se = divmod(s2, 60)
            day = 1 + h // 24
            ts = f"2026-12-{day:02d} {h % 24:02d}:{mi:02d}:{se:02d}"
            loss = 5.5 - i * 1e-6 + rnd.random() * 0.01
            lr = 1e-3 * (1 - i / n) + 1e-6
            gn = 1.0 + rnd.random()
            f.write(f"[INFO] {ts},{m:03d} [mindformers/core/callback/callback.py:747] print_output_info: "
                    f"{{ Epoch:[  1/  1], step:[{i:5d}/{n:5d}], loss:[{loss:5.6f}/{loss:5.6f}], per_step_time: 9ms, "
                    f"lr: {lr:.8g}, overflow cond: False, loss_scale: 1.0, global_norm: [{gn:.8g}], "
                    "train_throughput_per_npu: 0.008T\n")
            bar = int(50 * i / n) * "█"
            f.write(f"[INFO] {ts},{m:03d} [mindformers/core/callback/callback.py:764] print_output_info:   "
                    f"{100 * i / n:4.1f}% |{bar:<50}| 405.99206 samples/s/p  0:00:00 }}\n")
            g.write(f"{ts}.{m:03d},1,{i},{n},{loss:.6f},{loss:.6f},9,{lr:.8g},False,1.0,{gn:.8g},0.008,405.99206\n")
    return os.path.join(folder, "output"), csv_path


def make_plain(folder: str, lines: int) -> tuple[str, str]:
    """msrun's worker_0.log of a LossMonitor + TimeMonitor job, and the CSV of its values."""
    rnd = random.Random(0)
    logs = os.path.join(folder, "msrun_log")
    os.makedirs(logs)
    csv_path = os.path.join(folder, "plain.csv")
    per_epoch = 1000
    with open(os.path.join(logs, "worker_0.log"), "w") as f, open(csv_path, "w") as g:
        g.write("epoch,step,loss\n")
        for i in range(1, lines + 1):
            epoch = 1 + (i - 1) // per_epoch
            loss = 2.3 - i * 1e-6 + rnd.random() * 0.01
            f.write(f"epoch: {epoch} step: {i}, loss is {loss!r}\n")
            g.write(f"{epoch},{i},{loss!r}\n")
            if i % per_epoch == 0:
                f.write(f"epoch time: {per_epoch * 24.5:.3f} ms, per step time: 24.500 ms\n")
    return logs, csv_path


def plain(lines: int) -> None:
    import pandas as pd

    from mstop.sources import read_once

    with tempfile.TemporaryDirectory() as tmp:
        logs, csv_path = make_plain(tmp, lines)
        ref, ours = [], []
        for _ in range(3):
            t = time.perf_counter()
            df = pd.read_csv(csv_path)
            ref.append(time.perf_counter() - t)
            t = time.perf_counter()
            store = read_once(logs)
            ours.append(time.perf_counter() - t)
        assert store.ranks[0].rows == len(df) == lines
        r, o = statistics.median(ref), statistics.median(ours)
        print(f"worker_0.log (LossMonitor): {lines:,} step lines, "
              f"{os.path.getsize(os.path.join(logs, 'worker_0.log')) / 1e6:.0f} MB")
        print(f"pandas.read_csv of the same values:                   {r:6.2f} s")
        print(f"mstop reading the worker log cold (read_once):        {o:6.2f} s  = {o / r:.1f} x pandas "
              "(target <= 2)")


def floor(path: str) -> None:
    pattern = re.compile(rb"\[INFO\] (\S+ \S+) \[[^\]]*\] print_output_info: \{ Epoch:\[ *(\d+)/ *(\d+)\], "
                         rb"step:\[ *(\d+)/ *(\d+)\], loss:\[([^/]+)/[^\]]*\], per_step_time: (\d+)ms, lr: ([^,]+), "
                         rb"overflow cond: (\w+), loss_scale: ([^,]+), global_norm: \[([^\]]+)\]")
    with open(path, "rb") as f:
        for raw in f.read().splitlines():
            if b"{ Epoch:[" in raw:
                pattern.match(raw)


def main() -> int:
    import pandas as pd

    from mstop.sources import read_once

    lines = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    with tempfile.TemporaryDirectory() as tmp:
        out, csv_path = make(tmp, lines)
        size = os.path.getsize(os.path.join(out, "log", "rank_0", "info.log"))
        ref, ours, base = [], [], []
        for _ in range(3):  # interleaved: the machine's noise hits all three alike
            t = time.perf_counter()
            df = pd.read_csv(csv_path, parse_dates=["time"], date_format="%Y-%m-%d %H:%M:%S.%f")
            ref.append(time.perf_counter() - t)
            t = time.perf_counter()
            store = read_once(out)
            ours.append(time.perf_counter() - t)
            t = time.perf_counter()
            floor(os.path.join(out, "log", "rank_0", "info.log"))
            base.append(time.perf_counter() - t)
        assert store.ranks[0].rows == len(df) == lines // 2
        r, o, b = (statistics.median(x) for x in (ref, ours, base))
        print(f"info.log: {lines:,} lines, {size / 1e6:.0f} MB; {len(df):,} steps")
        print(f"pandas.read_csv of the same values (CSV, {os.path.getsize(csv_path) / 1e6:.0f} MB): {r:6.2f} s")
        print(f"mstop reading the log cold (read_once):               {o:6.2f} s  = {o / r:.1f} x pandas "
              "(target <= 2)")
        print(f"floor: split + one regex match per step line, no rows:  {b:6.2f} s  = {b / r:.1f} x pandas")
    plain(lines // 2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
