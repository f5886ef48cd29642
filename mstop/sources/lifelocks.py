"""Ranks whose process ended with no exit event, told by the life lock their writer held.

The exit witness (mstop_writer.witness) says when and how a rank's process ended, but not every end leaves
it alive to say so: a rank that is PID 1 of its own pid namespace (a container) takes every process of the
namespace with it, its witness too, and the job then read as running until its heartbeats had been missing
for about a minute. The writer holds a shared ``flock`` on its events file for its life
(mstop_writer._files.LifeLock; its start event says ``life_lock``), which the kernel lets go however the
process ends. A rank silent for a few seconds whose lock nobody holds any more has ended: recorded as an
``exit`` found so (``found_ended``: its time is its files' last write, not exact enough to order the ranks'
ends), with a note. Only a rank of this machine's kernel is probed (its start event's boot id is ours): a
file system whose locks do not reach across machines (Lustre's ``localflock``) would show a lock held on
another host as free.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping

import numpy as np

from ..engine.reader import RunReader
from ..engine.store import Store
from .files import lock_free

#: seconds a rank is silent (no row, no event) before its life lock is looked at: under the shortest silence
#: that reads a rank dead (3 heartbeats of a writer beating every second), so a rank whose lock was let go is
#: found by it before then (at 3 s both, a read whose status came a moment after its look said dead with no word
#: of how: CI)
LIFE_SILENCE = 2.0
#: the most ranks probed by one check (each an open and a flock): the rest at the next checks
LIFE_PROBES = 256


def boot_id() -> str | None:
    """This machine's boot id (the kernel's: the same inside its containers)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip() or None
    except OSError:
        return None


class LifeLocks:
    """The checks of one source's ranks (call :meth:`check` now and then with each rank's events file)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.boot = boot_id()
        self.told: set[tuple[int, str]] = set()  # (rank, session) recorded ended
        self._at = 0  # where the next check's probes begin among the candidates

    def check(self, events: Mapping[int, str], now: float | None = None,
              free: Callable[[int], bool | None] | None = None, boot: str | None = None) -> int:
        """Probe the life locks of silent ranks that have not ended (``events``: rank -> its events file);
        record those found free. ``free`` and ``boot``: how a rank's lock is told and the kernel it must have
        run on, when the files are on another host (its follower probes them: mstop.sources.remote); else
        this machine's. Returns how many were recorded."""
        if free is None:  # the files are on this machine
            free, boot = (lambda r: lock_free(events[r])), self.boot
        if boot is None or not events:
            return 0
        reader = RunReader(self.store)
        st = reader.answers()
        if not st.ranks:
            return 0
        now = time.time() if now is None else now
        with np.errstate(invalid="ignore"):
            silent = ~(st.aborted | st.finished | st.exited | st.lost) & (now - st.life > LIFE_SILENCE)
        candidates = [st.ranks[k] for k in np.flatnonzero(silent).tolist() if st.ranks[k] in events]
        if not candidates:
            return 0
        at = self._at % len(candidates)
        self._at = at + LIFE_PROBES
        found = 0
        for r in (candidates[at:] + candidates[:at])[:LIFE_PROBES]:
            start = reader.start(r)
            if not start or start.get("life_lock") is not True or start.get("boot_id") != boot:
                continue
            key = (r, str(start.get("session")))
            if key in self.told or free(r) is not True:
                continue
            self.told.add(key)
            found += 1
            at = _last_write(events[r]) if os.path.isabs(events[r]) else reader.last(r, "time")
            self.store.ingest_events(r, [{"time": at if at is not None else now, "kind": "exit", "rank": r,
                                          "pid": start.get("pid"), "source": "viewer", "how": "unknown",
                                          "found_ended": True, "found_by": "life lock"}])
        if found:
            ranks = sorted(r for r, _ in self.told)
            who = f"rank {ranks[0]}" if len(ranks) == 1 else f"{len(ranks)} ranks"
            self.store.note_as("life-lock", f"the process of {who} ended with no word from its exit witness (its "
                                            "lock on its events file was let go: a rank that is PID 1 of its "
                                            "container takes its witness with it): when, its files' last write "
                                            "tells, not which rank ended first")
        return found


def _last_write(events: str) -> float:
    """The rank's last write: its events file's and metrics file's modification times, the later."""
    times = []
    for path in (events, events.replace(".events.jsonl", ".csv")):
        try:
            times.append(os.stat(path).st_mtime)
        except OSError:
            continue
    return max(times) if times else time.time()
