"""Node sets as sources through a real OpenSSH (issue 41): ``lo[1-16]:/tmp/.../%h/run``, sixteen ssh
aliases of 127.0.0.1, each host's run directory its own (``%h``), read as one run: ``summary --json`` equals
the same sixteen directories read locally as one run. The transport's faults: tests/system/test_fanout.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import sshd
from tests.helpers.common import ROOT
from tests.helpers.runs import steps, write_rank, written_at


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = sshd.start_or_skip(tmp_path_factory.mktemp("sshd"))
    srv.config.write_text(srv.config.read_text() + sshd.alias(srv, "lo*"))  # lo1, lo2 ...: this machine
    yield srv
    sshd.stop(srv)


def summary(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mstop", "summary", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=180)


def test_a_node_set_of_sixteen_loopback_hosts_reads_as_the_same_dirs_read_locally(server, tmp_path):
    dirs = []
    for h in range(1, 17):  # host h holds ranks 2h-2 and 2h-1 of a world of 32
        run = tmp_path / f"lo{h}" / "run"
        for r in (2 * h - 2, 2 * h - 1):
            write_rank(run, r, steps(1, 40, loss=lambda s, r=r: 2.0 / s + r / 100, step_time=0.5, tokens=100))
        written_at(run, 1021.0)  # an old run: its figures do not move between the two reads
        dirs.append(run)
    local = json.loads(summary(*dirs, "--json").stdout)
    proc = summary(f"lo[1-16]:{tmp_path}/%h/run", "--json", "-F", server.config)
    assert proc.returncode == 0, proc.stderr
    remote = json.loads(proc.stdout)
    assert remote["ranks"] == 32 and remote["step"] == 40
    sshd.assert_same_summary(remote, local, f"lo[1-16]:{tmp_path}/%h/run")


def test_a_node_set_with_a_host_that_does_not_answer_names_it(server, tmp_path):
    """``deadport`` answers no ssh: the set's read fails naming it, never a traceback."""
    (tmp_path / "lo1" / "run").mkdir(parents=True)
    proc = summary(f"lo1,deadport:{tmp_path}/%h/run", "--json", "-F", server.config, "--connect-timeout", "3")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "deadport" in proc.stderr, proc.stderr


async def test_the_monitor_follows_a_node_set_as_one_run(server, tmp_path):
    """``mstop 'lo[1-2]:/.../%h/run'``: one monitor, every host's ranks in it."""
    from mstop.app import MonitorApp
    from mstop.app.widgets import Header
    from mstop.live import MonitorOptions
    from tests.helpers.app_common import settle, text

    for h in (1, 2):
        write_rank(tmp_path / f"lo{h}" / "run", h - 1, steps(1, 30, loss=1.0, step_time=0.5, tokens=100))
    app = MonitorApp(f"lo[1-2]:{tmp_path}/%h/run", options=MonitorOptions(connection=server.connection()))
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot, lambda: "ranks seen 2" in text(app.query_one(Header)), tries=1000)
        assert "step 30" in text(app.query_one(Header))


def test_a_folder_of_runs_over_a_node_set_is_refused_with_words(server, tmp_path):
    for h in (1, 2):
        write_rank(tmp_path / f"lo{h}" / "runs" / "a", 0, steps(1, 5, loss=1.0, step_time=0.5))
        write_rank(tmp_path / f"lo{h}" / "runs" / "b", 0, steps(1, 5, loss=1.0, step_time=0.5))
    proc = summary(f"lo[1-2]:{tmp_path}/%h/runs", "-F", server.config)
    assert proc.returncode == 2 and "a node set in the runs list is not read yet" in proc.stderr, \
        (proc.returncode, proc.stderr)
    # a node set's run beside a folder of runs: the list would show its first host's run alone
    proc = summary(f"lo[1-2]:{tmp_path}/%h/runs/a", tmp_path / "lo1" / "runs", "-F", server.config)
    assert proc.returncode == 2 and "a node set in the runs list is not read yet" in proc.stderr, \
        (proc.returncode, proc.stderr)
