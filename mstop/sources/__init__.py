"""Sources: where rows come from. ``mstop node1:/scratch/run node2:/scratch/run ./local``.

Each argument is a local run directory or ``[user@]host:/path``; all feed one store, ranks merged by
id (a rank found in two sources is reported by the store's ``duplicates``, not merged). Every source
speaks :class:`~mstop.sources.protocol.Source` and raises :class:`SourceError`; the monitor and the
commands hold a :class:`Sources` and never a source class of their own.

    protocol.py       what every source is: the Source protocol, SourceState, SourceError
    files.py          reading a growing file: only new, complete lines; truncation and replacement noticed
    local.py          a directory on this machine: discovery, file events or polling
    rankfiles.py      a writer run's rank files into the store (local and remote sources alike)
    watchers.py       how a source hears of changes: WatcherBase, get_watcher (inotify, watchdog, polling)
    inotify.py        Linux inotify on one directory, read by the following thread (watchdog elsewhere)
    mflog.py          a job's own logs (MindFormers' rank_<R>/info.log, msrun's worker_<N>.log and
                      scheduler.log), for a job nobody changed
    logs.py           where a rank's own log is, and its tail followed (the monitor's log pane, L)
    procwatch.py      the worker processes of a job read from its logs, watched from their own host
    lifelocks.py      ranks whose process ended with no exit event, told by their writers' life locks
    pyspy.py          a fresh stack of a rank's process with py-spy dump, where its pid is provably it
    remote.py         a directory on another host over the system's ssh
    fanout.py         many hosts (a node set) through one ClusterShell Task, in the follower's line mode
    nodesets.py       node sets as sources (node[001-512]:/path, ClusterShell's NodeSet): a spec a host
    runs.py           a directory of runs: which folders are runs, each run's last rows
    remote_runs.py    a directory of runs on another host, over one ssh connection
    replay.py         the demo's recorded run, written out at its own pace
    followers/        the programs sent over ssh and run on the other host (standard library only, alone)
"""

from __future__ import annotations

import os
import threading
import time
from typing import Callable

from ..engine.store import Store
from ..safe import clean
from .fanout import Fanout
from .local import LocalSource
from .mflog import MfLogSource, has_logs, has_writer_files
from .nodesets import expand, fold, is_node_set
from .protocol import DEFAULT_CONNECTION, Connection, Source, SourceError, SourceState
from .remote import DIGEST_S, RemoteSource, Target, parse_target, stop_programs
from .remote import cleanup as close_connections

__all__ = ["DEFAULT_CONNECTION", "Connection", "Source", "SourceError", "SourceState", "Sources", "check_spec",
           "close_connections", "read_once", "stop_programs"]


def check_spec(spec: str, *, exists: bool = True) -> Target | None:
    """The one check of a source argument: its ssh target, or None for a local directory.

    SourceError for a refused host name (one starting with ``-`` is never passed to ssh), and, with
    ``exists``, for a local directory that is not there (``missing`` set, naming the parent when that
    is missing too). Whether a remote path exists is known only once connected."""
    if is_node_set(spec):  # node[001-512]:/path: every host's name checked, the first host's target given
        targets = [parse_target(one) for one in expand(spec)]
        return targets[0]
    target = parse_target(spec)
    if target is None and exists and os.path.isfile(spec):
        raise SourceError(f"{clean(spec, 4096)}: is a file, not a directory (give the run's directory, or a "
                          "folder of runs)")
    if target is None and exists and not os.path.isdir(spec):
        parent = os.path.dirname(os.path.abspath(spec))
        hint = "" if os.path.isdir(parent) else f" (nor does {clean(parent, 4096)})"
        raise SourceError(f"{clean(spec, 4096)}: no such directory{hint}", missing=True)
    if target is None and exists and not os.access(spec, os.R_OK | os.X_OK):
        raise SourceError(f"{clean(spec, 4096)}: permission denied (its files cannot be listed or read by "
                          "this user)")
    return target


