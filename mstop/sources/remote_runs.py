"""A folder of runs on another host (``mstop host:/path/runs``): the runs list over one ssh connection.

Each refresh runs :mod:`mstop.sources.followers.runs_follower` once on the host, over the connection every source
of that host shares (ssh's ControlMaster): it finds the runs and sends, per rank file, its first lines
and its last bytes the first time, then only what was appended. Opening a run starts an ordinary
:class:`~mstop.sources.remote.RemoteSource` for it, on the same connection.
"""

from __future__ import annotations

import posixpath
import time
import zlib
from dataclasses import dataclass, field
from typing import Callable

from ..engine.store import Store
from ..safe import clean, inflate, loads
from .followers import program
from .protocol import DEFAULT_CONNECTION, Connection
from .rankfiles import Followed, Tail, followed, ingest
from .remote import FRAME_DEADLINE, RemoteError, Target, run_program
from .runs import keep_runs

PROGRAM = program("runs_follower")
#: the most problem lines of one host's runs list kept (each is a folder it could not search)
MAX_PROBLEMS = 100


def _answer(out: bytes, host: str) -> tuple[dict, bytes]:
    line, _, rest = out.partition(b"\n")
    try:
        header = loads(line)
        if not isinstance(header, dict):
            raise ValueError("not a JSON object")
        n = header.get("n", 0)
        if type(n) is not int or not 0 <= n <= len(rest):
            raise ValueError(f"a length of {clean(repr(n), 40)} for {len(rest)} bytes")
        payload = inflate(rest[:n]) if n else b""
    except (ValueError, zlib.error) as e:
        raise RemoteError(clean(f"{host}: an answer that does not read ({e})", 4096)) from None
    if header.get("error"):
        e = RemoteError(clean(f"{host}:{header['error']}", 4096), missing="no such directory" in header["error"])
        e.parent = header.get("parent") is True  # type: ignore[attr-defined]
        raise e
    return header, payload


def _refresh_entry_ok(entry: object) -> bool:
    """A refresh's file entry as the runs follower writes it: [key, start, head, length, reset]."""
    return (isinstance(entry, list) and len(entry) == 5 and isinstance(entry[0], str)
            and all(type(x) is int and x >= 0 for x in entry[1:4]) and isinstance(entry[4], bool))


def probe(target: Target, *, connection: Connection = DEFAULT_CONNECTION, wait: bool = False) -> str:
    """"run" when ``host:/path`` is a run itself (or nothing below it is), "runs" when runs are below it. A
    directory not there yet is a run to wait for when its parent exists on the host (or ``wait``), as a local
    one is; else RemoteError (``missing``)."""
    out = run_program(target.host, PROGRAM, {"root": target.path, "probe": True}, connection=connection,
                      timeout=FRAME_DEADLINE)  # a look at one folder: a host silent this long is gone
    try:
        header, _ = _answer(out, target.host)
    except RemoteError as e:
        if e.missing and (wait or getattr(e, "parent", False)):
            return "run"
        raise
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
    """The runs below ``host:/path`` (or that one run, ``single``), as :class:`~mstop.sources.runs.RunsWatch`.
    ``store_for``: the store a run's files go into, by its path below the folder (a node set's runs share one
    over all its hosts: :class:`NodeSetRunsWatch`); None: one of its own."""

    def __init__(self, target: Target, *, single: bool = False, connection: Connection = DEFAULT_CONNECTION,
                 tail: Tail | None = None, max_depth: int = 3,
                 store_for: Callable[[str], Store] | None = None) -> None:
        self.target = target
        self.store_for = store_for
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
        found = [(item[0], item[1]) for item in listed if isinstance(item, list) and len(item) == 2
                 and isinstance(item[0], str) and isinstance(item[1], str)]
        found, problems = keep_runs(found, [], self.runs)
        for rel, kind in found:
            run = self.runs.get(rel)
            if run is None:
                path = posixpath.normpath(posixpath.join(self.target.path, rel))
                name = posixpath.basename(path) if rel == "." else rel
                run = RemoteRunTail(path, clean(name, 4096), kind, self.target.host,
                                    read_options={"connection": self.connection})
                if self.store_for is not None:
                    run.store = self.store_for(rel)
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
        said = header.get("problems", [])
        self.problems = [clean(f"{self.target.host}:{p}", 4096) for p in (said if isinstance(said, list) else [])
                         ][:MAX_PROBLEMS] + [f"{self.target.host}: {p}" for p in problems]
        return new

    def _feed(self, run: RemoteRunTail, fname: str, start: int, head: bytes, data: bytes, reset: bool) -> None:
        f = run.files.get(fname)
        if f is None or reset:
            if reset and f is not None and self.store_for is not None:  # a store of several hosts: this file's
                if f.kind == "csv":
                    run.store.reset_rank(f.rank)
                elif f.kind == "events":
                    run.store.reset_events(f.rank)
                del run.files[fname]
            elif reset and f is not None:
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


