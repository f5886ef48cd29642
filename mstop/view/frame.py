"""The frame model: what one frame of the monitor shows, in the parts the screen draws.

Plain data (numbers, strings, series): the view builds it from the engine's figures, widgets only
arrange it. Nothing here imports textual.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from ..engine.figures import MemoryScope

#: x axes the charts can use (``x`` key).
X_AXES = ("step", "time", "tokens")
MEM_WARN, MEM_CRIT = 0.10, 0.05
DATA_WARN = 0.10


@dataclass
class Series:
    x: np.ndarray
    y: np.ndarray


#: how a chart line is drawn: this run's own (``main``), the unsmoothed loss (``raw``, faint), a
#: ``baseline`` run's, an ``overlay`` run's (the runs list's o; its mark the run's number), or the ``right``
#: axis's line
LINE_ROLES = ("main", "raw", "baseline", "overlay", "right")


@dataclass(frozen=True)
class Line:
    """One line of a chart as the frame hands it: its legend label, its points and its role (LINE_ROLES),
    and for an overlaid run its mark (``"2"``): the chart draws by role, never by reading the label."""

    label: str
    series: Series | None
    role: str = "main"
    mark: str | None = None


@dataclass
class RankRow:
    """One rank's line in the ranks table and cell in the heat strip."""

    rank: int
    host: str
    step: int | None
    step_time: float | None
    tokens_per_s: float | None
    headroom: float | None
    data_wait: float | None
    age: float | None
    #: the rank's newest profile: communication not overlapped, and idle, as shares of its steps
    comm_share: float | None = None
    idle_share: float | None = None
    #: its device as npu-smi sampled it (mstop.engine.devices): AICore busy, memory full, degrees C
    aicore: float | None = None
    device_memory: float | None = None
    temperature: float | None = None
    #: its process as its exit witness saw it (mstop.engine.processes.facts): pid, state letter (``ended``
    #: once it exited), CPU (cores busy), RSS (bytes), and how it ended (``SIGKILL``, ``exit 1``)
    pid: int | None = None
    state: str | None = None
    cpu: float | None = None
    rss: float | None = None
    ended: str | None = None


#: RankRow's fields that hold text (the others are numbers: kept in float arrays, NaN for None)
_TEXT_FIELDS = ("host", "state", "ended")
_INT_FIELDS = ("rank", "step", "pid")


class RankTable(Sequence[RankRow]):
    """Every rank's line of the ranks table, as columns: a :class:`RankRow` is built only when asked for
    (issue 39, step 7). The table draws one page of rows, sorted by a column (:meth:`order`); the heat strip
    reads columns (:meth:`column`): a frame of 10,000 ranks builds the 40 rows on screen, not 10,000.

    As a sequence it is every rank's row in rank order, as a list of RankRow was."""

    NAMES = tuple(f.name for f in fields(RankRow))
    __hash__ = None  # type: ignore[assignment]  (a table of rows is compared, never hashed)

    def __init__(self, columns: dict[str, Any] | None = None) -> None:
        """``columns``: field -> values, one per rank in rank order (numbers as arrays, NaN for none; text as
        lists, None for none); a field left out is none for every rank."""
        columns = dict(columns or {})
        n = len(columns.get("rank", ()))
        self._n = n
        self._num = {k: np.asarray(columns.get(k, np.full(n, np.nan)), dtype=np.float64)
                     for k in self.NAMES if k not in _TEXT_FIELDS}
        self._text = {k: list(columns.get(k, [None] * n)) for k in _TEXT_FIELDS}
        self._rows: dict[int, RankRow] = {}
        self._at: dict[int, int] | None = None

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._n))]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(i)
        row = self._rows.get(i)
        if row is None:
            vals: dict[str, Any] = {k: self._text[k][i] for k in _TEXT_FIELDS}
            for k, a in self._num.items():
                x = float(a[i])
                vals[k] = None if x != x else (int(x) if k in _INT_FIELDS else x)
            vals["host"] = vals["host"] if vals["host"] is not None else "?"
            row = self._rows[i] = RankRow(**vals)
        return row

    def __eq__(self, other: object) -> bool:
        return isinstance(other, (RankTable, list)) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"RankTable({list(self)!r})"

    def column(self, name: str) -> list[Any]:
        """Every rank's value of field ``name`` (None for none), in rank order."""
        if name in self._text:
            return list(self._text[name])
        a = self._num[name]
        ints = name in _INT_FIELDS
        return [None if x != x else (int(x) if ints else x) for x in a.tolist()]

    def values(self, name: str) -> np.ndarray:
        """A number field's values (NaN for none), in rank order: not to be written to."""
        return self._num[name]

    def index_of(self, rank: int) -> int | None:
        """Where ``rank`` is (None: not in the table)."""
        if self._at is None:
            self._at = {int(r): k for k, r in enumerate(self._num["rank"].tolist())}
        return self._at.get(rank)

    def order(self, key: str, reverse: bool = False) -> list[int]:
        """The rows' positions sorted by field ``key`` as ``sorted(rows, key=(missing, value), reverse=...)``
        sorts them: ranks without a value last (first when reversed), ties in rank order."""
        if key in self._text:
            vals = self._text[key]
            return sorted(range(self._n), key=lambda i: (vals[i] is None, vals[i] or ""), reverse=reverse)
        a = self._num[key]
        missing = np.isnan(a)
        have = np.flatnonzero(~missing)
        if reverse:  # a stable sort of the negated values keeps ties in rank order, as sorted(reverse=True)
            ranked = have[np.argsort(-a[have], kind="stable")]
            return np.concatenate([np.flatnonzero(missing), ranked]).tolist()
        ranked = have[np.argsort(a[have], kind="stable")]
        return np.concatenate([ranked, np.flatnonzero(missing)]).tolist()


