"""The ClusterShell transport's parts that run without a host (issue 41): the follower's line frames read
back, the command each host is started with, the room for many hosts' pipes. Against real hosts:
tests/system/test_fanout_sshd.py."""

from __future__ import annotations

import base64
import json
import re
import resource
import shlex
import zlib

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mstop.engine.store import Store
from mstop.sources import Connection
from mstop.sources.fanout import BOOTSTRAP, Fanout, room_for_files
from mstop.sources.remote import RemoteError, RemoteSource, Target


def source(path: str = "/runs/exp1") -> RemoteSource:
    return RemoteSource(Target("node7", path), Store())


def line(header: dict, payload: bytes = b"") -> bytes:
    z = zlib.compress(payload, 1) if payload else b""
    return json.dumps({**header, "n": len(z), "z": base64.b64encode(z).decode(), "clock": 1.0}).encode()


def test_a_line_frame_feeds_the_store_as_the_same_frame_read_from_a_pipe():
    rows = b"time,step,loss\n1000.0,1,2.5\n1001.0,2,2.25\n"
    src = source()
    src.take_line(line({"files": [["rank0.csv", 0, len(rows), False]], "caught_up": True}, rows))
    assert src.store.ranks[0].col("loss").tolist() == [2.5, 2.25]


@pytest.mark.parametrize("frame, words", [
    ({"files": [], "n": 4, "z": "!!!!"}, "not the 4 bytes of base64"),
    ({"files": [], "n": 9, "z": base64.b64encode(b"abc").decode()}, "not the 9 bytes of base64"),
    ({"files": [], "n": 0, "z": 5}, "not the 0 bytes of base64"),
    ({"files": [["rank0.csv", 0, 99, False]], "n": 0, "z": ""}, "add up to more bytes than it sent"),
    ({"files": "rank0.csv", "n": 0, "z": ""}, "is not a list of [name, offset, length, reset"),
    ({"files": [], "n": -1, "z": ""}, "announces -1 bytes"),
])
def test_a_line_frame_the_follower_never_sends_is_named(frame, words):
    with pytest.raises(RemoteError, match="node7") as e:
        source().take_line(json.dumps(frame).encode())
    assert words in str(e.value)


@given(st.one_of(st.binary(max_size=300), st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(
        ["files", "n", "z", "clock", "error", "events", "refused", "mtime", "caught_up"]), inner, max_size=6),
    max_leaves=12).map(lambda v: json.dumps(v).encode())))
@example(b'{"files": [["rank0.csv", 0, 3, false]], "n": 11, "z": "eJwrSs3JBAADMAF+"}')
def test_any_line_is_a_frame_or_a_reason_never_an_exception(raw):
    try:
        header = source().take_line(raw)
    except RemoteError as e:
        assert str(e)
    else:
        assert isinstance(header, dict)


def test_each_hosts_command_is_mstops_ssh_with_the_users_options_and_no_path():
    """The command ClusterShell runs (here or on a gateway) for a host: ssh with the user's options first,
    a ``%`` of theirs kept from ClusterShell's patterns, the host as ``%h``, the constant bootstrap told the
    host's name and the viewer's token (a host's new follower ends its old one); the run's path (user text) is
    never on it: it goes on standard input."""
    conn = Connection(("-F", "/etc/my ssh", "-o", "ControlPath=~/.ssh/cm-%C"), 7.0)
    fan = Fanout([RemoteSource(Target("alice@node1", "/runs/$(touch x)"), Store())], connection=conn)
    cmd = fan.command()
    assert cmd.startswith("exec ssh -F '/etc/my ssh' -o 'ControlPath=~/.ssh/cm-%%C' ")
    assert "ConnectTimeout=7" in cmd and "ServerAliveInterval=5" in cmd and "ControlMaster" not in cmd
    words = shlex.split(cmd.replace("%%", "%"))
    assert words[-2:] == ["%h", f"{BOOTSTRAP} %h {fan.token} 0"] and re.fullmatch("[0-9a-f]{16}", fan.token)
    assert words[words.index("-l") + 1] == "alice"
    assert "/runs" not in cmd


def test_many_hosts_raise_the_open_files_limit_to_fit_their_pipes():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 4096:
        pytest.skip(f"the hard limit here is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))  # a login node's usual soft limit
    try:
        room_for_files(4 * 600)  # 600 hosts, flat
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= 4 * 600
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _proc(root, pid: int, args: list[str], ticks: int) -> None:
    """A process as /proc shows it: its command line and its stat line (field 22, its start time)."""
    d = root / str(pid)
    d.mkdir()
    (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in args) + b"\0")
    (d / "stat").write_text(f"{pid} (python3) S " + " ".join(["0"] * 18) + f" {ticks} 0 0\n")


def test_a_hosts_latest_follower_ends_only_the_same_viewers_other_followers_of_that_host(tmp_path):
    """CI: through a gateway, a host's first ssh timed out under load and was started again; ClusterShell ends
    a gateway's worker whole, so the first follower ran on beside the second (9 ssh for 8 hosts). The latest
    launch of a viewer (its token, then its launch count, on the command line) ends the host's others: of an
    earlier launch, or of its own launch started before it (ClusterShell starts a lost gateway's hosts again
    in their worker). A follower that finds a later launch running is itself the one to end. Not another
    viewer's, another host's, or a process that only names them."""
    import os

    from mstop.sources.followers import follower

    me, token, other = os.getpid(), "0123456789abcdef", "fedcba9876543210"
    root = tmp_path / "proc"
    root.mkdir()
    prog = ["python3", "-u", "-c", "exec(compile(b, 'mstop-follower', 'exec'))"]
    _proc(root, me, [*prog, "lo3", token, "5"], 5000)
    _proc(root, 101, [*prog, "lo3", token, "4"], 4000)  # an earlier launch's: ended
    _proc(root, 107, [*prog, "lo3", token, "4"], 6000)  # an earlier launch's started again later: ended
    _proc(root, 108, [*prog, "lo3", token, "5"], 4000)  # this launch's, started before: ended
    _proc(root, 102, [*prog, "lo4", token, "4"], 4000)  # another host's
    _proc(root, 103, [*prog, "lo3", other, "4"], 4000)  # another viewer's
    _proc(root, 105, ["grep", "-c", "'mstop-follower'", "lo3", token, "4"], 4000)  # names it, runs no program
    _proc(root, 106, ["vim", "notes", "lo3", token, "4"], 4000)
    older, newer = follower.superseded("lo3", token, 5, proc=str(root))
    assert sorted(older) == [101, 107, 108] and not newer
    _proc(root, 109, [*prog, "lo3", token, "6"], 3000)  # a later launch runs: this one is to end
    assert follower.superseded("lo3", token, 5, proc=str(root))[1] is True