class LocalOrLogs:
    """A local directory read as a writer's run directory, until MindFormers logs appear in it with no rank
    file beside them (``mstop output/`` started before the job wrote its first log line): from then on as a
    MindFormers job's logs. Speaks :class:`Source` through whichever it is."""

    def __init__(self, spec: str, store: Store, *, poll: float | None = None,
                 on_update: Callable[[], None] | None = None) -> None:
        self.run_dir = self.label = spec
        self.clock_skew = 0.0
        self._args = (store, poll, on_update)
        self.active: LocalSource | MfLogSource = LocalSource(spec, store, poll=poll, on_update=on_update)
        self._following = False
        self._stop = threading.Event()
        self._watch: threading.Thread | None = None

    @property
    def state(self) -> SourceState:
        return self.active.state

    def _switch(self) -> bool:
        """Become the logs' source when they are there and no rank file is; True when it switched."""
        if self._settled() or has_writer_files(self.run_dir) or not has_logs(self.run_dir):
            return False
        store, poll, on_update = self._args
        if self._following:
            self.active.stop()
        self.active = MfLogSource(self.run_dir, store, poll=poll, on_update=on_update)
        if self._following:
            self.active.follow()
        return True

    def read_all(self) -> int:
        self._switch()
        return self.active.read_all()

    def follow(self) -> None:
        self._following = True
        self.active.follow()
        self._watch = threading.Thread(target=self._run, name="mstop-which", daemon=True)
        self._watch.start()

    def _settled(self) -> bool:
        """Decided: reading logs, or this directory's own rank files were found (another source's ranks in
        the same store decide nothing here)."""
        return isinstance(self.active, MfLogSource) or bool(getattr(self.active, "_files", None))

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            if self._settled() or self._switch():
                return

    def stop(self) -> None:
        self._stop.set()
        if self._watch is not None:
            self._watch.join(timeout=10)
        self.active.stop()


