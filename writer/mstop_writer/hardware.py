"""Peak FLOP/s of known devices, FLOPs per token, and host memory probes.

Standard library only: this module is imported inside training jobs.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple


class Peak(NamedTuple):
    """A device's peak dense FLOP/s (16-bit matmul) and where the number comes from."""

    flops: float
    source: str


_NV = "NVIDIA datasheet, dense BF16/FP16 tensor core (without sparsity)"
_ASCEND_B = (
    "figure widely quoted in Chinese industry reports for this 910B bin (FP16); "
    "Huawei publishes no per-bin datasheet: pass peak_flops to be exact"
)

#: Peak dense 16-bit FLOP/s per device, keyed by a normalised device name
#: (lower case, no spaces, dashes or underscores, no "ascend"/"nvidia"/"tesla" prefix).
#: Numbers we could not tie to a public source (e.g. Ascend 910B1) are left out on
#: purpose: an unknown device gives no MFU rather than a wrong one.
PEAK_FLOPS: dict[str, Peak] = {
    "910a": Peak(256e12, "Huawei, Hot Chips 31 (2019): Ascend 910, 256 TFLOPS FP16"),
    "910": Peak(256e12, "Huawei, Hot Chips 31 (2019): Ascend 910, 256 TFLOPS FP16"),
    "910proa": Peak(256e12, "Huawei, Hot Chips 31 (2019): Ascend 910, 256 TFLOPS FP16"),
    "910b2": Peak(376e12, _ASCEND_B),
    "910b3": Peak(313e12, _ASCEND_B),
    "910b4": Peak(280e12, _ASCEND_B),
    "910c": Peak(800e12, "Huawei Connect 2025 Ascend roadmap: 910C, 800 TFLOPS FP16"),
    "v100": Peak(125e12, "NVIDIA V100 datasheet (SXM2): 125 TFLOPS tensor"),
    "v100sxm2": Peak(125e12, "NVIDIA V100 datasheet (SXM2): 125 TFLOPS tensor"),
    "v100pcie": Peak(112e12, "NVIDIA V100 datasheet (PCIe): 112 TFLOPS tensor"),
    "a100": Peak(312e12, _NV + ": A100 312 TFLOPS"),
    "a800": Peak(312e12, _NV + ": A800 312 TFLOPS"),
    "h100": Peak(989e12, _NV + ": H100 SXM 989 TFLOPS"),
    "h100sxm": Peak(989e12, _NV + ": H100 SXM 989 TFLOPS"),
    "h100pcie": Peak(756e12, _NV + ": H100 PCIe 756 TFLOPS"),
    "h100nvl": Peak(835e12, _NV + ": H100 NVL 835 TFLOPS"),
    "h800": Peak(989e12, _NV + ": H800 SXM 989 TFLOPS"),
    "h200": Peak(989e12, _NV + ": H200 SXM 989 TFLOPS"),
    "b200": Peak(2250e12, _NV + ": HGX B200 2.25 PFLOPS"),
}

_PREFIXES = ("ascend", "nvidia", "tesla", "geforce")
_SUFFIX = re.compile(r"(\d+gb|hbm\d*e?)$")


def normalise_device(name: str) -> str:
    """Reduce a device name (``"NVIDIA A100-SXM4-80GB"``, ``"Ascend910B3"``) to a table key."""
    key = re.sub(r"[\s_\-]+", "", name.lower())
    for prefix in _PREFIXES:
        if key.startswith(prefix):
            key = key[len(prefix):]
    for _ in range(2):
        key = _SUFFIX.sub("", key)
    return key.replace("sxm4", "").replace("sxm5", "sxm")


def lookup_peak(device: str | None) -> Peak | None:
    """Return the peak of ``device`` from :data:`PEAK_FLOPS`, or None when unknown.

    Tries the exact normalised name first, then the longest table key that the
    name starts with (``"a100sxm"`` finds ``"a100"``), never a shorter bin of a
    different chip (``"910b1"`` does not fall back to anything).
    """
    if not device:
        return None
    key = normalise_device(device)
    if key in PEAK_FLOPS:
        return PEAK_FLOPS[key]
    if re.fullmatch(r"910b\d?", key):
        return None
    best = max((k for k in PEAK_FLOPS if key.startswith(k)), key=len, default=None)
    return PEAK_FLOPS[best] if best else None


def flops_per_token(
    *,
    n_params: int | None,
    n_layers: int | None,
    n_heads: int | None,
    head_dim: int | None,
    seq_len: int | None,
) -> tuple[float | None, str | None]:
    """Training FLOPs per token and how they were obtained.

    ``6·N + 12·L·H·Dh·S`` (PaLM, appendix B; nanoGPT's ``estimate_mfu``): 6 FLOPs
    per parameter per token for the forward and backward matmuls, plus the
    attention score and value products. With only ``n_params`` known the
    attention term is left out and the method says so; with nothing, unknown.
    """
    if n_params is None:
        return None, None
    attn = (n_layers, n_heads, head_dim, seq_len)
    if all(v is not None for v in attn):
        return (
            6.0 * n_params + 12.0 * n_layers * n_heads * head_dim * seq_len,  # type: ignore[operator]
            "6N+12LHQT",
        )
    return 6.0 * n_params, "6N (attention not counted)"


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def host_rss() -> int | None:
    """Resident set size of this process in bytes (``/proc/self/statm``), or None."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def host_peak_rss(reset: bool) -> int | None:
    """Peak RSS (``VmHWM``) since the last reset, in bytes; reset it afterwards if asked.

    Linux lets a process reset its own high-water mark by writing ``5`` to
    ``/proc/self/clear_refs``, which gives a true peak per interval rather than
    per process lifetime. Returns None where ``/proc`` is missing.
    """
    peak = None
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    peak = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        return None
    if reset:
        try:
            with open("/proc/self/clear_refs", "wb", buffering=0) as f:
                f.write(b"5")
        except OSError:
            pass
    return peak


def host_memory_limit() -> tuple[int | None, str]:
    """The memory this process's host (or its cgroup, when tighter) allows, in bytes, and which."""
    total = None
    try:
        total = os.sysconf("SC_PHYS_PAGES") * _PAGE
    except (OSError, ValueError, AttributeError):
        pass
    source = "host RAM"
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path, "rb") as f:
                raw = f.read().strip()
        except OSError:
            continue
        if raw.isdigit():
            limit = int(raw)
            if total is None or limit < total:
                total, source = limit, "cgroup limit"
        break
    return total, source
