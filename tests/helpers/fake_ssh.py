"""A stand-in ``ssh`` that plays a misbehaving host (tests/unit/test_hostile_hosts.py and
tests/system/test_hostile_hosts_ssh.py): it swallows the program mstop sends and answers as the file
``mode`` beside it says."""

FAKE_SSH = r'''#!/usr/bin/env python3
import json, os, sys, time
mode = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "mode")).read().strip()
n = int(sys.stdin.buffer.readline()); sys.stdin.buffer.read(n)  # the program mstop sends
request = json.loads(sys.stdin.buffer.readline())
out = sys.stdout.buffer
if request.get("probe"):  # the one-shot look at the folder: a run, unless the mode is about this answer
    if mode == "probe-silent":
        time.sleep(600)
    elif mode == "probe-endless":
        while True:
            out.write(b"y" * (1 << 20)); out.flush()
    elif mode == "probe-list":
        out.write(b"[1]\n"); out.flush()
    elif mode == "probe-negative":
        out.write(b'{"n": -3}\nabc'); out.flush()
    elif mode.startswith("runs-"):  # a folder of runs
        out.write(b'{"is_run": false, "has_runs": true, "runs": [["r0", "writer"]]}\n'); out.flush()
    else:
        out.write(b'{"is_run": true}\n'); out.flush()
    sys.exit(0)
if ("paths" in request or "pid" in request) and mode == "one-shot-silent":  # L, t, d: never answered
    time.sleep(600)
if "pid" in request:  # py-spy's dump on the rank's host (t, d): the answer, as the mode has it
    spy = {"spy-dicts": {"lines": [{"a": 1}, 5]}, "spy-escape": {"why": "\x1b]52;c;aGk=\x07 gone\x1b[2J"},
           "spy-many": {"lines": ["  main (job.py:1)\x1b[31m"] * 9000}, "spy-list": [1, 2],
           "spy-why-dict": {"why": {"x": 1}}}.get(mode, {"lines": ["Thread 1 (idle)"]})
    out.write(json.dumps(spy).encode() + b"\n"); out.flush()
    sys.exit(0)
if "paths" in request and mode == "log-slow":  # the log follower's read (L), answered after the pane closed
    time.sleep(1.5)
    out.write(b'{"error": "answered late"}\n'); out.flush()
    sys.exit(0)
if "root" in request and mode == "runs-many":  # the runs list: 100,000 runs
    out.write(json.dumps({"is_run": False, "runs": [["r%d" % i, "writer"] for i in range(100000)], "problems": [],
                          "files": [], "n": 0}).encode() + b"\n"); out.flush()
    sys.exit(0)
if "root" in request and mode == "runs-deep":  # the runs list: JSON nested 200,000 deep
    out.write(b"[" * 200000 + b"]" * 200000 + b"\n"); out.flush()
    sys.exit(0)
def frame(h, payload=b""):
    out.write((json.dumps(h) + "\n").encode() + payload); out.flush()
good = {"clock": time.time(), "files": [], "mtime": time.time()}
if mode == "silent":
    time.sleep(600)
elif mode == "endless":
    while True:
        out.write(b"x" * (1 << 20)); out.flush()
elif mode == "negative":
    frame({**good, "n": -5})
elif mode == "huge":
    frame({**good, "n": 10 ** 15})
elif mode == "list":
    out.write(b"[1, 2, 3]\n"); out.flush()
elif mode == "noclock":
    frame({"files": []})
elif mode == "stringclock":
    frame({**good, "clock": "noon"})
elif mode == "badfiles":
    frame({**good, "files": [["rank0.csv", "zero", 5, False]], "n": 0})
elif mode == "toolong":
    frame({**good, "files": [["rank0.csv", 0, 500, False]], "n": 0})
elif mode == "deep":
    out.write(b"[" * 200000 + b"]" * 200000 + b"\n"); out.flush()
elif mode == "bomb":
    import zlib
    c = zlib.compressobj(9)
    z = b"".join(c.compress(bytes(1 << 20)) for _ in range(256)) + c.flush()
    frame({**good, "files": [["rank0.csv", 0, 10, False]], "n": len(z)}, z)
elif mode == "nevercaughtup":
    while True:
        frame(dict(good, clock=time.time())); time.sleep(0.01)
time.sleep(600)
'''


def install(tmp_path, mode: str | None = None):
    """The stand-in written as ``tmp_path/bin/ssh`` (its mode beside it when given): the folder to put first
    on PATH."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    (folder / "ssh").write_text(FAKE_SSH)
    (folder / "ssh").chmod(0o755)
    if mode is not None:
        (folder / "mode").write_text(mode)
    return folder


def on_path(tmp_path, monkeypatch, mode: str) -> None:
    """The stand-in first on this process's PATH, playing ``mode``."""
    import os

    monkeypatch.setenv("PATH", f"{install(tmp_path, mode)}:{os.environ['PATH']}")


async def open_remote_log_pane(app, pilot):
    """``L`` on a rank whose log is on the stand-in host ``fakehost``: the log pane opened over ssh, its first
    read on its way; the tail it reads with."""
    from mstop.app.screens import LogScreen
    from mstop.live import LogPane
    from mstop.sources import Connection
    from mstop.sources.logs import Candidate, RemoteLogTail
    from tests.helpers.app_common import settle

    tail = RemoteLogTail("fakehost:/logs/train.log", host="fakehost", candidates=[Candidate("/logs/train.log")],
                         connection=Connection((), 1.0))
    await settle(pilot)
    app.push_screen(LogScreen(LogPane(0, tail.path, tail=tail)))
    await settle(pilot, lambda: isinstance(app.screen, LogScreen))
    return tail
