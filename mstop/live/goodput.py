"""The goodput ledger of a large run read on a thread while frames show the last one.

The ledger reads every row (10 M rows take about 2 s here): above ``SYNC_ROWS`` rows the live session reads
it from the frame's snapshot on a thread of its own (a snapshot: nothing writes to it), as often as
mstop.view.build.GoodputCache allows; a frame never waits for it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import ClassVar

from ..engine.figures import Options
from ..engine.store import Store
from ..view.build import GoodputCache


@dataclass
class ThreadedGoodput(GoodputCache):
    """:class:`~mstop.view.build.GoodputCache` whose readings of a run over ``SYNC_ROWS`` rows run on a
    thread, one at a time."""

    _thread: threading.Thread | None = None

    SYNC_ROWS: ClassVar[int] = 1_000_000

    def start(self, store: Store, opts: Options) -> bool:
        if store.rows <= self.SYNC_ROWS:
            return super().start(store, opts)
        if self._thread is not None and self._thread.is_alive():
            return False  # the last reading goes on: frames show the one before
        self._thread = threading.Thread(target=self.read, args=(store, opts), name="mstop-goodput", daemon=True)
        self._thread.start()
        return True
