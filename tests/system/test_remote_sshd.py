"""Watching a run over SSH against a real OpenSSH server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mstop.engine.store import Store
from mstop.live import MonitorOptions
from mstop.live.session import MonitorSession
from mstop.sources.remote import RemoteError, RemoteSource, Target
from mstop_writer import MetricsWriter
from tests.helpers import sshd
from tests.helpers.common import ROOT, processes_with, wait_for
from tests.helpers.log_trust import SECRET, T0, forged_run, private_file
from tests.helpers.runs import steps, write_rank, written_at


def summary(*args):
    return subprocess.run([sys.executable, "-m", "mstop", "summary", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_summary_over_ssh_equals_local(server, tmp_path):
    run = tmp_path / "run"
    for r in range(3):
        write_rank(run, r, steps(1, 50, loss=lambda s: 1.0 / s, step_time=0.5, tokens=100))
    written_at(run, 1051.0)  # an old run (a live one's figures move between the two reads)
    local = json.loads(summary(run, "--json").stdout)
    proc = summary(f"testhost:{run}", "--json", "-F", server.config)
    assert proc.returncode == 0, proc.stderr
    remote = json.loads(proc.stdout)
    sshd.assert_same_summary(remote, local, f"testhost:{run}")


def test_follow_live_and_survive_a_killed_connection(server, tmp_path):
    run = tmp_path / "live"
    run.mkdir()
    store = Store()
    src = RemoteSource(Target("testhost", str(run)), store, poll=0.05, connection=server.connection())
    src.follow()
    w = MetricsWriter(run, rank=0, world_size=1, heartbeat_interval=3600)
    try:
        for s in range(1, 21):
            w.log(s, loss=float(s), step_time=0.1)
        assert wait_for(lambda: store.rows == 20)
        for pid in server.session_pids():  # the network blip: the sshd child serving us dies
            os.kill(pid, signal.SIGKILL)
        for s in range(21, 41):
            w.log(s, loss=float(s), step_time=0.1)
            time.sleep(0.01)
        assert wait_for(lambda: store.rows == 40, timeout=40), src.state.connection
        time.sleep(0.5)
        assert store.ranks[0].col("step").tolist() == [float(s) for s in range(1, 41)]  # none lost, none twice
        assert store.ranks[0].col("loss").tolist() == [float(s) for s in range(1, 41)]
        assert any("failed" in n or "closed" in n for n in src.state.notes)
    finally:
        w.close()
        src.stop()


@pytest.mark.parametrize("path", ["/tmp/x; touch /tmp/pwned", "$(touch /tmp/pwned)", "`touch /tmp/pwned`",
                                  "/tmp/'\"; touch /tmp/pwned"])
def test_injection_is_a_literal_missing_path(server, path):
    if os.path.exists("/tmp/pwned"):
        os.unlink("/tmp/pwned")
    proc = summary(f"testhost:{path}", "--json", "-F", server.config)
    assert proc.returncode == 2 and "no such directory" in proc.stderr
    assert not os.path.exists("/tmp/pwned")


def test_missing_remote_path_and_unreachable_host(server, tmp_path):
    proc = summary(f"testhost:{tmp_path}/nope", "--json", "-F", server.config)
    assert proc.returncode == 2 and f"no such directory: {tmp_path}/nope" in proc.stderr
    t0 = time.monotonic()
    proc = summary("deadport:/x", "--json", "-F", server.config, "--connect-timeout", "3")
    assert proc.returncode == 2 and "Connection refused" in proc.stderr and time.monotonic() - t0 < 30


def test_no_python3_on_the_remote(server, tmp_path):
    store = Store()
    src = RemoteSource(Target("testhost", str(tmp_path)), store, connection=server.connection(),
                       command=lambda host, _: ["ssh", *server.options(), "--", host, "python3-missing -c x"])
    with pytest.raises(RemoteError, match="no python3 on the remote host"):
        src.read_all()


def test_several_sources_local_and_remote_merged_by_rank(server, tmp_path):
    a, b = tmp_path / "node1", tmp_path / "node2"
    for r in (0, 1):
        write_rank(a, r, steps(1, 10, loss=1.0, step_time=1.0, tokens=10))
    for r in (2, 3):
        write_rank(b, r, steps(1, 12, loss=2.0, step_time=1.0, tokens=10))
    write_rank(b, 1, steps(1, 5, loss=9.0))  # rank 1 again, on the other node: reported, not merged
    proc = summary(f"testhost:{a}", str(b), "--json", "-F", server.config)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["ranks"] == 4 and out["rows"] == 2 * 10 + 2 * 12 and out["step"] == 12
    assert out["run_dir"] == f"testhost:{a} {b}"
    table = subprocess.run([sys.executable, "-m", "mstop", "summary", f"testhost:{a}", str(b), "-F",
                            str(server.config)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                           env={**os.environ, "COLUMNS": "400"}).stdout
    assert f"rank 1 is in testhost:{a} and in {b}: the second is not shown" in table


async def test_monitor_over_ssh_shows_rows_and_host_state(server, tmp_path):
    from mstop.app import MonitorApp
    from mstop.app.widgets import Header

    run = tmp_path / "run"
    write_rank(run, 0, steps(1, 30, loss=0.5, step_time=1.0))
    app = MonitorApp([f"testhost:{run}", "deadport:/x"], connection=server.connection(3))
    async with app.run_test(size=(120, 40)) as pilot:
        deadline = time.monotonic() + 30
        head = ""
        while time.monotonic() < deadline:
            await pilot.pause(0.1)
            head = str(app.query_one(Header).content)
            if "step 30" in head and "deadport: reconnecting, try" in head:
                break
        assert "step 30" in head and "deadport: reconnecting, try" in head and "Connection refused" in head


def test_compare_over_ssh_equals_local(server, tmp_path):
    for name, st in (("base", 0.5), ("other", 0.4)):
        for r in range(2):
            write_rank(tmp_path / name, r, steps(1, 80, loss=lambda s: 1.0 / s, step_time=st, tokens=100))
        written_at(tmp_path / name, 1081.0)

    def compare(*args):
        proc = subprocess.run([sys.executable, "-m", "mstop", "compare", *map(str, args), "--format", "json",
                               "-F", server.config], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    local = compare(tmp_path / "base", tmp_path / "other")
    remote = compare(f"testhost:{tmp_path / 'base'}", tmp_path / "other")  # a remote baseline, a local run
    assert remote["runs"][0]["members"] == [f"testhost:{tmp_path / 'base'}"]
    assert [r["figures"] for r in remote["runs"]] == [r["figures"] for r in local["runs"]]
    assert remote["runs"][1]["figures"]["step_time"]["change_pct"] == pytest.approx(-20.0, abs=1e-4)


def test_a_fifo_named_like_a_rank_file_over_ssh(server, tmp_path):
    run = tmp_path / "run"
    write_rank(run, 0, steps(1, 10, loss=1.0, step_time=1.0))
    os.mkfifo(run / "rank1.csv")
    (run / "rank2.csv").mkdir()
    proc = summary(f"testhost:{run}", "--json", "-F", server.config)  # before: the follower blocked in open()
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["rows"] == 10 and out["refused_files"] == {"rank1.csv": "a FIFO, not a regular file",
                                                          "rank2.csv": "a directory, not a regular file"}


def _followers(server) -> list[int]:
    """Remote followers the tier's server runs (it is this machine); another worker's are not counted."""
    return [pid for pid, _ in processes_with("mstop-follower", under=[server.proc.pid])]


def test_a_killed_mstop_leaves_nothing_behind(server, tmp_path):
    import shutil
    import tempfile

    tmp = Path(tempfile.mkdtemp(dir="/tmp"))  # short: ssh's control socket lives in it
    before = set(_followers(server))
    # --wait on a missing remote path: mstop keeps its ssh connection going until it is killed
    proc = subprocess.Popen([sys.executable, "-m", "mstop", "summary", f"testhost:{tmp_path}/later", "--wait",
                             "--poll", "0.2", "-F", str(server.config)], cwd=ROOT,
                            env={**os.environ, "TMPDIR": str(tmp)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert wait_for(lambda: any(p.name.startswith("mstop-ssh-") for p in tmp.iterdir()), 30)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)  # as timeout(1) does
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    assert wait_for(lambda: set(_followers(server)) <= before, 15), "a remote follower was left running"
    assert list(tmp.iterdir()) == [], "the ssh control directory was left behind"
    assert not processes_with(f"ControlPath={tmp}"), "an ssh process (client or mux master) was left running"
    shutil.rmtree(tmp)


def _mf_log(folder: Path, first: int, last: int, total: int) -> list[str]:
    from tests.helpers.mflines import Log

    log = Log()
    for s in range(first, last + 1):
        log.step(1, 1, s, total, 3.0 - s / 1000, samples_per_s=40.0)
    return log.lines


def test_a_mindformers_log_over_ssh_equals_local(server, tmp_path):
    """``mstop summary host:output/`` on a MindFormers job's logs gives what the local read gives."""
    out = tmp_path / "output"
    for r in range(2):
        d = out / "log" / f"rank_{r}"
        d.mkdir(parents=True)
        (d / "info.log").write_text("".join(x + "\n" for x in _mf_log(d, 1, 40, 40)))
    local = json.loads(summary(out, "--json").stdout)
    proc = summary(f"testhost:{out}", "--json", "-F", server.config)
    assert proc.returncode == 0, proc.stderr
    remote = json.loads(proc.stdout)
    remote.pop("run_dir"), local.pop("run_dir")
    remote.pop("alerts"), local.pop("alerts")
    # the rank's own log is named for a local run only: over ssh it lives on the other host (issue 31)
    assert local.pop("log_path").endswith("rank_0/info.log") and remote.pop("log_path") is None
    assert remote == local and remote["rows"] == 80 and remote["source"]["kind"] == "mindformers log"


