"""Many hosts through one ClusterShell Task: the transport of a node set (``node[001-512]:/path``, issue 41).

Each host still gets the follower program (mstop.sources.followers.follower) on its standard input and runs it with
its own ``python3``; what changes is who holds the connections. Instead of a thread and a reader per host,
one ClusterShell Task, in one thread, runs the system's OpenSSH to every host (so ``~/.ssh/config``,
ProxyJump and agents apply), or has its gateways run it in tree mode (``--topology FILE``), and hands each
line a host prints to a handler as it arrives. The follower runs in its line mode (a frame a line, the
payload inside as base64), so each line is one whole frame, checked and fed to the store by the host's own
:class:`~mstop.sources.remote.RemoteSource`, exactly as when it reads its own pipe.

The ssh command is mstop's own (:func:`mstop.sources.remote.ssh_args`, run by ClusterShell's ``exec``
worker with the host's name for ``%h``), and the follower is told that name as its one argument: one
standard input then serves every host of a worker (a request keyed by host). That is what tree mode
needs: a ClusterShell gateway passes a channel's standard input to its newest worker only, so each gateway
must get one worker at a time, all its hosts in it.

What a long-lived follower needs from ClusterShell, each set here (tests/system/test_fanout_sshd.py):

* ``fanout`` at least the hosts: followers never end, so with the default 64 the 65th host would wait
  forever for a free slot;
* ``stdout_msgtree``/``stderr_msgtree`` off: else every line of every host is kept in memory;
* ``ServerAliveInterval``: a host whose link is gone is noticed by ssh; a host or follower that stops
  answering while its link lives is noticed by the frames' own deadline (the follower's heartbeat);
* rc 76 (a gateway lost mid-run) and rc 255 (ssh failed): the host is started again, at once for a lost
  gateway (ClusterShell routes around a gateway it has marked unreachable), after a backoff for ssh;
* every ssh process stopped when mstop ends, however it ends (:func:`mstop.sources.remote.cleanup`).
"""

from __future__ import annotations

import math
import os
import shlex
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from ..safe import clean
from .protocol import DEFAULT_CONNECTION, Connection
from .rankfiles import Round
from .remote import (
    BOOTSTRAP,
    FRAME_DEADLINE,
    IDLE_FRAMES,
    LINE_CHUNK,
    MAX_HEADER,
    STOPPERS,
    RemoteError,
    RemoteSource,
    program_input,
    retrying,
    ssh_args,
    ssh_error,
)

#: ClusterShell's return code for a node whose gateway was lost mid-run (its tree mode)
GATEWAY_LOST = 76
#: how often the deadlines are looked at
TICK = 1.0
#: hosts whose ssh is started in one tick, flat: each is a fork and an ssh handshake on this machine (some
#: 30 ms of its CPU); while ClusterShell starts clients it reads none, so 256 at once held every frame for
#: longer than their deadline (here: all 256 ended, started again, forever)
LAUNCH_EACH_TICK = 64
#: seconds a gateway may take to start one host's ssh, counted into the first frame's deadline (128 hosts
#: through 2 gateways were all connected after 25 s on a loaded 2-core machine; 256 never, within 30 s each)
GATEWAY_START_S = 0.25
#: how often the lines the hosts sent go into the store together (what it adds to a row's latency, at most)
BATCH_S = 0.1


@dataclass(eq=False)
class _Host:
    """One host's connection, as the Task's thread sees it."""

    source: RemoteSource
    worker: object | None = None  # the ClusterShell worker that runs its follower, while one does
    tries: int = 0
    rc: int | None = None
    err: deque = field(default_factory=lambda: deque(maxlen=8))  # its ssh's last lines on standard error
    last: float = 0.0  # time.monotonic() of its last frame, or of its start
    asked: float = 0.0  # our clock when it was started: its first frame measures its clock against it
    first: bool = True
    idle: int = 0
    due: bool = False  # to be started again at the next tick
    done: bool = False  # a one-shot read: caught up, or failed for good
    error: RemoteError | None = None
    raw: frozenset[int] = frozenset()  # the ranks its follower was asked to send row by row
    again: bool = False  # ended to be asked again (another rank row by row): no fault, its state unchanged

    @property
    def name(self) -> str:
        return self.source.target.host

    @property
    def node(self) -> str:
        """The host's name as ClusterShell takes it (its login, ``user@``, goes to ssh as ``-l``)."""
        return self.name.rpartition("@")[2]


