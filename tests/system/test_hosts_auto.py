"""``--hosts auto`` (issue 41): a run read here (a shared filesystem) whose ranks ran on other hosts, as their
start events name them: a rank's log and its stacks are read on its own host over ssh (a real OpenSSH on
127.0.0.1, the "hosts" ``lo1``, ``lo2`` its aliases), never a file of the same name on this machine."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from mstop.live import MonitorOptions
from mstop.live.session import MonitorSession
from mstop.live.stacks import fresh_lines
from mstop.sources import Connection
from mstop.sources.remote import rank_host
from tests.helpers.common import ROOT, wait_for
from tests.helpers.runs import start, steps, write_events, write_rank


def shared_run(tmp_path, host: str):
    """A run directory (as on a shared filesystem) with rank 0 on ``host``, its log on that host's own disk
    (named by the start event: on loopback the same path is also here, with other lines than the host's)."""
    run = tmp_path / "run"
    log = tmp_path / "node-local" / "worker_0.log"
    log.parent.mkdir()
    log.write_text("step 1 ok\nTraceback (most recent call last):\nRuntimeError: the host's own words\n")
    write_rank(run, 0, steps(1, 10, loss=1.0, step_time=0.5))
    write_events(run, 0, [start("s1", 1000.0, host=host, pid=4242, boot_id="b", pid_start=1, logs=[str(log)])])
    return run, log


def session(run, server, hosts: bool) -> MonitorSession:
    conn = Connection(server.options(), 10.0, hosts=hosts)
    s = MonitorSession([str(run)], MonitorOptions(connection=conn, follow=False))
    s.source.read_all()
    return s


def test_a_ranks_log_is_read_on_its_own_host(server, tmp_path):
    run, log = shared_run(tmp_path, "lo1")
    pane = session(run, server, hosts=True).log_pane(0)
    assert pane.path == f"lo1:{log}", pane.path  # read on lo1, over ssh
    pane.tail.read()
    assert wait_for(lambda: "RuntimeError: the host's own words" in pane.lines, 30), pane.lines
    local = session(run, server, hosts=False).log_pane(0)  # without --hosts: the file of that name here
    assert local.path == str(log)


def test_a_ranks_stacks_are_taken_on_its_own_host(server, tmp_path):
    """The dump is asked of lo1, and checked there: lo1 is this machine under another name, so its own
    identity check says the rank is not there (without --hosts: refused here without asking)."""
    run, _ = shared_run(tmp_path, "lo1")
    here = socket.gethostname()
    there = fresh_lines(session(run, server, hosts=True).store, Connection(server.options(), 10.0, hosts=True))
    text = "\n".join(t for _, t in there)
    assert f"it runs on lo1, not on {here}" in text, text  # the host's words: the request went there
    mine = fresh_lines(session(run, server, hosts=False).store, Connection(server.options(), 10.0))
    assert "it runs on lo1, not on this host" in "\n".join(t for _, t in mine)


@pytest.mark.parametrize("host", ["-oProxyCommand=touch /tmp/pwned", "a b", "lo1;id", "", None, 7,
                                  socket.gethostname()])
def test_a_start_events_host_that_is_no_host_name_or_this_host_is_never_reached(host):
    assert rank_host({"host": host}) is None


def test_hosts_takes_auto_only_and_is_the_monitors():
    """The monitor's flag (its L and t views read there); summary has no use for it and refuses it."""
    from mstop.cli import parse_command_line

    assert parse_command_line([".", "--hosts", "auto"]).connection.hosts is True
    assert parse_command_line(["."]).connection.hosts is False
    for argv in ([".", "--hosts", "all"], ["summary", ".", "--hosts", "auto"]):
        proc = subprocess.run([sys.executable, "-m", "mstop", *argv], cwd=ROOT, capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 2, (argv, proc.stderr)
