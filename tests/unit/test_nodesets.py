"""Node sets as sources (issue 41 step 1): ``node[001-512]:/path`` in ClusterShell's NodeSet syntax is one
run over all those hosts; ``%h`` in the path is each host's name."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mstop.sources import SourceError, Sources, check_spec
from mstop.sources.nodesets import MAX_HOSTS, expand, is_node_set
from mstop.sources.remote import RemoteSource, parse_target


def test_a_node_set_is_one_spec_a_host_in_the_sets_order():
    assert expand("node[01-03]:/scratch/%h/run") == ["node01:/scratch/node01/run", "node02:/scratch/node02/run",
                                                      "node03:/scratch/node03/run"]
    assert expand("me@rack[1-2]-n[1-2]:/r") == ["me@rack1-n1:/r", "me@rack1-n2:/r", "me@rack2-n1:/r",
                                               "me@rack2-n2:/r"]
    assert sorted(expand("login,n[1-2]:/x")) == ["login:/x", "n1:/x", "n2:/x"]
    for plain in ("node1:/a", "/local/path", "./a:b", "[::1]:/x", "me@[fe80::1]:/y", "relative/run"):
        assert expand(plain) == [plain] and not is_node_set(plain)


@pytest.mark.parametrize("spec, words", [("node[5-1]:/x", "not a node set: 'node[5-1]'"),
                                         ("node[1-1000000]:/x", "names 1,000,000 hosts: more than 100,000"),
                                         ("n[1-2]:", "no remote path after the colon"),
                                         ("n[1-2]:/x", None)])
def test_a_set_that_cannot_be_read_is_said_never_guessed(spec, words):
    if words is None:
        assert check_spec(spec, exists=False) == parse_target("n1:/x")
        return
    with pytest.raises(SourceError, match=words.replace("[", r"\[").replace("]", r"\]")):
        check_spec(spec, exists=False)


def test_sources_over_a_node_set_are_one_remote_source_a_host():
    from mstop.engine.store import Store

    src = Sources(["gpu[1-3]:/runs/%h/exp", "gpu2:/runs/gpu2/exp"], Store())
    assert [type(s) for s in src.items] == [RemoteSource] * 3  # a host named twice is read once
    assert [s.label for s in src.items] == ["gpu1:/runs/gpu1/exp", "gpu2:/runs/gpu2/exp", "gpu3:/runs/gpu3/exp"]
    assert src.label == "gpu[1-3]:/runs/%h/exp gpu2:/runs/gpu2/exp"


@given(st.text("abcxyz", min_size=1, max_size=4), st.lists(st.tuples(st.integers(0, 999), st.integers(0, 30)),
                                                           min_size=1, max_size=4), st.integers(1, 4))
def test_any_range_expands_to_its_hosts_each_a_target(prefix, spans, pad):
    """Whatever ranges: as many specs as distinct numbers, each a ``host:/path`` ssh can be given."""
    parts = [f"{a:0{pad}d}-{a + n:0{pad}d}" if n else f"{a:0{pad}d}" for a, n in spans]
    spec = f"{prefix}[{','.join(parts)}]:/p/%h"
    want = {f"{prefix}{k:0{pad}d}" for a, n in spans for k in range(a, a + n + 1)}
    got = expand(spec)
    assert len(got) == len(set(got)) == len(want) <= MAX_HOSTS
    for one in got:
        t = parse_target(one)
        assert t is not None and t.host in want and t.path == f"/p/{t.host}"


def test_p_over_a_node_set_is_a_clush_command_for_every_host(tmp_path):
    """The profile request over a node set: one ``clush`` line (with the monitor's ssh options) that writes
    each host's request, ``%h`` left for clush to put each host's name in."""
    import shlex

    from mstop.live import MonitorOptions, MonitorSession
    from mstop.sources.protocol import Connection

    cfg = tmp_path / "ssh config"
    session = MonitorSession(["n[1-2]:/r/%h/run"], MonitorOptions(connection=Connection.of(str(cfg), [])))
    words = shlex.split(session.profile_command())
    assert words == ["clush", "-o", f"-F {cfg}", "-w", "n[1-2]", "echo 10 > /r/%h/run/profile.request"], words


def test_hosts_in_the_same_state_fold_into_one_header_line():
    """64 hosts connecting are one line, not 64; a host in a state of its own keeps its own line, its name in
    its words; connected hosts are not said."""
    from mstop.engine.store import Store
    from mstop.sources import Sources

    src = Sources(["lo[1-64]:/runs/%h/exp"], Store())
    for item in src.items:
        item.state.connection = "connecting"
    assert src.states() == ["lo[1-64] (64 hosts): connecting"]
    for item in src.items[:60]:
        item.state.connection = "connected"
    bad = src.items[61]
    bad.state.connection = f"reconnecting, try 2 in 2 s: ssh {bad.target.host} failed (exit 255): refused"
    src.items[62].state.connection = "reconnecting, try 2 in 2 s: ssh lo63 failed (exit 255): refused"
    assert src.states() == ["lo[61,64] (2 hosts): connecting",
                            "lo[62-63] (2 hosts): reconnecting, try 2 in 2 s: ssh %h failed (exit 255): refused"]
    src.items[62].state.connection = "connected"
    assert src.states()[1] == "lo62: reconnecting, try 2 in 2 s: ssh lo62 failed (exit 255): refused"


@given(st.lists(st.tuples(st.integers(0, 40), st.integers(1, 3)), max_size=40, unique_by=lambda t: t[0]),
       st.sets(st.integers(0, 40)))
def test_folded_hosts_each_appear_once_quiet_and_alike_in_a_fold(order, apart_ids):
    """The ranks view's folding (mstop.view.hostfold): every host is on one line, alone or in one fold; a
    fold holds two or more hosts with nothing to say and the same number of ranks, where its first host was."""
    from mstop.view.hostfold import Fold, fold_hosts

    hosts = [(f"n{i}", n) for i, n in order]
    apart = {f"n{i}" for i in apart_ids}
    lines = fold_hosts(hosts, apart)
    seen = [h for x in lines for h in (x.hosts if isinstance(x, Fold) else [x])]
    assert sorted(seen) == sorted(h for h, _ in hosts)
    count = dict(hosts)
    for x in lines:
        if isinstance(x, Fold):
            assert len(x.hosts) >= 2 and not set(x.hosts) & apart
            assert {count[h] for h in x.hosts} == {x.ranks_each}
    firsts = [x.hosts[0] if isinstance(x, Fold) else x for x in lines]
    order_of = [h for h, _ in hosts]
    assert firsts == sorted(firsts, key=order_of.index)


@pytest.mark.parametrize("spec, words", [
    ("n[1-100000000]:/x", "names up to 100,000,000 hosts: more than 100,000"),
    ("n[1-99999999999999999999999]:/x", "names up to about 10^22 hosts"),  # past 64 bits: ClusterShell asserted
    ("r[1-10000]-n[1-100000]:/x", "names up to 1,000,000,000 hosts"),
])
def test_a_range_too_large_is_refused_before_it_is_expanded(spec, words):
    """Issue 58, item 11: 10^8 hosts took ClusterShell minutes and 7 GB to expand before the cap applied;
    a range past 64 bits raised its AssertionError. Both are refused from the text, at once."""
    import time

    t0 = time.monotonic()
    with pytest.raises(SourceError, match=words.replace("^", r"\^")):
        expand(spec)
    assert time.monotonic() - t0 < 1.0


@given(st.lists(st.tuples(st.integers(0, 300), st.integers(0, 300), st.integers(1, 5)), min_size=1, max_size=4),
       st.booleans())
def test_the_bound_is_never_below_the_sets_count(spans, two):
    """most_hosts is an upper bound (repeats not removed): a set within the cap by it is within by NodeSet."""
    from ClusterShell.NodeSet import NodeSet

    from mstop.sources.nodesets import most_hosts

    group = ",".join(f"{a}-{b}/{s}" if b > a else str(a) for a, b, s in spans)
    names = f"n[{group}]" + (f"-r[{group}]" if two else "")
    assert most_hosts(names) >= len(NodeSet(names))


def test_a_topology_file_that_is_a_fifo_or_names_huge_ranges_is_refused(tmp_path):
    """A FIFO blocked ClusterShell's read forever; a route over 10^8 hosts expanded into gigabytes."""
    import os

    from mstop.sources.fanout import check_topology

    fifo = tmp_path / "topology.conf"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        check_topology(str(fifo))
    big = tmp_path / "big.conf"
    big.write_text("[routes]\nlogin: gw[1-100000000]\n")
    with pytest.raises(ValueError, match="names more than 100,000 hosts"):
        check_topology(str(big))
    huge = tmp_path / "huge.conf"
    huge.write_bytes(b"#" * (2 << 20))
    with pytest.raises(ValueError, match="more than a topology file's"):
        check_topology(str(huge))
