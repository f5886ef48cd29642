"""Issue 26, reading files: rank files shaped as strangers shape them (no session column, a 100 GB hole,
unreadable modes), read without a traceback, without blocking, and with a word for what cannot be read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from mstop.engine.figures import Options
from tests.helpers.common import ROOT, wait_for


def mstop(*args: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mstop", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, **kw)


def test_a_100_gb_hole_named_like_a_rank_file_costs_one_lseek(tmp_path):
    """Issue 26 #10: a sparse file of 100 GB with no newline, named rank1.csv, beside a good rank: summary
    answers at once (the hole is stepped over, not read), counts the line bad and says why."""
    from tests.helpers.runs import start, steps, write_events, write_rank

    write_events(tmp_path, 0, [start("s1", t=1000.0, world_size=2)])
    write_rank(tmp_path, 0, steps(1, 50, loss=1.0, step_time=1.0))
    with open(tmp_path / "rank1.csv", "wb") as f:
        f.truncate(100 << 30)
    out = mstop("summary", str(tmp_path), "--json", timeout=60)
    assert out.returncode == 0, out.stderr
    js = json.loads(out.stdout)
    assert js["rows"] == 50 and js["bad_rows"] == 1
    table = mstop("summary", str(tmp_path), env={**os.environ, "COLUMNS": "300"}, timeout=60).stdout
    assert "rank1.csv: a line of over 1 MiB with no line end skipped" in table


def test_ctrl_c_during_a_command_is_a_word_not_a_traceback(tmp_path):
    """Ctrl-C while ``summary --wait`` waits (it says so once: the signal comes after that, not during
    Python's own start-up, which takes seconds on a loaded machine): a word and exit 130."""
    def as_in_a_terminal() -> None:
        """SIGINT as a foreground command has it (the test's worker may hold it ignored or blocked: a
        child inherits both, and a job's libraries set them in their processes)."""
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    p = subprocess.Popen([sys.executable, "-m", "mstop", "summary", str(tmp_path / "not-yet"), "--wait"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=as_in_a_terminal)
    said = p.stderr.readline()
    assert said.startswith(f"mstop: {tmp_path / 'not-yet'}: no such directory: waiting for it"), said
    p.send_signal(signal.SIGINT)
    try:
        out, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:  # say what the process was doing, then fail
        status = Path(f"/proc/{p.pid}/status").read_text()
        facts = [line for line in status.splitlines() if line.startswith(("State", "Sig", "Threads"))]
        p.kill()
        p.communicate()
        raise AssertionError(f"no end 30 s after SIGINT: {facts}") from None
    assert p.returncode == 130 and "Traceback" not in err and "interrupted" in err, err


def _good_runs(root, n: int) -> None:
    from tests.helpers.runs import write_run

    for i in range(n):
        write_run(root / f"good-{i:02d}", status="finished", note="good", world=1, steps=20)


def _hostile_runs(root) -> None:
    """The two cases of issue 26 #19: a start event with profile_steps 5, a MindFormers log with a date
    that is no date; and a third with an events file of garbage."""
    from tests.helpers.mflines import Log
    from tests.helpers.runs import start, steps, write_events, write_rank

    write_events(root / "profile-steps-5", 0, [start("s1", t=1000.0, world_size=1, profile_steps=5)])
    write_rank(root / "profile-steps-5", 0, steps(1, 20, loss=1.0, step_time=1.0))
    log = Log()
    for s in range(1, 11):
        log.step(1, 1, s, 10, 5.0, samples_per_s=100.0)
    d = root / "mf-bad-date" / "output" / "log" / "rank_0"
    d.mkdir(parents=True)
    (d / "info.log").write_text(log.text().replace(log.lines[0][7:17], "2026-13-45", 1))
    write_rank(root / "garbage-events", 0, steps(1, 5, loss=1.0))
    (root / "garbage-events" / "rank0.events.jsonl").write_bytes(b"\x00\xff{[" * 1000 + b"\n")


def test_one_hostile_run_never_hides_the_others(tmp_path):
    """Issue 26 #19: summary of a folder of 20 good runs and 3 hostile ones lists all 23."""
    _good_runs(tmp_path, 20)
    _hostile_runs(tmp_path)
    out = mstop("summary", str(tmp_path), "--json", timeout=180)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    runs = json.loads(out.stdout)["runs"]
    assert len(runs) == 23 and "errors" not in json.loads(out.stdout)
    by = {os.path.relpath(r["run_dir"], tmp_path).split(os.sep)[0]: r for r in runs}
    assert by["profile-steps-5"]["bad_events"] == 1 and by["profile-steps-5"]["rows"] == 20
    assert by["garbage-events"]["bad_events"] == 1 and by["garbage-events"]["rows"] == 5
    assert by["mf-bad-date"]["bad_rows"] == 1 and by["mf-bad-date"]["rows"] == 9
    table = mstop("summary", str(tmp_path), env={**os.environ, "COLUMNS": "300"}, timeout=180)
    assert table.returncode == 0 and table.stdout.count("good-") == 20 and "mf-bad-date" in table.stdout


def test_the_runs_list_shows_every_run_of_a_hostile_folder(tmp_path):
    from mstop.engine.health import Health, Rules
    from mstop.live.runs import RunsModel
    from mstop.sources.runs import RunsWatch

    _good_runs(tmp_path, 5)
    _hostile_runs(tmp_path)
    model = RunsModel([RunsWatch(str(tmp_path))], Options(), lambda: Health(Rules()))
    for _ in range(3):
        model.refresh()
    rows, problems, _ = model.snapshot()
    assert len(rows) == 8 and not problems
    status = {r.name.split("/")[0]: r.status for r in rows}
    assert status["mf-bad-date"] in ("stalled", "finished", "dead") and status["profile-steps-5"] != "unreadable"


def _as_nobody(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-m",
                           "mstop", *args], cwd=cwd or ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HOME": "/tmp", "COLUMNS": "300"})


def _world_readable_tmp():
    import tempfile

    d = tempfile.mkdtemp(prefix="mstop-perm-")
    os.chmod(d, 0o755)
    return d


def _needs_setpriv():
    import shutil

    import pytest

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root to run a case as another user (setpriv, from util-linux); CI runs as root")


def test_unreadable_rank_files_and_folders_say_permission_denied(tmp_path):
    """Issue 26 #20, as a non-root user (root reads everything): a run whose rank file is mode 000, a run
    directory of mode 000, a folder of runs with one unreadable run."""
    import shutil

    from tests.helpers.runs import start, steps, write_events, write_rank

    _needs_setpriv()
    root = _world_readable_tmp()
    try:
        run = os.path.join(root, "run")
        write_events(Path(run), 0, [start("s1", t=1000.0, world_size=1)])
        write_rank(Path(run), 0, steps(1, 10, loss=1.0))
        os.chmod(os.path.join(run, "rank0.csv"), 0)
        os.chmod(os.path.join(run, "rank0.events.jsonl"), 0)
        out = _as_nobody("summary", run)
        assert out.returncode == 2 and "permission denied" in out.stderr, (out.stdout, out.stderr)
        assert "rank0.csv: permission denied" in out.stdout
        os.chmod(os.path.join(run, "rank0.csv"), 0o644)
        os.chmod(os.path.join(run, "rank0.events.jsonl"), 0o644)
        assert _as_nobody("summary", run).returncode == 0
        os.chmod(run, 0)
        out = _as_nobody("summary", run)
        assert out.returncode == 2 and "permission denied" in out.stderr, out.stderr
        os.chmod(run, 0o755)
        shutil.copytree(run, os.path.join(root, "other"))
        os.chmod(os.path.join(root, "other"), 0)
        out = _as_nobody("summary", root)
        assert "other: cannot be read: Permission denied" in out.stderr and out.stdout.count("run") >= 1
    finally:
        for d, _, _ in os.walk(root):
            os.chmod(d, 0o755)
        shutil.rmtree(root, ignore_errors=True)


def test_runs_deeper_than_the_search_are_said_and_links_are_listed_once(tmp_path):
    """Issue 26 #21: a run 4 levels down is not listed at the default depth, and a line says so; --depth 4
    finds it; a link latest -> run42 is one run, named run42."""
    from tests.helpers.runs import write_run

    write_run(tmp_path / "run42", status="finished", note="", world=1, steps=10)
    (tmp_path / "latest").symlink_to(tmp_path / "run42")
    write_run(tmp_path / "a" / "b" / "c" / "deep", status="finished", note="", world=1, steps=10)
    out = mstop("summary", str(tmp_path), "--json")
    names = sorted(os.path.basename(r["run_dir"]) for r in json.loads(out.stdout)["runs"])
    assert names == ["run42"], names
    assert "deeper than runs are looked for (--depth N)" in out.stderr and "/a/b/c" in out.stderr
    out = mstop("summary", str(tmp_path), "--json", "--depth", "4")
    names = sorted(os.path.basename(r["run_dir"]) for r in json.loads(out.stdout)["runs"])
    assert names == ["deep", "run42"] and "deeper" not in out.stderr


def test_a_hole_after_good_rows_is_stepped_over_and_rows_after_it_are_read(tmp_path):
    """A hole in the middle (a preallocated or crashed file): the rows before and after it are read."""
    from mstop.sources import read_once
    from tests.helpers.runs import steps, write_rank

    write_rank(tmp_path, 0, steps(1, 10, loss=1.0))
    with open(tmp_path / "rank0.csv", "r+b") as f:
        f.seek(0, os.SEEK_END)
        f.truncate(f.tell() + (4 << 30))
    write_rank(tmp_path / "more", 0, steps(11, 12, loss=1.0), header=False)
    with open(tmp_path / "rank0.csv", "ab") as f:
        f.write(b"\n" + (tmp_path / "more" / "rank0.csv").read_bytes())
    store = read_once(str(tmp_path))
    assert store.ranks[0].col("step").tolist() == [float(s) for s in range(1, 13)] and store.bad_rows == 1


async def test_keys_work_and_q_quits_while_a_long_log_is_read(tmp_path, monkeypatch):
    """Issue 26 #18: the first read of a long MindFormers log (1,000,000 lines, about 10 s to parse here) is
    done on a thread: the screen says so, ? opens the help, Ctrl-C quits, and the reading stops. (The pilot takes
    about 2 s a key while the reader holds the GIL; in a terminal q ends mstop in about 0.5 s.)"""
    from benchmarks.bench_mflog import make
    from mstop.app import MonitorApp
    from mstop.app.screens import HelpScreen
    from tests.helpers.app_common import screen_lines

    make(str(tmp_path), 1_000_000)
    # read line by line (about 10 s here), not as arrays (about 3 s): long enough for the keys to land
    monkeypatch.setattr("mstop.formats.mflog.BULK_RUN", 10**9)
    app = MonitorApp(str(tmp_path / "output"), follow=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        assert app.monitor.reading
        assert "reading what is written so far" in "\n".join(screen_lines(app))
        await pilot.press("question_mark")
        await pilot.pause(0.2)
        assert isinstance(app.screen, HelpScreen) and app.monitor.reading
        await pilot.press("ctrl+c")  # quits from the help screen too (one key: a key takes ~2 s here)
    assert app.monitor.reading and app.monitor.session.store.rows < 1_000_000  # it quit while reading
    assert wait_for(lambda: not [t for t in threading.enumerate() if t.name == "mstop-load"], 5)