def test_msrun_worker_logs_over_ssh_equal_local(server, tmp_path):
    """Issue 28: ``mstop summary host:LOG_DIR`` on msrun's worker logs (LossMonitor lines, no timestamps)
    gives what the local read gives: the ranks from the file names, the same rows and losses."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for r in range(2):
        (logs / f"worker_{r}.log").write_text("".join(
            f"epoch: 1 step: {s}, loss is {2.0 + r - s / 100}\n" for s in range(1, 31)))
    (logs / "scheduler.log").write_text("scheduler\n")
    local = json.loads(summary(logs, "--json").stdout)
    proc = summary(f"testhost:{logs}", "--json", "-F", server.config)
    assert proc.returncode == 0, proc.stderr
    remote = json.loads(proc.stdout)
    assert remote["rows"] == local["rows"] == 60 and remote["ranks"] == local["ranks"]
    assert remote["loss"] == local["loss"] and remote["step"] == local["step"] == 30
    # the scheduler's word travels too (real scheduler logs of this machine's msrun): every worker
    # unregistered, and a worker it timed out
    shutil.copy(ROOT / "tests" / "fixtures" / "msrun" / "finished.scheduler.log", logs / "scheduler.log")
    local = json.loads(summary(logs, "--json").stdout)
    remote = json.loads(summary(f"testhost:{logs}", "--json", "-F", server.config).stdout)
    assert remote["status"] == local["status"] == "finished"
    shutil.copy(ROOT / "tests" / "fixtures" / "msrun" / "lost-rank1.scheduler.log", logs / "scheduler.log")
    local = json.loads(summary(logs, "--json").stdout)
    remote = json.loads(summary(f"testhost:{logs}", "--json", "-F", server.config).stdout)
    assert remote["status"] == local["status"] == "dead"
    said = [[a["kind"], a["message"]] for a in remote["alerts"]]
    assert said == [[a["kind"], a["message"]] for a in local["alerts"]]
    assert any("msrun's scheduler timed out rank 1" in m for _, m in said), said


def test_follow_a_mindformers_log_over_ssh_through_a_rotation_and_a_reconnect(server, tmp_path):
    folder = tmp_path / "output" / "log" / "rank_0"
    folder.mkdir(parents=True)
    lines = _mf_log(folder, 1, 60, 60)
    path = folder / "info.log"
    path.write_text("".join(x + "\n" for x in lines[:40]))  # steps 1-20 (a step and a progress line each)
    store = Store()
    src = RemoteSource(Target("testhost", str(tmp_path / "output")), store, poll=0.05, connection=server.connection())
    src.follow()
    try:
        assert wait_for(lambda: store.rows == 20)
        os.rename(path, folder / "info.log.1")  # RotatingFileHandler's rollover
        with open(folder / "info.log.1", "a") as f:  # written to the old file just before it rolled over
            f.write("".join(x + "\n" for x in lines[40:60]))
        path.write_text("".join(x + "\n" for x in lines[60:80]))
        assert wait_for(lambda: store.rows == 40)
        for pid in server.session_pids():  # the network blip
            os.kill(pid, signal.SIGKILL)
        with open(path, "a") as f:
            f.write("".join(x + "\n" for x in lines[80:]))
        assert wait_for(lambda: store.rows == 60, timeout=40), src.state.connection
        time.sleep(0.5)
        assert store.ranks[0].col("step").tolist() == [float(s) for s in range(1, 61)]  # none lost, none twice
        assert store.ranks[0].col("samples_per_s_per_npu").tolist() == [40.0] * 60
    finally:
        src.stop()


def test_summary_of_a_folder_of_runs_over_ssh_equals_local(server, tmp_path):
    from tests.helpers.runs import RUNS, runs_folder

    root = runs_folder(tmp_path / "runs")
    local = json.loads(summary(root, "--json").stdout)["runs"]
    proc = summary(f"testhost:{root}", "--json", "-F", server.config)
    assert proc.returncode == 0, proc.stderr
    remote = json.loads(proc.stdout)["runs"]
    assert [s["run_dir"] for s in remote] == [f"testhost:{root}/{n}" for n in sorted(RUNS)]
    for a, b in zip(local, remote):
        assert (a["status"], a["step"], a["loss_ema"], a["tokens_per_s"]) == \
            (b["status"], b["step"], b["loss_ema"], b["tokens_per_s"])


def test_a_folder_of_runs_over_ssh_lists_the_runs_read_from_msrun_worker_logs(server, tmp_path):
    """Issue 40 item 13: over ssh a folder of runs left out the runs read from msrun worker logs (10 listed,
    12 locally): a plain job's folder of ``worker_N.log`` (or its ``msrun_log/``) is a run there too."""
    from tests.helpers.runs import RUNS, runs_folder

    root = runs_folder(tmp_path / "runs")
    for name, sub in (("plain-a", ""), ("plain-b", "msrun_log")):
        logs = root / name / sub
        logs.mkdir(parents=True)
        for r in range(2):
            (logs / f"worker_{r}.log").write_text("".join(
                f"epoch: 1 step: {s}, loss is {2.0 + r - s / 100}\n" for s in range(1, 31)))
    local = [s["run_dir"].removeprefix(f"{root}/") for s in json.loads(summary(root, "--json").stdout)["runs"]]
    proc = summary(f"testhost:{root}", "--json", "-F", server.config)
    assert proc.returncode == 0, proc.stderr
    remote = [s["run_dir"].removeprefix(f"testhost:{root}/") for s in json.loads(proc.stdout)["runs"]]
    assert sorted(local) == sorted(remote) == sorted([*RUNS, "plain-a", "plain-b"]), (local, remote)


