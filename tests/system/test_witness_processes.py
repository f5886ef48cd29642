"""Issue 38, with real writer processes killed, stopped and crashed: the exit witness beside each rank (its
``exit``, ``proc`` and ``stack`` events) and the stacks faulthandler writes; which of a launcher's workers ended
first (its witness records which others still ran); and the three watchers of a rank's process (the witness,
the viewer's process watch, the ssh follower's) saying the same of its end. The witness's readers, fed bytes
and events in this process, are tests/unit/test_witness.py and test_which_ended_first.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from mstop.engine.store import Store
from mstop.sources.followers.follower import Workers
from mstop.sources.procwatch import ProcessWatch
from tests.helpers.common import HELPERS, ROOT, proc_state, read_events, wait_for

JOB = HELPERS / "witness_job.py"


def _start(run, then: str, *, rank: int = 0, steps: int = 20, stack_after: float | None = None,
           world: int | None = None):
    """A writer process (tests/helpers/witness_job.py) that wrote ``steps`` rows and then does ``then``."""
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'writer'}{os.pathsep}{ROOT}")
    argv = [sys.executable, str(JOB), str(run), str(rank), str(steps), then]
    if stack_after is not None or world is not None:
        argv.append("-" if stack_after is None else str(stack_after))
    if world is not None:
        argv.append(str(world))
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    assert p.stdout.readline().strip() == "ready", p.stderr.read()
    return p


def test_a_killed_rank_has_its_exit_written_within_a_fraction_of_a_second(tmp_path):
    run = tmp_path / "run"
    p = _start(run, "hang")
    (start,) = _kinds(run, kind="start")
    assert start["witness"] == "started" and start["witness_pid"] > 0
    assert start["pid_start"] > 0 and start["boot_id"] and start["pid_ns"].startswith("pid:")
    wit = start["witness_pid"]
    assert wait_for(lambda: _kinds(run, kind="proc"), 5)
    t_kill = time.time()
    p.send_signal(signal.SIGKILL)
    assert wait_for(lambda: _kinds(run, kind="exit"), 3)
    (ex,) = _kinds(run, kind="exit")
    assert ex["pid"] == p.pid and ex["rank"] == 0
    assert ex["time"] - t_kill < 0.5  # the witness saw it at once (pidfd), not a heartbeat later
    p.wait()
    # the zombie's status was read before msrun (here: this test) reaped it, or the end is "unknown"
    assert ex["how"] in ("signal", "unknown")
    if ex["how"] == "signal":
        assert ex["signal"] == "SIGKILL" and ex["code"] == -9
    assert wait_for(lambda: proc_state(wit) in ("", "Z"), 2), "the witness outlived its rank"


def test_a_stopped_rank_is_said_stopped_at_once_and_running_again_after(tmp_path):
    run = tmp_path / "run"
    p = _start(run, "hang")
    try:
        assert wait_for(lambda: _kinds(run, kind="proc"), 5)
        p.send_signal(signal.SIGSTOP)
        t = time.time()
        assert wait_for(lambda: any(e["state"] == "T" for e in _kinds(run, kind="proc")), 3)
        first_t = next(e for e in _kinds(run, kind="proc") if e["state"] == "T")
        assert first_t["time"] - t < 2.0 and first_t["changed"] is True  # looked at every second
        p.send_signal(signal.SIGCONT)
        assert wait_for(lambda: _kinds(run, kind="proc")[-1]["state"] in "RS", 3)
    finally:
        p.kill()
        p.wait()


def test_a_rank_stuck_in_a_step_writes_every_threads_stack_while_stuck(tmp_path):
    run = tmp_path / "run"
    p = _start(run, "hang", stack_after=1.0)
    try:
        assert wait_for(lambda: _kinds(run, kind="stack"), 6)
        (s,) = _kinds(run, kind="stack")
        assert s["reason"] == "timeout" and s["step"] == 20 and s["limit"] == 1.0
        frames = [f for t in s["stacks"] for f in t["frames"]]
        assert any(f.startswith("stuck_here (") for f in frames), frames
        assert any(f.startswith("_heartbeat (") for f in frames)  # every thread, the writer's own too
        assert p.poll() is None  # written by the stuck rank itself, while it is stuck
        text = (run / "rank0.stacks.txt").read_text()
        assert "# mstop-stacks step=20 " in text and "in stuck_here" in text
    finally:
        p.kill()
        p.wait()


def test_a_rank_silent_past_its_pace_is_asked_for_its_stacks_in_seconds_and_a_stopped_one_is_not(tmp_path):
    """Issue 60: with the default limit (60 s), a rank silent past its first look (max(5 s, 3 median steps))
    is sent the signal its stacks file names by its witness: every thread's stack within 8 s of its last step,
    its reason ``asked``; once, however long it stays. A stopped rank is not asked (it could not write)."""
    run = tmp_path / "run"
    p = _start(run, "hang")
    held = _start(tmp_path / "held", "hang")
    held.send_signal(signal.SIGSTOP)
    try:
        assert wait_for(lambda: _kinds(run, kind="stack"), 10)
        (s,) = _kinds(run, kind="stack")
        assert s["reason"] == "asked" and s["step"] == 20 and s["time"] - s["since"] < 8, s
        frames = [f for t in s["stacks"] for f in t["frames"]]
        assert any(f.startswith("stuck_here (") for f in frames), frames
        assert p.poll() is None
        time.sleep(3)
        assert len(_kinds(run, kind="stack")) == 1  # once a silence
        assert _kinds(tmp_path / "held", kind="stack") == []
    finally:
        for q in (p, held):
            q.kill()
            q.wait()


def test_a_segfault_leaves_its_python_stack_and_its_signal(tmp_path):
    run = tmp_path / "run"
    p = _start(run, "segv")
    p.wait()
    assert wait_for(lambda: _kinds(run, kind="exit"), 3)
    stacks = _kinds(run, kind="stack")
    assert len(stacks) == 1 and stacks[0]["reason"] == "fatal" and stacks[0]["error"] == "Segmentation fault"
    current = [t for t in stacks[0]["stacks"] if t["current"]]
    assert current and current[0]["frames"][0].startswith("string_at (")
    (ex,) = _kinds(run, kind="exit")
    assert ex["how"] in ("signal", "unknown")
    if ex["how"] == "signal":
        assert ex["signal"] == "SIGSEGV"


def test_a_clean_finish_stops_the_witness_and_leaves_no_process(tmp_path):
    run = tmp_path / "run"
    p = _start(run, "finish")
    p.wait(10)
    (start,) = _kinds(run, kind="start")
    assert wait_for(lambda: not os.path.exists(f"/proc/{start['witness_pid']}"), 3)
    assert _kinds(run, kind="end") and not _kinds(run, kind="stack")
    assert "# mstop-stacks" in (run / "rank0.stacks.txt").read_text()  # the header only: no dump


def test_a_fresh_py_spy_dump_of_a_live_rank_and_why_not_for_others(tmp_path):
    import pytest

    from mstop.live import fresh_lines
    from mstop.sources import pyspy, read_once

    if pyspy.executable() is None:
        pytest.skip("py-spy is not installed: pip install -e '.[test]' installs it")
    run = tmp_path / "run"
    p = _start(run, "hang")
    try:
        store = read_once(str(run))
        lines = [t for _, t in fresh_lines(store)]
        assert f"rank 0 (pid {p.pid}):" in lines, lines
        assert any(t.strip().startswith("| stuck_here (") for t in lines), lines
        start = store.ranks[0].last_start
        # the same pid claimed by a start of another boot, namespace or host: never dumped
        for change, words in (({"boot_id": "x"}, "another boot"), ({"pid_ns": "pid:[1]"}, "another pid namespace"),
                              ({"host": "elsewhere"}, "runs on elsewhere"), ({"pid_start": 1}, "another process now"),
                              ({"boot_id": None}, "an older writer")):
            got, why = pyspy.dump({**start, **change})
            assert got is None and "not visible from here" in why and words in why, (change, why)
    finally:
        p.kill()
        p.wait()
    got, why = pyspy.dump(start)
    assert got is None and ("has ended" in why or "another process" in why), why


async def test_the_stacks_view_shows_a_stuck_ranks_stack_and_d_dumps_it_fresh(tmp_path):
    """t on a rank stuck past stack_after: its dump, grouped; d: py-spy's dump of it now, on screen."""
    import pytest

    from mstop.app import MonitorApp
    from mstop.sources import pyspy
    from tests.helpers.app_common import screen_lines, settle

    run = tmp_path / "run"
    p = _start(run, "hang", stack_after=1.0)
    try:
        assert wait_for(lambda: _kinds(run, kind="stack"), 6)
        app = MonitorApp(str(run), poll=0.1)
        async with app.run_test(size=(140, 40)) as pilot:
            await settle(pilot)
            await pilot.press("t")
            await settle(pilot, lambda: any("rank 0: in stuck_here" in ln for ln in screen_lines(app)))
            if pyspy.executable() is None:
                pytest.skip("py-spy is not installed")
            await pilot.press("d")
            await settle(pilot, lambda: any(f"rank 0 (pid {p.pid}):" in ln for ln in screen_lines(app)), tries=500)
    finally:
        p.kill()
        p.wait()


