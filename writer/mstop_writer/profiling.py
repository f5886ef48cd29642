"""A profiler window: MindSpore's own Profiler for a few steps, summarised into one ``profile`` event.

``ProfileWindow.after_step(step, t)`` is called once a step has ended (by ``MstopCallback``, or by
``MetricsWriter.log`` in a hand-written loop). When the step before the window ends, MindSpore's
``Profiler`` starts; when the window's last step ends it stops, and a background thread (training goes
on) runs its analysis, reads what it wrote, and appends a ``profile`` event: per step the time in
compute, communication not overlapped by compute, overlapped communication, and idle, as seconds and as
shares of the step; the ten operators that took the most time; where the profile is.

Where the profiler writes ``ASCEND_PROFILER_OUTPUT/step_trace_time.csv`` (Ascend) that file is read: its
header is MindSpore's ``StepTraceTimeHeaders`` (``mindspore/profiler/analysis/viewer/
ascend_step_trace_time_viewer.py`` in MindSpore 2.10: ``Step, Computing, Communication(Not Overlapped),
Overlapped, Communication, Free, Stage, Bubble, Communication(Not Overlapped and Exclude Receive),
Preparing``), in microseconds (sums of the trace events' ``dur``, which Chrome's trace format gives in
µs). Elsewhere (CPU, GPU) the same figures come from ``trace_view.json``: the operators' intervals inside
each step's wall time (from one row's end to the next), communication operators known by name.

``profile.request`` in the run directory (holding a step count, default 10) asks a running job to profile
its next steps: rank 0 turns it into ``profile.plan`` (the steps, far enough ahead for every rank to see
the plan) and removes it; every rank profiles the planned steps. Each looks at most once every
``REQUEST_EVERY`` seconds (one or two ``stat`` calls). Standard library only; MindSpore is imported when a
window starts.
"""

from __future__ import annotations

import csv
import glob
import json
import logging
import math
import os
import re
import threading
import time
from collections import deque
from typing import Any, Callable

from ._files import NotRegular, lstat_regular, read_regular, replace_file

log = logging.getLogger("mstop_writer")

#: the file a viewer (or a user) writes to ask for a profile of the next N steps
REQUEST_NAME = "profile.request"
#: what rank 0 makes of a request: the steps every rank profiles (JSON: first_step, last_step, steps, made)
PLAN_NAME = "profile.plan"
#: seconds between looks for a request
REQUEST_EVERY = 5.0
#: steps profiled when a request gives no count; the most a request may ask for
DEFAULT_STEPS, MAX_STEPS = 10, 1000
#: the recent steps whose fastest time sets how far ahead a plan starts (one slow step, a load spike or a
#: checkpoint, planned from alone, put the window so few steps ahead that another rank passed it unlooking)
PACE_STEPS = 64
#: communication operators, by name (HCCL on Ascend, NCCL on GPU, MindSpore's own op names)
COMM = re.compile(r"AllReduce|AllGather|ReduceScatter|Broadcast|AlltoAll|AllToAll|Send|Receive|Recv|"
                  r"hcom_|Hccl|Nccl|nccl|Barrier|CollectivePermute", re.IGNORECASE)
#: step_trace_time.csv's columns (see the module docstring), in µs
STEP_TRACE_COLUMNS = {"Computing": "compute", "Communication(Not Overlapped)": "comm_not_overlapped",
                      "Overlapped": "overlapped", "Free": "idle", "Stage": "stage", "Bubble": "bubble"}


def write_request(run_dir: str, steps: int) -> None:
    """Ask the job writing ``run_dir`` for a profile of its next ``steps`` steps (what the monitor's ``P``
    does): ``profile.request`` is made a new regular file, renamed over whatever is at the name (a link or
    a FIFO planted there is replaced, never written through nor opened). ``OSError`` when it cannot be."""
    replace_file(run_dir, REQUEST_NAME, f"{int(steps)}\n".encode())