def _handler(fan: Fanout, hosts: dict[str, _Host]):
    """A ClusterShell event handler for one worker and its hosts (made here: ClusterShell is imported when
    used)."""
    from ClusterShell.Event import EventHandler

    class Handler(EventHandler):
        def ev_read(self, worker, node, sname, msg) -> None:
            h = hosts.get(str(node))
            if h is None:
                return
            if sname == worker.SNAME_STDERR:
                h.err.append(msg)
            else:
                fan.line(h, worker, msg)

        def ev_pickup(self, worker, node) -> None:  # its ssh started now: its deadline counts from here
            h = hosts.get(str(node))
            if h is not None:
                h.last, h.asked = time.monotonic(), fan.clock()

        def ev_hup(self, worker, node, rc) -> None:
            h = hosts.get(str(node))
            if h is not None:
                h.rc = rc
                fan.closed(h, worker)

        def ev_close(self, worker, timedout) -> None:  # hosts whose end gave no return code (killed)
            for h in hosts.values():
                fan.closed(h, worker)

        def ev_timer(self, timer) -> None:
            fan.tick()

    return Handler()


def topology_file(given: str | None) -> str | None:
    """The topology file a node set is read through: ``given`` (``--topology``), else the site's (ClusterShell's
    own search: /etc/clustershell/topology.conf, then the user's), else None (flat: no gateway)."""
    if given:
        return given
    import os

    from ClusterShell.Task import Task

    return next((f for f in Task.TOPOLOGY_CONFIGS[::-1] if os.path.exists(f)), None)


def check_topology(path: str) -> None:
    """ValueError saying why ``path`` cannot route a node set from this host (unreadable, not a topology, or
    one that does not start from this host's name)."""
    import socket

    from ClusterShell.Topology import TopologyError, TopologyParser

    here = socket.gethostname().split(".")[0]  # the root node's name, as ClusterShell takes it
    _bounded_topology(path)
    try:
        TopologyParser(path).tree(here)
    except (OSError, TopologyError, ValueError, AssertionError) as e:
        raise ValueError(clean(f"{path}: {e} (its routes must start from this host, {here})", 4096)) from None


#: the largest topology file read (a site's routes are a few lines; past this it is not one)
MAX_TOPOLOGY = 1 << 20


