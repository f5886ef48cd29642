"""Issue 58, item 1: whether a plain job's worker ran on this host, from its own log (the address its
connection to msrun's master came from), read from any bytes without failing."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mstop.sources.procwatch import ran_here

LINE = ("[WARNING] DISTRIBUTED({pid},7f1e02dccb80,python):2026-12-06-14:02:21.189.895 "
        "[mindspore/ccsrc/cluster/rpc/tcp/tcp_comm.cc:485] Connect] Connection 11 source: {ip}:42116, "
        "destination: 10.9.9.9:8129\n")


def test_a_worker_whose_connection_came_from_this_host_ran_here(tmp_path):
    log = tmp_path / "worker_0.log"
    log.write_text("epoch: 1 step: 1, loss is 0.5\n" + LINE.format(pid=4321, ip="127.0.0.1"))
    assert ran_here(str(log), 4321)
    assert not ran_here(str(log), 4322)  # another process's line says nothing of this one
    log.write_text(LINE.format(pid=4321, ip="[::1]"))
    assert ran_here(str(log), 4321)


def test_an_address_of_another_host_or_no_address_says_nothing(tmp_path):
    log = tmp_path / "worker_0.log"
    log.write_text(LINE.format(pid=4321, ip="198.51.100.7"))  # TEST-NET-2: documentation only
    assert not ran_here(str(log), 4321)
    log.write_text("[WARNING] ME(4321,7f3a00000000,python):2026-12-03-10:00:00.000.000 [x.cc:1] f] hello\n")
    assert not ran_here(str(log), 4321)
    assert not ran_here(str(tmp_path / "missing.log"), 4321)


@given(st.binary(max_size=2000), st.integers(min_value=0, max_value=2**31))
def test_any_bytes_give_an_answer(tmp_path_factory, blob, pid):
    log = tmp_path_factory.mktemp("w") / "worker_0.log"
    log.write_bytes(blob)
    assert ran_here(str(log), pid) in (True, False)
