"""Builders the tests of devices writer share (system/test_devices_smi_stand_ins.py, unit/test_devices_writer.py):
plain functions and data, no fixtures."""

from __future__ import annotations

import csv

from mstop_writer.devices import (
    DeviceSampler,
    host_name,
)
from mstop_writer.schema import devices_name


def _sampler(run_dir, **kw):
    warned: list[tuple[str, str]] = []
    events: list[dict] = []
    s = DeviceSampler.start_if_present(str(run_dir), kw.pop("interval", 0.2), warn=lambda m, k: warned.append((k, m)),
                                       event=lambda kind, **f: events.append({"kind": kind, **f}), **kw)
    return s, warned, events


def rows_of(run_dir) -> list[dict[str, str]]:
    p = run_dir / devices_name(host_name())
    if not p.exists():
        return []
    with open(p, newline="") as f:
        return list(csv.DictReader(f))