class ProfileWindow:
    """When to profile, and the profile's summary once it is written."""

    def __init__(self, run_dir: str, rank: int, emit: Callable[..., None],
                 steps: tuple[int, int] | None = None, world_size: int = 2) -> None:
        self.run_dir, self.rank, self.emit, self.world_size = run_dir, rank, emit, world_size
        self.window: tuple[int, int] | None = None
        self.profiler: Any = None
        self.ends: dict[int, float] = {}  # step -> wall time it ended (time.time()), inside the window
        self.thread: threading.Thread | None = None
        self._next_look = 0.0
        self._plan_seen: tuple[float, int] | None = None
        self.started = time.time()  # a plan older than this process is an earlier process's
        self.failed: str | None = None
        self._refused: set[str] = set()
        self._paces: deque[float] = deque(maxlen=PACE_STEPS)
        if steps is not None:
            self.plan(*steps)

    def plan(self, first: int, last: int) -> None:
        """Profile steps ``first`` to ``last`` (inclusive), unless a window is already open."""
        if self.profiler is None and first >= 1 and last >= first:
            self.window = (int(first), int(last))

    @property
    def active(self) -> bool:
        return self.profiler is not None

    def after_step(self, step: int, t: float | None = None) -> None:
        """Step ``step`` ended (at wall time ``t``): open or close the window. Never raises."""
        t = time.time() if t is None else t
        try:
            if self.window is None:
                return
            first, last = self.window
            if self.profiler is not None and first <= step <= last:
                self.ends[step] = t
            if step == first - 1 and self.profiler is None:
                self.ends = {step: t}
                try:
                    self._start()
                except Exception as e:  # noqa: BLE001 - said in a profile event, so readers show why
                    self.window = None
                    self.emit("profile", step=last, first_step=first, last_step=last, path=None,
                              error=f"{type(e).__name__}: {e}")
                    raise
            elif step >= last and self.profiler is not None:
                self._stop(first, last)
            elif step >= first and self.profiler is None:
                self.window = None  # the window's start was missed (a resume past it): nothing to profile
        except Exception as e:  # noqa: BLE001 - profiling must never stop training
            self._fail(f"{type(e).__name__}: {e}")

    def pace(self, step_time: object) -> None:
        """A step took ``step_time`` seconds: the fastest of the last PACE_STEPS is the pace a plan assumes
        (the other ranks must look before the window, at whatever speed the steps go)."""
        if isinstance(step_time, (int, float)) and step_time > 0 and math.isfinite(step_time):
            self._paces.append(float(step_time))

    def check_request(self, step: int, step_time: float | None = None) -> None:
        """At most every REQUEST_EVERY seconds (one or two ``stat`` calls): rank 0 turns a new
        ``profile.request`` into ``profile.plan`` (steps far enough ahead for every rank to see it at its
        next look); every rank plans the window of a plan it has not seen."""
        now = time.monotonic()
        if now < self._next_look or self.profiler is not None:
            return
        self._next_look = now + REQUEST_EVERY
        try:
            if self.rank == 0:
                self._take_request(step, step_time if isinstance(step_time, (int, float)) else None)
            self._read_plan(step)
        except Exception as e:  # noqa: BLE001 - a request must never stop training
            self._fail(f"{type(e).__name__}: {e}")

    def _take_request(self, step: int, step_time: float | None) -> None:
        path = os.path.join(self.run_dir, REQUEST_NAME)
        try:
            text = read_regular(path, 64).decode("utf-8", "replace").strip()
        except FileNotFoundError:
            return
        except OSError as e:  # a FIFO, device, directory or link at the name: never read through, left alone
            self._refuse(REQUEST_NAME, e)
            return
        try:
            n = max(1, min(MAX_STEPS, int(text))) if text else DEFAULT_STEPS
        except ValueError:
            n = DEFAULT_STEPS
        # the other ranks look every REQUEST_EVERY seconds: start after that many seconds of steps at the
        # fastest pace of late, and more
        self.pace(step_time)
        fastest = min(self._paces) if self._paces else None
        alone = self.world_size <= 1 or fastest is None
        ahead = 2 if alone else max(2, math.ceil((REQUEST_EVERY + 2.0) / fastest) + 1)
        plan = {"first_step": step + ahead, "last_step": step + ahead + n - 1, "steps": n, "made": time.time()}
        try:
            # a new file of a random name, renamed over the plan: whole or not at all for every reader, and
            # nothing planted at the plan's or a temporary name is written through
            replace_file(self.run_dir, PLAN_NAME, json.dumps(plan).encode())
            os.remove(path)  # taken: a new request is a new file
        except OSError as e:
            self._fail(f"cannot plan the requested profile: {e}")

    def _read_plan(self, step: int) -> None:
        path = os.path.join(self.run_dir, PLAN_NAME)
        try:
            st = lstat_regular(path)
            key = (st.st_mtime, st.st_size)
            if key == self._plan_seen or st.st_mtime < self.started:
                return  # seen, or left by an earlier process of this job
            self._plan_seen = key
            plan = json.loads(read_regular(path, 4096))
            first, last = _whole(plan["first_step"]), _whole(plan["last_step"])
        except FileNotFoundError:
            return
        except NotRegular as e:
            self._refuse(PLAN_NAME, e)
            return
        except (OSError, ValueError, KeyError, TypeError, OverflowError):
            return
        if first <= step:
            return  # too late for this rank: it was past the window when it looked
        if last - first + 1 > MAX_STEPS:
            return  # no plan rank 0 makes
        self.plan(first, last)
        self.emit("profile_request", step=step, first_step=first, last_step=last, steps=last - first + 1)

    def _refuse(self, name: str, e: OSError) -> None:
        """Warn once per name that what is there is not a regular file, and leave it alone."""
        if name not in self._refused:
            self._refused.add(name)
            log.warning("mstop_writer: %s in %s is %s: not read, not written, not removed (training continues)",
                        name, self.run_dir, e.strerror or e)

    # -- the profiler ---------------------------------------------------------------------------

    def _start(self) -> None:
        import mindspore as ms

        top = os.path.join(self.run_dir, "profile")
        out = os.path.join(top, f"rank{self.rank}")
        for d in (top, out):  # the profile stays inside the run directory (README: "Profiles")
            if os.path.islink(d):
                raise OSError(f"{d} is a symlink: not profiling through it (profiles stay in the run directory)")
            try:
                os.mkdir(d)
            except FileExistsError:
                if not os.path.isdir(d):
                    raise OSError(f"{d} is not a directory: not profiling") from None
        self.path = out
        self.profiler = ms.Profiler(start_profile=False, output_path=out)
        self.profiler.start()

    def _stop(self, first: int, last: int) -> None:
        prof, self.profiler, self.window = self.profiler, None, None
        prof.stop()
        ends = dict(self.ends)
        self.thread = threading.Thread(target=self._summarise, args=(prof, first, last, ends),
                                       name="mstop-profile", daemon=True)
        self.thread.start()

    def _summarise(self, prof: Any, first: int, last: int, ends: dict[int, float]) -> None:
        try:
            prof.analyse()
            summary = summarise(self.path, first, last, ends)
            self.emit("profile", step=last, first_step=first, last_step=last, path=self.path, **summary)
        except Exception as e:  # noqa: BLE001
            self._fail(f"{type(e).__name__}: {e}")
            self.emit("profile", step=last, first_step=first, last_step=last, path=getattr(self, "path", None),
                      error=f"{type(e).__name__}: {e}")

    def _fail(self, why: str) -> None:
        if self.failed is None:
            log.warning("mstop_writer: profiling failed: %s (training continues)", why)
        self.failed = why

    def wait(self, timeout: float = 120.0) -> None:
        """Wait for a profile being summarised (tests; close() does not wait)."""
        if self.thread is not None:
            self.thread.join(timeout)


