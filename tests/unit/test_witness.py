"""Issue 38, the writer's half: the exit witness beside each rank (its ``exit``, ``proc`` and ``stack``
events) and the stacks faulthandler writes, with real writer processes killed, stopped and crashed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from mstop_writer import witness
from tests.helpers.common import HELPERS, ROOT, proc_state, read_events, wait_for

JOB = HELPERS / "witness_job.py"


def _start(run, then: str, *, rank: int = 0, steps: int = 20, stack_after: float | None = None):
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'writer'}{os.pathsep}{ROOT}")
    argv = [sys.executable, str(JOB), str(run), str(rank), str(steps), then]
    if stack_after is not None:
        argv.append(str(stack_after))
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    assert p.stdout.readline().strip() == "ready", p.stderr.read()
    return p


def _kinds(run, rank=0, kind=None):
    path = run / f"rank{rank}.events.jsonl"
    evs = read_events(path) if path.exists() else []
    return [e for e in evs if kind is None or e["kind"] == kind]


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


def test_a_witness_that_cannot_start_is_said_once_and_the_job_goes_on(tmp_path, monkeypatch, caplog):
    from mstop_writer import MetricsWriter

    monkeypatch.setattr(sys, "executable", "")
    with MetricsWriter(tmp_path / "run", rank=0, world_size=1) as w:
        w.log(1, loss=1.0, step_time=0.1)
    (start,) = _kinds(tmp_path / "run", kind="start")
    assert start["witness_pid"] is None and start["witness"] == "not started: no Python executable"
    assert [r for r in caplog.records if "exit witness" in r.getMessage()]


# -- the dump reader ---------------------------------------------------------------------------------------

DUMP = """Timeout (0:01:00)!
Thread 0x00007f01 (most recent call first):
  File "/a/b.py", line 3 in wait
  File "/a/c.py", line 9 in run

Current thread 0x00007f02 (most recent call first):
  File "/x/y.py", line 12 in next
"""


def _header(step, since=100.0):
    return f"# mstop-stacks step={step} since={since:.3f} armed={since:.3f} limit=60.0".ljust(127) + "\n"


def test_dumps_are_read_once_complete_and_an_empty_header_waits():
    blob = (_header(5) + DUMP + _header(9)).encode()
    parts = witness.split_dumps(blob, final=False)
    assert [c for _, c in parts] == [len((_header(5) + DUMP).encode())]
    (fields, _), = parts
    assert fields["step"] == 5 and fields["since"] == 100.0 and fields["reason"] == "timeout"
    assert fields["stacks"][0]["frames"] == ["wait (/a/b.py:3)", "run (/a/c.py:9)"]
    assert fields["stacks"][1] == {"thread": "0x00007f02", "current": True, "frames": ["next (/x/y.py:12)"]}
    final = witness.split_dumps(blob, final=True)
    assert sum(c for _, c in final) == len(blob) and final[-1][0] is None


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600), st.booleans())
def test_any_bytes_in_a_stacks_file_are_consumed_whole_or_left_never_raised(blob, final):
    parts = witness.split_dumps(blob, final=final)
    used = sum(c for _, c in parts)
    assert 0 <= used <= len(blob)
    if final:
        assert used == len(blob)
    for fields, _ in parts:
        if fields is not None:
            assert isinstance(fields["stacks"], list) and fields["reason"] in ("timeout", "fatal")


def test_a_zombies_wait_status_is_told_in_words():
    assert witness.describe_status(9) == {"how": "signal", "signal": "SIGKILL", "code": -9, "core": False}
    assert witness.describe_status(11 | 0x80)["core"] is True
    assert witness.describe_status(3 << 8) == {"how": "exit", "code": 3}


# -- a fresh dump from outside (py-spy), and the identity a pid must prove ----------------------------------

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


def test_the_witness_writes_nothing_before_the_sessions_start_event(tmp_path):
    """The writer starts the witness and then writes the start event (its fields name the witness): the
    witness's first event waits for the file to grow, so a session's events begin with its start (a fresh
    clone's 8-rank run on a loaded machine once read a proc event first). An events file of an older session
    does not count; after an interval it writes anyway."""
    events = tmp_path / "rank0.events.jsonl"
    events.write_text('{"time": 1, "kind": "end"}\n')  # an older session's
    me = os.getpid()
    facts = witness.proc_facts(me, float(os.sysconf("SC_CLK_TCK")), os.sysconf("SC_PAGE_SIZE"))
    w = witness.Witness(me, facts["start_ticks"], str(events), None, 0, interval=60.0)
    w.look(facts)
    assert [e["kind"] for e in read_events(events)] == ["end"]
    with open(events, "a") as f:
        f.write('{"time": 2, "kind": "start"}\n')
    w.look(facts)
    assert [e["kind"] for e in read_events(events)] == ["end", "start", "proc"]
    late = witness.Witness(me, facts["start_ticks"], str(tmp_path / "none.jsonl"), None, 0, interval=0.0)
    (tmp_path / "none.jsonl").write_text("")
    late.look(facts)
    assert [e["kind"] for e in read_events(tmp_path / "none.jsonl")] == ["proc"]