def _bounded_topology(path: str) -> None:
    """ValueError unless ``path`` is a regular file of at most MAX_TOPOLOGY bytes whose node sets each name at
    most 10 x MAX_HOSTS hosts: checked before ClusterShell reads it (a FIFO blocked it forever; a route of
    ``n[1-100000000]`` expanded into gigabytes). Opened without blocking, and checked by its descriptor."""
    import stat

    from .nodesets import MAX_HOSTS, most_hosts

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise ValueError(clean(f"{path}: {e.strerror}", 4096)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(clean(f"{path}: not a regular file (a FIFO, a device or a folder): no topology", 4096))
        if st.st_size > MAX_TOPOLOGY:
            raise ValueError(clean(f"{path}: {st.st_size:,} bytes: more than a topology file's "
                                   f"{MAX_TOPOLOGY:,}", 4096))
        text = os.read(fd, MAX_TOPOLOGY + 1).decode("utf-8", "replace")
    finally:
        os.close(fd)
    for line in text.splitlines():
        if line.lstrip().startswith(("#", ";", "[")) or ":" not in line:
            continue
        for side in line.split(":", 1):
            if most_hosts(side.strip()) > 10 * MAX_HOSTS:
                raise ValueError(clean(f"{path}: {side.strip()[:200]!r} names more than {MAX_HOSTS:,} hosts (a "
                                       "typo in a range?)", 4096))


def _flusher(fan: Fanout):
    from ClusterShell.Event import EventHandler

    class Flush(EventHandler):
        def ev_timer(self, timer) -> None:
            fan.flush()

    return Flush()


class Fanout:
    """Read or follow many :class:`RemoteSource` hosts through one ClusterShell Task in one thread.

    The sources keep their own state (``state.connection``, clock skew, files); this only moves lines.
    ``topology``: a ClusterShell topology file (tree mode through its gateways)."""

    def __init__(self, sources: list[RemoteSource], *, connection: Connection = DEFAULT_CONNECTION,
                 on_update: Callable[[], None] | None = None, topology: str | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.hosts = [_Host(s) for s in sources]
        #: the hosts' rank file lines of the last BATCH_S, parsed together (at 64 hosts a second brings
        #: hundreds of one-line chunks: parsing each alone was most of a row's cost, as for local files)
        self.round = Round(sources[0].store) if sources else None
        for s in sources:
            s.batch = self.round
        self._news = False
        self.connection = connection
        #: names this viewer's followers on the hosts' command lines: a host's new follower ends its old one
        #: (through a gateway that one runs on: mstop.sources.followers.follower.superseded)
        self.token = os.urandom(8).hex()
        self.launches = 0  # launches so far (each a new worker): a host's latest ends its others
        self.on_update = on_update
        self.topology = topology_file(topology)
        self.clock = clock  # this machine's time (a test's own): a host's clock is measured against it
        self._task = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._oneshot = False
        self._ready = threading.Event()
        self._ticked = 0.0  # time.monotonic() of the last tick
        #: seconds a first frame may take beyond a connection's: through gateways, each gateway starts its
        #: hosts' ssh all at once and reads none meanwhile (GATEWAY_START_S a host of the batch)
        self._starting = 0.0
        self._wake = threading.Event()  # set by stop(): a Task that failed is not started again

    # -- as a Source --------------------------------------------------------------------------

    def read_all(self) -> int:
        """Connect to every host, read what each holds until it says it has caught up, disconnect; rows added.
        RemoteError naming every host that failed (and why) when any did."""
        store = self.hosts[0].source.store
        before = store.rows
        self._oneshot = True
        for h in self.hosts:
            h.source.following = False
        self._start()
        assert self._thread is not None
        self._thread.join()
        failed = [h for h in self.hosts if h.error is not None]
        if failed:
            words = "; ".join(str(h.error) for h in failed[:8])
            more = f" (and {len(failed) - 8:,} more hosts)" if len(failed) > 8 else ""
            said = f"{len(failed):,} of {len(self.hosts):,} hosts cannot be read: {words}{more}"
            missing = all(h.error is not None and h.error.missing for h in failed)
            if len(failed) == len(self.hosts) or not missing:  # a host that does not answer: an incomplete read
                raise RemoteError(said, missing=missing)
            # hosts without the run folder: the others hold the run as far as it goes there, shown, and the
            # missing ones said (one such host made the whole set exit 2 and hid the rest)
            store.note(said + ": the figures are of the other hosts' ranks")
        return store.rows - before

    def follow(self) -> None:
        self._oneshot = False
        for h in self.hosts:
            h.source.following = True
        self._start()

    def stop(self) -> None:
        """End every host's connection and the Task's thread (ssh processes killed, so their followers end)."""
        self._stopping = True
        self._wake.set()
        STOPPERS.discard(self.stop)
        if self._thread is None:
            return  # never started
        self._ready.wait(10)
        task = self._task
        if task is not None and self._thread is not None and self._thread.is_alive():
            try:
                task.abort(kill=True)
            except Exception:  # noqa: BLE001 - a Task already ending: nothing left to stop
                pass
        if self._thread is not None:
            self._thread.join(timeout=10)

    # -- the Task's thread --------------------------------------------------------------------

    def _start(self) -> None:
        """A Task (in a thread of its own) for every host, each started afresh (a follow after a read)."""
        for h in self.hosts:
            h.done, h.error, h.tries, h.due = False, None, 0, False
        STOPPERS.add(self.stop)
        self._ready.clear()
        self._thread = threading.Thread(target=self._run, name="mstop-fanout", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        """The Task's life in this thread; a Task that fails (ClusterShell's own error, such as no gateway
        left to route through) ends every host's connection with the words, and, when following, a new Task
        starts them again after a backoff."""
        from ClusterShell.Task import task_self

        failures = 0
        while True:
            task = task_self()
            self._task = task
            failed: Exception | None = None
            try:
                self._setup(task)
            except Exception as e:  # noqa: BLE001 - said for every host below
                failed = e
            finally:
                self._ready.set()
            try:
                if failed is None and not self._stopping:
                    task.resume()
            except Exception as e:  # noqa: BLE001 - the Task's own failure: said for every host, never raised
                failed = e
            finally:
                try:
                    task.abort(kill=True)
                except Exception:  # noqa: BLE001 - already ended
                    pass
                self.flush()
            if failed is None or self._stopping:
                return
            for h in self.hosts:
                why = RemoteError(clean(f"{h.name}: ClusterShell failed: {failed}", 4096))
                if h.worker is not None:
                    self.closed(h, h.worker, why)
                elif self._oneshot and not h.done:  # never started (the Task failed before it)
                    h.done, h.error = True, why
            failures += 1
            if self._oneshot or self._wake.wait(min(30.0, 2.0 ** failures)):
                return

    def _setup(self, task) -> None:
        if not self.topology:
            room_for_files(FDS_A_HOST * len(self.hosts))
        # followers never end: every host needs its own slot at once (gateways inherit it)
        task.set_info("fanout", max(64, len(self.hosts) + 1))
        task.set_default("stdout_msgtree", False)  # lines are handled as they come, never kept
        task.set_default("stderr_msgtree", False)
        if self.topology:  # the gateways are reached by ClusterShell's ssh worker, with the user's options
            task.set_info("ssh_options", shlex.join(ssh_args(self.connection, mux=False)[1:]))
            task.set_info("connect_timeout", self.connection.timeout)
            task.load_topology(self.topology)
        fresh = [h for h in self.hosts if h.worker is None and not h.due and not h.done]
        if self.topology:  # through gateways: all in one worker (the gateways start them)
            self.launch(fresh)
        else:  # flat: this process starts every ssh; LAUNCH_EACH_TICK a second, the first at once
            for h in fresh[LAUNCH_EACH_TICK:]:
                h.due, h.last = True, time.monotonic()
            self.launch(fresh[:LAUNCH_EACH_TICK])
        self._ticked = time.monotonic()
        # following, the tick keeps the Task alive: through gateways every host is in one worker, and a lost
        # gateway ends it whole (each host rc 76), as every host's ssh failing at once does flat; with no client
        # left an autoclose timer let the Task end, and the hosts due again were never started (CI: "reconnecting,
        # try 1" for 90 s). stop() aborts it
        task.timer(TICK, _handler(self, {}), interval=TICK, autoclose=self._oneshot)
        task.timer(BATCH_S, _flusher(self), interval=BATCH_S, autoclose=True)

    def command(self, launch: int = 0) -> str:
        """The command each host's follower is started with, run by ClusterShell's exec worker here (or on a
        gateway), ``%h`` the host's name: mstop's own ssh command, the follower told the name it goes by, this
        viewer's token and the ``launch`` (the latest of a host ends the others: follower.superseded)."""
        user = {h.name.rpartition("@")[0] for h in self.hosts} - {""}
        args = ssh_args(self.connection, mux=False) + (["-l", user.pop()] if len(user) == 1 else [])
        text = shlex.join(args).replace("%", "%%")  # ClusterShell's own patterns are %h and %n
        return f"exec {text} -- %h {shlex.quote(f'{BOOTSTRAP} %h {self.token} {launch}')}"

    def launch(self, hosts: list[_Host]) -> None:
        """Start (or start again) followers: one worker for ``hosts`` through gateways (a gateway hands one
        standard input to its newest worker only), one a host without (each then ends alone)."""
        if self._stopping or self._task is None or not hosts:
            return
        from ClusterShell.NodeSet import NodeSet

        groups = [hosts] if self.topology else [[h] for h in hosts]
        self.launches += 1
        command = self.command(self.launches)
        if self.topology:
            self._starting = GATEWAY_START_S * len(hosts)
        for group in groups:
            for h in group:
                h.rc, h.first, h.idle, h.due, h.raw = None, True, 0, False, h.source.raw
                h.err.clear()
                h.last, h.asked = time.monotonic(), self.clock()
                if not (h.tries or h.again):
                    h.source.state.connection = "connecting"
                h.again = False
            request = {"lines": True, "chunk": LINE_CHUNK, "poll": group[0].source.poll or 0.2,
                       "hosts": {h.node: h.source.request() for h in group}}
            by_node = {h.node: h for h in group}
            worker = self._task.shell(command, nodes=NodeSet.fromlist(list(by_node)), remote=False,
                                      handler=_handler(self, by_node), stderr=True, stdin=True,
                                      tree=None if self.topology else False)
            worker.write(program_input(request))
            worker.set_write_eof()
            for h in group:
                h.worker = worker

    def line(self, h: _Host, worker: object, msg: bytes) -> None:
        """One line of a host's standard output: one frame of the follower's line mode."""
        if worker is not h.worker:
            return  # an ended connection's last words
        try:
            header = h.source.take_line(bytes(msg))
            if h.first:
                h.source.first_frame(header, h.asked)
        except RemoteError as e:
            self._end(h, e)
            return
        h.last = time.monotonic()
        if h.first:
            h.first, h.tries = False, 0
            h.source.state.connection = "connected"
        if self._oneshot:
            h.idle = 0 if header.get("files") or header.get("events") else h.idle + 1
            if header.get("caught_up"):
                h.done = True
                self._end(h, None)
            elif h.idle >= IDLE_FRAMES:
                self._end(h, RemoteError(f"{h.name}: {h.idle} frames in a row brought nothing and the host "
                                         "never said it had caught up: the read is given up"))
        self._news = True

    def flush(self) -> None:
        """The lines the hosts sent since the last flush into the store, then the screen told."""
        if self.round is not None:
            self.round.flush()
        if self._news and self.on_update is not None:
            self._news = False
            self.on_update()

    def _end(self, h: _Host, why: RemoteError | None, *, again: bool = False) -> None:
        """End a host's connection: said (``why``, None when it is done) and started again when following
        (``again``: at once and unsaid, to send it another request). Its worker ends with it when no other
        host's follower runs in it."""
        worker = h.worker
        if worker is None:
            return
        if again:  # due now: started by this tick (a time after the tick's own read it for the next, a second on)
            h.worker, h.due, h.last, h.again = None, True, -math.inf, True
        else:
            self.closed(h, worker, why)
        if not any(o.worker is worker for o in self.hosts):
            worker.abort()

    def closed(self, h: _Host, worker: object, why: RemoteError | None = None) -> None:
        """A host's connection ended: when following, said and started again after a backoff (at once for a
        lost gateway); a one-shot read keeps why it failed."""
        if worker is not h.worker:
            return  # said already (ended by mstop, or its return code came before its worker's end)
        h.worker = None
        if h.done or self._stopping:
            return
        if why is None:
            err = "\n".join(clean(bytes(x).decode("utf-8", "replace"), 1024) for x in h.err).strip()
            why = RemoteError(ssh_error(h.name, h.rc, err))
        if self._oneshot:
            h.done, h.error = True, why
            h.source.state.connection = str(why)
            return
        h.tries += 1
        if h.rc == GATEWAY_LOST:
            why = RemoteError(f"{h.name}: its gateway was lost (rc {GATEWAY_LOST}): started again by another route")
        delay = retrying(h.source.state, h.tries, why, TICK if h.rc == GATEWAY_LOST else None)
        h.due, h.last = True, time.monotonic() + delay  # started again by the tick after ``last``
        if self.on_update is not None:
            self.on_update()

    def tick(self) -> None:
        """Every second: hosts due are started again (together: one worker through gateways); a host whose
        next frame is late (the follower sends one at least every 5 s), or whose line grows without end, is
        ended and said. Time this thread could not read (it was starting ssh processes, or starved of the CPU)
        is never counted as a host's silence: each deadline moves by how late this tick is."""
        now = time.monotonic()
        late = now - self._ticked - TICK
        self._ticked = now
        for h in self.hosts:  # asked for other ranks row by row (RemoteSource.want_raw): started again now, its
            # first frame come or not (a follower still starting merges the rows the screen asked for as written
            # until it is asked again: a host started again for a fault just before a rank was picked sent 13 of
            # its rows merged in CI)
            if h.worker is not None and h.raw & h.source.rank_set != h.source.raw & h.source.rank_set:
                self._end(h, None, again=True)
        due = [h for h in self.hosts if h.due and now >= h.last]
        self.launch(due if self.topology else due[:LAUNCH_EACH_TICK])
        for h in self.hosts:
            if h.worker is not None and late > TICK:
                h.last += late
            if h.worker is None:
                continue
            limit = FRAME_DEADLINE + ((self.connection.timeout + self._starting) if h.first else 0.0)
            if now - h.last > limit:
                self._end(h, RemoteError(f"{h.name}: no frame for {limit:g} s: the host, its follower or the link "
                                         "stopped answering"))
            elif _buffered(h.worker, h.node) > MAX_HEADER:
                self._end(h, RemoteError(f"{h.name}: a frame over {MAX_HEADER >> 20} MiB without its end: not "
                                         "the follower's"))


#: file descriptors one host's ssh holds open in the viewer, flat (its output, its errors, its input until
#: the request is written; ClusterShell's own), with room to spare
FDS_A_HOST = 4


def room_for_files(more: int) -> None:
    """Raise this process's soft limit of open files so ``more`` fit beside what is open now (a login node's
    soft limit is often 1,024: 300 hosts' ssh pipes would pass it), up to the hard limit; past that, the
    hosts that cannot be started are said by ClusterShell's own error."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = more + 256 + len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else more + 1024
    if soft != resource.RLIM_INFINITY and want > soft:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
        except (ValueError, OSError):
            pass


def _buffered(worker: object, node: str) -> int:
    """The bytes of a line a host's client holds without its end yet (ClusterShell keeps a partial line in
    its client's read buffer, with no bound of its own; 0 when that cannot be seen, as through a gateway)."""
    try:
        return sum(len(c.streams[worker.SNAME_STDOUT].rbuf) for c in worker._clients  # type: ignore[attr-defined]
                   if str(c.key) == node)
    except (AttributeError, KeyError, TypeError):
        return 0
