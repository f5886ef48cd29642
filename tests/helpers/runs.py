"""Build run directories with exact, known contents for engine tests."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Callable

from mstop.engine.spill import SpillBudget
from mstop.engine.store import Store
from mstop.sources.local import LocalSource
from mstop_writer import COLUMNS


def write_rank(run: Path, rank: int, rows: list[dict[str, Any]], *, mode: str = "a", header: bool = True) -> None:
    """Append ``rows`` (dicts of column -> value; missing = empty cell) to ``rank<R>.csv``."""
    path = run / f"rank{rank}.csv"
    run.mkdir(parents=True, exist_ok=True)
    new = not path.exists() or mode == "w"
    with open(path, mode) as f:
        if new and header:
            f.write(",".join(COLUMNS) + "\n")
        f.writelines(",".join(["" if (v := r.get(c)) is None else str(v) for c in COLUMNS]) + "\n" for r in rows)


def written_at(run: Path, t: float) -> Path:
    """Date every file of ``run`` ``t`` (its modification time): an old run, its files last written when its
    rows say. Files written just now with rows dated long ago are a live job whose clock is wrong
    (mstop.engine.clocks), whose figures move with the clock."""
    import os

    for f in run.iterdir():
        if f.is_file():
            os.utime(f, (t, t))
    return run


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
    # the start event names the heartbeat interval the generated beats keep (the writer's own thread was
    # held back with a long one), and ``host`` when given
    lines = [json.loads(x) for x in Path(w.events_path).read_text().splitlines()]
    for e in lines:
        if e["kind"] == "start":
            e["heartbeat_interval"] = 30.0
            if host is not None:
                e["host"] = host
    Path(w.events_path).write_text("".join(json.dumps(e) + "\n" for e in lines))


def cluster_1024(run: Path) -> float:
    """1,024 ranks on 128 hosts, 5 s a step: rank 517's input pipeline drags (a straggler), rank 300 died at
    step 20, 202 s ago, its rows those of the same steps of the others (data parallel: every rank's step ends
    at the same moment), its heartbeats gone since (generated with the test helpers: a CPU cannot run 1,024
    ranks)."""
    t0, n, dt = 1_800_000_000.0, 60, 5.0
    now = t0 + n * dt + 2
    for r in range(1024):
        g = random.Random(r)
        dead = r == 300
        last = 20 if dead else n
        base = t0

        def dw(s, r=r, g=g):  # seconds of the 5 s step: 35 % on rank 517 from step 31, 2 % elsewhere
            return dt * (0.35 + g.gauss(0, 0.02) if r == 517 and s > 30 else abs(g.gauss(0.02, 0.005)))

        write_rank(run, r, steps(1, last, t0=base, dt=dt, loss=lambda s: 4.0 * s ** -0.2, step_time=dt,
                                 data_wait=dw, tokens=4096, mem_peak=50e9 + r * 1e6, mem_total=64e9))
        hb = t0 + last * dt if dead else now - 3
        write_events(run, r, [start("s1", t=base - 5, host=f"node{r // 8:03d}", memory_source="device",
                                    run_name="moe-1024 (generated: a straggler, a dead rank)")]
                     + [{"time": hb - 30 * k, "kind": "heartbeat", "session": "s1"} for k in range(3)][::-1])
    return now


#: the runs of :func:`runs_folder`: name -> (status at NOW_RUNS, note, world size)
RUNS = {
    "base": ("finished", "baseline", 2),
    "no-delay": ("running", "remove the data delay", 2),
    "recompute/seed1": ("running", "recompute on", 4),
    "recompute/seed2": ("stalled", "recompute on", 4),
    "lr-high": ("failed", "lr x10", 2),
}
NOW_RUNS = 1_800_000_400.0


def write_run(run: Path, *, status: str, note: str, world: int, steps: int = 120, t0: float = 1_800_000_000.0,
              loss0: float = 4.0, step_time: float = 1.0, clock_now: float = NOW_RUNS) -> None:
    """One run of ``world`` ranks written with the real MetricsWriter (its start event, rows and end or
    abort), in the state ``status`` names at ``clock_now``: finished (an end event), running (its last row
    just now), stalled (its last row 5 minutes before), failed (an abort event)."""
    from mstop_writer import MetricsWriter

    last = {"running": clock_now - 1.0, "stalled": clock_now - 300.0}.get(status, t0 + steps * step_time)
    n = steps if status not in ("running", "stalled") else int((last - t0) / step_time)
    now = [t0]
    for r in range(world):
        now[0] = t0
        w = MetricsWriter(run, rank=r, world_size=world, run_name=run.name, note=note, tokens_per_step=4096,
                          total_steps=steps * 4, heartbeat_interval=3600, memory_interval=3600,
                          clock=lambda: now[0], flops_per_token=6e6, peak_flops=1e12)
        for s in range(1, n + 1):
            now[0] = t0 + s * step_time
            w.log(s, loss=loss0 * s ** -0.3, lr=1e-3, grad_norm=1.0, step_time=step_time, data_wait=0.01)
        if status == "failed":
            w.event("abort", step=n, session=w.session, error="RuntimeError: loss is NaN")
        w.close(clean=status in ("finished",))


def runs_folder(root: Path) -> Path:
    """:data:`RUNS` below ``root`` (a nested group too), each with its own loss."""
    for i, (name, (status, note, world)) in enumerate(RUNS.items()):
        write_run(root / name, status=status, note=note, world=world, loss0=4.0 + 0.1 * i)
    return root


def followed(run: Path, files: dict[str, bytes], cuts: list[int], budget: SpillBudget | None = None,
             each: Callable[[Store], None] | None = None) -> Store:
    """A run's files appended in pieces (each cut at the same thousandths ``cuts``), read round by round by the
    local source (kept descriptors, as a follow does; the rounds driven here, without its thread) into a store
    of spill ``budget``; ``each(store)`` after every round. The store."""
    for name in files:
        (run / name).write_bytes(b"")
    store = Store(budget)
    src = LocalSource(str(run), store)
    src.keep_open()
    src.read_all()
    done = dict.fromkeys(files, 0)
    for f in sorted({c / 1000 for c in cuts} | {1.0}):
        for name, data in files.items():
            end = int(len(data) * f)
            with open(run / name, "ab") as out:
                out.write(data[done[name]:end])
            done[name] = end
        src.round(src.files)
        if each is not None:
            each(store)
    src.stop()
    return store
