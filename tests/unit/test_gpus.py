"""Issue 38 item 8: a rank on an NVIDIA GPU gets the device columns a rank on an NPU gets, from nvidia-smi's
CSV queries (tests/data/nvidia-smi, in the form nvidia-smi documents: no GPU is here)."""

from __future__ import annotations

import os
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from mstop.commands.summary import summarize
from mstop.engine.figures import Options
from mstop.sources import read_once
from mstop.view import build_view
from mstop_writer.gpus import apply_apps, parse_gpus
from tests.helpers.common import ROOT
from tests.helpers.nvidia_smi import DATA, StandIn

GPUS = (DATA / "query-gpu-a100x4.csv").read_text()
APPS = (DATA / "query-apps-a100x4.csv").read_text()


def test_four_a100s_and_their_processes():
    chips = parse_gpus(GPUS)
    apply_apps(chips, APPS)
    assert [(c.npu, c.device, c.chip) for c in chips] == [(0, 0, 0), (1, 1, 0), (2, 2, 0), (3, 3, 0)]
    g2 = chips[2]
    assert g2.name == "NVIDIA A100-SXM4-80GB" and g2.aicore == 0.12 and g2.temperature == 88.0
    assert g2.hbm_used == 80112 * 2**20 and g2.hbm_total == 81920 * 2**20 and g2.pids == [41874]
    assert chips[3].power is None and chips[3].pids == [] and chips[3].source == "nvidia-smi"
    assert chips[2].health is None  # nvidia-smi's CSV query has no health: no alert is made up


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_any_output_is_read_or_skipped_never_raised(text):
    chips = parse_gpus(text)
    apply_apps(chips, text)
    for c in chips:
        assert c.aicore is None or 0 <= c.aicore <= 1


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
    gpu = StandIn(tmp_path / "bin")
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
