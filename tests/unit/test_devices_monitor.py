"""The NPUs on the monitor: real writer processes sampling a stand-in npu-smi (tests/helpers/npu_smi.py; its outputs as
published, tests/data/npu-smi/SOURCES.md), then the same devices seen by summary --json, the ranks view, the
memory panel, the alerts, over ssh, and in a devices file the monitor must not trust."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mstop.engine.devices import DevicesParser, host_key
from mstop_writer.devices import host_name
from mstop_writer.schema import DEVICE_COLUMNS, devices_name

ROW = st.lists(st.one_of(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12),
                         st.sampled_from(["", "nan", "inf", "-1", "1e308", "0.5", "OK", "7"])),
               min_size=len(DEVICE_COLUMNS) - 2, max_size=len(DEVICE_COLUMNS) + 2)

@settings(max_examples=300, deadline=None)
@given(st.lists(ROW, max_size=20))
def test_devices_parser_counts_every_line(rows):
    """Every complete line of a hostile devices file is a sample or counted bad; numbers stay finite and
    text comes out without control codes."""
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(DEVICE_COLUMNS)
    for r in rows:
        w.writerow(r)
    blob = buf.getvalue().encode()
    samples, bad = DevicesParser().parse(blob)
    lines = list(csv.reader(io.StringIO(buf.getvalue())))[1:]
    assert len(samples) + bad == len([ln for ln in lines if ln and ln != list(DEVICE_COLUMNS)])
    for s in samples:
        assert all(x is None or abs(x) < float("inf") for x in (s.aicore, s.temperature, s.hbm_used, s.power))
        assert all(ord(ch) >= 32 for t in (s.host, s.name or "", s.health or "") for ch in t)


def test_host_names_join_as_the_writer_writes_them():
    assert host_key("node 1/a") == "node_1_a" and host_key(host_name()) == host_name()
    assert devices_name(host_name()).startswith("host_")