async def test_the_runs_list_over_ssh_and_local_side_by_side_names_each_runs_host(server, tmp_path):
    """``mstop runs/ testhost:/other/runs``: both folders in one list, each run with where it lives; the
    remote folder is read with one program run per refresh over the host's one shared connection."""
    from mstop.app.runs import RunsApp
    from mstop.app.widgets.runs import RunsTable
    from mstop.sources.remote_runs import RemoteRunsWatch
    from mstop.sources.runs import RunsWatch
    from tests.helpers.runs import NOW_RUNS, RUNS, runs_folder, write_run

    here = tmp_path / "here"
    write_run(here / "local-run", status="finished", note="on this machine", world=1, steps=30)
    there = runs_folder(tmp_path / "there")
    watches = [RunsWatch(str(here)), RemoteRunsWatch(Target("testhost", str(there)), connection=server.connection())]
    app = RunsApp(watches, label="here testhost:there", clock=lambda: NOW_RUNS, follow=False)
    async with app.run_test(size=(160, 30)) as pilot:
        table = app.runs_screen.query_one(RunsTable)
        for _ in range(300):
            await pilot.pause(0.05)
            if table.row_count == len(RUNS) + 1:
                break
        rows = {str(table.get_row_at(i)[1]): [str(c) for c in table.get_row_at(i)] for i in range(table.row_count)}
        assert set(rows) == set(RUNS) | {"local-run"}
        for name, (status, note, _) in RUNS.items():
            assert rows[name][2] == status and rows[name][13] == "testhost" and rows[name][14] == note
        assert rows["local-run"][13] != "testhost"
        local = RunsWatch(str(there))  # the same runs read here: the same figures
        local.discover()
        local.read()
        from mstop.engine import figures

        for run in local.runs.values():
            assert rows[run.name][3].startswith(f"{figures.step(run.store):,}/")
    # the next refresh brings only what was appended: one more row of no-delay's rank 0, nothing twice
    remote = watches[1]
    before = {name: run.store.rows for name, run in remote.runs.items()}
    path = there / "no-delay" / "rank0.csv"
    last = path.read_text().splitlines()[-1].split(",")
    last[0], last[1] = repr(float(last[0]) + 1.0), str(int(last[1]) + 1)
    with open(path, "a") as f:
        f.write(",".join(last) + "\n")
    remote.discover()
    after = {name: run.store.rows for name, run in remote.runs.items()}
    assert after == {**before, "no-delay": before["no-delay"] + 1}
    assert figures.step(remote.runs["no-delay"].store) == int(last[1])




