"""What the monitor is asked to do: one frozen object made once (by the command line, the runs list or a test)
and passed whole, to the screen and from it to the session, instead of a dozen keywords relayed one by one."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from typing import Any, Callable

from ..engine.health import Rules
from ..sources.protocol import DEFAULT_CONNECTION, Connection
from .throttle import RedrawBudget


@dataclass(frozen=True)
class MonitorOptions:
    """The monitor's settings. ``poll``: seconds between looks at the files instead of file events (None:
    events); ``peak_tflops``: one device's peak, overriding the run's; ``connection``: how ``host:/path``
    sources are reached; ``rules``: the health rules (None: the defaults); ``on_alert``: a command run for each
    new alert; ``baseline``: another run overlaid by step; ``logs_dir``: where the ranks' own logs are;
    ``bell``: ring on each new alert; ``follow``: keep reading (False: what is written now, as a test wants);
    ``clock``: the time ages are measured against (None: the sources' clock); ``digest``: seconds a remote
    host merges its ranks' rows over (None: mstop.sources.DIGEST_S for a node set, 0 otherwise); ``redraw``: how
    often frames of their own are drawn (mstop.live.throttle); ``routing``: the alert routing rules."""

    poll: float | None = None
    peak_tflops: float | None = None
    connection: Connection = DEFAULT_CONNECTION
    rules: Rules | None = None
    on_alert: str | None = None
    baseline: str | None = None
    logs_dir: str | None = None
    bell: bool = False
    follow: bool = True
    clock: Callable[[], float] | None = None
    digest: float | None = None
    redraw: RedrawBudget = RedrawBudget()
    #: the alert routing rules (mstop.live.routing.Rules, from --alert-rules): None: every new alert told
    #: once to the bell and ``on_alert``, as before routing existed
    routing: Any = None
    #: the monitor's export (mstop.commands.export, as ``mstop export`` has it): where to, every how long
    openmetrics: str | None = None
    listen: str | None = None
    export_every: float = 15.0

    def __post_init__(self) -> None:
        for name in ("poll", "peak_tflops"):
            v = getattr(self, name)
            if v is not None and not v > 0:
                raise ValueError(f"{name} must be positive: {v!r}")
        if self.on_alert is not None:
            shlex.split(self.on_alert)  # a command that cannot be split is refused here, not at the first alert

    @classmethod
    def given(cls, options: MonitorOptions | None = None, **fields: object) -> MonitorOptions:
        """``options`` (the defaults when None) with ``fields`` set: one object, for a caller that sets a few."""
        options = options or cls()
        return replace(options, **fields) if fields else options

    @property
    def alert_command(self) -> list[str] | None:
        """``on_alert`` split as a shell would split it (never run through one), or None."""
        return shlex.split(self.on_alert) if self.on_alert else None

    @property
    def peak_flops(self) -> float | None:
        return self.peak_tflops * 1e12 if self.peak_tflops else None
