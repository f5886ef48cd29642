"""The worker processes of a job read from its logs, watched from this host (issue 38, item 6).

A job with no mstop code has no exit witness. But MindSpore's log lines carry each worker's pid
(``[WARNING] ME(21888,7f...,python):2026-12-03-...``), and where mstop runs on the workers' host it can
watch those processes itself: the first to end is the rank that died (msrun ends the others within a
second, and the logs of all stop at the same step). A pid is trusted only when it is provably that
worker: a process of this host whose standard output or error *is* the worker's log file (``/proc/PID/fd``
1 or 2, the same file by device and inode), recorded with its start time (``/proc/PID/stat`` field 22) so a
reused pid is never taken for it. Anywhere else (the logs on a shared filesystem, the workers on other hosts,
another user's processes) mstop says once that it cannot see them.

A thread polls the workers' pidfds (the kernel wakes it at an end, to the millisecond), reads their
states once a second, and gives the store the same ``exit`` and ``proc`` events an exit witness writes,
marked ``"source": "viewer"``.
"""

from __future__ import annotations

import os
import re
import select
import threading
import time
from typing import Any, Callable

from mstop_writer.witness import describe_status, proc_facts, running

from ..engine.store import Store
from .followers.follower import ran_here as _ran_here

#: a MindSpore log line's prefix: ``ME(21888,7f3a...,python)`` or ``DEVICE(9026,...)``: the pid comes first
PID = re.compile(rb"\b[A-Z_]{2,16}\((\d{1,9}),[0-9a-fx]+,")
#: bytes of a worker log read to find its pid (MindSpore's first WARNING lines come within the first KB)
HEAD = 256 << 10
#: seconds between looks at the states, and between tries to find a worker's pid
LOOK_S = 1.0


class ProcessWatch:
    """Workers' processes by rank, watched from this host; :meth:`consider` each worker log as it is read."""

    def __init__(self, store: Store, on_update: Callable[[], None] | None = None) -> None:
        self.store = store
        self.on_update = on_update
        self.watched: dict[int, dict[str, Any]] = {}  # rank -> {pid, ticks, pidfd, log, said}
        self.unseen: dict[int, str] = {}  # rank -> why its process cannot be watched from here
        self.ended: dict[int, int] = {}  # rank -> pid: a worker of this host found ended (never seen running)
        self._tried: dict[int, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.ticks = float(os.sysconf("SC_CLK_TCK"))
        self.page = os.sysconf("SC_PAGE_SIZE")

    def consider(self, rank: int, log_path: str, *, follow: bool = True) -> None:
        """Find rank ``rank``'s worker process from its log (once found, or once a second until then) and
        watch it (``follow``; else record its state once, as a one-shot read does). A worker that ran on this
        host by its log (:func:`ran_here`) and has no process now has ended: recorded as such at once (a
        ``summary`` after the job, a monitor opened on a dead job), not after the logs' silence."""
        if rank in self.watched or rank in self.unseen or rank in self.ended:
            return
        now = time.monotonic()
        if follow and now - self._tried.get(rank, -1e9) < LOOK_S:
            return
        self._tried[rank] = now
        head = _head(log_path)
        pid = _pid_of(head)
        if pid is None:
            return
        why = _is_writer_of(pid, log_path)
        if why is not None and self._ended(pid) and _ran_here(head, pid):
            self._found_ended(rank, pid, log_path)
            return
        if why is not None:
            self.unseen[rank] = why
            self.store.note_as("procwatch", self._unseen_note())
            return
        if not follow:  # its state as it is now; watched from the next consider that follows
            facts = proc_facts(pid, self.ticks, self.page)
            if facts is not None:
                self.store.ingest_events(rank, [_proc_event(rank, pid, facts, True)])
            return
        facts = proc_facts(pid, self.ticks, self.page)
        if facts is None:
            return
        try:
            pidfd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            pidfd = None
        with self._lock:
            self.watched[rank] = {"pid": pid, "ticks": facts["start_ticks"], "pidfd": pidfd, "log": log_path,
                                  "said": None, "last": facts, "written": 0.0}
        self._proc(rank, facts, changed=True)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="mstop-procwatch", daemon=True)
            self._thread.start()

    def _ended(self, pid: int) -> bool:
        """Whether process ``pid`` of this host is gone, or a zombie its parent has not reaped yet (it holds no
        file any more, so it is no writer of its log, but it is no other process either)."""
        facts = proc_facts(pid, self.ticks, self.page)
        return facts is None or facts["state"] in "ZX"

    def _found_ended(self, rank: int, pid: int, log_path: str) -> None:
        """Rank ``rank``'s worker ran here and its process is gone: an ``exit`` whose time is its log's last
        write (it ended at or after it: not exact enough to order the ranks' ends, ``found_ended``)."""
        try:
            last = os.stat(log_path).st_mtime
        except OSError:
            return
        self.ended[rank] = pid
        self.store.ingest_events(rank, [{"time": last, "kind": "exit", "rank": rank, "pid": pid, "source": "viewer",
                                         "how": "unknown", "found_ended": True}])
        ranks = sorted(self.ended)
        who = f"rank {ranks[0]}" if len(ranks) == 1 else f"{len(ranks)} ranks"
        self.store.note_as("procwatch-ended", f"the worker process of {who} ran on this host (its log's "
                                              "connection address) and has ended: when, its log's last line "
                                              "tells, not which rank ended first")

    def _unseen_note(self) -> str:
        ranks = sorted(self.unseen)
        why = self.unseen[ranks[0]]
        who = f"rank {ranks[0]}" if len(ranks) == 1 else f"{len(ranks)} ranks (rank {ranks[0]}: {why})"
        return (f"the worker process of {who} is not visible from here ({why if len(ranks) == 1 else 'and the rest'}"
                "): which rank ended first is told by the logs only")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            for w in self.watched.values():
                if w["pidfd"] is not None:
                    os.close(w["pidfd"])
                    w["pidfd"] = None

    def _run(self) -> None:
        next_look = 0.0
        while not self._stop.is_set():
            with self._lock:
                live = {w["pidfd"]: r for r, w in self.watched.items() if w["pidfd"] is not None}
                polled = [r for r, w in self.watched.items() if w["pidfd"] is None and w.get("done") is None]
            poller = select.poll()
            for fd in live:
                poller.register(fd, select.POLLIN)
            wait = max(0.0, next_look - time.monotonic())
            if polled:  # a process without a pidfd: its end is looked for every 0.1 s
                wait = min(wait, 0.1)
            if live:
                ready = [live[fd] for fd, _ in poller.poll(wait * 1000)]
            else:
                self._stop.wait(wait)
                ready = []
            looking = time.monotonic() >= next_look
            if looking:
                next_look = time.monotonic() + LOOK_S
            changed = False
            active = [r for r in list(self.watched) if self.watched[r].get("done") is None]
            if ready or looking or polled:
                facts = {r: proc_facts(self.watched[r]["pid"], self.ticks, self.page) for r in active}
                gone = [r for r in active if r in ready or self._gone(r, facts[r])]
                # the ends seen in this one look share its time; the workers still running when looked at again
                # now, after those ends were certain, outlived them
                seen = time.time()
                alive = [self.watched[r]["pid"] for r in active if gone and r not in gone
                         and running(self.watched[r]["pid"], self.ticks, self.page, self.watched[r]["ticks"])]
                for r in gone:
                    self._exit(r, facts[r], seen, alive)
                    changed = True
                if looking:
                    for r in active:
                        if r not in gone:
                            changed |= self._proc(r, facts[r])
            if changed and self.on_update is not None:
                self.on_update()

    def _proc(self, rank: int, facts: dict[str, Any], *, changed: bool = False) -> bool:
        w = self.watched[rank]
        state = facts["state"]
        shown = state if state in "TtDZ" else "ok"
        now = time.monotonic()
        if not changed and shown == w["said"] and now - w["written"] < 5.0:
            w["last"] = facts
            return False
        w.update(said=shown, written=now, last=facts)
        self.store.ingest_events(rank, [_proc_event(rank, w["pid"], facts, changed or shown != "ok")])
        return True

    def _gone(self, rank: int, facts: dict[str, Any] | None) -> bool:
        """The rank's process ended, or its pid is another process's now."""
        return facts is None or facts["start_ticks"] != self.watched[rank]["ticks"] or facts["state"] in "ZX"

    def _exit(self, rank: int, facts: dict[str, Any] | None, seen: float, alive: list[int]) -> None:
        w = self.watched[rank]
        e: dict[str, Any] = {"time": seen, "kind": "exit", "rank": rank, "pid": w["pid"], "source": "viewer",
                             "peers_alive": alive}
        if facts is not None and facts.get("start_ticks") == w["ticks"] and "exit_status" in facts:
            e.update(describe_status(facts["exit_status"]))
        else:
            e["how"] = "unknown"
        last = w.get("last")
        if last is not None:
            e["last_state"] = last["state"]
        w["done"] = e["time"]
        if w["pidfd"] is not None:
            os.close(w["pidfd"])
            w["pidfd"] = None
        self.store.ingest_events(rank, [e])