def summarise(path: str, first: int, last: int, ends: dict[int, float]) -> dict[str, Any]:
    """The ``profile`` event's figures from what the profiler wrote under ``path``."""
    csvs = glob.glob(os.path.join(path, "**", "ASCEND_PROFILER_OUTPUT", "step_trace_time.csv"), recursive=True)
    rows = step_trace_rows(csvs[0]) if csvs else []
    traces = glob.glob(os.path.join(path, "**", "trace_view.json"), recursive=True)
    ops: list[dict[str, Any]] = []
    source = "step_trace_time.csv" if rows else "trace_view.json"
    if traces:
        with open(sorted(traces)[-1], encoding="utf-8") as f:
            events = json.load(f)
        ops = _op_events(events if isinstance(events, list) else events.get("traceEvents", []))
    if not rows:
        rows = trace_rows(ops, first, last, ends)
    if not rows:
        raise ValueError(f"no step of {first}-{last} found in the profile under {path}")
    return {"source": source, "steps_profiled": rows, "shares": shares(rows), "top_ops": top_ops(ops)}


def step_trace_rows(path: str) -> list[dict[str, Any]]:
    """Ascend's step_trace_time.csv: a step per row, µs → seconds."""
    out = []
    with open(path, newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            row: dict[str, Any] = {"step": _int(r.get("Step"))}
            for col, key in STEP_TRACE_COLUMNS.items():
                v = _float(r.get(col))
                if v is not None:
                    row[key] = v / 1e6
            parts = [row.get(k) for k in ("compute", "comm_not_overlapped", "idle")]
            if all(p is not None for p in parts):
                row["wall"] = sum(parts)  # type: ignore[arg-type]
                out.append(row)
    return out


def _op_events(events: list[Any]) -> list[dict[str, Any]]:
    """The operator events of a Chrome trace: complete events (``ph: X``) of processes named as operator
    lanes (MindSpore's ``CPU OP``; kernels, hardware, HCCL), else every complete event with an op type."""
    names = {e.get("pid"): str(e.get("args", {}).get("name", "")) for e in events
             if isinstance(e, dict) and e.get("ph") == "M" and e.get("name") == "process_name"}
    lanes = {pid for pid, n in names.items() if re.search(r"\bOP\b|Kernel|Hardware|HCCL|Communication|GPU", n)}
    out = []
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        if lanes and e.get("pid") not in lanes:
            continue
        if not lanes and not (e.get("args") or {}).get("type"):
            continue
        ts, dur = _float(e.get("ts")), _float(e.get("dur"))
        if ts is None or dur is None or dur < 0:
            continue
        name = str(e.get("name", ""))
        out.append({"name": name, "start": ts / 1e6, "end": (ts + dur) / 1e6, "comm": bool(COMM.search(name))})
    return out


def trace_rows(ops: list[dict[str, Any]], first: int, last: int, ends: dict[int, float]) -> list[dict[str, Any]]:
    """Per profiled step, from the operators' intervals inside its wall time (the previous step's end to
    its own): compute = the union of compute operators, communication not overlapped = communication
    outside it, overlapped = communication inside it, idle = the rest."""
    out = []
    for step in range(first, last + 1):
        lo, hi = ends.get(step - 1), ends.get(step)
        if lo is None or hi is None or hi <= lo:
            continue
        comp = _union([(max(o["start"], lo), min(o["end"], hi)) for o in ops if not o["comm"]
                       and o["end"] > lo and o["start"] < hi])
        comm = _union([(max(o["start"], lo), min(o["end"], hi)) for o in ops if o["comm"]
                       and o["end"] > lo and o["start"] < hi])
        c, m = _length(comp), _length(comm)
        both = _length(_intersect(comp, comm))
        wall = hi - lo
        out.append({"step": step, "wall": wall, "compute": c, "comm_not_overlapped": m - both,
                    "overlapped": both, "idle": max(0.0, wall - (c + m - both))})
    return out


def shares(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Each part's share of the profiled steps' wall time (compute + comm not overlapped + idle = 1;
    overlapped is inside compute)."""
    wall = sum(r["wall"] for r in rows)
    if wall <= 0:
        return {}
    return {k: round(sum(r.get(k, 0.0) for r in rows) / wall, 6)
            for k in ("compute", "comm_not_overlapped", "overlapped", "idle", "stage", "bubble")
            if any(k in r for r in rows)}


def top_ops(ops: list[dict[str, Any]], n: int = 10) -> list[dict[str, Any]]:
    """The ``n`` operator kinds that took the most time (``.../MatMul-op3`` counts as MatMul)."""
    total: dict[str, float] = {}
    for o in ops:
        kind = re.sub(r"-op\d+$", "", o["name"].rsplit("/", 1)[-1])
        total[kind] = total.get(kind, 0.0) + (o["end"] - o["start"])
    return [{"name": k, "seconds": round(v, 9)} for k, v in sorted(total.items(), key=lambda kv: -kv[1])[:n]]


def _union(iv: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(x for x in iv if x[1] > x[0]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _intersect(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _length(iv: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in iv)


def _float(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _whole(v: Any) -> int:
    """A plan's step: a JSON integer of at most 18 digits (a bool, float, text or huge number is a
    ``ValueError``: a hand-made plan never opens a window no rank will reach)."""
    if type(v) is not int or not -10**18 < v < 10**18:
        raise ValueError(f"not a step: {v!r}")
    return v


def _int(v: Any) -> int | None:
    f = _float(v)
    return int(f) if f is not None else None
