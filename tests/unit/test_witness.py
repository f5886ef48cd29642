"""Issue 38, the writer's half, in this process: a witness that cannot start, the reader of the stacks
faulthandler writes (any bytes), a zombie's wait status in words, nothing written before the start event.
With real writer processes killed, stopped and crashed: tests/system/test_witness_processes.py."""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mstop_writer import witness
from tests.helpers.common import read_events


def test_a_witness_that_cannot_start_is_said_once_and_the_job_goes_on(tmp_path, monkeypatch, caplog):
    from mstop_writer import MetricsWriter

    monkeypatch.setattr(sys, "executable", "")
    with MetricsWriter(tmp_path / "run", rank=0, world_size=1) as w:
        w.log(1, loss=1.0, step_time=0.1)
    (start,) = [e for e in read_events(tmp_path / "run" / "rank0.events.jsonl") if e["kind"] == "start"]
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


@given(st.binary(max_size=600), st.booleans())
def test_any_bytes_in_a_stacks_file_are_consumed_whole_or_left_never_raised(blob, final):
    parts = witness.split_dumps(blob, final=final)
    used = sum(c for _, c in parts)
    assert 0 <= used <= len(blob)
    if final:
        assert used == len(blob)
    for fields, _ in parts:
        if fields is not None:
            assert isinstance(fields["stacks"], list) and fields["reason"] in ("timeout", "fatal", "asked")


ASKED = """Thread 0x00007f01 (most recent call first):
  File "/a/b.py", line 3 in wait

Current thread 0x00007f02 (most recent call first):
  File "/x/y.py", line 12 in stuck_here
"""


def test_a_first_look_then_the_timed_dump_under_one_header_are_two_stacks():
    """Issue 60: the witness's first look (faulthandler's signal dump: no line of its own) and, the rank still
    stuck, the timed dump after it land under one header: two stack events, each with its reason."""
    blob = (_header(7) + ASKED + "\n" + DUMP).encode()
    parts = witness.split_dumps(blob, final=False)
    assert [f["reason"] for f, _ in parts] == ["asked", "timeout"]
    assert all(f["step"] == 7 for f, _ in parts) and sum(c for _, c in parts) == len(blob)
    assert parts[0][0]["stacks"][1]["frames"] == ["stuck_here (/x/y.py:12)"]
    assert parts[1][0]["stacks"][0]["frames"] == ["wait (/a/b.py:3)", "run (/a/c.py:9)"]


def test_a_dump_after_one_already_read_is_read_under_that_ones_header():
    """The timed dump lands after the first look was read (the file had held still): no header before it. It
    is read under the header of the dump before, not passed over; without one it is no dump of ours."""
    head = _header(7).rstrip("\n")
    (fields, used), = witness.split_dumps(DUMP.encode(), final=False, head=head)
    assert fields["reason"] == "timeout" and fields["step"] == 7 and used == len(DUMP.encode())
    assert witness.split_dumps(DUMP.encode(), final=False) == [(None, len(DUMP.encode()))]


@given(st.binary(max_size=600), st.booleans())
def test_any_bytes_after_a_read_dump_are_consumed_whole_or_left_never_raised(blob, final):
    parts = witness.split_dumps(blob, final=final, head=_header(3).rstrip("\n"))
    assert 0 <= sum(c for _, c in parts) <= len(blob)
    assert all(f is None or f["step"] in (3, None) or isinstance(f["step"], (int, float, str)) for f, _ in parts)


# -- the header the rank keeps: when its witness may ask for a first look ----------------------------------

def _stacks_header(path) -> dict:
    text = path.read_text()
    return witness.parse_header(text[text.rindex(witness.HEADER):].splitlines()[0])


@pytest.mark.parametrize("limit, asks", [(None, True), (3.0, False), (0, False)])
def test_the_header_offers_a_first_look_once_steps_end_and_never_after_training(tmp_path, limit, asks):
    """Issue 60: the header names the signal and the silence (max(5 s, 3 median steps)) only once a step has
    ended (the first one may compile for minutes) and below the timed limit (a 3 s ``stack_after`` dumps
    first; 0: no timed dumps, no first look either); a writer that closed offers none."""
    from mstop_writer import stacks

    path = tmp_path / "rank0.stacks.txt"
    d = stacks.StackDumps(str(path), limit, lambda *_: None)
    try:
        assert "sig" not in _stacks_header(path)
        for step in range(1, 6):
            d.step_end(step, 0.1)
        h = _stacks_header(path)
        assert h["step"] == 5 and (h.get("sig"), h.get("look")) == ((stacks.LOOK_SIGNAL, 5.0) if asks else
                                                                    (None, None)), h
        for step in range(6, 40):
            d.step_end(step, 4.0)
        assert _stacks_header(path).get("look") == (12.0 if asks else None)  # three median steps
    finally:
        d.pause()
    h = _stacks_header(path)
    assert "sig" not in h and h["step"] == 39