def _proc_event(rank: int, pid: int, facts: dict[str, Any], changed: bool) -> dict[str, Any]:
    """A ``proc`` event as an exit witness writes it, marked as the viewer's."""
    return {"time": time.time(), "kind": "proc", "rank": rank, "pid": pid, "source": "viewer",
            "state": facts["state"], "cpu_s": facts["cpu_s"], "rss": facts["rss"], "threads": facts["threads"],
            "changed": changed}


def ran_here(path: str, pid: int) -> bool:
    """Whether the worker ``pid`` whose log is ``path`` ran on this host: a line of its own (its pid in the
    MindSpore prefix) gives the address its connection to msrun's master came from (``Connection 11 source:
    127.0.0.1:42116, destination: ...``, MindSpore's cluster warnings), and that address is one of this
    host's (mstop.sources.followers.follower.ran_here: the rule the follower applies on a job's host). Logs
    without such a line (their level above WARNING) say nothing: False."""
    return _ran_here(_head(path), pid)


def _head(path: str) -> bytes:
    """A worker log's first HEAD bytes (empty when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            return f.read(HEAD)
    except OSError:
        return b""


def _pid_of(head: bytes) -> int | None:
    """The pid the first MindSpore-prefixed line of a worker log's ``head`` names."""
    m = PID.search(head)
    return int(m.group(1)) if m else None


def pid_in(path: str) -> int | None:
    """The pid the first MindSpore-prefixed line of a worker log names."""
    return _pid_of(_head(path))


def _is_writer_of(pid: int, path: str) -> str | None:
    """None when process ``pid`` of this host writes its standard output or error to ``path`` (the same
    file, by device and inode); else why it cannot be taken for the worker."""
    try:
        want = os.stat(path)
    except OSError as e:
        return f"cannot stat its log: {e.strerror}"
    if not os.path.exists(f"/proc/{pid}"):
        return "no such process on this host (it ended, or runs on another host)"
    for fd in (1, 2):
        try:
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except PermissionError:
            return "another user's process"
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (want.st_dev, want.st_ino):
            return None
    return "pid " + str(pid) + " on this host is another process (the workers run on another host)"