def test_a_fresh_stack_over_ssh_is_taken_on_the_ranks_host_or_says_why(server, tmp_path):
    """Issue 38 item 5: the stacks view's d for a ``host:/path`` run: the identity is checked on that host and
    py-spy run there (mstop/sources/followers/pyspy_follower.py over the shared connection). Without py-spy there it
    says so; with it (a link in ~/.local/bin for the test), the rank's stack comes back."""
    import signal as _signal

    from mstop.live import fresh_lines
    from mstop.sources import Sources
    from mstop.sources.pyspy import executable
    from tests.helpers.common import HELPERS

    if executable() is None:
        pytest.skip("py-spy is not installed: pip install -e '.[test]' installs it")
    run = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'writer'}{os.pathsep}{ROOT}")
    p = subprocess.Popen([sys.executable, str(HELPERS / "witness_job.py"), str(run), "0", "20", "hang"],
                         stdout=subprocess.PIPE, env=env, text=True)
    link = Path.home() / ".local" / "bin" / "py-spy"
    made = False
    try:
        assert p.stdout.readline().strip() == "ready"
        from mstop.engine.store import Store

        store = Store()
        srcs = Sources([f"{server.host}:{run}"], store, connection=server.connection())
        srcs.read_all()
        conn = server.connection()
        if not link.exists():
            text = "\n".join(t for _, t in fresh_lines(store, conn))
            assert f"rank 0: {server.host}: py-spy is not installed on " in text, text
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(executable())
            made = True
        lines = [t for _, t in fresh_lines(store, conn)]
        assert f"rank 0 (pid {p.pid}):" in lines and any(t.strip().startswith("| stuck_here (") for t in lines), lines
        srcs.stop()
    finally:
        if made:
            link.unlink()
        p.send_signal(_signal.SIGKILL)
        p.wait()


