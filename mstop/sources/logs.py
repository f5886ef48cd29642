"""Where a rank's own log is, and reading its tail while it grows (the monitor's log pane, ``L``).

In order, a rank's log is:

1. under ``--logs DIR``: msrun's ``worker_<R>.log``, or MindFormers' ``rank_<R>/info.log``;
2. for a job read from its own logs (:mod:`mstop.sources.mflog`): msrun's ``worker_<R>.log`` beside the run
   (a MindFormers job's ``output/msrun_log/``: a Python traceback goes to standard error, which msrun
   writes there, not to ``info.log``), else the rank's ``info.log``;
3. for a writer's run: the files the writer found its standard output and error going to when it started
   (its start event's ``logs``: msrun's worker log, ``nohup.out``, ``> train.log``).

:class:`LogTail` reads the last :data:`TAIL_BYTES` of one, then what is appended; it never blocks (a FIFO
is refused) and starts again from the end when the file was truncated or replaced.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Any

from mstop_writer.schema import events_name

from ..engine.reader import RunReader
from ..engine.store import Store
from ..formats.logs import LastError, clean_lines, last_error
from ..safe import clean, loads
from .followers import program
from .followers.log_follower import opened_refusal, refusal
from .mflog import LOG_NAME, MSRUN_DIR, find_logs
from .protocol import DEFAULT_CONNECTION, Connection, SourceError
from .remote import Target, parse_target, rank_host

#: How much of a log's end is read when it is opened (about 10,000 lines of 100 characters).
TAIL_BYTES = 1 << 20
#: a log is never read through a link (mstop.sources.followers.log_follower.refusal)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
#: Most lines a pane keeps while it follows (the oldest are dropped).
MAX_LINES = 20_000
#: Most bytes of a line without its end kept between reads (its start: far more than a pane shows of it);
#: the rest is dropped as it comes, so a line without end, or a hole of NULs, is never joined again and again
PARTIAL_MAX = 64 << 10
#: bytes before the read offset compared at every read: a log rewritten in place is read again, not kept
MARK_BYTES = 64


@dataclass(frozen=True)
class Candidate:
    """A place a rank's log may be, and what makes it the job's (mstop.sources.followers.log_follower.refusal): inside
    the folder ``within``, or owned by the owner of ``vouch`` (the events file whose start event named it)."""

    path: str
    within: str | None = None
    vouch: str | None = None
    since: float | None = None  # the start event's time: the job's output was written after it

    def check(self) -> dict[str, Any]:
        """The log follower's check of it (the same rule, applied on the other host)."""
        return {k: v for k, v in (("within", self.within), ("vouch", self.vouch), ("since", self.since))
                if v is not None}


def rank_log(store: Store, specs: list[str], rank: int, logs_dir: str | None = None) -> Candidate | None:
    """Rank ``rank``'s log (see the module docstring), or None when none is known here."""
    return find_rank_log(store, specs, rank, logs_dir)[0]


def find_rank_log(store: Store, specs: list[str], rank: int,
                  logs_dir: str | None = None) -> tuple[Candidate | None, str | None]:
    """(rank ``rank``'s log, None) or (None, why none is shown: a file named as its log that the job could
    not have written, else None): only a regular file the job could have written is ever read, whatever the
    run's files name (a start event naming a private key or ``/etc/shadow`` is refused). The log is read with
    its candidate's check: the rule is applied again to the file opened (:class:`LogTail`)."""
    why = None
    for c in candidates(store, specs, rank, logs_dir):
        bad = refusal(c.path, c.within, c.vouch, c.since)
        if bad is None:
            return c, None
        if not bad.startswith("missing: ") and why is None:
            why = bad
    return None, why


def candidates(store: Store, specs: list[str], rank: int, logs_dir: str | None = None) -> list[Candidate]:
    """Every place rank ``rank``'s log may be, best first."""
    out: list[Candidate] = []
    if logs_dir:
        out += [Candidate(p, within=logs_dir) for p in (
            os.path.join(logs_dir, f"worker_{rank}.log"), os.path.join(logs_dir, f"rank_{rank}", LOG_NAME),
            os.path.join(logs_dir, MSRUN_DIR, f"worker_{rank}.log"))]
    local = [spec for spec in specs if _local(spec)]  # host:/path: the log is on the other host
    for spec in local:
        found = find_logs(spec).get(rank)
        if found is not None:
            folder, name = found
            if name == LOG_NAME:  # MindFormers' rank_<R>/info.log: msrun's worker log holds the tracebacks
                root = os.path.dirname(os.path.dirname(folder))  # output/log/rank_R -> output
                top = os.path.dirname(root)
                out += [Candidate(os.path.join(r, MSRUN_DIR, f"worker_{rank}.log"), within=top) for r in (root, top)]
            out.append(Candidate(os.path.join(folder, name), within=folder))
    start = RunReader(store).start(rank) or {}
    logs, since = start.get("logs"), _time(start)
    if isinstance(logs, list) and local:  # else paths on the other host
        for spec in local:
            vouch = os.path.join(spec, events_name(rank))
            if os.path.lexists(vouch):
                out += [Candidate(p, within=spec, vouch=vouch, since=since) for p in logs
                        if isinstance(p, str) and os.path.isabs(p)]
                break
    return out