def test_a_header_number_that_is_no_json_number_is_none_and_the_stack_is_written_as_json(tmp_path):
    """Issue 58, item 11: ``step=1e999`` in a stacks file's header made the witness write ``Infinity`` into
    the events file, a line no JSON reader takes (the stack was lost)."""
    import json

    blob = (_header("1e999", since=100.0).replace("since=100.000", "since=nan") + DUMP).encode()
    (fields, _), = witness.split_dumps(blob, final=True)
    assert fields["step"] is None and fields["since"] is None and fields["stacks"]
    events = tmp_path / "rank0.events.jsonl"
    events.write_text("")
    me = os.getpid()
    facts = witness.proc_facts(me, float(os.sysconf("SC_CLK_TCK")), os.sysconf("SC_PAGE_SIZE"))
    w = witness.Witness(me, facts["start_ticks"], str(events), None, 0, interval=0.0)
    w.write({"time": 1.0, "kind": "stack", "step": float("inf"), "since": float("nan"), "deep": [float("-inf")]})
    (line,) = events.read_text().splitlines()
    assert json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} in the events file")) == {
        "time": 1.0, "kind": "stack", "step": None, "since": None, "deep": [None]}


def test_a_zombies_wait_status_is_told_in_words():
    assert witness.describe_status(9) == {"how": "signal", "signal": "SIGKILL", "code": -9, "core": False}
    assert witness.describe_status(11 | 0x80)["core"] is True
    assert witness.describe_status(3 << 8) == {"how": "exit", "code": 3}


# -- a fresh dump from outside (py-spy), and the identity a pid must prove ----------------------------------







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


#: a crash's dump as faulthandler left it in CI (stop 69): a second fault while it read another thread's frames
CUT = "Fatal Python error: Segmentation fault\n\nThread 0x00007f4f297fb6c0 (most recent call first):\n"
CRASH = CUT + '  File "/a/b.py", line 3 in wait\n\nCurrent thread 0x00007f02 (most recent call first):\n' \
              '  File "/job/helpers.py", line 7 in read_null\n  File "/job/train.py", line 40 in <module>\n'


@pytest.mark.parametrize("body, cut", [(CUT, True), ("Fatal Python error: Aborted\n\n", True), (CRASH, False),
                                       (CRASH + "Thread 0x00007f03 (most recent call first):\n", True),
                                       (DUMP, False)])
def test_a_crash_dump_cut_short_is_marked_cut(body, cut):
    (fields, _), = witness.split_dumps((_header(48) + body).encode(), final=True)
    assert bool(fields.get("cut")) == cut, fields


@pytest.mark.parametrize("body, said", [
    (CRASH, "it crashed (Segmentation fault): its Python stack at the crash is in the stacks view"),
    (CUT, "it crashed (Segmentation fault): its Python stack at the crash was cut short (faulthandler stopped "
          "within its dump")])
def test_a_crashed_ranks_words_say_whether_its_stack_was_written_whole(tmp_path, capsys, body, said):
    """A segfault's culprit points at its stack in the stacks view; when faulthandler's dump of it stopped short
    (CI: a thread's line, then nothing), the words and the stacks view say so rather than point at frames that
    are not there."""
    import json

    from mstop.cli import main
    from mstop.sources import read_once
    from mstop.view import stacks_lines
    from tests.helpers.runs import start, steps, write_events, write_rank

    run = tmp_path / "run"
    (fields, _), = witness.split_dumps((_header(48, since=1048.0) + body).encode(), final=True)
    for r in (1, 0):
        ev = [start("s1", t=999.0, world_size=2, pid=100 + r)]
        if r == 1:
            ev.append({"time": 1049.0, "kind": "stack", "rank": 1, "pid": 101, "source": "witness", **fields})
        ev.append({"time": 1050.5 - r, "kind": "exit", "rank": r, "pid": 100 + r, "how": "signal",  # msrun ends 0
                   "signal": ("SIGKILL", "SIGSEGV")[r], "code": (-9, -11)[r]})
        write_events(run, r, ev)
        write_rank(run, r, steps(1, 48, t0=1000.0, dt=1.0, step_time=1.0, loss=1.0))
    assert main(["summary", "--json", str(run)]) in (0, 1)
    js = json.loads(capsys.readouterr().out)
    culprit = js["culprit"]
    assert culprit["rank"] == 1 and said in culprit["words"], culprit
    # the diagnosis names the crash as the root, and rank 0's end by the launcher as its cascade
    assert js["diagnosis"][0]["kind"] == "root_cause" and js["diagnosis"][0]["ranks"] == [1], js["diagnosis"]
    assert js["diagnosis"][0]["words"] == "rank 1: killed by SIGSEGV (Segmentation fault) at step 48 (crash); 1 " \
                                          "rank then ended by the launcher", js["diagnosis"]
    (head,) = [t for _, t in stacks_lines(read_once(str(run))) if t.startswith("rank 1:")]
    assert head.startswith("rank 1: crashed (Segmentation fault)") and ("cut short" in head) == (body == CUT), head
