"""Following a run directory on another host over the system's ssh: ``mstop user@host:/path``.

The system OpenSSH client is used, so ``~/.ssh/config``, ProxyJump, agents,
Kerberos and ControlMaster all apply. The remote side needs ``python3`` and
nothing else: the follower program (:mod:`mstop.sources.followers.follower`) is sent over the
channel; the path and offsets follow as data on standard input, so the
remote login shell never sees user text. Only new bytes travel, compressed.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import subprocess
import threading
import time
import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..engine.store import Batch, Store
from ..formats.mflog import MfLogParser, SchedulerLog
from ..procs import stop_group
from ..safe import clean, inflate, loads
from .files import FileTail
from .followers import program
from .lifelocks import LifeLocks
from .mflog import SCHEDULER_LOG, ingest_log, note_lost, stream_rank, worker_states
from .protocol import DEFAULT_CONNECTION, Connection, SourceError, SourceState
from .rankfiles import Followed, Round, followed, ingest, rank_part

#: The remote command: a constant (no user text), which reads the program from standard input.
BOOTSTRAP = ('python3 -u -c "import sys;n=int(sys.stdin.buffer.readline());'
             "exec(compile(sys.stdin.buffer.read(n),'mstop-follower','exec'))\"")
FOLLOWER = program("follower")
#: the longest frame header read (a line of JSON: a few KB at 1,024 files) and the most payload bytes one
#: frame may announce: a host sending an endless line or a length past these is an error, never a MemoryError
MAX_HEADER = 16 << 20
MAX_PAYLOAD = 1 << 30
#: seconds without a frame after which a host (or its follower, or the link) is taken as gone: the follower
#: sends one at least every 5 s (its heartbeat: 4 of them missed); its first after the connection's own timeout
FRAME_DEADLINE = 20.0
#: frames in a row that bring nothing while a one-shot read waits for "caught up" (a host that never says it
#: caught up must not hang ``summary host:/path``): 12 heartbeats, a minute
IDLE_FRAMES = 12
#: the most bytes of one file a frame carries in the follower's line mode (a line is read whole before it is
#: handed on: a smaller frame keeps that buffer small)
LINE_CHUNK = 1 << 20
#: seconds a node set's host merges each rank's rows over while followed (the follower's digest mode: the
#: viewer's cost grows with hosts, not rows; a row is shown up to this much later); --digest sets another
DIGEST_S = 2.0
#: the most rows one digest line may stand for (a week of 100 steps a second merged for an interval is far
#: less): a weight past it is no digest the follower makes
MAX_STANDS_FOR = 1 << 24
_HOST = re.compile(r"^(?:[A-Za-z0-9._%+-]+@)?[A-Za-z0-9._-]+$|^(?:[A-Za-z0-9._%+-]+@)?\[[0-9A-Fa-f:.]+\]$")


_CONTROL: list[str] = []
#: ssh processes of this process that are running, and (host, ssh options) of every connection made:
#: at exit, however mstop ends (q, Ctrl-C, SIGTERM, SIGHUP), they are stopped and the control directory goes
_LIVE: set[subprocess.Popen] = set()
#: the one-shot programs running now (run_program), and those stop_programs ended
_PROGRAMS: set[subprocess.Popen] = set()
_STOPPED: set[subprocess.Popen] = set()
_MASTERS: set[tuple[str, tuple[str, ...]]] = set()
#: other transports' stop functions (mstop.sources.fanout's tasks), called by :func:`cleanup` first
STOPPERS: set[Callable[[], None]] = set()


def _control_dir() -> str:
    """A private directory for this process's ssh control sockets (short: socket paths are limited)."""
    if not _CONTROL:
        import atexit
        import tempfile

        # a socket path has at most 107 bytes: the directory, its name and ssh's 40-character %C must fit
        base = tempfile.gettempdir()
        _CONTROL.append(tempfile.mkdtemp(prefix="mstop-ssh-", dir=base if len(base) <= 40 else "/tmp"))
        atexit.register(cleanup)
    return _CONTROL[0]


