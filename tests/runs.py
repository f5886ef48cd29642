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


def write_with_writer(run: Path, rank: int, world: int, rows: list[dict[str, Any]], *,
                      beats: list[float] = (), t_start: float | None = None, host: str | None = None,
                      **options: Any) -> None:
    """Write rank ``rank``'s files with the real :class:`MetricsWriter` (its own start event, header and
    row format), at the times the rows give (``time`` of each row dict drives the writer's clock), plus
    heartbeats at the times ``beats``. The writer is closed without an ``end`` event: the job is running.

    ``host`` replaces this machine's name in the start event afterwards: one machine cannot be the
    128 nodes of a generated cluster (and 1,024 ranks' host memory summed on one host is an OOM)."""
    from mstop_writer import MetricsWriter

    now = [t_start if t_start is not None else (rows[0]["time"] - 5 if rows else 0.0)]
    w = MetricsWriter(run, rank=rank, world_size=world, heartbeat_interval=3600, memory_interval=3600,
                      clock=lambda: now[0], **options)
    items = [(r["time"], 0, r) for r in rows] + [(t, 1, None) for t in beats]
    for t, kind, r in sorted(items, key=lambda i: (i[0], i[1])):
        now[0] = t
        if kind:
            w.event("heartbeat", step=w.last_step, session=w.session)
        else:
            w.log(r["step"], **{k: v for k, v in r.items() if k not in ("time", "step", "session")})
    w.close(clean=False)
    if host is not None:
        lines = [json.loads(x) for x in Path(w.events_path).read_text().splitlines()]
        for e in lines:
            if e["kind"] == "start":
                e["host"] = host
        Path(w.events_path).write_text("".join(json.dumps(e) + "\n" for e in lines))
