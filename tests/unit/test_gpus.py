"""Issue 38 item 8: a rank on an NVIDIA GPU gets the device columns a rank on an NPU gets, from nvidia-smi's
CSV queries (tests/data/nvidia-smi, in the form nvidia-smi documents: no GPU is here)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mstop_writer.gpus import apply_apps, parse_gpus
from tests.helpers.nvidia_smi import DATA

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


@given(st.text(max_size=400))
def test_any_output_is_read_or_skipped_never_raised(text):
    chips = parse_gpus(text)
    apply_apps(chips, text)
    for c in chips:
        assert c.aicore is None or 0 <= c.aicore <= 1




