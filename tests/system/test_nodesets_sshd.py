"""Node sets as sources through a real OpenSSH (issue 41): ``lo[1-16]:/tmp/.../%h/run``, sixteen ssh
aliases of 127.0.0.1, each host's run directory its own (``%h``), read as one run: ``summary --json`` equals
the same sixteen directories read locally as one run. The transport's faults: tests/system/test_fanout_sshd.py."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import sshd
from tests.helpers.common import ROOT
from tests.helpers.runs import steps, write_rank, written_at


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
        # the header's "ranks seen" gives way to its notes (these rows are dated 1970: a clock note each)
        await settle(pilot, lambda: sorted(app.screen.session.store.ranks) == [0, 1]
                     and "step 30" in text(app.query_one(Header)), tries=1000)


def test_a_folder_of_runs_over_a_node_set_lists_each_run_once_with_every_hosts_ranks(server, tmp_path):
    """``summary 'lo[1-2]:/.../%h/runs'``: each host holds runs a and b (one rank each of a world of 2, and a
    run only lo2 has): each run is listed once, read over the whole set, with every host's ranks."""
    for h in (1, 2):
        for name, last in (("a", 12), ("b", 20)):
            write_rank(tmp_path / f"lo{h}" / "runs" / name, h - 1, steps(1, last, loss=1.0, step_time=0.5))
    write_rank(tmp_path / "lo2" / "runs" / "c", 0, steps(1, 5, loss=1.0, step_time=0.5))
    proc = summary(f"lo[1-2]:{tmp_path}/%h/runs", "--json", "-F", server.config)
    assert proc.returncode == 0, proc.stderr
    runs = {r["run_dir"]: r for r in json.loads(proc.stdout)["runs"]}
    base = f"lo[1-2]:{tmp_path}/%h/runs"
    assert set(runs) == {f"{base}/a", f"{base}/b", f"lo2:{tmp_path}/lo2/runs/c"}, sorted(runs)  # c: lo2 only
    assert (runs[f"{base}/a"]["ranks"], runs[f"{base}/a"]["step"]) == (2, 12)
    assert (runs[f"{base}/b"]["ranks"], runs[f"{base}/b"]["step"]) == (2, 20)
    assert (runs[f"lo2:{tmp_path}/lo2/runs/c"]["ranks"], runs[f"lo2:{tmp_path}/lo2/runs/c"]["step"]) == (1, 5)
    # the same runs as a table, each once; a set whose hosts all fail says which
    table = summary(f"lo[1-2]:{tmp_path}/%h/runs", "-F", server.config)
    assert table.returncode == 0 and table.stdout.count("/%h/runs/a") == 1, table.stdout
    gone = summary(f"deadport[1-2]:{tmp_path}/%h/runs", "-F", server.config, "--connect-timeout", "3")
    assert gone.returncode == 2 and "deadport1" in gone.stderr and "Traceback" not in gone.stderr, gone.stderr


def test_hosts_that_never_answer_hold_up_the_runs_list_once_not_once_each(server, tmp_path):
    """Four "hosts" whose port takes the connection and never speaks (a hung node: ssh waits out its connect
    timeout): a refresh of the set reads the live hosts' runs and names the four, in about one timeout, as
    the hosts are refreshed at once (one after another it took four: 12 s here)."""
    import socket
    import time

    mute = socket.socket()
    mute.bind(("127.0.0.1", 0))
    mute.listen(16)  # the kernel takes the connections; nothing ever answers them
    config = tmp_path / "ssh_config"
    config.write_text(server.config.read_text() + "Host mute*\n    HostName 127.0.0.1\n"
                      f"    Port {mute.getsockname()[1]}\n")
    for h in (1, 2):
        write_rank(tmp_path / f"lo{h}" / "runs" / "a", h - 1, steps(1, 12, loss=1.0, step_time=0.5))
    try:
        t0 = time.monotonic()
        proc = summary(f"lo[1-2],mute[1-4]:{tmp_path}/%h/runs", "--json", "-F", config, "--connect-timeout", "3")
        took = time.monotonic() - t0
    finally:
        mute.close()
    assert proc.returncode == 0, proc.stderr
    runs = json.loads(proc.stdout)["runs"]
    assert [(r["ranks"], r["step"]) for r in runs] == [(2, 12)], runs
    assert all(f"mute{i}" in proc.stderr for i in range(1, 5)), proc.stderr
    assert took < 9, f"{took:.1f} s: the silent hosts were waited for one after another"


