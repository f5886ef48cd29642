"""What the screen shows, computed from the store without any widget code.

    frame.py     the frame model: a View made of parts (header, loss, throughput, memory, data, ranks,
                 baseline), plain numbers and series
    build.py     build_view: a snapshot of the store under its lock, then each part from it
    parts.py     one short function per part, selecting the engine's figures (none computed here)
    charts.py    chart series against the x axis, marks on the loss chart, values at a step
    baseline.py  a baseline run's curves by step and the differences at the current step
    marks.py     an alert's words and letters on screen: the heat strip's letter, how long it has held
    stacks.py    the stacks view's lines (t): each rank's newest stack, ranks grouped by where they are
    hostfold.py  the ranks view grouped by host: quiet hosts folded into one line (node[001-480] ok)

A frame from a snapshot, and nothing else: nothing here reads files, starts a thread or a process, or keeps
state that follows a job (that is mstop.live, the room above); nothing imports textual, so a frame can be
tested, printed or drawn by another front end.
"""

from __future__ import annotations

from ..engine.endings import error_lines, ranks_text
from ..engine.figures import ENDED, STATUSES, Options
from ..engine.goodput import losses_text
from ..engine.health import Rules
from ..engine.store import Snapshot
from .baseline import baseline_overlay, run_part
from .build import build_view
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
from .marks import MARKS, heat_marks, since_text
from .stacks import stacks_lines

# what the app may use of the engine, besides the frame: names and types it draws with (the app imports
# nothing of the engine or sources itself; what follows a job live is mstop.live's)
__all__ = ["DATA_WARN", "ENDED", "MARKS", "MEM_CRIT", "MEM_WARN", "STATUSES", "X_AXES", "BaselinePart",
           "DataPart", "DeviceCell", "Options", "Rules", "Snapshot",
           "losses_text",
           "HeaderPart", "Line", "LossPart", "MemoryPart", "RankRow", "RankTable",
           "Series", "ThroughputPart", "View",
           "baseline_overlay", "stacks_lines",
           "build_view", "error_lines", "heat_marks", "incident_marks", "numeric_columns", "rank_series", "run_part",
           "ranks_text", "since_text", "step_range", "values_at_step"]
