"""A folder of runs on another host (``mstop host:/path/runs``): the runs list over one ssh connection.

Each refresh runs :mod:`mstop.sources.runs_follower` once on the host, over the connection every source
of that host shares (ssh's ControlMaster): it finds the runs and sends, per rank file, its first lines
and its last bytes the first time, then only what was appended. Opening a run starts an ordinary
:class:`~mstop.sources.remote.RemoteSource` for it, on the same connection.
"""

from __future__ import annotations

import json
import posixpath
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from ..engine.store import Store
from ..safe import clean
from .protocol import DEFAULT_CONNECTION, Connection
from .rankfiles import Followed, Tail, followed, ingest
from .remote import FRAME_DEADLINE, RemoteError, Target, run_program

PROGRAM = (Path(__file__).resolve().parent / "runs_follower.py").read_bytes()


def _answer(out: bytes, host: str) -> tuple[dict, bytes]:
    line, _, rest = out.partition(b"\n")
    try:
        header = json.loads(line)
        if not isinstance(header, dict):
            raise ValueError("not a JSON object")
        n = header.get("n", 0)
        if type(n) is not int or not 0 <= n <= len(rest):
            raise ValueError(f"a length of {clean(repr(n), 40)} for {len(rest)} bytes")
        payload = zlib.decompress(rest[:n]) if n else b""
    except (ValueError, zlib.error) as e:
        raise RemoteError(clean(f"{host}: an answer that does not read ({e})", 4096)) from None
    if header.get("error"):
        raise RemoteError(clean(f"{host}:{header['error']}", 4096), missing="no such directory" in header["error"])
    return header, payload


def _refresh_entry_ok(entry: object) -> bool:
    """A refresh's file entry as the runs follower writes it: [key, start, head, length, reset]."""
    return (isinstance(entry, list) and len(entry) == 5 and isinstance(entry[0], str)
            and all(type(x) is int and x >= 0 for x in entry[1:4]) and isinstance(entry[4], bool))


def probe(target: Target, *, connection: Connection = DEFAULT_CONNECTION) -> str:
    """"run" when ``host:/path`` is a run itself (or nothing below it is), "runs" when runs are below it."""
    out = run_program(target.host, PROGRAM, {"root": target.path, "probe": True}, connection=connection,
                      timeout=FRAME_DEADLINE)  # a look at one folder: a host silent this long is gone
    header, _ = _answer(out, target.host)
    return "runs" if not header.get("is_run") and header.get("has_runs") else "run"


@dataclass
class RemoteRunTail:
    """One run on the other host: a store fed from the bytes each refresh brings (read() does nothing:
    the watch's discover() reads every run of the host in one go)."""

    path: str  # on the host
    name: str
    kind: str
    host: str
    store: Store = field(default_factory=Store)
    error: str | None = None
    full: bool = False
    read_at: float = 0.0
    files: dict[str, Followed] = field(default_factory=dict)
    hint: str = ""  # what its row says in place of a note (a run the list cannot read from here)
    #: how the whole run is read over ssh (read_once's options), for the list's history pass
    read_options: dict = field(default_factory=dict)

    def read(self) -> None:
        self.read_at = time.monotonic()

    def history_version(self) -> tuple:
        """What its files hold now (names and bytes received): a history read before is stale when it moved."""
        return tuple(sorted((n, f.tail.offset) for n, f in self.files.items()))


class RemoteRunsWatch:
    """The runs below ``host:/path`` (or that one run, ``single``), as :class:`~mstop.sources.runs.RunsWatch`."""

    def __init__(self, target: Target, *, single: bool = False, connection: Connection = DEFAULT_CONNECTION,
                 tail: Tail | None = None, max_depth: int = 3) -> None:
        self.target = target
        self.max_depth = max_depth
        self.label = str(target)
        self.single = single
        self.connection = connection
        self.tail = tail or Tail()
        self.runs: dict[str, RemoteRunTail] = {}
        self.problems: list[str] = []

    def discover(self) -> list[RemoteRunTail]:
        offsets = {f"{name}/{fname}": f.tail.offset for name, run in self.runs.items()
                   for fname, f in run.files.items()}
        request = {"root": self.target.path, "single": self.single, "offsets": offsets, "max_depth": self.max_depth,
                   "tail": [self.tail.job_bytes, self.tail.rank_bytes, self.tail.events_bytes]}
        out = run_program(self.target.host, PROGRAM, request, connection=self.connection)
        header, payload = _answer(out, self.target.host)
        runs: dict[str, RemoteRunTail] = {}
        new = []
        listed, files = header.get("runs", []), header.get("files", [])
        if not isinstance(listed, list) or not isinstance(files, list) or not all(_refresh_entry_ok(e) for e in files):
            raise RemoteError(f"{self.target.host}: a refresh's 'runs' or 'files' are not what the runs follower "
                              "sends")
        for item in listed:
            if not (isinstance(item, list) and len(item) == 2):
                continue
            rel, kind = item
            if not isinstance(rel, str) or not isinstance(kind, str):
                continue
            run = self.runs.get(rel)
            if run is None:
                path = posixpath.normpath(posixpath.join(self.target.path, rel))
                name = posixpath.basename(path) if rel == "." else rel
                run = RemoteRunTail(path, clean(name, 4096), kind, self.target.host,
                                    read_options={"connection": self.connection})
                if kind != "writer":  # its logs hold their sessions in their first lines: read whole when opened
                    run.hint = "a MindFormers log over ssh: Enter opens and reads it"
                new.append(run)
            runs[rel] = run
        at = 0
        for entry in files:
            key, start, head, length, reset = entry
            data = payload[at: at + int(length)]
            at += int(length)
            rel, _, fname = str(key).rpartition("/")
            run = runs.get(rel)
            if run is not None:
                self._feed(run, fname, int(start), data[: int(head)], data[int(head):], bool(reset))
        self.runs = runs
        self.problems = [clean(f"{self.target.host}:{p}", 4096) for p in header.get("problems", [])]
        return new

    def _feed(self, run: RemoteRunTail, fname: str, start: int, head: bytes, data: bytes, reset: bool) -> None:
        f = run.files.get(fname)
        if f is None or reset:
            if reset and f is not None:
                run.store = Store()  # read again from near the end: a new store, as a rebuilt local tail
                run.files = {}
            f = followed(fname, fname, run.store, f"{run.host}:{run.path}")
            if f is None:
                return
            run.files[fname] = f
            if head:
                ingest(run.store, f, f.tail.feed(head))
            f.tail.offset = start
        elif start != f.tail.offset:
            return  # not the bytes asked for: the next refresh asks again
        ingest(run.store, f, f.tail.feed(data))