def test_with_timed_dumps_off_a_crash_still_leaves_its_stack_and_its_step(tmp_path):
    """stack_after=0: no timed dump is ever armed, but the header stays current, so a fatal signal's stack
    says the step the rank was in."""
    run = tmp_path / "run"
    p = _start(run, "segv", stack_after=0)
    p.wait()
    assert wait_for(lambda: _kinds(run, kind="exit"), 3)
    (start,) = _kinds(run, kind="start")
    assert start["stack_after"] == 0 and start["fatal_stacks"] == "stacks file"
    (s,) = _kinds(run, kind="stack")
    assert s["reason"] == "fatal" and s["step"] == 20 and "Timeout" not in (run / "rank0.stacks.txt").read_text()


def _kinds(run, rank=0, kind=None):
    path = run / f"rank{rank}.events.jsonl"
    evs = read_events(path) if path.exists() else []
    return [e for e in evs if kind is None or e["kind"] == kind]


def _exit(run, rank: int) -> dict | None:
    evs = [e for e in read_events(run / f"rank{rank}.events.jsonl") if e["kind"] == "exit"]
    return evs[0] if evs else None


def _summary(run) -> dict:
    out = subprocess.run([sys.executable, "-m", "mstop", "summary", str(run), "--json"], capture_output=True,
                         text=True, timeout=120, cwd=ROOT)
    assert out.returncode in (0, 1, 2, 3), out.stderr
    return json.loads(out.stdout)


