"""Which rank's process ended first, when the ends are closer than any clock tells apart (issue 38).

msrun looks at its workers once a second and ends the others at once: the ends it causes come 0-1 s after
the first, a tenth of them within 0.1 s, the margin one host's exit times need. What orders them then is
sight: whoever saw a rank end (its exit witness, or the viewer watching a log-read job's workers) records
which of the other workers still ran at that moment (``peers_alive``), after that end was certain."""

from __future__ import annotations

from mstop.engine import processes
from mstop.engine.processes import End, first_end


def _start(rank: int, pid: int, **kw) -> dict:
    return {"kind": "start", "rank": rank, "pid": pid, "host": "n1", "boot_id": "b", "pid_ns": "pid:[1]", **kw}


def _end(rank: int, t: float, pid: int, alive: list[int] | None = None, **start) -> End:
    ex = {"kind": "exit", "time": t, "pid": pid, "how": "signal", "signal": "SIGKILL", "code": -9,
          "source": "witness"}
    if alive is not None:
        ex["peers_alive"] = alive
    return End(rank, t, ex, _start(rank, pid, **start))


def test_ends_closer_than_the_margin_are_ordered_by_sight_only():
    """Without a sighting, two ends 0.03 s apart on one host name nobody; with one, the rank that saw the
    other running is first, even when the other's witness woke earlier (its time is the smaller)."""
    assert first_end([_end(0, 100.03, 10), _end(1, 100.0, 11)], 5.0) is None
    found = first_end([_end(0, 100.03, 10), _end(1, 100.0, 11, alive=[10])], 5.0)
    assert found is not None and found[0].rank == 1 and abs(found[1] - 0.03) < 1e-9
    found = first_end([_end(0, 99.98, 10), _end(1, 100.0, 11, alive=[10])], 5.0)
    assert found is not None and found[0].rank == 1 and found[1] < 0
    # beyond the margin, time alone orders them
    found = first_end([_end(0, 100.5, 10), _end(1, 100.0, 11)], 5.0)
    assert found is not None and found[0].rank == 1


def test_a_sighting_counts_only_within_one_pid_namespace():
    """The same pid in another container (pid namespace) or on another host is another process."""
    other_ns = _end(0, 100.03, 10, pid_ns="pid:[2]")
    assert not processes.outlived(_end(1, 100.0, 11, alive=[10]), other_ns)
    other_host = _end(0, 100.03, 10, host="n2")
    assert not processes.outlived(_end(1, 100.0, 11, alive=[10]), other_host)
    assert first_end([other_host, _end(1, 100.0, 11, alive=[10])], 5.0) is None  # 0.03 s across hosts
    # one watcher (the viewer following a log-read job) saw both: its own pids, one namespace
    a = End(1, 100.0, {"time": 100.0, "pid": 11, "source": "viewer", "peers_alive": [10]}, {})
    b = End(0, 100.02, {"time": 100.02, "pid": 10, "source": "viewer", "peers_alive": []}, {})
    assert processes.outlived(a, b) and not processes.outlived(b, a)
    assert first_end([a, b], 5.0)[0].rank == 1


def test_every_other_end_must_be_outlived_or_later_by_its_margin():
    """Three ranks: rank 2 saw rank 0 running but not rank 1, whose end is as close: nobody is named."""
    ends = [_end(0, 100.05, 10), _end(1, 100.01, 11), _end(2, 100.0, 12, alive=[10])]
    assert first_end(ends, 5.0) is None
    ends[2] = _end(2, 100.0, 12, alive=[10, 11])
    assert first_end(ends, 5.0)[0].rank == 2
    # an end known by the files only (no exit): the files' margin applies
    files_only = End(3, 101.0, None, {})
    assert first_end([*ends, files_only], 5.0) is None
    assert first_end([*ends, files_only], 0.5)[0].rank == 2