class Sources:
    """Start, read and stop several sources as one (SourceError for an argument that is refused)."""

    def __init__(self, specs: list[str], store: Store | None = None, *, poll: float | None = None,
                 on_update: Callable[[], None] | None = None, connection: Connection = DEFAULT_CONNECTION,
                 digest: float | None = None) -> None:
        """``digest``: while following, each remote host merges its ranks' rows over that many seconds
        (mstop.sources.followers.follower's digest mode); None: DIGEST_S for a node set's hosts, none for others.
        ``store``: the store they feed (None: one of their own, :attr:`store`)."""
        self.specs = list(specs)
        self.store = store = store if store is not None else Store()
        self.items: list[Source] = []  # one a directory (a host's, for a node set)
        self._shown: int | None = None  # the rank the screen shows in detail (show)
        self._lowest: int | None = None  # the lowest rank a remote host follows (the job's rank)
        self._drivers: list[Source | Fanout] = []  # what reads them: each itself, or a node set's one Task
        seen: set[str] = set()
        for spec in self.specs:
            group: list[RemoteSource] = []
            for one in expand(spec):  # a node set (node[001-512]:/path) is one source a host
                if one in seen:
                    continue  # a host named twice is read once
                seen.add(one)
                target = check_spec(one, exists=False)
                if target is None and not has_writer_files(one) and has_logs(one):
                    item: Source = MfLogSource(one, store, poll=poll, on_update=on_update)
                elif target is None:
                    item = LocalOrLogs(one, store, poll=poll, on_update=on_update)
                else:
                    merge = digest if digest is not None else DIGEST_S if is_node_set(spec) else 0.0
                    item = RemoteSource(target, store, poll=poll, on_update=on_update, connection=connection,
                                        digest=merge, on_ranks=self._ranks_grew)
                    if is_node_set(spec):
                        group.append(item)
                        self.items.append(item)
                        continue
                self.items.append(item)
                self._drivers.append(item)
            if group:  # a node set's hosts: through one ClusterShell Task (mstop.sources.fanout)
                self._drivers.append(Fanout(group, connection=connection, on_update=on_update,
                                           topology=connection.topology))

    @property
    def label(self) -> str:
        return " ".join(self.specs)

    def show(self, rank: int | None) -> int:
        """The rank the screen shows in detail (the ranks view's; None: none), told when that changes: it comes
        row by row, as written, beside the job's rank (see :meth:`raw_ranks`). The hosts asked again."""
        self._shown = rank
        return self.want_raw(self.raw_ranks())

    def raw_ranks(self) -> frozenset[int]:
        """The ranks the screen draws row by row: the job's rank (the lowest the remote hosts follow: its loss
        chart's) and the shown one."""
        return frozenset(r for r in (self._lowest, self._shown) if r is not None)

    def _ranks_grew(self, rank: int) -> None:
        """A remote host found the rank file of ``rank``: the job's rank when it is the lowest yet (asked for
        again only then: a node set's first frames bring thousands of ranks)."""
        if self._lowest is None or rank < self._lowest:
            self._lowest = rank
            self.want_raw(self.raw_ranks())

    def want_raw(self, ranks: frozenset[int]) -> int:
        """Each remote host that merges its ranks' rows (a digest) sends those of ``ranks`` it has as written,
        from now on; the hosts asked again (their followers started anew). How many were."""
        return sum(item.want_raw(ranks) for item in self.items if isinstance(item, RemoteSource))

    def read_all(self, *, wait: float | None = None, stop: threading.Event | None = None,
                 waiting: Callable[[str], None] | None = None) -> int:
        """Read what every source holds now; return the rows added.

        A directory that is not there (here or on its host) is a SourceError, or with ``wait`` is looked
        for again every ``wait`` seconds until it appears (``mstop summary --wait``; ``stop`` ends the
        wait early with a SourceError; ``waiting`` is told once what is waited for). Any other failure, such
        as ssh refusing, is never waited out."""
        rows = 0
        for s in self._drivers:
            told = False
            while True:
                try:
                    if isinstance(s, (LocalOrLogs, MfLogSource)) and not os.path.isdir(s.run_dir):
                        check_spec(s.run_dir)  # raises, saying what is missing
                    rows += s.read_all()
                    break
                except SourceError as e:
                    if wait is None or not e.missing or (stop is not None and stop.is_set()):
                        raise
                    if waiting is not None and not told:
                        waiting(str(e))
                        told = True
                    (stop or threading.Event()).wait(wait)
        return rows

    def follow(self) -> None:
        for s in self._drivers:
            s.follow()

    def stop(self) -> None:
        for s in self._drivers:
            s.stop()

    def clock(self) -> float:
        """The time to compare rows with: the first remote host's clock, measured at connect, else ours
        (a laptop's skewed clock must not call a live job stalled)."""
        skew = next((s.clock_skew for s in self.items if s.state.connection is not None), 0.0)
        return time.time() + skew

    def states(self) -> list[str]:
        """One short line per remote host that is not simply connected; hosts in the same state folded into
        one line, as ``clush -b`` folds like output (``lo[3-9] (7 hosts): connecting``; a host's name in
        the words is ``%h`` there)."""
        groups: dict[str, list[str]] = {}
        for s in self.items:
            if isinstance(s, RemoteSource) and s.state.connection != "connected":
                host = s.target.host
                groups.setdefault(str(s.state.connection).replace(host, "%h"), []).append(host)
        return [f"{hosts[0]}: {words.replace('%h', hosts[0])}" if len(hosts) == 1 else
                f"{fold(hosts)} ({len(hosts):,} hosts): {words}" for words, hosts in groups.items()]

    @property
    def mode(self) -> str:
        return ", ".join(sorted({s.state.mode for s in self.items}))


def read_once(spec: str, *, connection: Connection = DEFAULT_CONNECTION) -> Store:
    """One run (a directory or ``host:/path``) read as it is now into a store of its own: the runs of
    ``mstop compare``/``report`` and the monitor's baseline. SourceError says why it cannot be read
    (a missing directory, a refused host name, an ssh failure)."""
    store = Store()
    Sources([spec], store, connection=connection).read_all()
    return store