def test_a_witness_records_which_of_its_launchers_other_workers_still_ran_at_its_end(tmp_path):
    """Two ranks started by one parent (this test, as msrun starts its workers): rank 1 is killed, then rank 0
    at once. Rank 1's witness saw rank 0 running; rank 0's saw no rank 1. mstop names rank 1, however close
    the two ends' times."""
    run = tmp_path / "run"
    p0, p1 = _start(run, "hang", rank=0, world=2), _start(run, "hang", rank=1, world=2)
    try:
        p1.send_signal(signal.SIGKILL)
        assert wait_for(lambda: _exit(run, 1) is not None, 5)
        p0.send_signal(signal.SIGKILL)
        assert wait_for(lambda: _exit(run, 0) is not None, 5)
    finally:
        for p in (p0, p1):
            p.kill()
            p.wait()
    e1, e0 = _exit(run, 1), _exit(run, 0)
    assert p0.pid in e1["peers_alive"], e1
    assert p1.pid not in e0["peers_alive"], e0
    js = _summary(run)
    assert js["culprit"]["rank"] == 1 and js["culprit"]["fact"] == "exit", js["culprit"]
    assert "rank 1's process ended at" in js["culprit"]["words"]


def test_a_rank_killed_before_its_witness_first_looked_still_names_the_peers_that_ran(tmp_path):
    """CI: a rank killed right after its start event (before its witness's first look at it, which waits for
    that event) ended with no parent known: its peers were not looked at, and the job's culprit was none. The
    witness knows the rank's parent from its start: the peers still running at the end are listed."""
    from mstop_writer.witness import Witness, own_start_ticks

    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    a, b = subprocess.Popen(sleeper), subprocess.Popen(sleeper)  # two workers of one launcher: this test
    try:
        events = tmp_path / "rank0.events.jsonl"
        events.write_text("")
        w = Witness(a.pid, own_start_ticks(a.pid), str(events), None, 0, 5.0)  # no look taken
        a.kill()
        a.wait()  # reaped: no zombie's facts to read the parent from
        w.finish(None)
        (e,) = read_events(events)
        # (b, and any other process this test's worker still runs: its launcher's other children)
        assert e["kind"] == "exit" and b.pid in e["peers_alive"] and a.pid not in e["peers_alive"], e
    finally:
        for p in (a, b):
            p.kill()
            p.wait()


def _worker(run, logs, rank: int) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'writer'}{os.pathsep}{ROOT}")
    log = open(logs / f"worker_{rank}.log", "wb")  # noqa: SIM115 (the worker holds it: closed below)
    p = subprocess.Popen([sys.executable, str(HELPERS / "logged_worker.py"), str(run), str(rank)], stdout=log,
                         stderr=subprocess.PIPE, env=env, text=True)
    log.close()
    assert p.stderr.readline().strip() == "ready", p.stderr.read()
    return p


def _exits(run, store: Store, follower: list[tuple[int, dict]], rank: int) -> dict[str, dict]:
    out = {}
    path = run / f"rank{rank}.events.jsonl"
    got = [e for e in read_events(path) if e["kind"] == "exit"] if path.exists() else []
    if got:
        out["witness"] = got[0]
    d = store.ranks.get(rank)
    if d is not None and d.exits:
        out["viewer"] = d.exits[0]
    got = [e for r, e in follower if r == rank and e["kind"] == "exit"]
    if got:
        out["follower"] = got[0]
    return out


