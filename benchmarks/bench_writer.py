"""Per-step overhead of MstopCallback against MindSpore's LossMonitor, and MetricsWriter.log() cost.

Run: python benchmarks/bench_writer.py [--steps N] [--repeats R]

One tiny graph-mode model, one process, the three configurations interleaved
R times; each figure is the median over repeats of the mean step time over N
steps (after a warm-up run that compiles the graph). LossMonitor prints to
/dev/null. Prints µs per step for: none, LossMonitor(1), MstopCallback, and the
ratio (Mstop - none) / (LossMonitor - none). Then ``MetricsWriter.log()`` alone
beside a bare formatted ``write()`` + ``flush()`` of the same line (the floor).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import tempfile
import time


def bench_callbacks(steps: int, repeats: int) -> dict[str, float]:
    import mindspore as ms
    import numpy as np
    from mindspore import dataset as ds
    from mindspore import nn
    from mindspore.train import LossMonitor, Model

    from mstop_writer import MstopCallback

    ms.set_context(mode=ms.GRAPH_MODE)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((steps, 16)).astype(np.float32)
    y = rng.standard_normal((steps, 1)).astype(np.float32)
    net = nn.Dense(16, 1)
    model = Model(net, nn.MSELoss(), nn.SGD(net.trainable_params(), 0.01))

    def run(callbacks: list) -> float:
        data = ds.NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(1)
        t0 = time.perf_counter()
        model.train(1, data, callbacks=callbacks, dataset_sink_mode=False)
        return (time.perf_counter() - t0) / steps * 1e6

    run([])  # compile
    out: dict[str, list[float]] = {"none": [], "LossMonitor": [], "MstopCallback": [], "profile_steps": []}
    with tempfile.TemporaryDirectory() as tmp, open(os.devnull, "w") as null:
        for r in range(repeats):
            out["none"].append(run([]))
            with contextlib.redirect_stdout(null):
                out["LossMonitor"].append(run([LossMonitor(1)]))
            cb = MstopCallback(os.path.join(tmp, f"r{r}"))
            out["MstopCallback"].append(run([cb]))
            cb.close()
            # a profiler window configured but never reached: what profiling costs when it is off
            cb = MstopCallback(os.path.join(tmp, f"p{r}"), profile_steps=(10**9, 10**9 + 10))
            out["profile_steps"].append(run([cb]))
            cb.close()
    return {k: statistics.median(v) for k, v in out.items()}


def bench_log(rows: int, repeats: int) -> dict[str, float]:
    from mstop_writer import MetricsWriter

    res: dict[str, list[float]] = {"log": [], "floor": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(repeats):
            w = MetricsWriter(os.path.join(tmp, f"w{r}"), tokens_per_step=4096, peak_flops=1e12,
                              flops_per_token=6e6)
            t0 = time.perf_counter()
            for i in range(rows):
                w.log(i, epoch=1, loss=2.5 + i * 1e-6, lr=1e-4, step_time=0.5, data_wait=0.01)
            res["log"].append((time.perf_counter() - t0) / rows * 1e6)
            w.close()
            with open(os.path.join(tmp, f"floor{r}.csv"), "w") as f:
                t0 = time.perf_counter()
                for i in range(rows):
                    f.write(f"{time.time()!r},{i},1,{2.5 + i * 1e-6!r},0.0001,,0.5,0.01,,4096,,8192.0,"
                            f"0.049,1,1,1,,,abcdef012345\n")
                    f.flush()
                res["floor"].append((time.perf_counter() - t0) / rows * 1e6)
    return {k: statistics.median(v) for k, v in res.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000, help="steps per training run (default: 2000)")
    ap.add_argument("--repeats", type=int, default=7, help="interleaved repeats (default: 7)")
    ap.add_argument("--rows", type=int, default=20000, help="rows for the log() figure (default: 20000)")
    a = ap.parse_args()
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        cbs = bench_callbacks(a.steps, a.repeats)
    none, lm, mst = cbs["none"], cbs["LossMonitor"], cbs["MstopCallback"]
    print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}")
    print(f"per-step time, median of {a.repeats} runs x {a.steps} steps (graph mode, CPU):")
    print(f"  no callback        {none:8.1f} us/step")
    print(f"  LossMonitor(1)     {lm:8.1f} us/step   (+{lm - none:.1f})")
    print(f"  MstopCallback      {mst:8.1f} us/step   (+{mst - none:.1f})")
    prof = cbs["profile_steps"]
    print(f"  ... profile_steps outside the window {prof:8.1f} us/step   (+{prof - none:.1f}; "
          f"{prof - mst:+.1f} against MstopCallback)")
    ratio = (mst - none) / (lm - none) if lm > none else float("nan")
    print(f"  ratio (Mstop - none) / (LossMonitor - none) = {ratio:.2f}   target <= 1.0, Mstop overhead < 30 us")
    lg = bench_log(a.rows, a.repeats)
    print(f"MetricsWriter.log(): {lg['log']:.1f} us/row; bare formatted write()+flush(): {lg['floor']:.1f} us/row "
          f"(x{lg['log'] / lg['floor']:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
