"""How a source hears that files in its directory changed: one interface, three ways, chosen once.

The following thread of :class:`~mstop.sources.local.LocalSource` waits on a watcher, then takes what it
saw (names modified; names created, moved or deleted; whether events were lost or the directory went
away) and reads those files. Which watcher:

- :class:`InotifyWatcher`: Linux inotify read directly by that thread (mstop.sources.inotify), the cheap
  path for busy runs;
- :class:`WatchdogWatcher` on watchdog's native observer, where our own reader cannot start (other
  systems, a kernel without inotify);
- the same on watchdog's polling observer, where native events do not work (NFS, Lustre, GPFS: writes of
  other nodes come with no event) or polling was asked for.

:func:`get_watcher` picks the first that starts. A watcher never touches its source: it only answers.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Callable

from .inotify import Changes, DirectoryWatch

log = logging.getLogger("mstop")

#: watchdog's event types that change what a file holds or which files there are
CHANGE_EVENTS = frozenset({"modified", "created", "moved", "deleted"})


class _QuietRestart(logging.Filter):
    """watchdog logs an error when an observer we stop on purpose had events in flight."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Unhandled exception in FileSystemEventHandler" not in record.getMessage()


logging.getLogger("watchdog.observers.inotify").addFilter(_QuietRestart())


class WatcherBase:
    """A watch of one directory as the following thread uses it."""

    #: whether a file event costs little (our own inotify reader): the source subscribes to modifications
    #: up to a higher event rate before it scans instead
    cheap = False
    #: what the source's state calls this way of following (``inotify``; ``poll`` for a polling observer)
    mode = "inotify"

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for events or :meth:`wake`; whether either came."""
        raise NotImplementedError

    def wake(self) -> None:
        """Make a :meth:`wait`, now or the next, return at once (any thread)."""
        raise NotImplementedError

    def take(self) -> Changes:
        """What was seen since the last take (never blocks)."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop watching; return when it has stopped."""
        raise NotImplementedError


class InotifyWatcher(WatcherBase):
    """Linux inotify, read in batches by the waiting thread itself (no thread, no event objects)."""

    cheap = True

    def __init__(self, path: str, *, modifications: bool) -> None:
        self._watch = DirectoryWatch(path, modifications=modifications)

    def wait(self, timeout: float) -> bool:
        return self._watch.wait(timeout)

    def wake(self) -> None:
        self._watch.wake()

    def take(self) -> Changes:
        return self._watch.read()

    def close(self) -> None:
        self._watch.close()


class WatchdogWatcher(WatcherBase):
    """watchdog's observer (native events, or polling every ``poll`` seconds): its handler only records
    names, under the watcher's own lock, and wakes the waiting thread."""

    def __init__(self, path: str, *, polling: bool, modifications: bool, poll: float = 1.0,
                 names: Callable[[str], bool] = lambda _name: True) -> None:
        from watchdog.events import (
            FileCreatedEvent,
            FileDeletedEvent,
            FileModifiedEvent,
            FileMovedEvent,
            FileSystemEventHandler,
        )
        from watchdog.observers import Observer
        from watchdog.observers.polling import PollingObserver

        self.mode = "poll" if polling else "inotify"
        self._lock = threading.Lock()
        self._seen = Changes()
        self._event = threading.Event()
        watcher = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event) -> None:  # noqa: ANN001 - watchdog's signature
                if event.event_type not in CHANGE_EVENTS:
                    return
                name = os.path.basename(os.fsdecode(getattr(event, "dest_path", "") or event.src_path))
                if names(name):
                    watcher._record(name, event.event_type == "modified")

        # The filter also narrows the inotify mask, so our own opens and reads of the files never come
        # back as events (they would wake us for every read).
        wanted = [FileCreatedEvent, FileMovedEvent, FileDeletedEvent]
        if polling or modifications:
            wanted.append(FileModifiedEvent)
        obs = PollingObserver(timeout=poll) if polling else Observer()
        obs.schedule(Handler(), path, recursive=False, event_filter=wanted)
        obs.name = "mstop-watch"
        obs.start()
        self._observer = obs

    def _record(self, name: str, modified: bool) -> None:
        with self._lock:
            (self._seen.modified if modified else self._seen.changed).add(name)
            self._seen.events += 1
        self._event.set()

    def wait(self, timeout: float) -> bool:
        woken = self._event.wait(timeout)
        self._event.clear()
        return woken

    def wake(self) -> None:
        self._event.set()

    def take(self) -> Changes:
        with self._lock:
            got, self._seen = self._seen, Changes()
        return got

    def close(self) -> None:
        self._observer.stop()
        self._observer.join(timeout=10)


def get_watcher(path: str, *, polling: bool, modifications: bool, poll: float = 1.0, direct: bool = True,
                names: Callable[[str], bool] = lambda _name: True) -> WatcherBase:
    """The first way of watching ``path`` that starts: our own inotify reader (unless ``polling``, or not
    ``direct``), watchdog's native observer, or (``polling``) its polling observer. ``modifications``:
    subscribe to writes too (else growth is found by the source's scans); ``names``: the file names worth
    recording. Raises OSError when the chosen way cannot start (e.g. out of inotify watches)."""
    if not polling and direct:
        try:
            return InotifyWatcher(path, modifications=modifications)
        except OSError as e:
            log.debug("mstop: inotify directly on %s: %s; through watchdog", path, e)
    return WatchdogWatcher(path, polling=polling, modifications=modifications, poll=poll, names=names)
