"""Play a recorded run directory into another one at its original pace (``mstop demo --replay``).

Every line of every rank file is written at the moment it was written in the
recording (relative to the recording's first line, divided by ``speed``), with
its ``time`` moved to the present, so the monitor sees a live run without
MindSpore installed.
"""

from __future__ import annotations

import heapq
import json
import os
import threading
import time
from pathlib import Path

RECORDING = Path(__file__).resolve().parent.parent / "data" / "demo-run"


def _lines(src: Path) -> list[tuple[float, int, str, str]]:
    """(recorded time, order, file name, line) of every row and event, headers at time -inf."""
    out: list[tuple[float, int, str, str]] = []
    n = 0
    for f in sorted(src.iterdir()):
        if f.suffix not in (".csv", ".jsonl"):
            continue
        for i, line in enumerate(f.read_text().splitlines()):
            if f.suffix == ".csv":
                t = float("-inf") if i == 0 else float(line.split(",", 1)[0])
            else:
                t = float(json.loads(line)["time"])
            out.append((t, n, f.name, line))
            n += 1
    heapq.heapify(out)
    return [heapq.heappop(out) for _ in range(len(out))]


def replay(src: Path, dst: Path, *, speed: float = 1.0, stop: threading.Event | None = None,
           clock=time.time) -> None:
    """Write ``src``'s lines into ``dst`` at their recorded pace; return when done or stopped."""
    stop = stop or threading.Event()
    items = _lines(src)
    t0 = next((t for t, *_ in items if t != float("-inf")), 0.0)
    start = clock()
    dst.mkdir(parents=True, exist_ok=True)
    for t, _, name, line in items:
        if t != float("-inf"):
            due = start + (t - t0) / speed
            while not stop.is_set() and clock() < due:
                stop.wait(min(0.2, max(0.0, due - clock())))
            if stop.is_set():
                return
            now = clock()
            if name.endswith(".csv"):
                line = repr(now) + "," + line.split(",", 1)[1]
            else:
                obj = json.loads(line)
                obj["time"] = now
                if obj.get("kind") == "checkpoint" and isinstance(obj.get("path"), str):
                    obj["path"] = _replayed_path(obj["path"], dst)
                line = json.dumps(obj)
        fd = os.open(dst / name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)


def _replayed_path(path: str, dst: Path) -> str:
    """A recorded checkpoint path as if this replay had written it (under ``dst``), not the recording
    machine's temporary directory."""
    tail = path.split("/ckpt/", 1)[1] if "/ckpt/" in path else os.path.basename(path)
    return str(dst / "ckpt" / tail)


def start_replay(dst: Path, *, speed: float = 1.0, src: Path = RECORDING) -> tuple[threading.Thread, threading.Event]:
    """Replay in a daemon thread; set the returned event to stop it."""
    stop = threading.Event()
    th = threading.Thread(target=replay, args=(src, dst), kwargs={"speed": speed, "stop": stop},
                          name="mstop-replay", daemon=True)
    th.start()
    return th, stop