def _time(start: dict[str, Any]) -> float | None:
    """A start event's time (None: not a number)."""
    t = start.get("time")
    return float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) and t == t else None


def _local(spec: str) -> bool:
    """Whether ``spec`` is a directory on this machine (not ``host:/path``, nor a refused host name)."""
    try:
        return parse_target(spec) is None
    except SourceError:
        return False


@dataclass
class LogTail:
    """One log file read from near its end, then as it grows: its complete lines, cleaned for a terminal."""

    path: str
    #: the trust rule it was found by (mstop.sources.logs.find_rank_log): applied again to each file opened
    check: Candidate | None = None
    lines: list[str] = field(default_factory=list)
    offset: int = 0
    error: str | None = None  # why it cannot be read now
    dropped: int = 0  # lines dropped from the start of ``lines`` to keep MAX_LINES
    _ident: tuple[int, int] | None = None
    _partial: bytes = b""
    _mark: bytes = b""  # the last bytes read (up to MARK_BYTES), ending at ``offset``

    @property
    def pending(self) -> int:
        """Bytes of a line not ended yet kept between reads (at most PARTIAL_MAX)."""
        return len(self._partial)

    @property
    def opened(self) -> bool:
        """Whether a read has found the file (its identity is known)."""
        return self._ident is not None

    def read(self) -> list[str]:
        """Read what is new; return the lines it added (the first call: the file's last TAIL_BYTES)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | _NOFOLLOW)
        except OSError as e:
            self.error = f"cannot open {self.path}: {e.strerror or e}"
            return []
        try:
            c = self.check
            bad = opened_refusal(fd, self.path, c.within, c.vouch, c.since) if c is not None else None
            if bad is not None:  # a link on the way swapped since the file was judged: judged again, opened
                self.error = bad
                return []
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                self.error = f"{self.path} is not a regular file"
                return []
            ident = (st.st_dev, st.st_ino)
            notes = []
            mid_line = False
            name = os.path.basename(self.path)
            if ident == self._ident and st.st_size >= self.offset and self._mark and \
                    os.pread(fd, len(self._mark), self.offset - len(self._mark)) != self._mark:
                notes.append(f"-- {name} was rewritten in place: read again --")  # its old lines are not its
                self.dropped += len(self.lines)
                self.lines = []
                self._ident = None
            if ident != self._ident or st.st_size < self.offset:  # replaced or truncated: from its end again
                if self._ident is not None:
                    notes.append(f"-- {name} was truncated or replaced: read again --")
                self._ident, self._partial = ident, b""
                self.offset = max(0, st.st_size - TAIL_BYTES)
                mid_line = self.offset > 0  # the tail starts inside a line: that piece is left out
            elif st.st_size - self.offset > TAIL_BYTES:  # more than a tail since the last read (a burst, a hole)
                notes.append(f"-- {st.st_size - self.offset - TAIL_BYTES:,} bytes of {name} skipped: its last "
                             f"{TAIL_BYTES >> 20} MiB follow --")
                self.offset, self._partial, mid_line = st.st_size - TAIL_BYTES, b"", True
            data = os.pread(fd, min(max(0, st.st_size - self.offset), TAIL_BYTES), self.offset)
        except OSError as e:
            self.error = f"cannot read {self.path}: {e.strerror or e}"
            return []
        finally:
            os.close(fd)
        self.error = None
        self.offset += len(data)
        return self._take(data, notes, mid_line)

    def _take(self, data: bytes, notes: list[str], mid_line: bool) -> list[str]:
        """The complete lines of newly read bytes (``mid_line``: the first piece is a cut line, left out)."""
        if data:
            self._mark = (self._mark + data)[-MARK_BYTES:]
        cut = data.rfind(b"\n")
        if cut < 0:  # no line ends here: the line goes on (at most PARTIAL_MAX of its start kept)
            if len(self._partial) < PARTIAL_MAX:
                self._partial = (self._partial + data)[:PARTIAL_MAX]
            data = b""
        else:
            data, self._partial = self._partial[:PARTIAL_MAX] + data[:cut + 1], data[cut + 1:cut + 1 + PARTIAL_MAX]
        cut = data.rfind(b"\n")
        body = data[: cut + 1]
        if mid_line:
            body = body[body.find(b"\n") + 1:]
        new = notes + (clean_lines(body.decode("utf-8", "replace"))[:-1] if body else [])
        self.lines += new
        if len(self.lines) > MAX_LINES:
            self.dropped += len(self.lines) - MAX_LINES
            del self.lines[: len(self.lines) - MAX_LINES]
        return new


def last_error_of(log: Candidate) -> LastError | None:
    """The last error a log's tail holds (mstop.formats.logs.last_error), read once; None without one."""
    tail = LogTail(log.path, log)
    tail.read()
    return last_error(tail.lines)


