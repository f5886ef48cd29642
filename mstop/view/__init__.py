"""What the screen shows, computed from the store without any widget code.

    frame.py     the frame model: a View made of parts (header, loss, throughput, memory, data, ranks,
                 baseline), plain numbers and series
    build.py     build_view: a snapshot of the store under its lock, then each part from it
    parts.py     one short function per part, selecting the engine's figures (none computed here)
    charts.py    chart series against the x axis, marks on the loss chart, values at a step
    baseline.py  a baseline run's curves by step and the differences at the current step
    alerting.py  alert bookkeeping between frames (seen, told, --on-alert) and the heat-strip letters
    session.py   MonitorSession: the monitor's store, sources, health, alerting, baseline and overlays; each
                 frame returned with what is new (alerts to tell, a history scan due), no screen code
    runs.py      the runs list's rows: each run's figures, status and note, sorted and filtered
    logpane.py   the log pane's content (L): a rank's log lines, its error lines, n/N and / answered
    stacks.py    the stacks view's lines (t): each rank's newest stack, ranks grouped by where they are
    options.py   MonitorOptions: what the monitor is asked to do, one frozen object passed whole

Nothing here imports textual, so a frame can be tested, printed or drawn by another front end.
"""

from __future__ import annotations

from ..engine.endings import error_lines
from ..engine.figures import ENDED, STATUSES, Options
from ..engine.goodput import losses_text
from ..engine.health import Rules
from ..engine.store import Store
from ..sources import Connection, SourceError, check_spec, close_connections
from ..sources.replay import start_replay
from .alerting import MARKS, Alerting, heat_marks, since_text
from .baseline import baseline_overlay, run_part
from .build import Carry, build_view
from .charts import incident_marks, numeric_columns, rank_series, step_range, values_at_step
from .frame import (
    DATA_WARN,
    MEM_CRIT,
    MEM_WARN,
    X_AXES,
    BaselinePart,
    DataPart,
    DeviceCell,
    HeaderPart,
    Line,
    LossPart,
    MemoryPart,
    RankRow,
    RankTable,
    Series,
    ThroughputPart,
    View,
)
from .options import MonitorOptions
from .stacks import fresh_lines, stacks_lines

# what the app may use of the rooms below, besides the frame: names and types it draws with, the sources'
# one error, checking a source argument, the demo's replay, and closing the ssh connections at exit (the app
# imports nothing of the engine or sources itself)
__all__ = ["DATA_WARN", "ENDED", "MARKS", "MEM_CRIT", "MEM_WARN", "STATUSES", "X_AXES", "Alerting", "BaselinePart",
           "Carry", "DataPart", "DeviceCell", "Options", "Rules", "SourceError", "Store", "check_spec",
           "close_connections", "start_replay",
           "losses_text",
           "HeaderPart", "Line", "LossPart", "MemoryPart", "MonitorOptions", "Connection", "RankRow", "RankTable",
           "Series", "ThroughputPart", "View",
           "baseline_overlay", "stacks_lines", "fresh_lines",
           "build_view", "error_lines", "heat_marks", "incident_marks", "numeric_columns", "rank_series", "run_part",
           "since_text", "step_range", "values_at_step"]
