"""A run whose start event names logs, as a forged one would (tests of issue 40 item 9, in both tiers)."""

from __future__ import annotations

import os
import time

from tests.helpers.runs import start, steps, write_events, write_rank

T0 = time.time() - 100.0  # the job ran just now: its output file was written since its start
SECRET = "SECRET-KEY-MATERIAL RuntimeError: the line a forged start event wants shown"


def forged_run(tmp_path, logs: list[str], *, failed: bool = True):
    """A run of 20 rows whose start event names ``logs`` as its logs; ``failed``: it ends in an abort."""
    run = tmp_path / "run"
    events = [start("s1", T0, logs=logs)]
    if failed:
        events.append({"time": T0 + 21, "kind": "abort", "session": "s1", "step": 20,
                       "error": "ValueError: the job's own abort"})
    write_events(run, 0, events)
    write_rank(run, 0, steps(1, 20, t0=T0, step_time=1.0))
    return run


def private_file(path) -> str:
    """A file owned by another user (nobody), as a private file of someone else is."""
    path.write_text(SECRET + "\n")
    os.chown(path, 65534, 65534)
    os.chmod(path, 0o600)
    return str(path)
