"""The NPUs on the monitor: real writer processes sampling a stand-in npu-smi (tests/helpers/npu_smi.py; its outputs as
published, tests/data/npu-smi/SOURCES.md), then the same devices seen by summary --json, the ranks view, the
memory panel, the alerts, over ssh, and in a devices file the monitor must not trust."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mstop.engine.devices import DevicesParser, host_key
from mstop_writer.devices import host_name
from mstop_writer.schema import DEVICE_COLUMNS, devices_name


def test_host_names_join_as_the_writer_writes_them():
    assert host_key("node 1/a") == "node_1_a" and host_key(host_name()) == host_name()
    assert devices_name(host_name()).startswith("host_")


ROW = st.lists(st.one_of(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12),
                         st.sampled_from(["", "nan", "inf", "-1", "1e308", "0.5", "OK", "7", "²", "9" * 5000,
                                          "1 ² 3", '"open', "12345678901234567890"])),
               min_size=len(DEVICE_COLUMNS) - 2, max_size=len(DEVICE_COLUMNS) + 2)


@given(st.lists(ROW, max_size=20))
def test_devices_parser_counts_every_line(rows):
    """Every complete line of a hostile devices file is a sample or counted bad (a quote never spans lines:
    an open one swallowed the rows after it; a pids cell of ``²`` or 5,000 digits crashed summary); numbers
    stay finite and text comes out without control codes."""
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_NONE, escapechar="\\")
    w.writerow(DEVICE_COLUMNS)
    for r in rows:
        buf.write(",".join(r) + "\n")  # as a hostile file holds it: quotes, newlines and all
    blob = buf.getvalue().encode()
    samples, bad = DevicesParser().parse(blob)
    header = ",".join(DEVICE_COLUMNS)
    lines = [ln.rstrip("\r") for ln in buf.getvalue().split("\n")[1:]]
    assert len(samples) + bad == len([ln for ln in lines if ln.strip() and ln != header])
    for s in samples:
        assert all(p < 1 << 40 for p in s.pids)
        assert all(x is None or abs(x) < float("inf") for x in (s.aicore, s.temperature, s.hbm_used, s.power))
        assert all(ord(ch) >= 32 for t in (s.host, s.name or "", s.health or "") for ch in t)