#: hosts of a node set a runs list refreshes at once (ClusterShell's own default fanout): one ssh client
#: each, on the connection the host's sources share
AT_ONCE = 64


def _discovered(watch: RemoteRunsWatch) -> str | None:
    """One host's refresh (in a pool's thread): None, or what went wrong."""
    try:
        watch.discover()
    except RemoteError as e:
        return str(e)
    return None


class NodeSetRunsWatch:
    """The runs below ``node[1-4]:/path`` (or that one run, ``single``) on every host of the set, each run
    listed once: a run is its path below the folder, on any of the hosts; its row is read from every host's
    rank files in one store, and it opens as the node set's run (``node[1-4]:/path/run``). Each host is read
    as :class:`RemoteRunsWatch` reads one (one program a host a refresh, over its shared connection), up to
    :data:`AT_ONCE` hosts at a time: a refresh of N hosts takes about N / AT_ONCE of one host's time, and a
    host that does not answer holds up no other. A host that cannot be read is a problem the list names, the
    others go on."""

    def __init__(self, spec: str, *, single: bool = False, connection: Connection = DEFAULT_CONNECTION,
                 tail: Tail | None = None, max_depth: int = 3) -> None:
        from .nodesets import expand, host_part
        from .remote import parse_target

        part = host_part(spec)
        assert part is not None
        self.hosts, self.path = part
        self.label = spec
        self.connection = connection
        self.runs: dict[str, RemoteRunTail] = {}
        self.problems: list[str] = []
        self._stores: dict[str, Store] = {}
        self.watches = []
        for one in expand(spec):
            target = parse_target(one)
            assert target is not None
            self.watches.append(RemoteRunsWatch(target, single=single, connection=connection, tail=tail,
                                                max_depth=max_depth, store_for=self._store))

    def _where(self, rel: str, hosts: list[str]) -> tuple[str, str]:
        """Where the run ``rel`` is, as a source names it: the hosts of the set that have it (a node set of
        them, the path's ``%h`` kept; one host: its own path), and its path."""
        from .nodesets import fold

        path = posixpath.normpath(posixpath.join(self.path, rel))
        user, at, _ = self.hosts.rpartition("@")
        nodes = [h.rpartition("@")[2] for h in hosts]
        if len(nodes) == 1:
            return f"{user}{at}{nodes[0]}", path.replace("%h", nodes[0])
        return f"{user}{at}{fold(nodes)}", path

    def _store(self, rel: str) -> Store:
        return self._stores.setdefault(rel, Store())

    def discover(self) -> list[RemoteRunTail]:
        from concurrent.futures import ThreadPoolExecutor

        problems: list[str] = []
        parts: dict[str, list[RemoteRunTail]] = {}
        failed = 0
        with ThreadPoolExecutor(max_workers=max(1, min(AT_ONCE, len(self.watches))),
                                thread_name_prefix="mstop-runs") as pool:
            answers = list(pool.map(_discovered, self.watches))  # in the set's order, whenever each answers
        for w, why in zip(self.watches, answers):
            if why is not None:
                problems.append(why)
                failed += 1
                continue
            problems += w.problems
            for rel, run in w.runs.items():
                parts.setdefault(rel, []).append(run)
        if failed == len(self.watches):
            more = f" (and {failed - 4:,} more hosts)" if failed > 4 else ""
            raise RemoteError(f"{failed:,} of {failed:,} hosts cannot be read: {'; '.join(problems[:4])}{more}")
        runs: dict[str, RemoteRunTail] = {}
        new = []
        for rel, got in parts.items():
            host, path = self._where(rel, [h.host for h in got])
            run = self.runs.get(rel)
            if run is None or (run.host, run.path) != (host, path):  # new, or on other hosts now: a new row
                run = RemoteRunTail(path, got[0].name, got[0].kind, host, self._store(rel),
                                    read_options={"connection": self.connection}, hint=got[0].hint)
                new.append(run)
            run.files = {f"{h.host}/{n}": f for h in got for n, f in h.files.items()}
            runs[rel] = run
        self.runs = runs
        self.problems = problems
        return new
