"""The host's NVIDIA GPUs (MindSpore's GPU backend), sampled with ``nvidia-smi`` into the same
``host_<name>.devices.csv`` rows as the NPUs (mstop_writer.devices): a rank on a GPU gets the device columns a
rank on an NPU gets.

Standard library only. Two calls a sample, both in nvidia-smi's stable CSV query form (``--format=csv,
noheader,nounits``: one line per GPU or process, comma-separated, no units; a value the GPU does not report
is ``[N/A]`` or ``[Not Supported]``):

- ``--query-gpu=index,name,pci.bus_id,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw``:
  the GPU's index (``npu`` and ``device`` columns: CUDA counts devices the same way), its utilisation
  (the ``aicore`` column: the share of time a kernel ran), its memory (``hbm_*``: MiB, mebibytes), degrees C, W;
- ``--query-compute-apps=gpu_bus_id,pid,used_memory``: the processes on each GPU (``pids``), joined by bus id.

nvidia-smi has no health field in this form: ``health`` stays empty (no ``device_unhealthy`` alert is made
from it), and ``source`` says ``nvidia-smi``.
"""

from __future__ import annotations

from .devices import MB, Call, Chip, DeviceSampler

GPU_FIELDS = ("index", "name", "pci.bus_id", "utilization.gpu", "memory.used", "memory.total", "temperature.gpu",
              "power.draw")
APP_FIELDS = ("gpu_bus_id", "pid", "used_memory")
QUERY_GPU = [f"--query-gpu={','.join(GPU_FIELDS)}", "--format=csv,noheader,nounits"]
QUERY_APPS = [f"--query-compute-apps={','.join(APP_FIELDS)}", "--format=csv,noheader,nounits"]


def _value(cell: str) -> float | None:
    """A number of nvidia-smi's CSV, None for ``[N/A]``, ``[Not Supported]``, ``N/A`` and anything else."""
    try:
        v = float(cell.strip())
    except ValueError:
        return None
    return v if v == v and abs(v) != float("inf") else None


def _bus(cell: str) -> str:
    """A PCI bus id as both queries give it (``00000000:07:00.0``), upper-case: the join key."""
    return cell.strip().upper()


def parse_gpus(text: str) -> list[Chip]:
    """``--query-gpu`` lines as chips (one chip per GPU); lines that are not one GPU's fields are skipped."""
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(GPU_FIELDS) or not cells[0].isdigit():
            continue
        i = int(cells[0])
        util, used, total = _value(cells[3]), _value(cells[4]), _value(cells[5])
        c = Chip(npu=i, chip=0, name=cells[1] or None, device=i, bus_id=_bus(cells[2]) or None)
        c.aicore = util / 100.0 if util is not None and 0 <= util <= 100 else None
        c.hbm_used = int(used * MB) if used is not None and used >= 0 else None
        c.hbm_total = int(total * MB) if total is not None and total > 0 else None
        c.temperature, c.power = _value(cells[6]), _value(cells[7])
        c.source = "nvidia-smi"
        out.append(c)
    return out


def apply_apps(chips: list[Chip], text: str) -> None:
    """``--query-compute-apps`` lines: each process's pid on the GPU of its bus id."""
    by_bus = {c.bus_id: c for c in chips if c.bus_id}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(APP_FIELDS) or not cells[1].isdigit():
            continue
        c = by_bus.get(_bus(cells[0]))
        if c is not None:
            c.pids.append(int(cells[1]))


class GpuSampler(DeviceSampler):
    """:class:`~mstop_writer.devices.DeviceSampler` (one process per host, a daemon thread, timeouts, each
    failure warned once) with nvidia-smi's two queries for a sample."""

    kind = "GPUs"
    tool = "nvidia-smi"

    def sample_once(self) -> float | None:
        info = Call([self.command, *QUERY_GPU], self.timeout)
        if info.kind is not None:
            return self._failed_call(info)
        chips = parse_gpus(info.out)
        if not chips:
            first = next((ln.strip() for ln in info.out.splitlines() if ln.strip()), "nothing")
            self._fail("unreadable", f"nvidia-smi printed no GPU line mstop can read (first line: {first[:120]!r})")
            return self.interval
        t = self._clock()
        apps = Call([self.command, *QUERY_APPS], self.timeout)
        if apps.kind is None:
            apply_apps(chips, apps.out)
        elif apps.stuck:
            return self._failed_call(apps)
        self._write(chips, t)
        return self.interval