@pytest.mark.slow
def test_a_plain_msrun_job_over_ssh_names_the_first_worker_to_end(server, tmp_path):
    """Issue 38 item 6 over ssh: a job with no mstop code followed as ``host:/logs``; the follower on the
    workers' host finds each worker's pid in its log, checks that the process writes that log, and waits on
    its pidfd: rank 1 kills itself at step 100, msrun ends rank 0, and rank 1 is named by its exit."""
    import signal as _signal

    from mstop.engine.endings import culprit
    from mstop.engine.figures import Options
    from mstop.engine.store import Store
    from mstop.sources import Sources
    from tests.helpers.msrun import plain_msrun

    job, logs = plain_msrun(tmp_path, "400", "1", "100", "0.05")
    store = Store()
    try:
        assert wait_for(lambda: (logs / "worker_1.log").exists() and b"ME(" in (logs / "worker_1.log").read_bytes(),
                        120)
        srcs = Sources([f"{server.host}:{logs}"], store, poll=0.2, connection=server.connection())
        srcs.follow()
        # both workers watched (a proc event each) before rank 1 kills itself at step 100 (5 s of steps)
        assert wait_for(lambda: all(store.ranks.get(r) is not None and store.ranks[r].procs for r in (0, 1)), 60)
        job.wait(timeout=300)
        opts = Options()
        ok = wait_for(lambda: (c := culprit(store.snapshot(), opts)) is not None and c.fact == "exit", 30)
        c = culprit(store.snapshot(), opts)
        assert ok and c.rank == 1 and "killed by SIGKILL" in c.words, (c, {r: d.exits for r, d in store.ranks.items()})
        srcs.stop()
    finally:
        if job.poll() is None:
            os.killpg(job.pid, _signal.SIGKILL)
            job.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file of another user needs root (CI runs as root)")