def job_rank_of(store: Store) -> int:
    """The rank whose log stands for the job: the lowest with rows (figures.lowest_rank), else the lowest
    known (a job that died before its first row), else 0."""
    from ..engine.figures import lowest_rank

    run = RunReader(store)
    got = lowest_rank(store) if not run.empty() else None
    return got if got is not None else min(run.ranks, default=0)


@dataclass
class RemoteLogTail(LogTail):
    """A log on another host, read as :class:`LogTail` reads one here: one run of the log follower program
    (mstop.sources.followers.log_follower) over the host's shared ssh connection per :meth:`read`, while the pane is
    open; ``candidates`` are the paths it may be at, on that host, best first (the first that is a file)."""

    host: str = ""
    candidates: list[Candidate] = field(default_factory=list)
    connection: Connection = DEFAULT_CONNECTION
    remote = True

    def read(self) -> list[str]:
        from .remote import RemoteError, run_program

        first = self._ident is None
        chosen = [c for c in self.candidates if c.path == self.path.split(":", 1)[1]][:1]
        ask = self.candidates if first else chosen  # the file chosen, checked again at every read
        request = {"paths": [c.path for c in ask], "checks": [c.check() for c in ask], "tail": TAIL_BYTES,
                   "offset": None if first else self.offset, "ident": list(self._ident) if self._ident else None}
        try:
            out = run_program(self.host, _program(), request, connection=self.connection, timeout=20.0)
            nl = out.index(b"\n")
            head = checked_answer(loads(out[:nl]), len(out) - nl - 1)
        except (RemoteError, ValueError) as e:
            self.error = f"{self.host}: the log cannot be read: {e}"
            return []
        if "error" in head:
            self.error = f"{self.host}: {clean(str(head['error']), 500)}"
            return []
        data = out[nl + 1: nl + 1 + int(head["n"])]
        notes, mid_line = [], False
        if head["reset"]:
            if self._ident is not None:
                notes.append(f"-- {os.path.basename(self.path)} was truncated or replaced: read again --")
            self._partial = b""
            mid_line = int(head["offset"]) > 0
        if head.get("skipped"):
            notes.append(f"-- {int(head['skipped']):,} bytes of {os.path.basename(self.path)} skipped: its last "
                         f"{TAIL_BYTES >> 20} MiB follow --")
            self._partial, mid_line = b"", True
        self._ident = tuple(head["ident"])
        self.path = f"{self.host}:{clean(str(head['path']), 4096)}"
        self.error = None
        self.offset = int(head["offset"]) + len(data)
        return self._take(data, notes, mid_line)


def checked_answer(head: Any, sent: int) -> dict[str, Any]:
    """The log follower's answer, every field type-checked (a host's answer is never trusted: a field missing
    or of the wrong type is a ValueError naming it, said in the pane, never a traceback)."""
    if not isinstance(head, dict):
        raise ValueError("its answer is not a JSON object")
    if "error" in head:
        return {"error": head["error"]}
    for key, kind in (("path", str), ("offset", int), ("n", int), ("reset", bool)):
        if not isinstance(head.get(key), kind) or (kind is int and isinstance(head[key], bool)):
            raise ValueError(f"its answer's {key!r} is missing or not a {kind.__name__}")
    ident = head.get("ident")
    if not (isinstance(ident, list) and len(ident) == 2 and all(type(x) is int for x in ident)):
        raise ValueError("its answer's 'ident' is not two numbers")
    if head["offset"] < 0 or not 0 <= head["n"] <= min(sent, TAIL_BYTES):
        raise ValueError(f"its answer's sizes do not hold (offset {head['offset']}, n {head['n']}, {sent} bytes sent)")
    skipped = head.get("skipped", 0)
    if type(skipped) is not int or skipped < 0:
        raise ValueError("its answer's 'skipped' is not a count")
    return head


def _program() -> bytes:

    return program("log_follower")