def cleanup() -> None:
    """Stop every ssh client still running, ask each multiplexing master to exit, remove the control
    directory: a stopped mstop leaves no ssh process, remote follower or temporary directory behind."""
    for stop in list(STOPPERS):
        stop()
    for proc in list(_LIVE):
        _kill(proc)
    if _CONTROL:
        d = _CONTROL[0]
        for host, opts in list(_MASTERS):
            try:
                subprocess.run(["ssh", *opts, "-o", f"ControlPath={d}/%C", "-O", "exit", "--", host],
                               stdin=subprocess.DEVNULL, capture_output=True, timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        _MASTERS.clear()
        import shutil

        shutil.rmtree(d, ignore_errors=True)
        _CONTROL.clear()


def stop_programs() -> None:
    """End every one-shot program still waiting on its host (``L``, ``t``/``d``, a runs refresh): the app
    quitting must not wait for a host that never answers (its reading thread is joined at exit: q took the
    read's whole timeout, 26-37 s)."""
    for proc in list(_PROGRAMS):
        _STOPPED.add(proc)
        try:
            proc.kill()
        except OSError:
            pass


def _kill(proc: subprocess.Popen) -> None:
    """Stop an ssh client and everything in its process group."""
    stop_group(proc, 5.0)
    _LIVE.discard(proc)


def frame_problem(line: bytes, header: object, n: int | None) -> str | None:
    """What makes a frame one the follower never sends (None: none): a header line without its end, one
    that is no JSON object, a length past MAX_PAYLOAD or below 0, ``files`` that are not its entries."""
    if not line.endswith(b"\n"):
        return f"a frame header over {MAX_HEADER >> 20} MiB without its end: not the follower's"
    if not isinstance(header, dict):
        return f"unexpected output from the remote side: {clean(line[:200].decode('utf-8', 'replace'), 200)}"
    if n is None:
        return f"a frame announces {clean(repr(header.get('n')), 40)} bytes: not a length the follower sends"
    files = header.get("files", [])
    if not isinstance(files, list) or not all(entry_ok(e) for e in files):
        return "a frame's 'files' is not a list of [name, offset, length, reset, ...]"
    return None


def entry_ok(entry: object) -> bool:
    """A frame's file entry as the follower writes it: [name, offset, length, reset, ...]."""
    return (isinstance(entry, list) and len(entry) >= 4 and isinstance(entry[0], str)
            and all(type(x) is int and x >= 0 for x in entry[1:3]) and isinstance(entry[3], (bool, int)))


def ssh_command(host: str, connection: Connection) -> list[str]:
    """ssh running the bootstrap on ``host``. One multiplexed connection per host: sources on the same host
    share a master connection (a user's own ControlMaster settings, given with -o or in ssh_config, win:
    ssh takes the first)."""
    _MASTERS.add((host, connection.ssh_options))
    return [*ssh_args(connection), "--", host, BOOTSTRAP]


def ssh_args(connection: Connection, *, mux: bool = True) -> list[str]:
    """ssh and its options, up to the host: the user's own first (ssh takes the first value of an option),
    never a password prompt, the connection's timeout, a link that died noticed in 15 s; ``mux``: through
    this process's shared connection to the host."""
    opts = ["-o", "ControlMaster=auto", "-o", f"ControlPath={_control_dir()}/%C", "-o", "ControlPersist=10"]
    return ["ssh", *connection.ssh_options, "-o", "BatchMode=yes", "-o", f"ConnectTimeout={int(connection.timeout)}",
            "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3", *(opts if mux else [])]


def program_input(request: dict) -> bytes:
    """What the bootstrap reads on standard input: the follower program's length and text, then ``request``
    as one JSON line."""
    return f"{len(FOLLOWER)}\n".encode() + FOLLOWER + json.dumps(request).encode() + b"\n"


def ssh_error(host: str, code: int | None, err: str) -> str:
    """What to say when ssh (or the program it ran) failed."""
    if code == 127 or "python3: command not found" in err or "python3: not found" in err:
        return clean(f"{host}: no python3 on the remote host (ssh said: {err or code})", 4096)
    return clean(f"ssh {host} failed (exit {code}): {err or 'connection closed'}", 4096)


def run_program(host: str, program: bytes, request: dict, *, connection: Connection = DEFAULT_CONNECTION,
                timeout: float = 60.0) -> bytes:
    """Run a standalone ``program`` on ``host`` once (over the host's shared connection) with ``request``
    as its one JSON line of input; its standard output, or RemoteError saying what failed."""
    cmd = ssh_command(host, connection)
    connect_timeout = connection.timeout
    data = f"{len(program)}\n".encode() + program + json.dumps(request).encode() + b"\n"
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
    except OSError as e:
        raise RemoteError(f"cannot run ssh: {e}") from None
    _LIVE.add(proc)
    _PROGRAMS.add(proc)
    try:
        out, err, why = _bounded(proc, data, connect_timeout + timeout, MAX_ANSWER)
    finally:
        _PROGRAMS.discard(proc)
        _kill(proc)
    if proc in _STOPPED:
        _STOPPED.discard(proc)
        raise RemoteError(f"ssh {host}: stopped (mstop is quitting)")
    if why is not None:
        raise RemoteError(clean(f"ssh {host}: {why}", 4096))
    if proc.returncode != 0:
        raise RemoteError(ssh_error(host, proc.returncode, err.decode("utf-8", "replace").strip()))
    return out


#: the most a one-shot program's answer may be (a folder of 10,000 runs' listing is a few MB): a host sending
#: more, or without end, is cut off and said, never read whole into memory
MAX_ANSWER = 256 << 20


def _bounded(proc: subprocess.Popen, data: bytes, timeout: float, cap: int) -> tuple[bytes, bytes, str | None]:
    """Write ``data`` to ``proc`` and read its output and errors until it ends, at most ``cap`` bytes and
    ``timeout`` seconds: (output, errors, None), or what was wrong (the caller kills it)."""
    import selectors

    deadline = time.monotonic() + timeout
    out, err = bytearray(), bytearray()
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write(data)
        proc.stdin.close()
    except OSError:
        pass  # ssh already failed: its words come on stderr
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, out)
    sel.register(proc.stderr, selectors.EVENT_READ, err)
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return bytes(out), bytes(err), f"no answer in {timeout:g} s"
            for key, _ in sel.select(min(left, 1.0)):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                key.data.extend(chunk)
                if len(out) > cap or len(err) > cap:
                    return bytes(out[:cap]), bytes(err[:4096]), f"an answer over {cap >> 20} MiB: cut off"
    finally:
        sel.close()
    try:
        proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return bytes(out), bytes(err), f"no answer in {timeout:g} s"
    return bytes(out), bytes(err), None