async def test_the_runs_list_over_a_node_set_shows_each_run_once_and_opens_it_over_the_set(server, tmp_path):
    """``mstop 'lo[1-2]:/.../%h/runs'``: the runs list, each run once with its hosts (``lo[1-2]``) and both
    hosts' ranks; Enter opens the monitor over the set."""
    from mstop.app.runs import RunsApp
    from mstop.app.widgets import Header
    from mstop.app.widgets.runs import RunsTable
    from mstop.commands.arguments import runs_watches
    from mstop.live import MonitorOptions
    from tests.helpers.app_common import settle, text

    for h in (1, 2):
        for name, last in (("a", 12), ("b", 20)):
            write_rank(tmp_path / f"lo{h}" / "runs" / name, h - 1, steps(1, last, loss=1.0, step_time=0.5))
    spec = f"lo[1-2]:{tmp_path}/%h/runs"
    watches = runs_watches([spec], connection=server.connection())
    assert watches is not None and len(watches) == 1
    app = RunsApp(watches, MonitorOptions(connection=server.connection()), label=spec, follow=False)
    async with app.run_test(size=(160, 30)) as pilot:
        table = app.runs_screen.query_one(RunsTable)
        await settle(pilot, lambda: table.row_count == 2, tries=500)
        rows = {str(table.get_row_at(i)[1]): [str(c) for c in table.get_row_at(i)] for i in range(table.row_count)}
        assert set(rows) == {"a", "b"} and rows["b"][3].startswith("20") and rows["a"][13] == "lo[1-2]", rows
        table.focus()
        table.move_cursor(row=[str(table.get_row_at(i)[1]) for i in range(2)].index("b"))
        await pilot.press("enter")
        await settle(pilot, lambda: "step 20" in text(app.screen.query_one(Header)), tries=1000)
        assert app.screen.session.source.label == f"lo[1-2]:{tmp_path}/%h/runs/b"
        assert sorted(app.screen.session.store.ranks) == [0, 1]  # both hosts' ranks


def test_a_rank_two_hosts_hold_is_shown_once_and_said_not_merged(server, tmp_path):
    """Issue 58 item 8: a rank two hosts of a set both hold (a wrong rank variable) is never merged silently into
    one rank: the second host's is not shown, and ``summary`` says which hosts."""
    for h, loss in ((1, 1.0), (2, 5.0)):
        run = tmp_path / f"lo{h}" / "run"
        write_rank(run, 0, steps(1, 10, loss=loss, step_time=0.5))  # both say they are rank 0
        write_rank(run, h, steps(1, 10, loss=loss, step_time=0.5))
        written_at(run, 1011.0)
    spec = f"lo[1-2]:{tmp_path}/%h/run"
    got = subprocess.run([sys.executable, "-m", "mstop", "summary", "--json", spec, "-F", server.config], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert got.returncode in (0, 1), got.stderr
    js = json.loads(got.stdout)
    assert js["ranks"] == 3 and js["rows"] == 30, (js["ranks"], js["rows"])  # rank 0 once, not 20 rows of it
    table = subprocess.run([sys.executable, "-m", "mstop", "summary", spec, "-F", server.config], cwd=ROOT,
                           capture_output=True, text=True, timeout=120).stdout
    line = next(x for x in table.splitlines() if "not merged" in x)
    assert "rank 0" in line and "lo1" in line and "lo2" in line, table