def remote_candidates(store: Store, spec: str, rank: int, *, hosts: bool = False) -> tuple[str, list[Candidate]] | None:
    """(host, places on it) where rank ``rank``'s log may be for a ``host:/path`` source: the start event's
    ``logs`` (paths on that host), then msrun's and MindFormers' names under the source's folder. With
    ``hosts`` (``--hosts auto``), a directory read here whose rank ran on another host is that host's too
    (a shared filesystem: the same path there), so its log is looked for on it."""
    try:
        target = parse_target(spec)
    except SourceError:
        return None
    start = RunReader(store).start(rank) or {}
    if target is None and hosts and _local(spec):
        host = rank_host(start)
        target = Target(host, os.path.abspath(spec)) if host is not None else None
    if target is None:
        return None
    logs, since = start.get("logs"), _time(start)
    root = target.path.rstrip("/")
    base = root or "/"
    vouch = f"{root}/{events_name(rank)}"
    paths = [Candidate(p, within=base, vouch=vouch, since=since) for p in logs
             if isinstance(p, str) and p.startswith("/")] if isinstance(logs, list) else []
    names = (f"worker_{rank}.log", f"{MSRUN_DIR}/worker_{rank}.log", f"rank_{rank}/{LOG_NAME}",
             f"log/rank_{rank}/{LOG_NAME}")
    paths += [Candidate(f"{root}/{p}", within=base) for p in names]
    return target.host, paths


def remote_tail(store: Store, specs: list[str], rank: int,
                connection: Connection = DEFAULT_CONNECTION) -> RemoteLogTail | None:
    """Rank ``rank``'s log on the host of the first ``host:/path`` source (remote_candidates), unread; None
    without such a source."""
    got = next((c for c in (remote_candidates(store, spec, rank, hosts=connection.hosts) for spec in specs) if c),
               None)
    if got is None:
        return None
    host, paths = got
    return RemoteLogTail(f"{host}:{paths[0].path}", host=host, candidates=paths, connection=connection)


#: the ranks whose own logs are read for the peers they waited for, at most (a 1,024-rank job: every one)
WAITS_LOOKED_AT = 4096


def add_log_waits(store: Store, specs: list[str], logs_dir: str | None = None,
                  told: set[tuple[int, str, int]] | None = None, snap: Any = None) -> int:
    """A writer's run whose job hangs or died: each rank's own log (its msrun worker log, named by its start
    event, or in ``logs_dir``) read at its tail for the collective timeouts that name the peer it waited for
    (mstop.formats.waits), given to the store as ``waits_for`` events of the rank's current session, as the
    log reader gives them for a job read from its logs; a log not written since that session began is not
    read (an earlier launch's). ``told``: the (rank, session, peer) already given, kept by a caller that
    looks again. A run whose ranks' logs already gave waits (a job read from its logs) is left as it is. The
    ranks' start events are read from their answers' arrays (mstop.engine.rankstate: no rank record made),
    each log found by its own name (no folder scanned a rank); ``snap``: the store's snapshot a caller already
    holds. Returns how many waits were given."""
    from ..engine import rankstate
    from ..formats.waits import waited_peer

    snap = store.snapshot() if snap is None else snap
    local = [spec for spec in specs if _local(spec)]
    if snap.ranks_with("waits") or not (local or logs_dir):
        return 0
    told = set() if told is None else told
    found: dict[int, list[dict[str, Any]]] = {}
    st = rankstate.states(snap)
    for r, one in list(zip(st.ranks, st.one))[:WAITS_LOOKED_AT]:
        start = one.start or {}
        session, since = start.get("session"), _time(start)
        if not isinstance(session, str):
            continue
        log = _own_log(r, start, local, logs_dir, since)
        if log is None:
            continue
        tail = LogTail(log.path, log)
        tail.read()
        for line in tail.lines:
            w = waited_peer(line)
            if w is not None and (r, session, w.peer) not in told:
                told.add((r, session, w.peer))
                # timed at the session's start: a wait read now is no sign of the rank's life
                found.setdefault(r, []).append({"kind": "waits_for", "time": since if since is not None else 0.0,
                                                "session": session, "peer": w.peer, "group": w.group,
                                                "group_size": w.group_size})
    store.take_events(found)  # every rank's at once: a graph half read could name the wrong rank
    return sum(len(v) for v in found.values())


def _own_log(rank: int, start: dict[str, Any], local: list[str], logs_dir: str | None,
             since: float | None) -> Candidate | None:
    """Rank ``rank``'s own log as its start event names it (or ``logs_dir``'s ``worker_<R>.log``), if the job
    could have written it (:func:`refusal`) since its session began."""
    out: list[Candidate] = []
    if logs_dir:
        out.append(Candidate(os.path.join(logs_dir, f"worker_{rank}.log"), within=logs_dir, since=since))
    logs = start.get("logs")
    if isinstance(logs, list):
        for spec in local:
            vouch = os.path.join(spec, events_name(rank))
            out += [Candidate(p, within=spec, vouch=vouch, since=since) for p in logs
                    if isinstance(p, str) and os.path.isabs(p)]
    for c in out:
        if refusal(c.path, c.within, c.vouch, c.since) is None:
            try:
                if since is None or os.stat(c.path).st_mtime >= since:
                    return c
            except OSError:
                continue
    return None
