"""Per-step overhead of MstopCallback against MindSpore's LossMonitor, and MetricsWriter.log() cost.

Run: python benchmarks/bench_writer.py [--steps N] [--repeats R]

One tiny graph-mode model, one process, the configurations of each repeat in a
rotating order, R repeats; each wall figure is the median over repeats of the
mean step time over N steps (after a warm-up run that compiles the graph).
LossMonitor prints to /dev/null. Prints µs per step for: none, LossMonitor(1),
MstopCallback, the ratio (Mstop - none) / (LossMonitor - none) (the median of
each repeat's ratio: step times on a shared machine drift by more than the
overheads measured), and the hooks' own time of both callbacks measured inside
the same runs. Then ``MetricsWriter.log()`` alone beside a bare formatted
``write()`` + ``flush()`` of the same line (the floor), and the NPU sampling's
CPU cost per sample beside one bare ``npu-smi info`` (``--devices-only``).
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
from typing import Any


def _timed(cb: Any, acc: list[float]) -> Any:
    """``cb`` with its step hooks timed (perf_counter around each call, summed into ``acc[0]``): the
    callback's own time inside the training process, free of the step-to-step noise of wall figures."""
    for name in ("on_train_step_begin", "on_train_step_end"):
        hook = getattr(cb, name)

        def timed(run_context: Any, hook: Any = hook) -> None:
            t0 = time.perf_counter()
            hook(run_context)
            acc[0] += time.perf_counter() - t0
        setattr(cb, name, timed)
    return cb


def bench_callbacks(steps: int, repeats: int) -> dict[str, float]:
    """Per-step figures in microseconds (medians over ``repeats``): wall time with no callback, with
    ``LossMonitor(1)``, with ``MstopCallback``, with a profiler window never reached; the hooks' own time
    of the two callbacks (``*_hooks``); and ``ratio``, the median over repeats of each repeat's
    (Mstop - none) / (LossMonitor - none). The configurations of a repeat run in a rotating order, so
    that no configuration always follows the same one."""
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
    names = ["none", "LossMonitor", "MstopCallback", "profile_steps"]
    out: dict[str, list[float]] = {k: [] for k in names + ["LossMonitor_hooks", "MstopCallback_hooks", "ratio"]}
    with tempfile.TemporaryDirectory() as tmp, open(os.devnull, "w") as null:
        for r in range(repeats):
            got: dict[str, float] = {}
            for name in names[r % 4:] + names[:r % 4]:
                acc = [0.0]
                if name == "none":
                    got[name] = run([])
                elif name == "LossMonitor":
                    with contextlib.redirect_stdout(null):
                        got[name] = run([_timed(LossMonitor(1), acc)])
                    got["LossMonitor_hooks"] = acc[0] / steps * 1e6
                else:
                    # profile_steps: a window configured but never reached, what profiling costs when off
                    cb = MstopCallback(os.path.join(tmp, f"{name}{r}"),
                                       **({"profile_steps": (10**9, 10**9 + 10)} if name == "profile_steps" else {}))
                    got[name] = run([_timed(cb, acc) if name == "MstopCallback" else cb])
                    cb.close()
                    if name == "MstopCallback":
                        got["MstopCallback_hooks"] = acc[0] / steps * 1e6
            for k, v in got.items():
                out[k].append(v)
            lm = got["LossMonitor"] - got["none"]
            out["ratio"].append((got["MstopCallback"] - got["none"]) / lm if lm > 0 else float("nan"))
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


