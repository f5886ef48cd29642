"""The hosts' NPUs as the writers sampled them (``host_<name>.devices.csv``, mstop_writer.devices): the file's
parser, the join of devices to ranks, and the figures the screen and the health rules read.

A device is one chip: (host, NPU id, chip id). A rank is joined to its device by its process id when npu-smi
listed it among the chip's processes, else by its host and device id (``DEVICE_ID`` through
``ASCEND_RT_VISIBLE_DEVICES``, from its start event). Sample times are the sampling host's clock, as the rank's
rows on that host are: the two are compared with each other, never with this machine's clock.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from typing import Any

from mstop_writer.schema import DEVICE_COLUMNS, host_key

from .. import fmt
from ..safe import clean

#: samples kept per device (at the default 10 s: the last 15 minutes)
KEEP = 90
#: a device whose newest sample is older than this many sampling intervals is not reported as current
STALE_INTERVALS = 3.0
DEFAULT_INTERVAL = 10.0
_REQUIRED = ("time", "host", "npu", "chip")


@dataclass(frozen=True)
class DeviceSample:
    """One chip at one sample (the devices file's row, numbers as numbers, unknowns None)."""

    time: float
    host: str
    npu: int
    chip: int
    device: int | None = None
    name: str | None = None
    health: str | None = None
    aicore: float | None = None
    hbm_used: float | None = None
    hbm_total: float | None = None
    memory_used: float | None = None
    memory_total: float | None = None
    temperature: float | None = None
    power: float | None = None
    pids: tuple[int, ...] = ()
    error_code: str | None = None

    @property
    def key(self) -> tuple[str, int, int]:
        return self.host, self.npu, self.chip

    @property
    def label(self) -> str:
        """``h1 NPU 3`` (``h1 NPU 3 chip 1`` on a two-chip NPU's second chip)."""
        return f"{self.host} NPU {self.npu}" + (f" chip {self.chip}" if self.chip else "")

    @property
    def memory_share(self) -> float | None:
        """HBM used / total (the chip's other memory where it has no HBM figure)."""
        for used, total in ((self.hbm_used, self.hbm_total), (self.memory_used, self.memory_total)):
            if used is not None and total:
                return used / total
        return None

    @property
    def healthy(self) -> bool:
        return self.health is None or self.health.upper() == "OK"


def _num(v: str) -> float | None:
    if not v:  # most of a row's empty cells (no HBM figure, no error code): no exception raised for them
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _int(v: str) -> int | None:
    f = _num(v)
    return int(f) if f is not None and f == int(f) and f >= 0 else None


def _text(v: str | None) -> str | None:
    return clean(v, 64) or None if v else None


class DevicesParser:
    """Complete lines of one devices file into samples; a line that is not a row of its header is bad."""

    def __init__(self) -> None:
        self.header: list[str] | None = None

    def reset(self) -> None:
        self.header = None

    def parse(self, blob: bytes) -> tuple[list[DeviceSample], int]:
        """Each line on its own: a quote never spans lines (an open quote swallowed the 100 rows after it,
        counted as one), so every line is a sample or one bad row."""
        text = blob.decode("utf-8", "replace")
        out: list[DeviceSample] = []
        bad = 0
        for line in text.split("\n"):
            line = line.rstrip("\r")
            if not line.strip():
                continue
            try:
                row = next(csv.reader([line]), [])
            except csv.Error:  # a NUL, a quote left open: this line alone
                bad += 1
                continue
            if not row:
                continue
            if self.header is None:
                self.header = [c.strip().lstrip("\ufeff") for c in row]
                if not all(c in self.header for c in _REQUIRED):
                    bad += 1
                    self.header = None
                continue
            if row == self.header:
                continue  # a restarted sampler's header again
            s = self._sample(row)
            if s is None:
                bad += 1
            else:
                out.append(s)
        return out, bad

    def _sample(self, row: list[str]) -> DeviceSample | None:
        assert self.header is not None
        if len(row) != len(self.header):
            return None
        v = dict(zip(self.header, row))
        t, npu, chip = _num(v["time"]), _int(v["npu"]), _int(v["chip"])
        host = _text(v["host"])
        if t is None or npu is None or chip is None or host is None:
            return None
        # ASCII digits of a process id's length only: "²" is a digit to Python, and 5,000 digits are past
        # int()'s limit (each crashed summary)
        pids = tuple(int(p) for p in v.get("pids", "").split() if p.isascii() and p.isdigit() and len(p) <= 10)[:16]
        return DeviceSample(
            time=t, host=host, npu=npu, chip=chip, device=_int(v.get("device", "")), name=_text(v.get("name")),
            health=_text(v.get("health")), aicore=_num(v.get("aicore", "")), hbm_used=_num(v.get("hbm_used", "")),
            hbm_total=_num(v.get("hbm_total", "")), memory_used=_num(v.get("memory_used", "")),
            memory_total=_num(v.get("memory_total", "")), temperature=_num(v.get("temperature", "")),
            power=_num(v.get("power", "")), pids=pids, error_code=_text(v.get("error_code")))


assert set(_REQUIRED) <= set(DEVICE_COLUMNS)


def interval(store: Any) -> float:
    """The sampling interval the writers were started with (their start events), else the default."""
    got = [float(d.last_start["device_interval"]) for d in store.ranks.values()
           if d.last_start and isinstance(d.last_start.get("device_interval"), (int, float))
           and d.last_start["device_interval"] > 0]
    return max(got) if got else DEFAULT_INTERVAL


def latest(store: Any) -> dict[tuple[str, int, int], DeviceSample]:
    """Each device's newest sample."""
    return {k: v[-1] for k, v in store.devices.items() if v}


def rank_devices(store: Any) -> dict[int, tuple[str, int, int]]:
    """rank -> its device's key: by process id where npu-smi listed the rank's process on a chip of its
    host, else by host and device id (its start event's ``device_id``). Once per store version: a frame
    asks for it four times (the strip, the ranks' columns, the rules), each a pass over every rank."""
    return store.memo("devices.rank_devices", lambda: _rank_devices(store))


def _rank_devices(store: Any) -> dict[int, tuple[str, int, int]]:
    now = latest(store)
    by_pid = {(s.host, p): k for k, s in now.items() for p in s.pids}
    by_id = {(s.host, s.device): k for k, s in now.items() if s.device is not None}
    out: dict[int, tuple[str, int, int]] = {}
    for r, d in store.ranks.items():
        start = d.last_start or {}
        host = host_key(start.get("host")) if start.get("host") else None
        if host is None:
            continue
        k = by_pid.get((host, start.get("pid"))) or by_id.get((host, start.get("device_id")))
        if k is not None:
            out[r] = k
    return out


def current(store: Any) -> dict[tuple[str, int, int], DeviceSample]:
    """The newest sample of each device whose host still samples (a newest sample within STALE_INTERVALS
    intervals of its host's newest): a device that left the table is not reported as it last was. Once per
    store version, as rank_devices."""
    return store.memo("devices.current", lambda: _current(store))


def _current(store: Any) -> dict[tuple[str, int, int], DeviceSample]:
    now = latest(store)
    newest: dict[str, float] = {}
    for s in now.values():
        newest[s.host] = max(newest.get(s.host, s.time), s.time)
    limit = STALE_INTERVALS * interval(store)
    return {k: s for k, s in now.items() if newest[s.host] - s.time <= limit}


@dataclass
class DeviceSummary:
    """The devices line under the memory panel, and summary --json's ``devices``."""

    devices: int
    hosts: int
    aicore_mean: float | None
    aicore_min: DeviceSample | None
    memory_max: DeviceSample | None
    temperature_max: DeviceSample | None
    unhealthy: list[DeviceSample]
    newest: float  # the newest sample's time (its host's clock)

    def public(self) -> dict[str, Any]:
        def who(s: DeviceSample | None) -> str | None:
            return s.label if s is not None else None

        return {"devices": self.devices, "hosts": self.hosts, "aicore_mean": self.aicore_mean,
                "aicore_min": self.aicore_min.aicore if self.aicore_min else None, "aicore_min_device": who(
                    self.aicore_min), "memory_max": self.memory_max.memory_share if self.memory_max else None,
                "memory_max_device": who(self.memory_max),
                "temperature_max": self.temperature_max.temperature if self.temperature_max else None,
                "temperature_max_device": who(self.temperature_max),
                "unhealthy": [{"device": s.label, "health": s.health, "error_code": s.error_code}
                              for s in self.unhealthy]}


def summary(store: Any) -> DeviceSummary | None:
    """The devices' figures now (None: no devices file, or none current)."""
    now = list(current(store).values())
    if not now:
        return None
    busy = [s for s in now if s.aicore is not None]
    mem = [s for s in now if s.memory_share is not None]
    hot = [s for s in now if s.temperature is not None]
    return DeviceSummary(
        devices=len(now), hosts=len({s.host for s in now}),
        aicore_mean=sum(s.aicore for s in busy) / len(busy) if busy else None,  # type: ignore[misc]
        aicore_min=min(busy, key=lambda s: (s.aicore, s.key)) if busy else None,
        memory_max=max(mem, key=lambda s: (s.memory_share, s.key)) if mem else None,
        temperature_max=max(hot, key=lambda s: (s.temperature, s.key)) if hot else None,
        unhealthy=sorted((s for s in now if not s.healthy), key=lambda s: s.key), newest=max(s.time for s in now))


def recent(store: Any, key: tuple[str, int, int], seconds: float) -> list[DeviceSample]:
    """A device's samples within ``seconds`` of its newest."""
    got = store.devices.get(key) or ()
    if not got:
        return []
    end = got[-1].time
    return [s for s in got if end - s.time <= seconds]


def sampling_notes(store: Any) -> list[str]:
    """What the header says of the hosts' device sampling: a host whose sampler's last word is a failure
    (npu-smi timed out, failed, printed nothing readable), and device rows that could not be read."""
    last: dict[str, dict[str, Any]] = {}
    for r in store.ranks_with("device_events"):  # a rank whose writer samples devices (one a host)
        for e in store.ranks[r].device_events:
            host = str(e.get("host") or "?")
            if host not in last or float(e["time"]) >= float(last[host]["time"]):
                last[host] = e
    notes = [f"{clean(h, 64)}: no device rows: {clean(e.get('message'), 200)}" for h, e in sorted(last.items())
             if e.get("state") == "failed"]
    if store.bad_device_rows:
        notes.append(f"{fmt.count(store.bad_device_rows, 'device row')} could not be read")
    return notes
