"""Builders the tests of goodput share (system/test_goodput_real_jobs.py, unit/test_goodput.py): plain functions and
data, no fixtures."""

from __future__ import annotations

from tests.helpers.runs import start, write_events, write_rank


def row(step: int, t: float, st: float = 1.0, dw: float = 0.0, session: str = "A") -> dict:
    return {"time": t, "step": step, "loss": 1.0, "step_time": st, "data_wait": dw, "tokens": 100,
            "session": session}


def known_run(path, rank: int = 0, shift: float = 0.0):
    """Session A starts at 1000: its first row at 1010 (10 s: 1 s a step, 9 s start-up and compile), steps 2-10
    each 1 s with 0.25 s of data wait, step 5 saving a checkpoint (3 s: 2 s over the median), a 10 s gap
    before step 8 with no step running. A dies after step 10 (its last row at 1031); session B starts at 1100, resumed
    from step 6 (A's steps 6-10 are recomputed: 5 s), its first row at 1105 (4 s compile), steps 7-12, ends
    at 1111 with an end event."""
    rows = [row(1, 1010.0 + shift)]
    t = 1010.0
    for s in range(2, 11):
        st = 3.0 if s == 5 else 1.0
        t += st + (10.0 if s == 8 else 0.0)
        rows.append(row(s, t + shift, st=st, dw=0.25))
    b_rows = [row(6, 1105.0 + shift, session="B")] + [row(s, 1105.0 + (s - 6) + shift, dw=0.25, session="B")
                                                      for s in range(7, 13)]
    write_events(path, rank, [start("A", t=1000.0 + shift, world_size=2),
                              {"time": 1016.0 + shift, "kind": "checkpoint", "step": 5, "path": "ck5"},
                              start("B", t=1100.0 + shift, world_size=2),
                              {"time": 1111.0 + shift, "kind": "end", "session": "B", "rows": 7}])
    write_rank(path, rank, rows + b_rows)
    return path