@dataclass
class HeaderPart:
    """The run, its progress, its times and what is wrong with its files."""

    run_name: str | None = None
    device: str | None = None
    world_size: int | None = None
    #: the stacks view (t) holds what explains the state: a run that stopped making steps (stalled, dead,
    #: failed) with stack dumps (a crash's, a hang's), or a rank stuck in a step by its dump: the footer shows t
    stacks_explain: bool = False
    ranks_seen: int = 0
    status: str = "waiting"
    step: int | None = None
    total_steps: int | None = None
    eta: float | None = None
    elapsed: float | None = None
    steps_per_s: float | None = None
    #: the slowest and the furthest rank's last steps when they differ (the header's step is the furthest's)
    step_spread: tuple[int, int] | None = None
    #: "no row for 14 s, usual step 40 ms": the job writes no rows far beyond its pace (pace and ETA not live)
    quiet: str | None = None
    tokens_seen: float | None = None
    since_last_row: float | None = None
    compile_s: float | None = None  # the newest session's first step (graph compilation), left out of windows
    repeated_steps: int = 0
    repeated_seconds: float = 0.0  # wall time the repeated steps cost
    repeated_whose: str | None = None  # whose count it is, when the ranks repeated different counts
    goodput: float | None = None  # productive / wall time (mstop.engine.goodput)
    goodput_lost: list[tuple[str, float]] = field(default_factory=list)  # the largest lost buckets, seconds
    last_checkpoint: dict[str, Any] | None = None
    checkpoint_age: float | None = None
    bad_rows: int = 0
    bad_events: int = 0  # event lines that are not JSON objects of known fields of the right types
    dropped_rows: int = 0  # lost to I/O errors, as the writers' dropped events report them
    writer_errors: list[str] = field(default_factory=list)  # what the writers failed at
    refused_rows: int = 0  # rows the writers refused for bad input
    refused: str | None = None  # what the first refusal said
    refused_cells: int = 0  # cells no real step can have, made missing at the door (mstop.engine.door)
    refused_cells_why: str | None = None  # the most common reason, its first example
    notes: list[str] = field(default_factory=list)  # ssh host states, ranks found in two sources, files refused
    skew_note: str | None = None
    #: the source when it is not mstop's writer (a MindFormers log), and the figures it cannot give
    source: str | None = None
    cannot_give: list[str] = field(default_factory=list)


