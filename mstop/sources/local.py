"""Following a run directory on this machine: discovery, file events, polling, reading.

A :class:`LocalSource` finds ``rank<R>.csv`` and ``rank<R>.events.jsonl`` files,
reads their new bytes (:class:`~mstop.sources.files.FileTail`) and feeds them to a
:class:`~mstop.engine.store.Store` (:mod:`mstop.sources.rankfiles`). ``follow()`` does
that in a background thread woken by a watcher (:mod:`mstop.sources.watchers`: on Linux
mstop's own inotify reader, elsewhere watchdog's observer), with a check every few
seconds that switches to polling when files grow without events (NFS, Lustre and GPFS do
not report writes made on other nodes).
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable

from ..engine.store import Store
from ..safe import clean
from .files import slots_free
from .lifelocks import LifeLocks
from .protocol import SourceState
from .rankfiles import (
    DEVICES_TAIL,
    Followed,
    Round,
    Tail,
    followed,
    ingest,
    rank_part,
    read_order,
    rotation_groups,
    why_not_followed,
)
from .watchers import WatcherBase, get_watcher

log = logging.getLogger("mstop")


@dataclass(frozen=True)
class FollowTuning:
    """How a local source follows its files: one frozen object, the module's TUNING unless a source is given
    its own (a test replaces TUNING whole, by monkeypatch).

    - ``check_every``: seconds between looks at the directory, and at how busy it is.
    - ``batch_delay``: after a file event, seconds to wait for more before reading: a burst of writes over
      many ranks costs one round of reading and one update, not one per write. 1,024 ranks x 1 row/s
      (bench_follow): 0.1 s gave a p95 latency of 192-226 ms, 0.05 s 139-160 ms for 1 % more of a core.
    - ``busy_events``, ``busy_events_direct``: file events per second above which growth is found by scans
      instead (see LocalSource._adapt): for watchdog's observer, and for our own inotify reader (its events
      cost far less: benchmarks/README.md).
    - ``direct_events``: read Linux inotify directly (mstop.sources.inotify) rather than through watchdog's
      observer, where it works; watchdog otherwise (polling, other systems). The watcher's choice.
    - ``scan_interval``: seconds between stat scans while busy.
    - ``scan_budget``: most ``stat`` calls a second the scans make: with more files than a scan may stat,
      each scan takes the next slice of them (10,000 files: each stat'ed once a second, not ten times). On a
      network filesystem every stat is a round trip to its metadata server.
    - ``verify_every``, ``verify_budget``: files with a kept descriptor are read without looking at their
      path (see FileTail); each is looked at by its path (a ``stat``, an ``open`` if replaced) every
      ``verify_every`` seconds, at most ``verify_budget`` files a second (20,000 files: each every 40 s), for
      a truncation or a replacement that no file event told of. Events (a rename, a truncation's
      modification) make the file looked at at once."""

    check_every: float = 2.0
    batch_delay: float = 0.05
    busy_events: float = 100.0
    busy_events_direct: float = 20_000.0
    direct_events: bool = True
    scan_interval: float = 0.1
    scan_budget: int = 10_000
    verify_every: float = 30.0
    verify_budget: int = 500

    def __post_init__(self) -> None:
        for name in ("check_every", "scan_interval", "verify_every", "busy_events", "busy_events_direct",
                     "scan_budget", "verify_budget"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive: {getattr(self, name)!r}")


#: how a source follows when it is given no tuning of its own
TUNING = FollowTuning()


class LocalSource:
    """Feed ``store`` from the files in ``run_dir``."""

    def __init__(self, run_dir: str, store: Store, *, poll: float | None = None,
                 on_update: Callable[[], None] | None = None, tail: Tail | None = None,
                 tuning: FollowTuning | None = None) -> None:
        self.run_dir = os.fspath(run_dir)
        self.tail = tail  # read each file from near its end (the runs list), not its whole history
        self.tuning = tuning or TUNING
        self.label = self.run_dir
        self.clock_skew = 0.0
        self.store = store
        self.poll = poll
        self.on_update = on_update
        self.state = SourceState(mode="once", poll_interval=poll)
        self._files: dict[str, Followed] = {}
        self._files_refused: set[str] = set()
        self._dirty: set[str] = set()  # files a modification event named: their kept descriptors are read
        self._changed: set[str] = set()  # files created, moved or deleted: looked at by their path
        self._keep = False  # following: the files' descriptors are kept open between reads
        self._dirty_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watcher: WatcherBase | None = None  # what wakes the thread (mstop.sources.watchers)
        self._events_seen = 0
        self._unseen_once = False  # growth no event told of was found once: a second time means polling
        self._listing_changed = True
        self._scanning = False
        self._scan_at: dict[str, int] = {}  # where the next stat scan of each kind of file begins
        self._errors: set[str] = set()
        self._life = LifeLocks(store)  # ranks that ended with no exit event (PID 1 of a container)

    # -- one-shot ------------------------------------------------------------------

    def read_all(self) -> int:
        """Discover files and read everything new in all of them; return the rows added."""
        self._discover()
        before = self.store.rows
        batch = Round(self.store, overlap=True)  # thousands of files: one parse a few of them, beside the reads
        try:
            for name in sorted(self._files, key=read_order):
                if self._stop.is_set():  # stopped during a long first read (q while loading)
                    break
                self._read(name, batch=batch)
            batch.flush()
        finally:
            batch.close()
        self.check_lives()
        return self.store.rows - before

    def check_lives(self) -> int:
        """Record the ranks whose process ended with no exit event, found by their writers' life locks
        (mstop.sources.lifelocks); not for the runs list, which reads the files' ends only."""
        if self.tail is not None:
            return 0
        return self._life.check({f.rank: f.tail.path for n, f in self._files.items()
                                 if f.kind == "events" and n.endswith(".jsonl")})

    # -- following -------------------------------------------------------------------

    @property
    def files(self) -> Mapping[str, Followed]:
        """The files followed, by name (read-only)."""
        return MappingProxyType(self._files)

    @property
    def pending(self) -> frozenset[str]:
        """Files an event said were created, moved or deleted: the next round looks at them by their path."""
        with self._dirty_lock:
            return frozenset(self._changed)

    def keep_open(self) -> None:
        """Keep the files' descriptors open between reads, as :meth:`follow` does: a new row is then one
        ``pread``. With :meth:`round`, a caller drives following itself, without the thread."""
        self._keep = True
        for f in self._files.values():
            f.tail.keep = True

    def round(self, names: Iterable[str] = (), *, check: bool = False) -> None:
        """One read round, as the following thread makes it: the files an event named (and ``names``) are read,
        those created, moved or deleted looked at by path; ``check``: the periodic look at the directory."""
        with self._dirty_lock:
            self._dirty |= set(names)
        self._round(check=check)

    def read_file(self, name: str) -> bool:
        """Read what is new in one followed file now; whether rows came."""
        return self._read(name)

    def watch_with(self, watcher: WatcherBase) -> None:
        """Hear of changes through ``watcher`` (its events are taken by :meth:`take_events`)."""
        self._stop_watcher()
        self._watcher = watcher

    def follow(self) -> None:
        """Start following in a background thread (stop with :meth:`stop`)."""
        self.keep_open()
        self._thread = threading.Thread(target=self._run, name="mstop-source", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and the observer; return when both are gone."""
        self._stop.set()
        self._poke()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._stop_watcher()
        if self._thread is None or not self._thread.is_alive():
            for f in self._files.values():
                f.tail.close()

    def _run(self) -> None:
        self._watch()
        next_check = time.monotonic() + self.tuning.check_every
        last_check, events_before, grown = time.monotonic(), 0, 0
        while not self._stop.is_set():
            try:
                if not os.path.isdir(self.run_dir):
                    self.state.missing = True
                else:
                    if self.state.missing or self._watcher is None:
                        self.state.missing = False
                        self._watch()
                    if self._watcher is not None:
                        self.take_events()
                    grown += self._round(check=time.monotonic() >= next_check)
                    now = time.monotonic()
                    if now >= next_check:
                        elapsed = max(now - last_check, 1e-3)
                        self._adapt((self._events_seen - events_before) / elapsed, grown / elapsed)
                        self.verify()  # after _adapt: growth no event told of is how it finds NFS
                        self.check_lives()
                        last_check, events_before, grown = now, self._events_seen, 0
                        next_check = now + self.tuning.check_every
                if self.on_update is not None:
                    self.on_update()
            except Exception as e:  # noqa: BLE001 - a bad file must not stop following the others
                key = f"{type(e).__name__}: {e}"
                if key not in self._errors:  # once each: a persistent fault must not flood the log
                    self._errors.add(key)
                    self.state.notes.append(f"error while reading: {key}")
                    log.exception("mstop: error while reading %s", self.run_dir)
            if self.poll is not None or self.state.fell_back:
                timeout = self.poll or 1.0
            else:
                timeout = self.tuning.scan_interval if self._scanning else self.tuning.check_every
            watcher = self._watcher
            woken = watcher.wait(timeout) if watcher is not None else self._wake.wait(timeout)
            if woken and not self._stop.is_set() and not self._scanning:
                time.sleep(self.tuning.batch_delay)
            self._wake.clear()

    def _watch(self) -> None:
        """Start watching, and read every known file by its path: while nothing watched (before following
        began, or while the directory was gone) any of them may have grown or been replaced."""
        self._start_watcher()
        with self._dirty_lock:
            self._changed.update(self._files)

    def _poke(self) -> None:
        """Wake the reading thread (any thread)."""
        self._wake.set()
        watcher = self._watcher
        if watcher is not None:
            watcher.wake()

    def take_events(self) -> None:
        """Sort what the watcher saw into the files to read."""
        assert self._watcher is not None
        got = self._watcher.take()
        if got.gone:  # the directory was removed or moved away: watch it again when it is back
            self._watcher.close()
            self._watcher = None
            self._listing_changed = True
        if got.overflow:  # the kernel dropped events: every file may have grown, or been replaced
            log.info("mstop: inotify queue overflowed on %s: reading every file", self.run_dir)
            got.changed.update(self._files)
        modified = {n for n in got.modified if rank_part(n) is not None}
        changed = {n for n in got.changed if rank_part(n) is not None}
        self._events_seen += len(modified) + len(changed)
        with self._dirty_lock:
            self._dirty |= modified
            self._changed |= changed
            if changed:
                self._listing_changed = True

    def _round(self, check: bool) -> int:
        """One round of reading: the files events named (modified: their kept descriptors; created, moved,
        deleted: by their path), the scan's slice while scanning, the listing when it changed or at a
        ``check``. Returns how many files the scan found grown."""
        with self._dirty_lock:
            dirty, self._dirty = self._dirty, set()
            changed, self._changed = self._changed, set()
            listing, self._listing_changed = self._listing_changed, False
        grown = 0
        if self._scanning:
            # metrics files every scan; events files (heartbeats every 30 s) every check
            grown, full = self.scan(events=check)
            changed |= full
        if listing or check:
            changed |= self._discover()
        batch = Round(self.store)
        # metrics files first, parsed together; then events files (a rank's rows before its events, its older
        # parts before the newer: read_order)
        for name in sorted(dirty - changed, key=read_order):
            if name in self._files:
                self._read(name, quick=True, batch=batch)
        batch.flush()
        for name in sorted(changed, key=read_order):
            if name in self._files:
                self._read(name)
        return grown

    def _adapt(self, event_rate: float, growth_rate: float) -> None:
        """Choose how to notice growth, every check_every seconds.

        A file event costs much more CPU through watchdog's observer than through
        our own inotify reader (bench_inotify.py; figures in benchmarks/README.md). Above busy_events events
        a second (busy_events_direct for our reader) the source stops subscribing to
        modifications and instead scans its files every scan_interval (kept
        descriptors read, others stat'ed); when growth falls below a fifth of that,
        it subscribes again.
        """
        if self.poll is not None or self.state.fell_back:
            return
        t = self.tuning
        busy = t.busy_events_direct if self._watcher is not None and self._watcher.cheap else t.busy_events
        if not self._scanning:
            if event_rate > busy:
                self._scanning = True
                self._start_watcher()
            else:
                self._check_unseen_growth()
        elif growth_rate < busy / 5:
            self._scanning = False
            self._start_watcher()

    def scan(self, events: bool, by_path: bool = False) -> tuple[int, set[str]]:
        """Look for growth no event told of: metrics files, and events files if asked; at most scan_budget x
        scan_interval of them, the next slice each time (a file is then looked at every ``files /
        scan_budget`` seconds: that is the latency above scan_budget / 10 files). A kept descriptor is
        read at once (no metadata operation); other files, and all when ``by_path``, are stat'ed. Returns
        how many files grew, and the names of those to read by their path."""
        names = self._slice([n for n, f in self._files.items() if f.kind != "events"], "csv",
                            int(self.tuning.scan_budget * self.tuning.scan_interval))
        if events:  # heartbeats (every 30 s): a quarter of the budget, every check
            names += self._slice([n for n, f in self._files.items() if f.kind == "events"], "events",
                                 int(self.tuning.scan_budget * self.tuning.check_every / 4))
        grew, out, batch = 0, set(), Round(self.store)
        for name in names:
            f = self._files[name]
            if not by_path and f.tail.kept:
                grew += self._read(name, quick=True, confirm=False, batch=batch)
                continue
            if not by_path and self._keep and slots_free():  # read by its path once: kept from then on
                grew += self._read(name)
                continue
            try:
                if os.stat(f.tail.path).st_size != f.tail.offset:
                    out.add(name)
                    grew += 1
            except OSError:
                continue
        batch.flush()
        return grew, out

    def verify(self) -> None:
        """Read the next slice of kept files by their path (each every verify_every seconds, at most
        verify_budget a second): what their descriptors cannot tell (a truncation, a replacement) when no
        event told of it."""
        kept = [n for n, f in self._files.items() if f.tail.kept]
        t = self.tuning
        n = min(int(t.verify_budget * t.check_every), math.ceil(len(kept) * t.check_every / t.verify_every))
        for name in self._slice(kept, "verify", n):
            self._read(name)

    def _slice(self, names: list[str], kind: str, limit: int) -> list[str]:
        """The next ``limit`` of ``names``, round and round (all of them when they are fewer)."""
        if len(names) <= limit:
            return names
        at = self._scan_at.get(kind, 0) % len(names)
        self._scan_at[kind] = at + limit
        return (names[at:] + names[:at])[:limit]

    def _start_watcher(self) -> None:
        """(Re)start watching: native events (modifications too unless scanning), or polling; a native
        watch that cannot start (out of inotify watches) falls back to polling, and says so."""
        self._stop_watcher()
        polling = self.poll is not None or self.state.fell_back
        try:
            self._watcher = get_watcher(self.run_dir, polling=polling, modifications=not self._scanning,
                                        poll=self.poll or 1.0, direct=self.tuning.direct_events,
                                        names=lambda n: rank_part(n) is not None)
        except OSError as e:
            if polling:
                self.state.notes.append(f"cannot watch {self.run_dir}: {e}")
                return
            self.state.notes.append(f"native file events unavailable ({e}): polling")
            self.state.fell_back = True
            return self._start_watcher()
        self.state.mode = "poll" if polling else ("inotify+scan" if self._scanning else "inotify")

    def _stop_watcher(self) -> None:
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.close()

    def _check_unseen_growth(self) -> None:
        """Files that grew although no event said so: native events do not work here. Until a first event
        is seen, growth is found by stat (read at once by its path). Found at two checks with no event at all
        in between, it switches to polling: once is not enough, for an event can come later than the check
        (watchdog's observer under load) and a watch just made can miss the write that came before it."""
        grew, full = self.scan(events=True, by_path=self._events_seen == 0)
        if full:
            with self._dirty_lock:
                self._changed.update(full)
            self._poke()
        if self._events_seen or self.state.mode != "inotify":
            self._unseen_once = False
        elif grew and not self._unseen_once:
            self._unseen_once = True
        elif grew:
            self.state.fell_back = True
            self.state.notes.append("files grow without file events (network filesystem?): polling")
            self._start_watcher()

    # -- files -----------------------------------------------------------------------

    def _discover(self) -> set[str]:
        """Add new rank files (and a rank's older parts, ``rank0.csv.1``: see :meth:`_follow_renames`); return
        the names of files that appeared."""
        try:
            names = os.listdir(self.run_dir)
        except PermissionError:
            self.store.note(f"{clean(self.run_dir, 4096)}: permission denied: its files cannot be listed")
            return set()
        except OSError:
            return set()
        new = self._follow_renames(names)
        for name in names:
            if name in self._files or name in self._files_refused:
                continue
            part = rank_part(name)
            if part is None:
                if name.startswith("rank") and (".csv" in name or ".jsonl" in name):
                    self.store.ignored_files.add(clean(name, 128))  # rank0.csv.2.gz, rank0.csv.bak: not read
                continue
            if self.tail is not None and (part[1] == "devices" or part[2]):
                continue  # the runs list shows no devices, and reads a rank's newest part only
            path = os.path.join(self.run_dir, name)
            why = why_not_followed(path)
            self.store.refuse(name, why)  # None: followed (again)
            if why is not None:
                continue
            f = followed(name, path, self.store, self.run_dir, part[:2])
            if f is None:
                self._files_refused.add(name)  # another source feeds this rank (reported by the store)
                continue
            f.tail.keep = self._keep
            self._files[name] = f
            new.add(name)
            if f.kind == "devices":  # weeks of samples: only the last ones are read
                head = f.tail.start_near_end(DEVICES_TAIL)
                if head.blob:
                    ingest(self.store, f, head)
        if self.tail is not None and new:
            self.tail.begin(self.store, {n: self._files[n] for n in new})
        return new

    def _follow_renames(self, names: list[str]) -> set[str]:
        """A rank's files renamed by a rotation (``mv rank0.csv rank0.csv.1``, then ``.1`` to ``.2``: logrotate)
        are read on from where they were under their new names: found again by their identity (device, inode)
        among the names of their rank and kind, in any folder whose listing has an older part. The file then
        at the old name is a new part, its rows after theirs (nothing read again, nothing dropped). A file
        found under no name is gone (its rows read stay); one whose name now holds another file and that is
        found under no other name stays there, to FileTail's rules (a longer copy continues, a rewrite resets).
        Returns the new names of the files moved (read by their path in this round: no event may tell of them)."""
        groups = rotation_groups(names, self._files)
        if not groups:
            return set()
        mine: dict[tuple[int, str], dict[tuple[int, int], str]] = {}
        renamed: set[str] = set()
        for name, f in self._files.items():
            if (f.rank, f.kind) in groups and f.tail.ident is not None:
                mine.setdefault((f.rank, f.kind), {})[f.tail.ident] = name
        for group, known in mine.items():
            found: dict[str, str] = {}  # old name -> new name
            for n in sorted(groups[group]):
                try:
                    st = os.stat(os.path.join(self.run_dir, n))
                except OSError:
                    continue
                old = known.get((st.st_dev, st.st_ino))
                if old is not None:
                    found[old] = n
            moved = {old: self._files.pop(old) for old, n in found.items() if n != old}
            for old, f in moved.items():
                held = self._files.pop(found[old], None)
                if held is not None:  # its own file is gone from that name
                    held.tail.close()
                f.tail.path = os.path.join(self.run_dir, found[old])
                self._files[found[old]] = f
                renamed.add(found[old])
            for old in set(known.values()) - set(found) - groups[group]:
                self._files.pop(old).tail.close()  # deleted (or compressed away): its rows were read
        return renamed

    def _read(self, name: str, *, quick: bool = False, confirm: bool = True, batch: Round | None = None) -> bool:
        """Read what file ``name`` has new; return whether it had any. ``quick``: from its kept descriptor
        (see FileTail.read); ``confirm``: when a quick read finds nothing although an event named the
        file, read it by its path (a truncation is a modification that adds nothing); ``batch``: the round
        its chunks go to (parsed with the other files' when it is flushed), else each is ingested now."""
        f = self._files[name]
        got = False
        while True:
            chunk = f.tail.read(quick=quick)
            if quick and confirm and not (chunk.blob or chunk.more or chunk.overlong or got):
                chunk = f.tail.read()
            if f.tail.refused is not None:  # replaced by a FIFO or a directory, or made unreadable, since found
                self.store.refuse(name, f.tail.refused)
                return got
            if name in self.store.refused:
                self.store.refuse(name, None)  # readable again
            new = bool(chunk.blob or chunk.reset or chunk.overlong)
            got = got or new
            if new or chunk.mtime is not None:  # an empty quick read (most of a scan's) has nothing to give
                if batch is not None:
                    batch.add(f, chunk)
                else:
                    ingest(self.store, f, chunk)
            if not chunk.more or self._stop.is_set():  # a huge file read in chunks: stopping ends it
                return got


