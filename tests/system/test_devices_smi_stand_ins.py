"""The writer's device sampling against stand-in device tools run as processes: an npu-smi on PATH
(tests/helpers/npu_smi.py) that prints npu-smi's outputs as published (tests/data/npu-smi/SOURCES.md), is slow,
fails, hangs, prints without end and hangs past being killed, while training goes on; an nvidia-smi
(tests/helpers/nvidia_smi.py) for a rank on a GPU. No Ascend device is here: with the parsers' tests in this
process (tests/unit/test_devices_writer.py, test_gpus.py), this is all the device code's testing."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import textwrap
import time

import pytest

from mstop.commands.summary import summarize
from mstop.engine.figures import Options
from mstop.sources import read_once
from mstop.view import build_view
from mstop_writer import MetricsWriter
from mstop_writer.devices import host_name
from mstop_writer.schema import DEVICE_COLUMNS
from tests.helpers.common import ROOT, read_events, wait_for
from tests.helpers.devices_writer_common import _sampler, rows_of
from tests.helpers.npu_smi import StandIn
from tests.helpers.nvidia_smi import StandIn as GpuStandIn

MB = 1 << 20


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
    """Two ranks of one host (msrun's DEVICE_ID 0 and 1), npu-smi hanging half the time: one of them samples at
    a time, the lowest local rank first, and no log() call waits for it. Rank 1 is started once rank 0 has:
    a loaded machine can start two processes seconds apart, and the one that starts first may take the host
    (the lowest rank's head start is one interval); the one left takes over when the sampler ends."""
    npu = StandIn(tmp_path / "bin", info="info-910b3-busy.txt")
    run = tmp_path / "run"
    run.mkdir()

    def start(r: int) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", WRITER, str(run), str(r)], cwd=ROOT, text=True,
                                stdout=subprocess.PIPE, env={**npu.env(dict(os.environ)), "DEVICE_ID": str(r)})

    procs = [start(0)]
    assert wait_for(lambda: (run / "rank0.events.jsonl").exists()
                    and any(e["kind"] == "start" for e in read_events(run / "rank0.events.jsonl")), 60)
    procs.append(start(1))
    time.sleep(1.5)
    npu.set(mode="hang")
    time.sleep(1.0)
    npu.set(mode="ok")
    slowest = [float(p.communicate(timeout=60)[0].split()[-1]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    # a log() call never waited for npu-smi, whose hang lasts its 5 s timeout (a bound far from both: a loaded
    # machine alone can hold a call for tens of milliseconds)
    assert max(slowest) < 1.0, slowest
    took = {r: [e["time"] for e in read_events(run / f"rank{r}.events.jsonl")
                if e["kind"] == "devices" and e.get("state") == "sampling"] for r in (0, 1)}
    assert len(took[0]) == 1 and len(took[1]) <= 1, took  # the lowest local rank first, once
    if took[1]:  # rank 1 outlived rank 0 and took the host over: only once rank 0 had logged its last step
        with open(run / "rank0.csv", newline="") as f:
            last0 = max(float(r["time"]) for r in csv.DictReader(f))
        assert took[1][0] > last0 > took[0][0], (took, last0)
    rows = rows_of(run)
    assert len(rows) >= 8 * 3 and {r["npu"] for r in rows} == {str(i) for i in range(8)}
    assert {float(r["aicore"]) for r in rows} == {0.87}
    start_event = next(e for e in read_events(run / "rank1.events.jsonl") if e["kind"] == "start")
    assert start_event["device_id"] == 1 and start_event["device_interval"] == 0.2


def test_sampler_writes_rows_from_the_stand_in(tmp_path):
    npu = StandIn(tmp_path / "bin", info="info-910b4-1-procs-25.2.2.txt")
    s, warned, events = _sampler(tmp_path, command=str(npu.folder / "npu-smi"))
    try:
        assert wait_for(lambda: len(rows_of(tmp_path)) >= 4, 10)
    finally:
        s.stop()
    rows = rows_of(tmp_path)
    assert list(rows[0]) == list(DEVICE_COLUMNS)
    r = rows[0]
    assert (r["host"], r["npu"], r["device"], r["name"], r["health"]) == (host_name(), "0", "0", "910B4-1", "OK")
    assert int(r["hbm_used"]) == 61825 * MB and int(r["hbm_total"]) == 65536 * MB and r["pids"] == "19334"
    assert float(r["temperature"]) == 40.0 and float(r["power"]) == 78.2 and float(r["aicore"]) == 0.0
    assert {x["source"] for x in rows} == {"info+usages", "info"}  # one NPU's usages per sample, in turn
    assert "info" in npu.calls and "info -t usages -i 0" in npu.calls and "info -t usages -i 1" in npu.calls
    assert not warned and events[0]["state"] == "sampling"


@pytest.mark.parametrize("mode, kind, says", [
    ("fail", "exit", "failed (exit 8): dcmi module initialize failed"),
    ("garbage", "unreadable", "no device table mstop can read (first line not understood: 'Permission denied"),
])
def test_a_failing_npu_smi_is_warned_once_and_told(tmp_path, mode, kind, says):
    npu = StandIn(tmp_path / "bin")
    npu.set(mode=mode)
    s, warned, events = _sampler(tmp_path, command=str(npu.folder / "npu-smi"), interval=0.1)
    try:
        assert wait_for(lambda: len(npu.calls) >= 3, 10)
        npu.set(mode="ok")
        assert wait_for(lambda: rows_of(tmp_path), 10)
    finally:
        s.stop()
    assert {k for k, _ in warned} == {f"devices:{kind}"} and says in warned[0][1]
    failed = [e for e in events if e["state"] == "failed"]
    assert len(failed) == 1 and failed[0]["reason"] == kind  # once per kind, however many calls failed
    assert events[-1]["message"] == "device sampling works again"


@pytest.mark.parametrize("mode", ["flood", "endless"])
def test_npu_smi_printing_without_end_is_cut_in_the_sampler_and_training_goes_on(tmp_path, mode):
    """Issue 40 item 10: npu-smi printing 1 GB, or lines without end: the sampler reads at most a few MB of
    it, kills it, says so once, and the training process neither waits nor grows (its output was read whole
    into the job: 1 GB blocked log() for 2.5 s and took 3 GB; endless output grew the job until it was
    killed)."""
    import time

    from mstop_writer.devices import MAX_OUTPUT

    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    npu = StandIn(tmp_path / "bin")
    npu.set(mode=mode)
    before = rss()
    w = MetricsWriter(tmp_path / "run", witness=False)
    s, warned, events = _sampler(tmp_path, command=str(npu.folder / "npu-smi"), interval=0.2)
    longest, grew = 0.0, 0
    try:
        t_end = time.monotonic() + 4.0
        step = 0
        while time.monotonic() < t_end:  # the training loop: a row every 10 ms
            step += 1
            t = time.perf_counter()
            w.log(step, loss=1.0)
            longest = max(longest, time.perf_counter() - t)
            grew = max(grew, rss() - before)
            time.sleep(0.01)
        assert wait_for(lambda: warned, 10)
    finally:
        s.stop()
        w.close()
    assert {k for k, _ in warned} == {"devices:too much output"}
    assert f"printed over {MAX_OUTPUT // MB} MB: killed" in warned[0][1]
    assert [e["reason"] for e in events if e["state"] == "failed"] == ["too much output"]
    assert grew < 64 * MB, f"the job grew by {grew / MB:.0f} MB"
    assert longest < 0.5, f"a log() call waited {longest:.2f} s"
    assert not rows_of(tmp_path)


def test_the_sampler_samples_a_950_table_and_quotes_what_it_cannot_read(tmp_path):
    npu = StandIn(tmp_path / "bin", info="info-950-continued-made.txt")
    npu.set(health="health-alarm.txt")  # -t health of an Alarm NPU says Alarm too
    for d in "abc":
        (tmp_path / d).mkdir()
    s, warned, events = _sampler(tmp_path / "a", command=str(npu.folder / "npu-smi"))
    try:
        assert wait_for(lambda: len(rows_of(tmp_path / "a")) >= 8, 10)
    finally:
        s.stop()
    rows = rows_of(tmp_path / "a")
    assert {(r["npu"], r["health"], float(r["aicore"])) for r in rows[:4]} >= {("1", "Alarm", 1.0), ("2", "Alarm", 1.0)}
    npu.set(info="info-unknown-layout-made.txt")
    said = _warning(tmp_path / "b", npu, "devices:partly")
    assert "2 lines of its device table not understood (the first: '| 0     Ascend910" in said
    # a table with nothing readable: its first line that is no border is quoted
    (npu.folder / "only-border.txt").write_text("+-----+\n| what | is | this |\n+-----+\n")
    npu.set(info=str(npu.folder / "only-border.txt"))
    said = _warning(tmp_path / "c", npu, "devices:unreadable")
    assert "(first line not understood: '| what | is | this |')" in said, said


def _warning(run_dir, npu: StandIn, kind: str) -> str:
    """What a sampler of the stand-in warns of, of ``kind`` (waited for)."""
    s, warned, _ = _sampler(run_dir, command=str(npu.folder / "npu-smi"))
    try:
        assert wait_for(lambda: any(k == kind for k, _ in warned), 10)
    finally:
        s.stop()
    return next(m for k, m in warned if k == kind)


JOB = """
import sys, time
from mstop_writer import MetricsWriter
w = MetricsWriter(sys.argv[1], rank=0, world_size=1, device_interval=0.2, tokens_per_step=1024, device="GPU")
for s in range(1, 40):
    w.log(s, loss=1.0 / s, step_time=0.02)
    time.sleep(0.02)
w.close()
"""


def test_a_rank_on_a_gpu_gets_its_devices_columns(tmp_path):
    """A writer on a host with nvidia-smi and no npu-smi, DEVICE_ID=0 and CUDA_VISIBLE_DEVICES=2: it samples
    the GPUs into the devices file, and the rank is joined to GPU 2 (hot and nearly full) in the ranks view
    and in summary --json."""
    gpu = GpuStandIn(tmp_path / "bin")
    run = tmp_path / "run"
    env = gpu.env({**os.environ, "PYTHONPATH": str(ROOT / "writer"), "DEVICE_ID": "0", "CUDA_VISIBLE_DEVICES": "2"})
    env["PATH"] = f"{gpu.folder}:/usr/bin:/bin"  # no npu-smi
    subprocess.run([sys.executable, "-c", JOB, str(run)], env=env, check=True, timeout=60)
    assert any(c.startswith("--query-gpu=") for c in gpu.calls)
    files = sorted(p.name for p in run.glob("host_*.devices.csv"))
    assert len(files) == 1
    store = read_once(str(run))
    js = summarize(store, str(run), Options())
    assert js["devices"]["temperature_max"] == 88.0 and js["devices"]["hosts"] == 1
    v = build_view(store, Options())
    (row,) = v.ranks
    assert row.aicore == 0.12 and row.temperature == 88.0 and abs(row.device_memory - 80112 / 81920) < 1e-6
