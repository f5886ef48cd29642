"""Builders the tests of hostile events share (system/test_hostile_events_cli.py, unit/test_hostile_events.py):
plain functions and data, no fixtures."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.runs import start, steps, write_rank

HUGE = int("9" * 400)


def write(run: Path, events: list[dict]) -> None:
    run.mkdir(parents=True, exist_ok=True)
    with open(run / "rank0.events.jsonl", "w") as f:
        for e in events:
            f.write(json.dumps(e) + "\n")  # Python's json writes Infinity, NaN and huge integers as they are
    write_rank(run, 0, steps(1, 40, t0=1000.0, dt=1.0, step_time=1.0, tokens=100, loss=2.0), mode="w")


CASES = {
    "profile_steps 5": start("s1", t=999.0, world_size=1, profile_steps=5),
    "profile_steps text": start("s1", t=999.0, world_size=1, profile_steps="abc"),
    "profile_steps three": start("s1", t=999.0, world_size=1, profile_steps=[1, 2, 3]),
    "profile_steps 400 digits": start("s1", t=999.0, world_size=1, profile_steps=[1, HUGE]),
    "span 400 digits": {"time": 1050.0, "kind": "profile", "session": "s1", "step": 14, "first_step": HUGE,
                        "last_step": HUGE, "shares": {"compute": 0.5, "comm_not_overlapped": 0.1,
                                                      "overlapped": 0.0, "idle": 0.4}},
    "share 400 digits": {"time": 1050.0, "kind": "profile", "session": "s1", "step": 14, "first_step": 10,
                         "last_step": 14, "shares": {"compute": HUGE, "comm_not_overlapped": 0.1,
                                                     "overlapped": 0.0, "idle": 0.4}},
    "share text": {"time": 1050.0, "kind": "profile", "session": "s1", "step": 14, "first_step": 10,
                   "last_step": 14, "shares": "abc"},
    "step Infinity": {"time": 1050.0, "kind": "profile", "session": "s1", "step": float("inf"),
                      "first_step": float("-inf"), "last_step": float("inf"),
                      "shares": {"compute": 0.5, "comm_not_overlapped": 0.1, "overlapped": 0.0, "idle": 0.4}},
    "request Infinity": {"time": 1050.0, "kind": "profile_request", "session": "s1", "step": 5,
                         "first_step": 7, "last_step": float("inf"), "steps": float("inf")},
}


