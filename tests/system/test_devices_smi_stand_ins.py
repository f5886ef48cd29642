"""The writer's NPU sampling: npu-smi's outputs as published (tests/data/npu-smi/SOURCES.md) read right, and a
stand-in npu-smi on PATH (tests/helpers/npu_smi.py) that prints them, is slow, fails, hangs and hangs past being
killed, while training goes on. No Ascend device is here: this is all the device code's testing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

from tests.helpers.common import ROOT, read_events, wait_for
from tests.helpers.devices_writer_common import _sampler, rows_of  # noqa: F401
from tests.helpers.npu_smi import StandIn


def test_a_slow_npu_smi_is_killed_at_its_timeout_and_asked_less_often(tmp_path):
    npu = StandIn(tmp_path / "bin")
    npu.set(mode="slow")
    s, warned, events = _sampler(tmp_path, command=str(npu.folder / "npu-smi"), interval=0.1, timeout=0.5)
    try:
        assert wait_for(lambda: warned, 10)
        time.sleep(1.0)
        calls = len(npu.calls)
    finally:
        t = time.monotonic()
        s.stop()
        stopped = time.monotonic() - t
    assert warned[0][0] == "devices:timeout" and "took over 0.5 s: killed" in warned[0][1]
    assert calls == 1  # backed off for 6 x the timeout, not asked again every 0.1 s
    assert stopped < 1.5
    out = subprocess.run(["pgrep", "-f", f"{npu.folder}/npu-smi"], capture_output=True, text=True)
    assert out.stdout == ""  # killed with its process group, sleep included


def test_an_npu_smi_that_outlives_its_kill_stops_sampling(tmp_path):
    npu = StandIn(tmp_path / "bin")
    npu.set(mode="stuck")
    s, warned, events = _sampler(tmp_path, command=str(npu.folder / "npu-smi"), interval=0.1, timeout=0.3)
    try:
        assert wait_for(lambda: not s.running, 10)
    finally:
        s.stop()
        subprocess.run(["pkill", "-f", "sleep 1000"], check=False)
    assert warned[0][0] == "devices:stuck" and "does not end even when killed: device sampling stopped" in warned[0][1]
    assert len(npu.calls) == 1


WRITER = textwrap.dedent("""
    import sys, time
    from mstop_writer import MetricsWriter
    run, rank = sys.argv[1], int(sys.argv[2])
    times = []
    with MetricsWriter(run, rank=rank, world_size=2, device_interval=0.2, heartbeat_interval=0.5) as w:
        for step in range(1, 81):
            t = time.perf_counter()
            w.log(step, loss=1.0 / step, step_time=0.05)
            times.append(time.perf_counter() - t)
            time.sleep(0.05)
    print(max(times))
""")

def test_one_process_per_host_samples_while_training_goes_on(tmp_path):
    """Two ranks of one host (msrun's DEVICE_ID 0 and 1), npu-smi hanging half the time: one of them samples,
    and no log() call waits for it."""
    npu = StandIn(tmp_path / "bin", info="info-910b3-busy.txt")
    run = tmp_path / "run"
    run.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(run), str(r)], cwd=ROOT, text=True,
                              stdout=subprocess.PIPE, env={**npu.env(dict(os.environ)), "DEVICE_ID": str(r)})
             for r in (0, 1)]
    time.sleep(1.5)
    npu.set(mode="hang")
    time.sleep(1.0)
    npu.set(mode="ok")
    slowest = [float(p.communicate(timeout=60)[0].split()[-1]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    # a log() call never waited for npu-smi, whose hang lasts its 5 s timeout (a bound far from both: a loaded
    # machine alone can hold a call for tens of milliseconds)
    assert max(slowest) < 1.0, slowest
    sampling = [r for r in (0, 1) if any(e["kind"] == "devices" and e.get("state") == "sampling"
                                         for e in read_events(run / f"rank{r}.events.jsonl"))]
    assert sampling == [0]  # the lowest local rank, alone
    rows = rows_of(run)
    assert len(rows) >= 8 * 3 and {r["npu"] for r in rows} == {str(i) for i in range(8)}
    assert {float(r["aicore"]) for r in rows} == {0.87}
    start = next(e for e in read_events(run / "rank1.events.jsonl") if e["kind"] == "start")
    assert start["device_id"] == 1 and start["device_interval"] == 0.2