class RemoteError(SourceError):
    """The remote side cannot be followed (ssh's own words included)."""


@dataclass
class Target:
    host: str
    path: str

    def __str__(self) -> str:
        return f"{self.host}:{self.path}"


def parse_target(text: str) -> Target | None:
    """``[user@]host:/path`` as scp names remote paths; None for a local path.

    A colon before any slash makes it remote (``./a:b`` and ``/x:y`` stay local).
    A host that starts with ``-`` or holds anything but host-name characters is refused.
    """
    colon = text.find(":")
    if text.startswith("-") and colon > 0:
        raise SourceError(f"not a host name: {text[:colon]!r} (a host may not start with '-')")
    slash = text.find("/")
    if colon <= 0 or (slash != -1 and slash < colon):
        return None
    host, path = text[:colon], text[colon + 1:]
    if host.startswith("-") or not _HOST.match(host):
        raise SourceError(f"not a host name: {host!r}")
    if not path:
        raise SourceError(f"{text!r}: no remote path after the colon")
    return Target(host, path)


def rank_host(start: dict | None) -> str | None:
    """The host a rank ran on, as its start event names it, when that is another host than this one and a
    name ssh may be given (a start event is a file's word: ``-oProxyCommand=...`` is never passed on); None
    otherwise."""
    import socket

    host = (start or {}).get("host")
    if not isinstance(host, str) or host == socket.gethostname():
        return None
    try:
        target = parse_target(f"{host}:/")
    except SourceError:
        return None
    return target.host if target is not None else None


#: the most ranks one frame may say their life lock is free (more is a host's answer cut, not refused)
MAX_UNLOCKED = 100_000
#: seconds between looks for a run directory that does not exist yet on its host
MISSING_EVERY = 2.0


def retrying(state: SourceState, tries: int, why: object, delay: float | None = None) -> float:
    """A lost connection said in ``state`` (``reconnecting, try 3 in 4 s: ...``, and among its notes); the
    seconds to wait before try ``tries``: 1, 2, 4 ... 30 unless ``delay`` is given."""
    delay = min(30.0, 2.0 ** (tries - 1)) if delay is None else delay
    state.connection = f"reconnecting, try {tries} in {delay:.0f} s: {why}"
    state.notes.append(str(why))
    return delay


def _utc_offset(gmtoff: object) -> float | None:
    """The remote host's UTC offset as its follower sent it (seconds), or None when it sent none."""
    return float(gmtoff) if isinstance(gmtoff, (int, float)) and not isinstance(gmtoff, bool) else None


