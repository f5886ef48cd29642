"""The goodput ledger of a large run read on a thread while frames show the last one.

The ledger is read from each rank's fold (mstop.engine.ledgerfold) in O(sessions) a rank, about 20 µs: 0.2 s
at 10,000 ranks. Above ``SYNC_RANKS`` ranks the live session reads it from the frame's snapshot on a thread of
its own (a snapshot: nothing writes to it), as often as
mstop.view.build.GoodputCache allows; a frame never waits for it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import ClassVar

from ..engine.figures import Options
from ..engine.reader import RunReader
from ..engine.store import Snapshot
from ..view.build import GoodputCache


@dataclass
class ThreadedGoodput(GoodputCache):
    """:class:`~mstop.view.build.GoodputCache` whose readings of a run of over ``SYNC_RANKS`` ranks run on a
    thread, one at a time."""

    _thread: threading.Thread | None = None

    SYNC_RANKS: ClassVar[int] = 2_000

    def start(self, store: Snapshot, opts: Options) -> bool:
        if RunReader.count(store) <= self.SYNC_RANKS:
            return super().start(store, opts)
        if self._thread is not None and self._thread.is_alive():
            return False  # the last reading goes on: frames show the one before
        self._thread = threading.Thread(target=self.read, args=(store, opts), name="mstop-goodput", daemon=True)
        self._thread.start()
        return True
