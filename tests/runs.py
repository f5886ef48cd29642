"""Build run directories with exact, known contents for engine tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mstop_writer import COLUMNS


def write_rank(run: Path, rank: int, rows: list[dict[str, Any]], *, mode: str = "a", header: bool = True) -> None:
    """Append ``rows`` (dicts of column -> value; missing = empty cell) to ``rank<R>.csv``."""
    path = run / f"rank{rank}.csv"
    run.mkdir(parents=True, exist_ok=True)
    new = not path.exists() or mode == "w"
    with open(path, mode) as f:
        if new and header:
            f.write(",".join(COLUMNS) + "\n")
        for r in rows:
            f.write(",".join("" if r.get(c) is None else str(r[c]) for c in COLUMNS) + "\n")


def write_events(run: Path, rank: int, events: list[dict[str, Any]]) -> None:
    run.mkdir(parents=True, exist_ok=True)
    with open(run / f"rank{rank}.events.jsonl", "a") as f:
        for e in events:
            f.write(json.dumps(e) + "\n")


def start(session: str, t: float = 0.0, **fields: Any) -> dict[str, Any]:
    return {"time": t, "kind": "start", "session": session, **fields}


def steps(first: int, last: int, *, session: str = "s1", t0: float = 1000.0, dt: float = 1.0,
          **values: Any) -> list[dict[str, Any]]:
    """Rows for steps first..last, one every ``dt`` seconds; values may be callables of the step."""
    out = []
    for s in range(first, last + 1):
        row = {"time": t0 + (s - first + 1) * dt, "step": s, "session": session}
        for k, v in values.items():
            row[k] = v(s) if callable(v) else v
        out.append(row)
    return out