def test_the_witness_the_viewer_and_the_follower_agree_on_how_and_in_what_order_ranks_ended(tmp_path):
    run, logs = tmp_path / "run", tmp_path / "logs"
    logs.mkdir()
    p0, p1 = _worker(run, logs, 0), _worker(run, logs, 1)
    store = Store()
    watch = ProcessWatch(store)
    workers = Workers()
    follower: list[tuple[int, dict]] = []
    try:
        for r in (0, 1):
            watch.consider(r, str(logs / f"worker_{r}.log"))
            workers.consider(r, str(logs / f"worker_{r}.log"))
        assert set(watch.watched) == {0, 1}, watch.unseen
        assert set(workers.watched) == {0, 1}, workers.unseen

        def seen(rank: int) -> bool:
            workers.wait(0.05)
            workers.look()
            follower.extend(workers.take())
            return len(_exits(run, store, follower, rank)) == 3

        for victim, other in ((p1, p0), (p0, p1)):
            rank = 1 if victim is p1 else 0
            victim.send_signal(signal.SIGKILL)  # not reaped until the end: its status stays readable
            assert wait_for(lambda r=rank: seen(r), 10), _exits(run, store, follower, rank)
            ends = _exits(run, store, follower, rank)
            for who, e in ends.items():
                assert e["pid"] == victim.pid, (who, e)
                assert (e["how"], e.get("signal"), e.get("code")) == ("signal", "SIGKILL", -9), (who, e)
                if victim is p1:  # the first end: the other worker still ran
                    assert other.pid in e["peers_alive"], (who, e)
                else:
                    assert p1.pid not in e["peers_alive"], (who, e)
            assert {e["source"] for e in ends.values()} == {"witness", "viewer", "follower"}
    finally:
        watch.stop()
        for p in (p0, p1):
            p.kill()
            p.wait()


def _pid1_job(run, steps: int = 20):
    """A writer process that is PID 1 of its own pid namespace (``unshare --pid --fork``: a container's first
    process), hanging after its rows; the unshare process and the writer's pid as this namespace sees it."""
    import shutil

    import pytest

    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("no unshare here (util-linux)")
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'writer'}{os.pathsep}{ROOT}")
    p = subprocess.Popen([unshare, "--pid", "--fork", "--mount-proc", sys.executable, str(JOB), str(run), "0",
                          str(steps), "hang"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    line = p.stdout.readline().strip()
    if line != "ready":
        pytest.skip(f"a pid namespace cannot be made here: {p.stderr.read()[:200]}")
    (inner,) = [int(x) for x in subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True,
                                               text=True).stdout.split()]
    return p, inner


def test_a_rank_that_is_pid_1_of_its_container_is_dead_within_seconds_of_its_kill(tmp_path, server):
    """Issue 58 item 11: a rank that is PID 1 of its own pid namespace takes its exit witness with it (every
    process of the namespace is killed with it): no exit was written and the job read ``running`` until its
    heartbeats had been missing for ~58 s. Its writer's life lock on its events file is let go by the kernel
    however it ends: ``summary`` says dead within seconds, here and over ssh, naming rank 0 and how it was found."""
    run = tmp_path / "run"
    p, inner = _pid1_job(run)
    try:
        start = [e for e in read_events(run / "rank0.events.jsonl") if e["kind"] == "start"][0]
        assert start["pid"] == 1 and start["life_lock"] is True, start
        js = json.loads(subprocess.run([sys.executable, "-m", "mstop", "summary", "--json", str(run)], cwd=ROOT,
                                       capture_output=True, text=True, timeout=60).stdout)
        assert js["status"] == "running", js["status"]  # alive: its lock is held
        os.kill(inner, signal.SIGKILL)
        killed = time.time()
        p.wait(timeout=10)
        assert not [e for e in read_events(run / "rank0.events.jsonl") if e["kind"] == "exit"]  # no witness word
        for spec in (str(run), f"testhost:{run}"):
            got = {}

            def dead(spec=spec, got=got) -> bool:
                out = subprocess.run([sys.executable, "-m", "mstop", "summary", "--json", spec, "-F", server.config],
                                     cwd=ROOT, capture_output=True, text=True, timeout=60)
                got.update(json.loads(out.stdout))
                return got["status"] == "dead"

            assert wait_for(dead, timeout=20), (spec, got.get("status"), got.get("notes"))
            assert time.time() - killed < 15
            assert got["culprit"]["rank"] == 0, got["culprit"]
            assert any("ended with no word from its exit witness" in n for n in got["notes"]), (spec, got["notes"])
            (a,) = [a for a in got["alerts"] if a["kind"] in ("job_dead", "dead_rank")]
            assert "life locks let go" in a["message"] or "life lock" in a["message"], a
    finally:
        if p.poll() is None:
            p.kill()
