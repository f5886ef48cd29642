"""Several sources in one view: ``mstop node1:/scratch/run node2:/scratch/run ./local``.

Each argument is a local run directory or ``[user@]host:/path``; all feed one
store, ranks merged by id. A rank found in two sources is reported (the
store's ``duplicates``), not merged.
"""

from __future__ import annotations

import os
import time
from typing import Callable

from ..engine.store import Store
from ..safe import clean
from .local import LocalSource
from .remote import RemoteError, RemoteSource, parse_target


class Sources:
    """Start, read and stop several sources as one."""

    def __init__(self, specs: list[str], store: Store, *, poll: float | None = None,
                 on_update: Callable[[], None] | None = None, ssh_options: tuple[str, ...] = (),
                 connect_timeout: float = 10.0) -> None:
        self.specs = list(specs)
        self.items: list[LocalSource | RemoteSource] = []
        for spec in specs:
            target = parse_target(spec)  # ValueError for a refused host
            if target is None:
                self.items.append(LocalSource(spec, store, poll=poll, on_update=on_update))
            else:
                self.items.append(RemoteSource(target, store, poll=poll, on_update=on_update,
                                               ssh_options=ssh_options, connect_timeout=connect_timeout))

    @property
    def label(self) -> str:
        return " ".join(self.specs)

    def read_all(self) -> None:
        """Read what every source holds now (RemoteError for a remote one that cannot be read)."""
        for s in self.items:
            s.read_all()

    def follow(self) -> None:
        for s in self.items:
            s.follow()

    def stop(self) -> None:
        for s in self.items:
            s.stop()

    def clock(self) -> float:
        """The time to compare rows with: the first remote host's clock, measured at connect, else ours
        (a laptop's skewed clock must not call a live job stalled)."""
        skew = next((s.clock_skew for s in self.items if isinstance(s, RemoteSource)), 0.0)
        return time.time() + skew

    def states(self) -> list[str]:
        """One short line per remote host that is not simply connected."""
        return [f"{s.target.host}: {s.host_state}" for s in self.items
                if isinstance(s, RemoteSource) and s.host_state != "connected"]

    @property
    def mode(self) -> str:
        return ", ".join(sorted({s.state.mode for s in self.items}))


def read_once(spec: str, *, ssh_options: tuple[str, ...] = (), connect_timeout: float = 10.0) -> Store:
    """One run (a directory or ``host:/path``) read as it is now into a store of its own: the runs of
    ``mstop compare``/``report`` and the monitor's baseline. ValueError says why it cannot be read
    (a missing directory, a refused host name, an ssh failure)."""
    store = Store()
    if parse_target(spec) is None and not os.path.isdir(spec):  # parse_target: ValueError for a refused host
        raise ValueError(f"{clean(spec, 4096)}: no such directory")
    try:
        Sources([spec], store, ssh_options=ssh_options, connect_timeout=connect_timeout).read_all()
    except RemoteError as e:
        raise ValueError(str(e)) from None
    return store