@dataclass
class LossPart:
    """The loss chart (raw and smoothed, marks) and the lr / grad norm chart below it."""

    now: float | None = None
    ema: float | None = None
    min: float | None = None
    raw: Series | None = None
    smooth: Series | None = None
    nan_steps: list[float] = field(default_factory=list)  # x of each NaN/Inf loss (on the chosen axis)
    nan_first_step: int | None = None  # the first one's step
    evals: list[tuple[float, str, float]] = field(default_factory=list)
    segment_starts: list[float] = field(default_factory=list)  # x of each restart/resume on the chart rank
    checkpoints: list[tuple[float, float]] = field(default_factory=list)  # (x, loss) marks
    incident_marks: list[tuple[float, float]] = field(default_factory=list)  # (x, loss) of past incidents
    lr: Series | None = None
    grad_norm: Series | None = None
    lr_now: float | None = None
    grad_norm_now: float | None = None
    custom: dict[str, Series | None] = field(default_factory=dict)  # the / key's columns


@dataclass
class ThroughputPart:
    """Tokens/s, samples/s, step time and MFU (with the peak it is measured against)."""

    tokens_per_s: float | None = None
    samples_per_s: float | None = None
    step_time: float | None = None
    series: Series | None = None
    series_of: str = "tokens/s"  # what ``series`` is: samples/s when the run has no tokens (a MindFormers log)
    #: the newest profile's breakdown of a step (figures.latest_profile), or None
    profile: dict[str, Any] | None = None
    mfu: float | None = None
    mfu_series: Series | None = None
    peak_flops: float | None = None
    peak_source: str | None = None
    mfu_missing: str | None = None  # why there is no MFU, naming what is missing (figures.mfu_missing)


@dataclass
class MemoryPart:
    """The worst memory headroom, whose it is (a rank, or a host), its bytes and its history."""

    headroom: float | None = None
    worst: MemoryScope | None = None
    used: float | None = None
    peak: float | None = None
    total: float | None = None
    source: str | None = None
    series: Series | None = None  # of the worst rank (device memory) over the run
    #: the NPUs now (mstop.engine.devices.DeviceSummary), None without a devices file
    devices: Any = None


@dataclass
class DeviceCell:
    """One device of the ranks view's device strip: its figures now and the ranks on it."""

    host: str
    npu: int
    chip: int
    ranks: list[int]
    aicore: float | None
    memory: float | None
    temperature: float | None
    health: str | None


@dataclass
class DataPart:
    """The input pipeline: the share of step time spent waiting for data, the device queue."""

    wait_frac: float | None = None
    worst_rank: int | None = None
    queue_depth: float | None = None
    queue_rank: int | None = None  # whose queue: the worst rank's


@dataclass
class BaselinePart:
    """A baseline run's curves by step and the differences at this run's current step (``--baseline``)."""

    name: str
    loss: Series | None = None  # smoothed, like this run's smoothed loss
    throughput: Series | None = None
    mfu: Series | None = None
    step: int | None = None  # the step the deltas are taken at
    loss_delta: float | None = None  # smoothed loss: this run − baseline
    loss_ema: float | None = None
    tps_change: float | None = None  # tokens/s: relative change (0.08 = +8 %)
    sps_change: float | None = None  # samples/s: relative change, where a run has no tokens
    mfu_delta: float | None = None  # MFU: this run − baseline, as a fraction (0.02 = +2 pp)
    note: str | None = None  # why a delta or the overlay is missing


@dataclass
class View:
    """Everything one frame shows."""

    xaxis: str = "step"
    now: float = 0.0  # the frame's clock: ages on screen are taken against it
    chart_rank: int | None = None  # the rank the run-wide charts are drawn from (the lowest with rows)
    header: HeaderPart = field(default_factory=HeaderPart)
    loss: LossPart = field(default_factory=LossPart)
    throughput: ThroughputPart = field(default_factory=ThroughputPart)
    memory: MemoryPart = field(default_factory=MemoryPart)
    data: DataPart = field(default_factory=DataPart)
    ranks: RankTable = field(default_factory=RankTable)
    devices: list[DeviceCell] = field(default_factory=list)  # the hosts' NPUs now, by host and NPU
    baseline: BaselinePart | None = None
    overlays: list[BaselinePart] = field(default_factory=list)  # other runs drawn by step (the runs list's o)
    name: str = ""  # this run's name beside overlaid runs (their legend names them too)
    alerts: list[Any] = field(default_factory=list)  # active health alerts (mstop.engine.health.Alert)
    #: what slows the job, worst first (mstop.engine.diagnosis.Verdict): the header's first line
    diagnosis: list[Any] = field(default_factory=list)
    new_alerts: int = 0  # not yet seen (the a key)
    marks: dict[int, str] = field(default_factory=dict)  # the heat strip's letter per rank with an alert
