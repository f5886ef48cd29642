"""What every source is: the protocol the sources share, their state, and the one error they raise.

A source reads one run directory (on this machine, or on another host over ssh) into a store. The
monitor and the commands only ever hold :class:`~mstop.sources.Sources`, which speaks this protocol for
all of its members.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class Connection:
    """How to reach ``host:/path`` sources, made once (from the command line by :meth:`of`, or by a test) and
    passed whole to every source, runs list and log pane that opens an ssh connection: the options as the
    ``ssh`` command line takes them (``-F FILE``, ``-o OPTION``), the seconds to wait for a connection, a
    ClusterShell topology file for node sets (``--topology``: their hosts reached through its gateways), and
    whether the ranks' own hosts, as their start events name them, are reached for what only they have (a
    rank's log, its stacks) when the run directory is read here (``--hosts auto``: a shared filesystem)."""

    ssh_options: tuple[str, ...] = ()
    timeout: float = 10.0
    topology: str | None = None
    hosts: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "ssh_options", tuple(str(o) for o in self.ssh_options))
        if not self.timeout > 0:
            raise ValueError(f"connect timeout must be positive: {self.timeout!r}")

    @classmethod
    def of(cls, config: str | None = None, options: Iterable[str] = (), timeout: float = 10.0,
           topology: str | None = None, hosts: bool = False) -> Connection:
        """From ``-F FILE``, ``-o OPTION``, ``--topology FILE`` and ``--hosts auto`` as given on mstop's
        command line."""
        args = ["-F", config] if config else []
        for o in options:
            args += ["-o", o]
        return cls(tuple(args), timeout, topology, hosts)


#: no ssh options, the default timeout: what a source gets when nobody says otherwise
DEFAULT_CONNECTION = Connection()


class SourceError(ValueError):
    """A source that cannot be read: a refused host name, a directory that does not exist, an ssh failure.

    ``missing`` says the directory is not there (yet): what ``--wait`` waits out. A ValueError, so code
    that checked specs before this class existed goes on catching it."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


@dataclass
class SourceState:
    """What a source knows about itself, for the header and ``summary``."""

    mode: str = "idle"  # "inotify", "inotify+scan", "poll", "once", "ssh"
    poll_interval: float | None = None
    fell_back: bool = False
    missing: bool = False
    notes: list[str] = field(default_factory=list)
    #: a remote source's connection ("connecting", "connected", "reconnecting, try 2 in 2 s: ..."); None here
    connection: str | None = None


class Source(Protocol):
    """One run directory feeding a store."""

    #: the directory or ``host:/path`` as the user named it
    label: str
    state: SourceState
    #: the source's clock minus ours, in seconds (0 on this machine; measured at connect over ssh)
    clock_skew: float

    def read_all(self) -> int:
        """Read what the files hold now; return the rows added (SourceError when it cannot be read)."""
        ...

    def follow(self) -> None:
        """Go on reading new bytes in a background thread until :meth:`stop`."""
        ...

    def stop(self) -> None:
        """Stop following; return when the thread (and any connection) is gone."""
        ...
