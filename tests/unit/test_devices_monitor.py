"""The NPUs on the monitor: real writer processes sampling a stand-in npu-smi (tests/helpers/npu_smi.py; its outputs as
published, tests/data/npu-smi/SOURCES.md), then the same devices seen by summary --json, the ranks view, the
memory panel, the alerts, over ssh, and in a devices file the monitor must not trust."""

from __future__ import annotations

from mstop.engine.devices import host_key
from mstop_writer.devices import host_name
from mstop_writer.schema import devices_name


def test_host_names_join_as_the_writer_writes_them():
    assert host_key("node 1/a") == "node_1_a" and host_key(host_name()) == host_name()
    assert devices_name(host_name()).startswith("host_")