def test_over_ssh_the_follower_applies_the_same_rule(server, tmp_path):
    """Issue 40 item 9 over ssh: the same forged start event read as testhost:/path; the log follower on that
    host refuses the file and says why; nothing of it comes back (tests/unit/test_log_trust.py: here)."""
    secret = private_file(tmp_path / "id_rsa")
    link = tmp_path / "link.log"
    os.symlink(tmp_path / "id_rsa", link)
    run = forged_run(tmp_path, [secret, str(link)])
    session = MonitorSession([f"testhost:{run}"], MonitorOptions(clock=lambda: T0 + 40,
                                                                 connection=server.connection()))
    try:
        session.source.read_all()
        session.first_read_done()
        pane = session.log_pane(0)
        assert pane.problem.startswith("reading testhost:")  # not read on the caller's thread: the screen's
        pane.read()
        assert pane.lines == [] and "belongs to another user" in pane.problem, pane.problem
        assert SECRET not in pane.problem and pane.problem.startswith("testhost: ")
    finally:
        session.source.stop()


def test_rotated_rank_files_over_ssh_are_read_in_order_and_followed_through_a_rotation(server, tmp_path):
    """Issue 58 item 8: rank0.csv.K (logrotate's older parts) read over ssh as locally, and a rotation while
    following (rank0.csv -> rank0.csv.1, a new rank0.csv) loses no row and reads none twice."""
    run = tmp_path / "rot"
    write_rank(run, 0, steps(1, 10, loss=1.0, session="s"))
    os.rename(run / "rank0.csv", run / "rank0.csv.1")
    write_rank(run, 0, steps(11, 20, loss=1.0, session="s", t0=1010.0))
    written_at(run, 1051.0)
    local = json.loads(summary(run, "--json").stdout)
    proc = summary(f"testhost:{run}", "--json", "-F", server.config)
    remote = json.loads(proc.stdout)
    assert (remote["rows"], remote["step"], remote["resets"], remote["repeated_steps"]) == (20, 20, 0, 0)
    sshd.assert_same_summary(remote, local, f"testhost:{run}")

    live = tmp_path / "live"
    live.mkdir()
    store = Store()
    src = RemoteSource(Target("testhost", str(live)), store, poll=0.05, connection=server.connection())
    src.follow()
    try:
        write_rank(live, 0, steps(1, 10, loss=1.0, session="s"))
        assert wait_for(lambda: store.rows == 10)
        os.rename(live / "rank0.csv", live / "rank0.csv.1")
        write_rank(tmp_path / "scratch", 0, steps(11, 12, loss=1.0, session="s", t0=1010.0), header=False)
        with open(live / "rank0.csv.1", "ab") as f:  # the writer's descriptor: the moved file still grows
            f.write((tmp_path / "scratch" / "rank0.csv").read_bytes())
        time.sleep(0.3)
        write_rank(live, 0, steps(13, 20, loss=1.0, session="s", t0=1012.0))  # the writer's new file
        assert wait_for(lambda: store.rows == 20, timeout=20), store.rows
        time.sleep(0.5)
        assert store.resets == 0 and store.rows == 20
        assert store.snapshot().ranks[0].col("step").tolist() == [float(s) for s in range(1, 21)]
    finally:
        src.stop()


async def test_the_monitor_of_a_remote_run_not_made_yet_waits_for_it(server, tmp_path):
    """Issue 58 item 9: ``mstop host:/path`` started before the job made its folder exited, where the local
    monitor waits: its parent exists on the host, so it is a run to wait for; the header says so, and the rows
    come once the job writes them. A folder whose parent is missing too is still refused (unless --wait)."""
    from mstop.app import MonitorApp
    from mstop.app.widgets import Header
    from mstop.commands.arguments import runs_watches
    from tests.helpers.app_common import settle, text

    run = tmp_path / "later" / "run"
    (tmp_path / "later").mkdir()
    spec = f"testhost:{run}"
    assert runs_watches([spec], connection=server.connection()) is None  # a run, not an error
    with pytest.raises(RemoteError, match="no such directory"):
        runs_watches([f"testhost:{tmp_path}/nowhere/run"], connection=server.connection())
    assert runs_watches([f"testhost:{tmp_path}/nowhere/run"], connection=server.connection(), wait=True) is None
    app = MonitorApp(spec, options=MonitorOptions(connection=server.connection()))
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot, lambda: "waiting for it" in text(app.query_one(Header)), tries=600)
        assert "WAITING" in text(app.query_one(Header))
        write_rank(run, 0, steps(1, 20, loss=1.0, step_time=0.5, tokens=100))
        await settle(pilot, lambda: "step 20" in text(app.query_one(Header)), tries=1000)
        assert "waiting for it" not in text(app.query_one(Header))