class RemoteSource:
    """Feed ``store`` from a run directory on another host (same interface as LocalSource). ``command``: the
    program that reaches the host and runs the bootstrap there, given the host and the connection (default:
    :func:`ssh_command`); another transport, or a host whose ``python3`` is elsewhere, gives its own."""

    def __init__(self, target: Target, store: Store, *, poll: float | None = None,
                 on_update: Callable[[], None] | None = None, connection: Connection = DEFAULT_CONNECTION,
                 clock: Callable[[], float] = time.time, digest: float = 0.0,
                 command: Callable[[str, Connection], list[str]] = ssh_command,
                 on_ranks: Callable[[int], None] | None = None) -> None:
        """``on_ranks``: told (on the thread that reads the host) each rank the host's rank files grew by, so
        whoever decides which ranks come as written (:meth:`want_raw`) can decide again."""
        self.target = target
        self.on_ranks = on_ranks
        self.command = command
        self.label = str(target)
        self.store = store
        self.poll = poll
        self.on_update = on_update
        self.connection = connection
        self.state = SourceState(mode="ssh", poll_interval=poll, connection="connecting")
        self.clock_skew = 0.0  # remote clock - local clock, measured at connect
        self.bytes_received = 0
        self._clock = clock
        self._files: dict[str, Followed] = {}
        self._refused_names: set[str] = set()
        self._scheduler: tuple[FileTail, SchedulerLog] | None = None  # msrun's scheduler.log, when sent
        self._scheduler_cursor = ""
        self._told: set[tuple[int, str, str]] = set()  # (rank, session, kind) the scheduler log gave
        #: the ranks whose life lock the follower found free on the host, and the host's boot id (lifelocks)
        self._unlocked: frozenset[int] = frozenset()
        self._boot: str | None = None
        self._life = LifeLocks(store)
        #: where its rank files' new lines go when many hosts' frames are parsed together (a read round of
        #: mstop.sources.rankfiles, flushed by its owner); None: into the store frame by frame
        self.batch: Round | None = None
        #: while following (never a one-shot read: summary and compare take every row), ask the follower to
        #: merge each rank's rows over this many seconds (its digest mode), but those of the ranks in ``raw``
        self.digest = digest
        self.raw: frozenset[int] = frozenset({0})  # rank 0: the job's rank (the loss chart's) in most jobs
        self._asked = self.raw  # what the running follower was asked for (request)
        self.following = False
        #: the ranks whose rank files it follows (replaced whole: read by the screen's thread)
        self.rank_set: frozenset[int] = frozenset()
        self._new_ranks: list[int] = []  # rank files found in the frame being fed
        self._restarting = False
        self._proc: subprocess.Popen | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- one-shot ----------------------------------------------------------------------

    def read_all(self) -> int:
        """Connect, read everything written so far, disconnect; raise RemoteError when that fails."""
        before = self.store.rows
        proc, header = self._connect()
        idle = 0
        try:
            while not header.get("caught_up"):
                header = self._frame(proc)
                idle = 0 if header.get("files") or header.get("events") else idle + 1
                if idle >= IDLE_FRAMES:
                    raise RemoteError(f"{self.target.host}: {idle} frames in a row brought nothing and the host "
                                      "never said it had caught up: the read is given up")
        finally:
            self._close(proc)
        return self.store.rows - before

    # -- following ----------------------------------------------------------------------

    def follow(self) -> None:
        self.following = True
        self._thread = threading.Thread(target=self._run, name="mstop-remote", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._proc is not None:
            self._close(self._proc)
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        tries = 0
        while not self._stop.is_set():
            try:
                proc, _ = self._connect()
                tries = 0
                self.state.connection = "connected"
                while not self._stop.is_set():
                    self._frame(proc)
                    if self.on_update is not None:
                        self.on_update()
                    if self.raw != self._asked and self.digest > 0:  # asked again from this thread (a new rank)
                        self._restarting = True
                        self._close(proc)
                        raise RemoteError(f"{self.target.host}: asked for other ranks as written")
            except RemoteError as e:
                if self._stop.is_set():
                    break
                if self._restarting:  # ended to be asked again (want_raw): no fault, no wait
                    self._restarting = False
                    continue
                if e.missing:  # a folder the job has not made yet (msrun makes it a moment after it starts):
                    # looked for again every few seconds, as the local monitor waits for it; no fault, no note
                    self.state.missing = True
                    self.state.connection = f"{self.target.path} does not exist yet: waiting for it"
                    if self.on_update is not None:
                        self.on_update()
                    self._stop.wait(MISSING_EVERY)
                    continue
                self.state.missing = False
                tries += 1
                delay = retrying(self.state, tries, e)
                if self.on_update is not None:
                    self.on_update()
                self._stop.wait(delay)
            finally:
                if self._proc is not None:
                    self._close(self._proc)

    def want_raw(self, ranks: frozenset[int]) -> bool:
        """Of ``ranks``, those this host follows are to come row by row (the rest merged, while following with
        a digest): when that changes, its follower is started again with the new request (its stdin is read
        once). Whether it changed."""
        mine = frozenset(ranks & self.rank_set)
        if mine == self.raw & self.rank_set or not (self.following and self.digest > 0):
            return False
        self.raw = mine
        proc = self._proc
        if proc is not None and self._thread is not None and threading.current_thread() is not self._thread:
            self._restarting = True  # its reading thread, asked by itself, starts again after the frame
            self._close(proc)
        return True

    # -- the connection ----------------------------------------------------------------

    def _connect(self) -> tuple[subprocess.Popen, dict]:
        """Start ssh and the follower; return the process and its first frame (already fed to the store)."""
        proc = subprocess.Popen(self.command(self.target.host, self.connection), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        _LIVE.add(proc)
        self._proc = proc
        if self._stop.is_set():  # stop() came while it started: it saw the old process (or none), not this one
            self._close(proc)
            raise RemoteError(f"{self.target.host}: stopped")
        try:
            assert proc.stdin is not None
            proc.stdin.write(self.program_input())
            proc.stdin.flush()
        except OSError:
            pass  # ssh already failed: its message comes below
        t0 = self._clock()
        try:
            header = self._frame(proc, deadline=self.connection.timeout + FRAME_DEADLINE)
            self.first_frame(header, t0)
        except RemoteError:
            self._close(proc)
            raise
        return proc, header

    def program_input(self) -> bytes:
        """What the bootstrap reads on standard input: the follower program, then its request."""
        return program_input(self.request())

    def request(self) -> dict:
        """The follower's request: the path, and the offsets already received (a reconnect resends nothing)."""
        offsets = {name: [f.tail.offset, f.cursor if f.kind == "mflog" else f.tail.signature.hex()]
                   for name, f in self._files.items() if f.kind != "mflog" or f.cursor}
        if self._scheduler is not None and self._scheduler_cursor:
            offsets[SCHEDULER_LOG] = [self._scheduler[0].offset, self._scheduler_cursor]
        out = {"path": self.target.path, "offsets": offsets, "poll": self.poll or 0.2}
        self._asked = self.raw  # what this connection's follower sends as written (the first frame may ask more)
        if self.following and self.digest > 0:
            out.update(digest=self.digest, raw=sorted(self.raw))
        return out

    def first_frame(self, header: dict, t0: float) -> None:
        """The connection's first frame (asked for at ``t0`` on our clock): its clock, the host's clock skew."""
        clock = header.get("clock")
        if not (isinstance(clock, (int, float)) and not isinstance(clock, bool) and math.isfinite(clock)):
            raise RemoteError(f"{self.target.host}: its first frame has no clock (got {clock!r:.40})")
        self.clock_skew = clock - (t0 + self._clock()) / 2

    def _frame(self, proc: subprocess.Popen, deadline: float = FRAME_DEADLINE) -> dict:
        """Read one frame and feed its bytes to the store; raise RemoteError on errors, a lost connection, a
        frame not come within ``deadline`` seconds, or one of a shape the follower never sends (every field
        from the other side is type-checked, every read bounded: the words name the host and what)."""
        assert proc.stdout is not None
        host = self.target.host
        late = threading.Event()

        def expire() -> None:
            late.set()
            self._close(proc)

        timer = threading.Timer(deadline, expire)
        timer.daemon = True
        timer.start()
        line, n, payload = b"", 0, b""
        try:
            line = proc.stdout.readline(MAX_HEADER)
            header = loads(line) if line.endswith(b"\n") else None
            n = header.get("n", 0) if isinstance(header, dict) else 0
            ok_n = type(n) is int and 0 <= n <= MAX_PAYLOAD
            payload = proc.stdout.read(n) if ok_n and n else b""
        except (ValueError, OSError):  # closed under us (stop(), the deadline), or a line that is no JSON
            header, ok_n, payload = "closed", True, b""
        finally:
            timer.cancel()
        if late.is_set():
            raise RemoteError(f"{host}: no frame for {deadline:g} s: the host, its follower or the link stopped "
                              "answering")
        if not line or (header == "closed" and not line.endswith(b"\n")) or (ok_n and len(payload) != n):
            raise RemoteError(self._ssh_error(proc) if line or header != "closed" else "connection closed")
        return self.take(line, header, n if ok_n else None, payload)

    def take_line(self, line: bytes) -> dict:
        """One frame of the follower's line mode (its header line, the payload in it as base64), as a worker
        reading a host a line at a time hands it (without its newline): fed to the store as :meth:`take`
        does; RemoteError for a line the follower never sends."""
        try:
            header = loads(line)
        except ValueError:
            header = None
        n = header.get("n", 0) if isinstance(header, dict) else 0
        ok_n = type(n) is int and 0 <= n <= MAX_PAYLOAD
        payload = b""
        if ok_n and isinstance(header, dict):
            z = header.pop("z", "")
            try:
                payload = base64.b64decode(z, validate=True) if isinstance(z, str) else None
            except ValueError:
                payload = None
            if payload is None or len(payload) != n:
                raise RemoteError(f"{self.target.host}: a frame's payload is not the {n:,} bytes of base64 it "
                                  "announces: not the follower's")
        return self.take(line + b"\n", header, n if ok_n else None, payload)

    def take(self, line: bytes, header: object, n: int | None, payload: bytes) -> dict:
        """A frame read whole (its header ``line``, parsed as ``header``, announcing ``n`` bytes, None when
        that is no length; its ``payload``): every field from the other side type-checked, then fed to the
        store. RemoteError names the host and what is wrong."""
        host = self.target.host
        why = frame_problem(line, header, n)
        if why is not None:
            raise RemoteError(f"{host}: {why}")
        assert isinstance(header, dict)
        files = header.get("files", [])
        if "error" in header:
            raise RemoteError(clean(f"{self.target}: {header['error']}", 4096),
                              missing=str(header["error"]).startswith("no such directory"))
        # a frame whole and no error: connected, before its rows are shown (they said "connecting" beside them)
        self.state.connection, self.state.missing = "connected", False
        if isinstance(header.get("refused"), list):
            self._refused(header["refused"])
        if isinstance(header.get("events"), list):
            self._worker_events(header["events"])
        mtime = header.get("mtime")
        if isinstance(mtime, (int, float)) and not isinstance(mtime, bool):
            self.store.saw_mtime(float(mtime) - self.clock_skew)  # the files' time on this machine's clock
        self.bytes_received += len(line) + len(payload)
        if payload:
            try:
                payload = inflate(payload)
            except zlib.error as e:
                raise RemoteError(f"{host}: a frame's payload cannot be read ({e})") from None
        if sum(int(e[2]) for e in files) > len(payload):
            raise RemoteError(f"{host}: a frame's files add up to more bytes than it sent")
        self._feed(header, payload)
        self._lives(header)
        return header

    def _lives(self, header: dict) -> None:
        """The ranks whose life lock the host's follower found free (``unlocked``, sent when it changes, with
        the host's boot id): those that ended with no exit event are recorded so (mstop.sources.lifelocks)."""
        got, boot = header.get("unlocked"), header.get("boot")
        if isinstance(got, list):
            self._unlocked = frozenset(r for r in got[:MAX_UNLOCKED] if type(r) is int and r >= 0)
            self._boot = clean(boot, 64) if isinstance(boot, str) else None
        if self._unlocked:
            self._life.check({r: f"rank{r}.events.jsonl" for r in self._unlocked},
                             free=lambda r: r in self._unlocked, boot=self._boot)

    def _feed(self, header: dict, payload: bytes) -> None:
        """Give each file's bytes of a frame to its parser (bytes a reconnect sent again are skipped)."""
        try:
            self._renamed(header.get("renamed"))
            self._open_files(header)
        finally:  # a frame refused halfway (RemoteError) keeps the ranks its files made known: a rank whose
            self._add_ranks()  # reader was made and never added was never asked for as written again
        self._feed_files(header, payload)

    def _open_files(self, header: dict) -> None:
        """A reader for each file of the frame not followed yet, before any of its rows: a rank whose rows are
        in the store is one this host follows (``want_raw`` asked for it between the two was refused)."""
        gmtoff = header.get("gmtoff")
        for entry in header.get("files", []):
            name = entry[0]
            if name != SCHEDULER_LOG and name not in self._files:
                f = self._followed(str(name), gmtoff)
                if f is not None:
                    self._files[name] = f

    def _feed_files(self, header: dict, payload: bytes) -> None:
        pos, seen, scheduler = 0, set(), None
        gmtoff = header.get("gmtoff")
        for entry in header.get("files", []):
            name, offset, length, reset = entry[:4]
            data = payload[pos: pos + int(length)]
            pos += int(length)
            if name == SCHEDULER_LOG:
                scheduler = (entry, data)  # read after the workers' rows, held ones too (as locally)
                continue
            f = self._files.get(name)
            if f is None:
                continue  # not one to read (another source's rank, a name refused)
            if len(entry) > 5 and isinstance(entry[5], dict) and f.kind in ("csv", "events", "devices"):
                self._digest_part(f, entry, data, bool(reset))  # the follower's digest mode
                continue
            if not reset and offset != f.tail.offset:
                skip = f.tail.offset - int(offset)
                if skip < 0 or skip > len(data):
                    continue  # not the bytes we are missing: the next frame brings them again
                data = data[skip:]  # already had these (a reconnect resent them): no duplicate rows
            if f.log is not None:
                f.cursor = str(entry[4]) if len(entry) > 4 else ""
                if len(entry) > 5 and entry[5]:  # the follower could not read some lines (rotations)
                    note_lost(self.store, f.rank, f.log)
                seen.add(name)
                chunk = f.tail.feed(data)
                arrived = header.get("mtime")  # when the host last wrote them: the time of unstamped lines
                arrived = (float(arrived) - self.clock_skew
                           if isinstance(arrived, (int, float)) and not isinstance(arrived, bool) else None)
                ingest_log(self.store, f.rank, f.log, chunk.blob, bad=chunk.overlong, flush=False,
                           arrived=arrived, name=str(name))
            else:
                chunk = f.tail.feed(data, reset=bool(reset))
                if self.batch is not None:  # parsed with other hosts' chunks (mstop.sources.fanout)
                    self.batch.add(f, chunk)
                else:
                    ingest(self.store, f, chunk)
                self._file_time(f, entry)
        for name, f in self._files.items():  # log streams with nothing new: their held rows go in
            if f.log is not None and (name not in seen or header.get("caught_up")):
                ingest_log(self.store, f.rank, f.log, b"", flush=True, name=str(name))
        if scheduler is not None:
            self._scheduler_lines(*scheduler, gmtoff)

    def _renamed(self, pairs: object) -> None:
        """Files the follower found renamed by a rotation (``[old, new]``: rank0.csv -> rank0.csv.1): their
        readers go on under the new names. A pair that is not two names of one rank file's parts, or whose
        old name is not followed, is passed over (the follower then sends the file as a new one)."""
        if not isinstance(pairs, list):
            return
        moved = {}
        for pair in pairs[:len(self._files)]:
            if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(n, str) for n in pair)):
                continue
            old, new = rank_part(pair[0]), rank_part(pair[1])
            if old is None or new is None or old[:2] != new[:2] or pair[0] not in self._files:
                continue
            moved[pair[1]] = self._files.pop(pair[0])
        for name, f in moved.items():
            self._files[name] = f

    def _add_ranks(self) -> None:
        """The rank files a frame brought, into :attr:`rank_set` at once (a frame of 200,000 files made a
        copy of the set a file: minutes), each said to ``on_ranks``."""
        if not self._new_ranks:
            return
        new, self._new_ranks = self._new_ranks, []
        self.rank_set = self.rank_set | frozenset(new)
        if self.on_ranks is not None:
            for r in new:
                self.on_ranks(r)

    def _digest(self, f: Followed, entry: list, data: bytes) -> None:
        """A digest part of a rank file: lines of its own columns, each standing for ``k`` rows written
        (mstop.sources.followers.follower's digest mode), fed as rows of that weight; the file is then read on after
        the bytes they stand for. RemoteError for a part that does not follow what was read (it would lose
        or double rows) or whose lines are not each a row."""
        meta = entry[5]
        ks, end = meta.get("k"), meta.get("end")
        parser = f.parser
        what = f"{self.target.host}: a digest of {clean(str(entry[0]), 64)}"
        if not (isinstance(ks, list) and all(type(k) is int and 1 <= k <= MAX_STANDS_FOR for k in ks)
                and type(end) is int and parser is not None and parser.header is not None
                and int(entry[1]) == f.tail.offset and end >= f.tail.offset):
            raise RemoteError(f"{what} that does not follow what was read: not the follower's")
        rows = parser.parse(data) if self.batch is None else None  # else parsed with the other hosts'
        if (data.count(b"\n") != len(ks) or not data.endswith(b"\n")
                or (rows is not None and (rows.bad or len(rows) != len(ks))) or not f.tail.skip_to(end)):
            raise RemoteError(f"{what} whose lines are not its {len(ks):,} rows: not the follower's")
        self._file_time(f, entry)
        if rows is None:
            assert self.batch is not None
            self.batch.add_digest(f, data, ks)  # a line that is no row there: read as it is, and said
            return
        rows.weights = np.asarray(ks, np.float64)
        self.store.append(Batch.of(f.rank, rows))

    def _file_time(self, f: Followed, entry: list) -> None:
        """A rank file's modification time as its entry gives it (on the host's clock, as the source's clock
        is), when it is a number."""
        mtime = entry[4] if len(entry) > 4 else None
        if isinstance(mtime, (int, float)) and not isinstance(mtime, bool) and math.isfinite(mtime):
            self.store.file_time(f.rank, f.kind, float(mtime), newest=False)

    def _digest_part(self, f: Followed, entry: list, data: bytes, reset: bool) -> None:
        """A part of the follower's digest mode: a rank file's merged rows, its events' lines but the
        heartbeats a later one replaced, or a devices file's lines held for the interval."""
        if f.kind == "csv":
            self._digest(f, entry, data)
        else:
            self._beats(f, entry, data, reset)

    def _beats(self, f: Followed, entry: list, data: bytes, reset: bool) -> None:
        """A digest part of a rank's events file: its complete lines but the heartbeats a later one replaced
        (mstop.sources.followers.follower.Beats), fed as lines read; the file is then read on after the bytes they
        stand for. RemoteError for a part that does not follow what was read."""
        end = entry[5].get("end")
        start = 0 if reset else f.tail.offset
        if not (type(end) is int and int(entry[1]) == start and end >= start + len(data)
                and (not data or data.endswith(b"\n")) and (reset or not f.tail.pending)):
            raise RemoteError(f"{self.target.host}: a digest of {clean(str(entry[0]), 64)} that does not follow "
                              "what was read: not the follower's")
        chunk = f.tail.feed(data, reset=reset)
        f.tail.skip_to(end)
        if self.batch is not None:
            self.batch.add(f, chunk)
        else:
            ingest(self.store, f, chunk)
        self._file_time(f, entry)

    def _scheduler_lines(self, entry: list, data: bytes, gmtoff: object) -> None:
        """msrun's scheduler.log, sent beside the worker logs: the workers' ends and losses (as local)."""
        if self._scheduler is None:
            self._scheduler = (FileTail(SCHEDULER_LOG), SchedulerLog(gmtoff=_utc_offset(gmtoff)))
        tail, sched = self._scheduler
        skip = tail.offset - int(entry[1])
        if skip < 0 or skip > len(data):
            return  # not the bytes that follow what was read: the next frame brings them again
        self._scheduler_cursor = str(entry[4]) if len(entry) > 4 else ""
        parsers = {f.rank: f.log for f in self._files.values() if f.log is not None}
        worker_states(self.store, parsers, sched.parse(tail.feed(data[skip:]).blob), self._told, sched.expected)

    def _followed(self, name: str, gmtoff: object) -> Followed | None:
        """The record for a remote file (checked; never used as a local path): a rank file, or a MindFormers
        log stream read with the remote host's UTC offset."""
        r = stream_rank(name)
        if r is None:
            f = followed(name, name, self.store, str(self.target))
            if f is not None and f.kind == "csv" and f.rank not in self.rank_set:
                self._new_ranks.append(f.rank)  # the set made once a frame: a copy a file was quadratic
            return f
        if not self.store.claim(r, str(self.target)):
            return None
        self.store.add_rank_file(r)
        return Followed(r, "mflog", FileTail(name), log=MfLogParser(r, gmtoff=_utc_offset(gmtoff)))

    def _worker_events(self, entries: list) -> None:
        """The follower's word on a log-read job's worker processes (their ``exit`` and ``proc`` events, watched
        on their own host: mstop.sources.procwatch's rules), each checked as an events file's line is."""
        from ..formats.parse import parse_events

        for entry in entries:
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], int)
                    and isinstance(entry[1], dict)) or not self.store.claim(entry[0], str(self.target)):
                continue
            got = parse_events(json.dumps(entry[1]).encode())
            if entry[1].get("reason") == "procwatch":
                self.store.note_as("procwatch", f"rank {entry[0]}'s worker process is not visible on "
                                                f"{self.target.host}: which rank ended first is told by the logs only")
                continue
            self.store.ingest_events(entry[0], got.items, bad=got.bad, cut=got.cut)

    def _refused(self, entries: list) -> None:
        """The remote files named like rank files that are not followed (a FIFO, a directory, a dangling
        link), and why: the whole list each time it changes."""
        now: dict[str, str] = {}
        for entry in entries:
            if isinstance(entry, list) and len(entry) == 2 and all(isinstance(x, str) for x in entry) and \
                    rank_part(entry[0]) is not None:
                now[entry[0]] = clean(entry[1], 128)
        for name in self._refused_names - set(now):
            self.store.refuse(name, None)
        for name, why in now.items():
            self.store.refuse(name, why)
        self._refused_names = set(now)

    def _ssh_error(self, proc: subprocess.Popen) -> str:
        try:
            proc.wait(timeout=self.connection.timeout + 5)
        except subprocess.TimeoutExpired:
            proc.kill()
        try:
            err = (proc.stderr.read() if proc.stderr else b"").decode("utf-8", "replace").strip()
        except (ValueError, OSError):
            err = ""
        return ssh_error(self.target.host, proc.returncode, err)

    def _close(self, proc: subprocess.Popen) -> None:
        _kill(proc)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        if self._proc is proc:
            self._proc = None