def test_ends_a_witness_saw_already_over_are_not_ordered_by_its_wake():
    """A whole job SIGKILLed at once on a loaded host (CI, stop 70): rank 1's witness woke 0.25 s before the
    others' and saw no sibling running (``peers_alive`` empty): they had ended by then too. The witnesses'
    times are their wakes, not the ends: nobody is named. A sibling it saw running still follows it; a rank of
    another parent (each rank started by its own shell) or a writer that gave no ``ppid`` is ordered by time."""
    ends = [_end(r, 100.25 if r != 1 else 100.0, 10 + r, alive=[], ppid=7) for r in range(4)]
    assert first_end(ends, 5.0) is None
    ends[1] = _end(1, 100.0, 11, alive=[10, 12, 13], ppid=7)  # it saw them running: first by sight
    assert first_end(ends, 5.0)[0].rank == 1
    assert first_end([_end(r, 100.25 if r != 1 else 100.0, 10 + r, alive=[], ppid=7 + r) for r in range(4)],
                     5.0)[0].rank == 1
    assert first_end([_end(r, 100.25 if r != 1 else 100.0, 10 + r, alive=[]) for r in range(4)], 5.0)[0].rank == 1


def test_a_stopped_rank_woken_by_the_kill_that_ends_it_is_still_the_held_one(tmp_path):
    """Issue 58 (the stopped-rank flake): rank 3 stopped (T) for 40 s; the kill that ended it woke it, and its
    witness saw it running (R) a moment before its exit. It was held until its end: it stays the culprit,
    not the rank whose process msrun ended first of the others."""
    from mstop.engine.endings import culprit
    from mstop.engine.figures import Options
    from mstop.sources import read_once
    from tests.helpers.runs import start, steps, write_events, write_rank

    run = tmp_path / "run"
    for r in range(4):
        events = [start("s1", t=990.0, world_size=4, pid=100 + r, host="n0", boot_id="b", pid_ns="ns")]
        if r == 3:
            events += [{"time": 1061.0, "kind": "proc", "rank": 3, "pid": 103, "state": "T", "changed": True},
                       {"time": 1081.0, "kind": "proc", "rank": 3, "pid": 103, "state": "T"},
                       {"time": 1101.0, "kind": "proc", "rank": 3, "pid": 103, "state": "R", "changed": True},
                       {"time": 1101.4, "kind": "exit", "rank": 3, "pid": 103, "how": "signal", "signal": "SIGKILL",
                        "code": -9, "last_state": "R"}]
        else:  # their AllReduce timed out waiting for rank 3; msrun ended rank 1 first, the others after it
            t = 1100.0 if r == 1 else 1100.8
            events += [{"time": t, "kind": "exit", "rank": r, "pid": 100 + r, "how": "signal", "signal": "SIGTERM",
                        "code": -15, "last_state": "S"}]
        write_events(run, r, events)
        write_rank(run, r, steps(1, 60, t0=1000.0, dt=1.0, step_time=1.0, loss=1.0))
    c = culprit(read_once(str(run)), Options(clock=lambda: 1200.0))
    assert c is not None and c.rank == 3 and c.fact == "state", c
    assert c.words.startswith("rank 3's process was stopped (SIGSTOP or Ctrl-Z) from "), c.words


def test_processes_that_all_exited_with_an_error_code_and_wrote_no_error_are_said_so(tmp_path):
    """A failed job whose every process exited with code 1 in the same moment and wrote no abort: no rank is
    named (no fact tells them apart), and the words say how they ended, not "a rank aborted"."""
    from mstop.engine.endings import culprit, failure_message
    from mstop.engine.figures import Options, status
    from mstop.sources import read_once
    from tests.helpers.runs import start, steps, write_events, write_rank

    run = tmp_path / "run"
    for r in range(2):
        write_events(run, r, [start("s1", t=990.0, world_size=2, pid=200 + r, host="n0", boot_id="b", pid_ns="ns"),
                              {"time": 1061.0, "kind": "exit", "rank": r, "pid": 200 + r, "how": "exit", "code": 1}])
        write_rank(run, r, steps(1, 60, t0=1000.0, dt=1.0, step_time=1.0, loss=1.0))
    store, opts = read_once(str(run)), Options(clock=lambda: 1100.0)
    assert status(store, opts) == "failed" and culprit(store, opts) is None
    words, _ = failure_message(store, opts)
    assert words == "every process ended and none wrote an error (ranks 0-1: exited with code 1): see the ranks' logs"
