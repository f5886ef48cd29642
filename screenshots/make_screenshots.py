"""Save the README's screenshots (Textual SVG) from real runs.

    python screenshots/make_screenshots.py            # needs mindspore for the demo run

- demo-120x40.svg, demo-80x24.svg: the demo's real MindSpore job (examples/train_tiny_lm.py, 2 ranks, CPU).
- ranks.svg, help.svg: the same run, ranks view and help screen.
- pressure-120x40.svg: a run generated with MetricsWriter (close to OOM, input pipeline starving, device
  queue empty): conditions a CPU cannot produce, and the caption says so.
- health-120x40.svg, alerts.svg: a generated run with a resume from an earlier checkpoint and a NaN loss:
  the alerts panel, the restart boundary and checkpoint marks on the loss chart, the alerts list.
- dead-120x40.svg, incidents.svg: a generated run killed 5 minutes ago (status DEAD) with a loss spike and a
  slow input pipeline in its history: the incident marks on the loss chart and the list of past incidents.
- cluster-1024.svg: the ranks view of 1,024 generated ranks with one straggler and one dead rank,
  the straggler's cell clicked.
- cluster-hosts.svg: the same ranks grouped by host (h): the 126 quiet hosts folded into one line, the two
  with an alert one line each.
- compare.svg (each run profiled at steps 200-210): ``mstop compare`` of real runs (a baseline of 2 repeats
  with a slow input pipeline against a
  run without the delay), as the terminal shows it (rich's own SVG export of the same table).
- baseline-120x40.svg: the monitor on the faster run with the baseline overlaid by step.
- mindformers-log.svg: a real MindFormers Trainer job watched from its own info.log (the kit's capture).
- msrun-workers.svg, msrun-ranks.svg: a real 4-worker msrun job with MindSpore's LossMonitor and TimeMonitor
  and no mstop code (tests/helpers/msrun_plain_job.py), watched from msrun's worker logs alone.
- profile-120x40.svg: a baseline run above, profiled at steps 200-210 on CPU: the throughput panel's breakdown.
- report-loss.png, report-tokens_per_s.png: two of ``mstop report``'s plots of the same runs.
- runs-120x40.svg, runs-compare.svg, runs-overlay.svg: ``mstop runs/`` on the folder of those three real runs
  and a generated running one: the list (base-1 opened once, so its goodput is known; two runs marked), the
  compare screen of the marked runs, and the three real runs overlaid by step.

- logpane-failed.svg: a real MindSpore job that failed (tests/helpers/failing_job.py, its output in train.log): the
  header naming its error, and the log pane (L) opened at its traceback.
- devices.svg: the ranks view of a generated 2-rank run whose writers sampled a stand-in npu-smi printing a
  published 910B3 table (tests/helpers/npu_smi.py), one NPU edited to Alarm at 97 °C: the device strip and columns.
  No Ascend device is here: the caption says so.

- ranks-processes.svg: the ranks view of a real 4-worker msrun job (tests/helpers/msrun_job.py) whose rank 3 was
  just stopped with SIGSTOP: each rank's process (pid, state, CPU, RSS) from its exit witness, rank 3 stopped.
- stacks.svg: the stacks view (t) of a real 4-worker msrun job whose rank 2 blocks before step 40 while the others
  wait in their AllReduce (--stall=2:40 --stack-after=4): the ranks grouped by where their main thread is.

    python screenshots/make_screenshots.py --runs-only   # the three real runs and the runs screens only
    python screenshots/make_screenshots.py --issue38-only   # ranks-processes.svg and stacks.svg only
    python screenshots/make_screenshots.py --issue31-only   # logpane-failed.svg and devices.svg only
    python screenshots/make_screenshots.py --hosts-only   # cluster-1024.svg and cluster-hosts.svg only

Convert to PNG to look at them: rsvg-convert screenshots/demo-120x40.svg -o /tmp/demo.png
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mstop.app import MonitorApp  # noqa: E402
from mstop.sources import read_once  # noqa: E402
from mstop_writer import MetricsWriter  # noqa: E402
from tests.helpers.app_common import settle  # noqa: E402
from tests.helpers.common import HELPERS  # noqa: E402
from tests.helpers.runs import cluster_1024  # noqa: E402


async def shoot(run: str, out: Path, size: tuple[int, int], keys: tuple[str, ...] = (), now: float | None = None,
                click_cell: int | None = None, baseline: str | None = None, peak_tflops: float | None = None):
    """Save the app's screen after pressing ``keys`` (and clicking heat strip cell ``click_cell``)."""
    app = MonitorApp(run, follow=False, baseline=baseline, peak_tflops=peak_tflops,
                     **({"clock": lambda: now} if now else {}))
    async with app.run_test(size=size) as pilot:
        await settle(pilot)  # the first read is done on a thread
        await pilot.pause(0.5)  # the history's incidents are scanned on a worker, then the chart is redrawn
        for k in keys:
            await pilot.press(k)
        await pilot.pause()
        if click_cell is not None:
            from mstop.app.widgets import HeatStrip

            width = app.query_one(HeatStrip).content_size.width
            await pilot.click(HeatStrip, offset=(1 + click_cell % width, click_cell // width))
            await pilot.pause()
        app.save_screenshot(str(out))
    print("wrote", out.relative_to(ROOT))


def last_time(run: Path) -> float:
    rows = (run / "rank0.csv").read_text().splitlines()
    return float(rows[-1].split(",")[0]) + 2.0


def pressure_run(run: Path) -> list[MetricsWriter]:
    """A 4-rank run near OOM on rank 2, its input pipeline starving on rank 3 (written with MetricsWriter).
    Still running: the writers are returned open (a closed run is finished, and no longer starving)."""
    t = [1_800_000_000.0]
    writers = []
    for r in range(4):
        t[0] = 1_800_000_000.0
        w = MetricsWriter(run, rank=r, world_size=4, run_name="moe-1b (generated: OOM pressure, slow input)",
                          device="Ascend910B3", n_params=1_000_000_000, n_layers=24, n_heads=16, head_dim=128,
                          seq_len=4096, tokens_per_step=4 * 4 * 4096, total_steps=5000,
                          clock=lambda: t[0], heartbeat_interval=3600)
        for s in range(1, 1201):
            t[0] += 2.0
            starving = r == 3 and s > 700
            w.log(s, epoch=1, loss=7.0 * s ** -0.12, lr=2e-4, grad_norm=0.8 + 0.1 * (s % 17) / 17,
                  step_time=2.0, data_wait=0.55 if starving else 0.03, queue_depth=0 if starving else 4)
        writers.append(w)
    # device memory figures (a CPU has none): rewrite the memory cells as an Ascend job would report them
    for r in range(4):
        path = run / f"rank{r}.csv"
        lines = path.read_text().splitlines()
        head = lines[0].split(",")
        iu, ip, it = head.index("mem_used"), head.index("mem_peak"), head.index("mem_total")
        out = [lines[0]]
        for i, line in enumerate(lines[1:]):
            cells = line.split(",")
            peak = 61.2e9 + 0.002e9 * i if r == 2 else 48e9
            cells[iu], cells[ip], cells[it] = repr(peak - 3e9), repr(peak), repr(64e9)
            out.append(",".join(cells))
        path.write_text("\n".join(out) + "\n")
        ev = run / f"rank{r}.events.jsonl"
        events = [json.loads(x) for x in ev.read_text().splitlines()]
        events[0]["memory_source"] = "device"
        events[0]["host"] = f"node{r // 2}"
        ev.write_text("".join(json.dumps(e) + "\n" for e in events))
    return writers


def health_run(run: Path) -> None:
    """Two ranks; checkpoints every 100 steps; a crash after step 300 and a resume from step 200; a NaN loss
    at step 420 on rank 1 (written with MetricsWriter: a CPU demo cannot be made to do this on cue)."""
    t = [1_800_000_000.0]
    for session, (first, last) in enumerate(((1, 300), (201, 450))):
        for r in range(2):
            t[0] = 1_800_000_000.0 + (0 if session == 0 else 320 * 3.0)
            w = MetricsWriter(run, rank=r, world_size=2, run_name="gpt-350m (generated: resume, NaN)",
                              device="Ascend910B3", flops_per_token=2.1e9, tokens_per_step=8 * 2048, total_steps=1000,
                              clock=lambda: t[0], heartbeat_interval=3600)
            for s in range(first, last + 1):
                t[0] += 3.0
                loss = float("nan") if (s == 420 and r == 1) else 5.5 * s ** -0.18
                w.log(s, epoch=1, loss=loss, lr=3e-4, grad_norm=1.0, step_time=3.0, data_wait=0.05)
                if s % 100 == 0 and r == 0:
                    w.checkpoint(s, f"/ckpt/step{s}.ckpt")
            if session == 0:
                w._hb_stop.set()  # a crash: no end event
                w._hb.join()
            else:
                w.close()


def dead_run(run: Path) -> float:
    """Two ranks killed with kill -9 at step 640 (heartbeats stop, no end event): a 30x loss spike at step 300
    and a slow input pipeline on rank 1 around step 500 in its history (written with MetricsWriter, beats at
    the writer's 30 s interval). Returns the moment to look at it: 5 minutes after the kill."""
    t = [1_800_000_000.0]
    for r in range(2):
        t[0] = 1_800_000_000.0
        w = MetricsWriter(run, rank=r, world_size=2, run_name="llama-1b (generated: killed, spike and slow input)",
                          device="Ascend910B3", flops_per_token=6e9, tokens_per_step=8 * 4096, total_steps=2000,
                          clock=lambda: t[0], heartbeat_interval=3600)
        for s in range(1, 641):
            t[0] += 1.5
            starving = r == 1 and 480 <= s <= 520
            w.log(s, epoch=1, loss=(30.0 if s == 300 else 4.0 * s ** -0.15), lr=3e-4, grad_norm=1.0,
                  step_time=1.5, data_wait=0.6 if starving else 0.02)
            if s % 20 == 0:
                w.event("heartbeat", step=s, session=w.session)
        w._hb_stop.set()  # kill -9: no end event, the heartbeats stop
        w._hb.join()
    for r in range(2):  # the start event names the heartbeat interval the beats above kept
        ev = run / f"rank{r}.events.jsonl"
        events = [json.loads(x) for x in ev.read_text().splitlines()]
        events[0]["heartbeat_interval"] = 30.0
        ev.write_text("".join(json.dumps(e) + "\n" for e in events))
    return t[0] + 300.0


def main() -> int:
    out = ROOT / "screenshots"
    if "--hosts-only" in sys.argv:
        with tempfile.TemporaryDirectory() as tmp:
            cluster = Path(tmp) / "cluster"
            now = cluster_1024(cluster)
            asyncio.run(shoot(str(cluster), out / "cluster-1024.svg", (120, 40), ("r", "m"), now=now,
                              click_cell=517))
            asyncio.run(shoot(str(cluster), out / "cluster-hosts.svg", (120, 40), ("r", "h"), now=now))
        return 0
    if "--issue31-only" in sys.argv:
        with tempfile.TemporaryDirectory() as tmp:
            logpane_shot(Path(tmp), out)
            devices_shot(Path(tmp), out)
        return 0
    if "--issue59-only" in sys.argv:
        with tempfile.TemporaryDirectory() as tmp:
            diagnosis_shot(Path(tmp), out)
        return 0
    if "--issue38-only" in sys.argv:
        with tempfile.TemporaryDirectory() as tmp:
            process_shots(Path(tmp), out)
        return 0
    if "--runs-only" in sys.argv:
        with tempfile.TemporaryDirectory() as tmp:
            runs_shots(train_comparison_runs(Path(tmp)), out)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        demo = Path(tmp) / "demo"
        subprocess.run([sys.executable, str(ROOT / "examples" / "train_tiny_lm.py"), "--run-dir", str(demo),
                        "--ranks", "2", "--steps", "600", "--ckpt-every", "150", "--run-name", "tiny-lm demo"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        now = last_time(demo)
        asyncio.run(shoot(str(demo), out / "demo-120x40.svg", (120, 40), now=now))
        asyncio.run(shoot(str(demo), out / "demo-80x24.svg", (80, 24), now=now))
        asyncio.run(shoot(str(demo), out / "ranks.svg", (120, 40), ("r",), now=now))
        asyncio.run(shoot(str(demo), out / "help.svg", (120, 40), ("question_mark",), now=now))
        pressure = Path(tmp) / "pressure"
        writers = pressure_run(pressure)
        asyncio.run(shoot(str(pressure), out / "pressure-120x40.svg", (120, 40), now=last_time(pressure) + 1))
        for w in writers:
            w.close()
        health = Path(tmp) / "health"
        health_run(health)
        asyncio.run(shoot(str(health), out / "health-120x40.svg", (120, 40), now=last_time(health)))
        asyncio.run(shoot(str(health), out / "alerts.svg", (120, 40), ("a",), now=last_time(health)))
        dead = Path(tmp) / "dead"
        now = dead_run(dead)
        asyncio.run(shoot(str(dead), out / "dead-120x40.svg", (120, 40), now=now))
        asyncio.run(shoot(str(dead), out / "incidents.svg", (120, 40), ("a",), now=now))
        cluster = Path(tmp) / "cluster"
        now = cluster_1024(cluster)
        asyncio.run(shoot(str(cluster), out / "cluster-1024.svg", (120, 40), ("r", "m"), now=now, click_cell=517))
        asyncio.run(shoot(str(cluster), out / "cluster-hosts.svg", (120, 40), ("r", "h"), now=now))
        comparison_shots(Path(tmp), out)
        mindformers_shot(Path(tmp), out)
        msrun_shot(Path(tmp), out)
        logpane_shot(Path(tmp), out)
        devices_shot(Path(tmp), out)
        process_shots(Path(tmp), out)
        diagnosis_shot(Path(tmp), out)
    return 0


def process_shots(tmp: Path, out: Path) -> None:
    """ranks-processes.svg (rank 3 of a real msrun job stopped) and stacks.svg (rank 2 of another blocked)."""
    import os
    import signal
    import time

    from mstop.commands.summary import summarize
    from mstop.engine.figures import Options
    from tests.helpers.common import wait_for
    from tests.helpers.msrun import Msrun

    stopped = tmp / "stopped"
    stopped.mkdir()
    job = Msrun(stopped, 2000)
    try:
        job.at_step(3, 60)
        os.kill(job.pid(3), signal.SIGSTOP)
        assert wait_for(lambda: any(a["kind"] == "stopped_rank" for a in
                                    summarize(read_once(str(job.run)), str(job.run), Options())["alerts"]), 10)
        time.sleep(1.5)  # a second proc sample of every rank: their CPU rates
        asyncio.run(shoot(str(job.run), out / "ranks-processes.svg", (130, 40), ("r",), now=time.time()))
    finally:
        try:
            os.kill(job.pid(3), signal.SIGCONT)
        except OSError:
            pass
        job.stop()
    blocked = tmp / "blocked"
    blocked.mkdir()
    job = Msrun(blocked, 2000, "--stall=2:40", "--stack-after=4")
    try:
        job.at_step(0, 30)
        assert wait_for(lambda: any(a["kind"] == "stuck_rank" for a in
                                    summarize(read_once(str(job.run)), str(job.run), Options())["alerts"]), 90)
        asyncio.run(shoot(str(job.run), out / "stacks.svg", (120, 40), ("t",), now=time.time()))
    finally:
        job.stop()


def diagnosis_shot(tmp: Path, out: Path) -> None:
    """diagnosis.svg: the monitor's first line naming the compute straggler of a real msrun job (rank 2 spins
    0.15 s more each step), with its evidence."""
    import time

    from mstop.engine.diagnosis import diagnose
    from tests.helpers.common import wait_for
    from tests.helpers.msrun import Msrun

    (tmp / "straggler").mkdir()
    job = Msrun(tmp / "straggler", 2000, "--busy=2:0.15")
    try:
        assert wait_for(lambda: job.run.is_dir() and any(
            v.kind == "compute_straggler" for v in diagnose(read_once(str(job.run)).snapshot())), 240)
        asyncio.run(shoot(str(job.run), out / "diagnosis.svg", (120, 40), now=time.time()))
    finally:
        job.stop()


def logpane_shot(tmp: Path, out: Path) -> None:
    """logpane-failed.svg: a real MindSpore job failing at step 15, its output in train.log, L pressed."""
    run = tmp / "failed"
    run.mkdir()
    with open(tmp / "train.log", "wb") as log:
        subprocess.run([sys.executable, str(HELPERS / "failing_job.py"), str(run), "15"], cwd=tmp,
                       stdout=log, stderr=subprocess.STDOUT, check=False)
    asyncio.run(shoot(str(run), out / "logpane-failed.svg", (120, 40), ("L",)))


def devices_shot(tmp: Path, out: Path) -> None:
    """devices.svg: two ranks on NPUs 3 and 5 of a stand-in npu-smi (a published 910B3 table, NPU 3 edited to
    Alarm at 97 °C, NPU 5's HBM full), still running, the ranks view."""
    import os
    import time

    sys.path.insert(0, str(ROOT))
    from tests.helpers.npu_smi import StandIn

    npu = StandIn(tmp / "bin", info="info-910b3-alarm.txt")
    npu.set(health="health-alarm.txt")
    old = dict(os.environ)
    os.environ.update(npu.env(old), ASCEND_RT_VISIBLE_DEVICES="3,5")
    run = tmp / "devices"
    writers = []
    try:
        for r in range(2):
            os.environ["DEVICE_ID"] = str(r)
            writers.append(MetricsWriter(run, rank=r, world_size=2, device_interval=0.5, tokens_per_step=8192,
                                         run_name="npu stand-in (generated: no Ascend device here)",
                                         device="Ascend910B3"))
        for step in range(1, 121):
            for r, w in enumerate(writers):
                w.log(step, loss=3.0 / step ** 0.2, step_time=0.05, data_wait=0.02 * (r + 1))
            time.sleep(0.03)
        asyncio.run(shoot(str(run), out / "devices.svg", (140, 40), ("r",), now=last_time(run) + 0.2))
    finally:
        for w in writers:
            w.close()
        os.environ.clear()
        os.environ.update(old)


def msrun_shot(tmp: Path, out: Path) -> None:
    """msrun-workers.svg, msrun-ranks.svg: a real 4-worker data-parallel msrun job on CPU with LossMonitor and
    TimeMonitor only, read from its worker logs (``mstop LOG_DIR``)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    logs = tmp / "msrun-logs"
    msrun = shutil.which("msrun") or str(Path(sys.executable).parent / "msrun")
    subprocess.run([msrun, "--worker_num=4", "--local_worker_num=4", "--master_addr=127.0.0.1",
                    f"--master_port={port}", f"--log_dir={logs}", "--join=True",
                    str(HELPERS / "msrun_plain_job.py"), "60", "3"],
                   cwd=tmp, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**__import__("os").environ, "PATH": f"{Path(sys.executable).parent}:"
                                                           f"{__import__('os').environ['PATH']}"})
    store = read_once(str(logs))
    now = max(float(d.col("time")[-1]) for d in store.ranks.values()) + 5
    asyncio.run(shoot(str(logs), out / "msrun-workers.svg", (120, 40), now=now))
    asyncio.run(shoot(str(logs), out / "msrun-ranks.svg", (120, 40), ("r",), now=now))


def mindformers_shot(tmp: Path, out: Path) -> None:
    """mindformers-log.svg: a real MindFormers Trainer job (the kit's captured 60-step tiny Llama), watched
    from its own info.log with no change to the job; --peak-tflops 0.1 for a made-up CPU peak."""
    kit = ROOT.parent / "shared" / "mindformers" / "captured" / "info.log"
    if not kit.exists():
        print("skipped mindformers-log.svg:", kit, "not found")
        return
    folder = tmp / "tiny-llama" / "output" / "log" / "rank_0"
    folder.mkdir(parents=True)
    shutil.copy(kit, folder / "info.log")
    store = read_once(str(tmp / "tiny-llama" / "output"))
    asyncio.run(shoot(str(tmp / "tiny-llama" / "output"), out / "mindformers-log.svg", (120, 40),
                      now=float(store.ranks[0].col("time")[-1]) + 30, peak_tflops=0.1))


def comparison_shots(tmp: Path, out: Path) -> None:
    """Three real runs, one after the other (in parallel they would slow each other down): a baseline
    whose input pipeline sleeps 50 ms per batch, twice (seeds 1 and 2), and the same job without it."""
    import shutil

    from rich.console import Console

    from mstop.commands.compare import compare, render_table
    from mstop.commands.run import load_runs
    from mstop.sources import Connection

    runs = train_comparison_runs(tmp)
    loaded = load_runs([f"{runs / 'base-1'},{runs / 'base-2'}", str(runs / "no-delay")], Connection())
    console = Console(record=True, width=200, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(render_table(compare(loaded)))
    console.save_svg(str(out / "compare.svg"), title="mstop compare runs/base-1,runs/base-2 runs/no-delay")
    print("wrote", (out / "compare.svg").relative_to(ROOT))
    asyncio.run(shoot(str(runs / "no-delay"), out / "baseline-120x40.svg", (120, 40), now=last_time(runs / "no-delay"),
                      baseline=str(runs / "base-1")))
    asyncio.run(shoot(str(runs / "base-1"), out / "profile-120x40.svg", (120, 40), now=last_time(runs / "base-1")))
    report = tmp / "report"
    subprocess.run([sys.executable, "-m", "mstop", "report", f"{runs / 'base-1'},{runs / 'base-2'}",
                    str(runs / "no-delay"), "--out", str(report)], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    for name in ("loss", "tokens_per_s"):
        shutil.copy(report / f"{name}.png", out / f"report-{name}.png")
        print("wrote", (out / f"report-{name}.png").relative_to(ROOT))
    runs_shots(runs, out)


def train_comparison_runs(tmp: Path) -> Path:
    """runs/base-1, runs/base-2 (input pipeline sleeping 50 ms a batch, seeds 1 and 2), runs/no-delay."""
    runs = tmp / "runs"
    jobs = [("base-1", ["--data-delay", "0.05", "--seed", "1", "--run-name", "baseline"]),
            ("base-2", ["--data-delay", "0.05", "--seed", "2", "--run-name", "baseline"]),
            ("no-delay", ["--seed", "1", "--run-name", "input fixed", "--note", "no per-batch delay"])]
    for name, extra in jobs:
        subprocess.run([sys.executable, str(ROOT / "examples" / "train_tiny_lm.py"), "--run-dir", str(runs / name),
                        "--ranks", "2", "--steps", "300", "--ckpt-every", "150", "--profile-steps", "200:210",
                        *extra],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return runs


def runs_shots(runs: Path, out: Path) -> None:
    """The runs screen on the folder of real runs (plus a generated one still running, in a subfolder)."""
    from mstop.app.runs import CompareScreen, RunsApp
    from mstop.app.widgets.runs import RunsTable
    from mstop.sources.runs import RunsWatch
    from tests.helpers.runs import write_run

    now = max(last_time(runs / n) for n in ("base-1", "base-2", "no-delay")) + 20
    write_run(runs / "ablations" / "lr-x10", status="failed", note="lr x10: NaN at step 61", world=2, steps=61,
              t0=now - 900, step_time=0.5)
    write_run(runs / "ablations" / "recompute", status="running", note="recompute on", world=2, steps=400,
              t0=now - 150, step_time=0.5, clock_now=now)

    async def list_shots() -> None:
        app = RunsApp([RunsWatch(str(runs))], label="runs", clock=lambda: now, follow=False)
        async with app.run_test(size=(120, 40)) as pilot:
            table = app.runs_screen.query_one(RunsTable)
            for _ in range(100):
                await pilot.pause(0.05)
                if table.row_count == 5:
                    break
            await pilot.press("down", "down", "enter")  # base-1: opened once, its goodput known
            await pilot.pause(1.0)
            await pilot.press("escape")
            await pilot.pause(0.5)
            await pilot.press("space", "space", "space")  # base-1, base-2, no-delay marked (the cursor moves on)
            await pilot.pause(0.3)
            app.save_screenshot(str(out / "runs-120x40.svg"))
            print("wrote", (out / "runs-120x40.svg").relative_to(ROOT))
            await pilot.press("u", "up", "up", "space", "equals_sign", "space", "c")  # base-1,base-2 | no-delay
            for _ in range(200):
                await pilot.pause(0.05)
                if isinstance(app.screen, CompareScreen):
                    break
            await pilot.pause(0.3)
            app.save_screenshot(str(out / "runs-compare.svg"))
            print("wrote", (out / "runs-compare.svg").relative_to(ROOT))
            await pilot.press("escape", "u", "up", "up", "space", "space", "space", "o")
            for _ in range(200):
                await pilot.pause(0.05)
                if type(app.screen).__name__ == "MonitorScreen":
                    break
            await pilot.pause(1.0)
            app.save_screenshot(str(out / "runs-overlay.svg"))
            print("wrote", (out / "runs-overlay.svg").relative_to(ROOT))

    asyncio.run(list_shots())


if __name__ == "__main__":
    sys.exit(main())
