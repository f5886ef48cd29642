"""Builders the tests of hostile input share (system/test_hostile_input_processes.py, system/test_tmux.py,
unit/test_hostile_input.py): plain functions and data, no fixtures."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from mstop.engine.figures import Options
from mstop.engine.store import Store
from mstop.sources.local import LocalSource
from mstop_writer import MetricsWriter
from tests.helpers.runs import start, steps, write_events, write_rank

HOSTILE = {"run_name": "\x1b]2;PWNED\x1b\\", "note": "\x1b[2J wipe", "host": "\x1b[5;5Hhere\x9b31m\x07"}


CONTROL = ("\x1b", "\x9b", "\x07")


def load(run, clock=None) -> tuple[Store, Options]:
    store = Store()
    LocalSource(str(run), store).read_all()
    return store, Options(clock=clock or time.time)


def hostile_run(run: Path) -> None:
    """A finished run whose names, host, note, column, checkpoint path and eval metric carry escapes."""
    with MetricsWriter(run, run_name=HOSTILE["run_name"], note=HOSTILE["note"], tokens_per_step=10,
                       extra_columns=["acc\x1b[31m"], witness=False) as w:
        for s in range(1, 31):
            w.log(s, loss=1.0 / s, step_time=0.1, **{"acc\x1b[31m": 0.5})
        w.checkpoint(30, "ck/\x1b[2Jstep30.ckpt")
        w.event("eval", step=30, metrics={"\x9bval": 0.7})
    events = [json.loads(x) for x in (run / "rank0.events.jsonl").read_text().splitlines()]
    events[0]["host"] = HOSTILE["host"]
    (run / "rank0.events.jsonl").write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events))


def no_control(text: str) -> None:
    bad = [c for c in CONTROL if c in text]
    assert not bad, f"control codes {bad!r} in output: {text[:300]!r}"


def fifo_run(run: Path) -> None:
    write_rank(run, 0, steps(1, 20, t0=1000.0, loss=1.0, step_time=1.0))
    write_events(run, 0, [start("s1", 990.0), {"time": 1021.0, "kind": "end", "session": "s1"}])
    os.mkfifo(run / "rank3.csv")
    os.mkfifo(run / "rank3.events.jsonl")
    (run / "rank4.csv").mkdir()
    (run / "rank5.events.jsonl").symlink_to(run / "nowhere")
    os.mkfifo(run / "mstop.toml")  # the rules file too


def spiky_run(run: Path, now: float) -> None:
    """600 steps ending now: a 30x loss spike at step 300, starving input on rank 1 for steps 100-150, a NaN
    at step 450 on rank 0, still running (heartbeats)."""
    import random

    g = random.Random(1)
    t0 = now - 600
    for r in (0, 1):
        def loss(s, r=r):
            if r == 0 and s == 450:
                return "nan"
            return 30.0 if s == 300 else 2.0 + 0.01 * g.gauss(0, 1)

        def dw(s, r=r):
            return 0.5 if r == 1 and 100 <= s <= 150 else 0.01

        write_rank(run, r, steps(1, 600, t0=t0, loss=loss, step_time=1.0, data_wait=dw, tokens=100))
        write_events(run, r, [start("s1", t0 - 5)] + [{"time": now - k, "kind": "heartbeat", "session": "s1"}
                                                      for k in (60, 30, 1)])


