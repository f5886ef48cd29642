"""The health rules' types, below everything that uses them: the settings (:class:`Rules`), what holds now
(:class:`Alert`), what happened (:class:`Incident`), and the kinds in their documented order.

The rules themselves, each written once, are in :mod:`mstop.engine.ruletable`; :mod:`mstop.engine.health`
evaluates them over the recent window (alerts), :mod:`mstop.engine.incidents` over the history (incidents).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import numpy as np

from .config import read_settings
from .figures import Options

KINDS = ("nan_loss", "loss_spike", "grad_spike", "overflow", "oom_risk", "data_starvation", "throughput_drop",
         "stalled", "no_checkpoint", "straggler", "dead_rank", "lagging_rank", "job_dead", "job_failed",
         "device_unhealthy", "device_hot", "hbm_full", "aicore_idle",
         "stopped_rank", "stuck_rank")  # added by issue 38: after the others, whose order stays as it was
#: firings of one rule on one rank at most this many rows apart belong to one incident
GAP = 20


@dataclass
class Rules:
    """Thresholds of the health rules (defaults documented in the README)."""

    spike_k: float = 6.0  # a spike: above the running mean by k running standard deviations ...
    spike_window: int = 100  # ... over this many previous steps
    warmup_steps: int = 100  # no spike or throughput alert before this many rows
    recent_rows: int = 20  # a spike among the last rows keeps its alert active
    overflow_n: int = 5  # overflows in n ...
    overflow_m: int = 20  # ... of the last m steps
    oom_critical: float = 0.05  # memory headroom below this fraction
    data_wait: float = 0.10  # data-wait share of step time above this fraction ...
    data_wait_floor_s: float = 0.005  # ... and a mean wait per step of at least this (1 ms of a 2 ms step is no
    # starving pipeline worth an alert), never in a session's first data_wait_warmup rows (the pipeline fills)
    data_wait_warmup: int = 10
    throughput_fraction: float = 0.7  # recent tokens/s under this fraction of the run's median
    no_checkpoint_s: float | None = None  # None: 3 x the median interval between checkpoints (at least 10 min)
    hold_s: float = 0.0  # an alert stays active this long after its condition ends (0: it leaves at once)
    straggler_m: float = 5.0  # a straggler: data-wait share above the median over ranks by m scaled MADs ...
    straggler_margin: float = 0.05  # ... and by at least this absolute share ...
    straggler_k: int = 8  # ... in k ...
    straggler_n: int = 10  # ... of its last n rows
    heartbeat_s: float = 30.0  # heartbeat interval when no start event gives one (writers before it did)
    dead_after: float = 3.0  # a rank is dead after this many heartbeat intervals without a sign of life
    lag_steps: int = 10  # a lagging rank: its latest step this many steps behind the median
    device_temp_c: float = 85.0  # a device hotter than this (degrees C; mstop's default, not a device's spec)
    hbm_full: float = 0.97  # a device's HBM at least this full ...
    hbm_job_room: float = 0.20  # ... while its rank's own memory figure leaves it at least this much room
    aicore_idle: float = 0.05  # a device's AICore under this fraction ...
    aicore_idle_s: float = 60.0  # ... in every sample of this many seconds while its rank's steps run

    def __post_init__(self) -> None:
        """A setting out of its range is an error naming the range (``data_wait = 15`` would turn the rule off,
        ``oom_critical = 5`` would read as 500 %)."""
        for name in ("oom_critical", "data_wait", "throughput_fraction", "straggler_margin", "hbm_full",
                     "hbm_job_room", "aicore_idle"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1:
                raise ValueError(f"health setting {name} must be a fraction over 0 and under 1, got {v!r}")
        for name in ("spike_k", "straggler_m", "heartbeat_s", "dead_after", "device_temp_c", "aicore_idle_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise ValueError(f"health setting {name} must be a positive number, got {v!r}")
        for name in ("spike_window", "warmup_steps", "recent_rows", "overflow_n", "overflow_m", "straggler_k",
                     "straggler_n", "lag_steps", "data_wait_warmup"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"health setting {name} must be a whole number of 0 or more, got {v!r}")

    def options(self, opts: Options) -> Options:
        """``opts`` with this rule set's liveness settings, so the status and the rules judge death alike."""
        if (opts.dead_after, opts.heartbeat_s) == (self.dead_after, self.heartbeat_s):
            return opts
        return replace(opts, dead_after=self.dead_after, heartbeat_s=self.heartbeat_s)

    @classmethod
    def load(cls, run_dirs: list[str] = (), overrides: dict[str, Any] | None = None) -> Rules:
        """Defaults, then ``~/.config/mstop/config.toml``, then ``mstop.toml`` of the run, then ``overrides``."""
        values = read_settings(run_dirs, "health", {f.name for f in fields(cls)})
        values.update({k: v for k, v in (overrides or {}).items() if v is not None})
        return cls(**values)


@dataclass
class Alert:
    kind: str
    rank: int | None
    step: int | None
    message: str
    severity: float = 0.0  # orders per-rank alerts, worst first
    since_step: int | None = None  # the step at which it began to hold (this stretch of it)
    since_time: float | None = None  # and when, on the run's clock
    cleared: float | None = None  # a held alert (hold_s): when its condition ended
    #: the rest of a multi-line message (an error's call stack): the alerts list shows it, the header not
    detail: str = ""

    def public(self) -> dict[str, Any]:
        """The alert as ``summary --json`` shows it: ``{kind, rank, step, message}``."""
        d = asdict(self)
        for k in ("severity", "since_step", "since_time", "cleared", "detail"):
            d.pop(k)
        return d


@dataclass
class Incident:
    kind: str
    rank: int | None
    first_step: int | None
    last_step: int | None
    first_time: float | None
    last_time: float | None
    worst: float | None  # the rule's own measure at its worst (the loss of a spike, a data-wait share, ...)
    message: str
    active: bool = False

    def public(self) -> dict[str, Any]:
        """As ``summary --json`` shows it (non-finite numbers as strings)."""
        d = asdict(self)
        w = d["worst"]
        if isinstance(w, float) and not math.isfinite(w):
            d["worst"] = "nan" if math.isnan(w) else ("inf" if w > 0 else "-inf")
        return d

    def steps(self) -> str:
        """``step 300`` or ``steps 484-535``, for people."""
        return steps_text(self.first_step, self.last_step)


def steps_text(first: int | None, last: int | None) -> str:
    """``step 300`` or ``steps 484-535``: an incident's steps for people (screen, summary table, report)."""
    return f"step {first}" if first == last else f"steps {first}-{last}"


def groups(pos: np.ndarray) -> list[tuple[int, int]]:
    """Runs of positions with gaps of at most GAP: (first, last) index pairs into ``pos``."""
    if not len(pos):
        return []
    breaks = np.flatnonzero(np.diff(pos) > GAP)
    starts = np.concatenate([[0], breaks + 1])
    ends = np.concatenate([breaks, [len(pos) - 1]])
    return list(zip(starts.tolist(), ends.tolist()))


def order(i: Incident) -> tuple:
    return (i.first_time if i.first_time is not None else math.inf,
            i.first_step if i.first_step is not None else -1, i.kind, -1 if i.rank is None else i.rank)