def _cpu() -> float:
    """CPU seconds of this process and of its ended children (npu-smi's runs)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def bench_devices(samples: int, repeats: int) -> dict[str, float]:
    """The device sampling's cost (mstop_writer.devices): CPU seconds of one sample of an 8-NPU host (the
    process's own and npu-smi's), against the floor of running ``npu-smi info`` once and reading its output.
    npu-smi is the stand-in of the tests (tests/helpers/npu_smi.py: a shell script printing a published 910B3
    table): the real tool's own time, unknown here (no Ascend device), comes on top of both. The share of a
    core is the per-sample cost over the default interval (10 s)."""
    import subprocess
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from mstop_writer.devices import DeviceSampler
    from mstop_writer.schema import DEVICE_INTERVAL
    from tests.helpers.npu_smi import StandIn

    res: dict[str, list[float]] = {"sample": [], "floor": []}
    with tempfile.TemporaryDirectory() as tmp:
        npu = StandIn(Path(tmp) / "bin")
        exe = str(npu.folder / "npu-smi")
        for r in range(repeats):
            s = DeviceSampler(os.path.join(tmp, f"run{r}"), DEVICE_INTERVAL, warn=lambda m, k: None,
                              event=lambda *a, **k: None, command=exe)
            os.makedirs(os.path.join(tmp, f"run{r}"), exist_ok=True)
            c0 = _cpu()
            for _ in range(samples):
                s.sample_once()
            res["sample"].append((_cpu() - c0) / samples)
            s.stop()
            c0 = _cpu()
            for _ in range(samples):
                subprocess.run([exe, "info"], capture_output=True, check=True)
            res["floor"].append((_cpu() - c0) / samples)
    out = {k: statistics.median(v) for k, v in res.items()}
    out["core_share"] = out["sample"] / DEVICE_INTERVAL
    return out


def _proc_cpu_rss(pid: int) -> tuple[float, float]:
    """(CPU seconds, RSS bytes) of a process, from /proc: the CPU time from ``schedstat`` (nanoseconds on a
    CPU, where ``stat``'s clock ticks of 10 ms cannot tell 0.01 % from 0 in a minute)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    with open(f"/proc/{pid}/schedstat") as f:
        ns = int(f.read().split()[0])
    return ns / 1e9, int(fields[21]) * os.sysconf("SC_PAGE_SIZE")


def bench_witness(seconds: float, repeats: int) -> dict[str, float]:
    """The exit witness's cost (mstop_writer.witness), watching a rank (a sleeping Python process standing for
    it) with its stacks file: its RSS and its share of a core over ``seconds``, beside the floor of any
    Python program run the same way (``python -I -S`` sleeping 1 s at a time: the same wake-ups, no work).
    And the job's side: StackDumps.step_end per step beside one bare ``pwrite`` of its header."""
    import subprocess
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "writer"))
    from mstop_writer import stacks, witness

    res: dict[str, list[float]] = {"rss": [], "cpu": [], "floor_rss": [], "floor_cpu": [], "step_end": [],
                                   "pwrite": []}
    floor_code = "import time\nwhile True: time.sleep(1.0)"
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(repeats):
            rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
            events, st = os.path.join(tmp, f"e{r}.jsonl"), os.path.join(tmp, f"s{r}.txt")
            open(events, "w").close()
            open(st, "w").close()
            ticks = witness.own_start_ticks(rank.pid)
            w = subprocess.Popen([sys.executable, "-I", "-S", witness.__file__, str(rank.pid), str(ticks), events, st,
                                  "0", "5.0", "0"])
            floor = subprocess.Popen([sys.executable, "-I", "-S", "-c", floor_code])
            time.sleep(1.0)  # started
            (c0, _), (f0, _) = _proc_cpu_rss(w.pid), _proc_cpu_rss(floor.pid)
            time.sleep(seconds)
            (c1, rss), (f1, frss) = _proc_cpu_rss(w.pid), _proc_cpu_rss(floor.pid)
            res["cpu"].append((c1 - c0) / seconds)
            res["rss"].append(rss)
            res["floor_cpu"].append((f1 - f0) / seconds)
            res["floor_rss"].append(frss)
            for p in (rank, floor):
                p.kill()
                p.wait()
            w.wait(5)
            sd = stacks.StackDumps(os.path.join(tmp, f"own{r}.txt"), 60.0, lambda m, k: None)
            n = 20000
            t0 = time.perf_counter()
            for i in range(n):
                sd.step_end(i, 0.1)
            res["step_end"].append((time.perf_counter() - t0) / n)
            sd.pause()
            line = b"#" * 127 + b"\n"
            t0 = time.perf_counter()
            for _ in range(n):
                os.pwrite(sd.fd, line, 0)
            res["pwrite"].append((time.perf_counter() - t0) / n)
    return {k: statistics.median(v) for k, v in res.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000, help="steps per training run (default: 2000)")
    ap.add_argument("--repeats", type=int, default=7, help="interleaved repeats (default: 7)")
    ap.add_argument("--rows", type=int, default=20000, help="rows for the log() figure (default: 20000)")
    ap.add_argument("--samples", type=int, default=50, help="device samples per repeat (default: 50)")
    ap.add_argument("--devices-only", action="store_true", help="only the device sampling's cost")
    ap.add_argument("--witness-only", action="store_true", help="only the exit witness's cost")
    ap.add_argument("--witness-seconds", type=float, default=20.0, help="seconds the witness is watched (20)")
    a = ap.parse_args()
    wt = bench_witness(a.witness_seconds, a.repeats)
    print(f"exit witness: RSS {wt['rss'] / 2**20:.1f} MB (a bare python -I -S: {wt['floor_rss'] / 2**20:.1f} MB), "
          f"CPU {100 * wt['cpu']:.3f} % of a core (the bare program waking as often: {100 * wt['floor_cpu']:.3f} %)"
          "   target <= 15 MB, <= 0.1 %")
    print(f"stacks in the job: StackDumps.step_end {wt['step_end'] * 1e6:.2f} us a step (one bare pwrite of its "
          f"header: {wt['pwrite'] * 1e6:.2f} us)")
    if a.witness_only:
        return 0
    dv = bench_devices(a.samples, a.repeats)
    print(f"device sampling (8 NPUs, stand-in npu-smi): {dv['sample'] * 1e3:.1f} ms CPU a sample (npu-smi info "
          f"+ one -t usages + parsing + the write); one bare npu-smi info: {dv['floor'] * 1e3:.1f} ms "
          f"(x{dv['sample'] / dv['floor']:.1f}); at the default 10 s: {100 * dv['core_share']:.2f} % of a core"
          "   target <= 1 %")
    if a.devices_only:
        return 0
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
    print(f"  ratio (Mstop - none) / (LossMonitor - none), median of the repeats' ratios = {cbs['ratio']:.2f}"
          "   target <= 0.5")
    lmh, msh = cbs["LossMonitor_hooks"], cbs["MstopCallback_hooks"]
    print(f"  the hooks' own time per step: LossMonitor(1) {lmh:.1f} us, MstopCallback {msh:.1f} us "
          f"(ratio {msh / lmh:.2f})")
    lg = bench_log(a.rows, a.repeats)
    print(f"MetricsWriter.log(): {lg['log']:.1f} us/row; bare formatted write()+flush(): {lg['floor']:.1f} us/row "
          f"(x{lg['log'] / lg['floor']:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
