"""What follows a job while it runs: the rooms below read, compute and build frames; this one owns the
sources and their threads, keeps what holds between frames, and starts processes (``--on-alert``, py-spy).

    session.py   MonitorSession: the monitor's store, sources, health, alerting, baseline and overlays; each
                 frame returned with what is new (alerts to tell, a history scan due), no screen code
    alerting.py  alert bookkeeping between frames (seen, told) and running ``--on-alert``
    routing.py   alerts that route and hold still (--alert-rules): for, clear_after, grouping, repeats,
                 silences kept beside the run, the sinks' own thread (bell, command, file, http), the history
    runs.py      the runs list's model: each run's figures, status and note, sorted and filtered (its filter
                 language), read and followed on threads
    logpane.py   the log pane's content (L): a rank's log lines, its error lines, n/N and / answered
    stacks.py    each rank's stacks read now from outside (py-spy dump, here or over ssh: the t view's d)
    options.py   MonitorOptions: what the monitor is asked to do, one frozen object passed whole
    throttle.py  how often frames of their own are drawn: the redraw budget and the frames' cost

Nothing here imports textual: the app draws what the session hands it.
"""

from __future__ import annotations

from ..sources import Connection, SourceError, check_spec, close_connections, stop_programs
from ..sources.replay import start_replay
from .alerting import Alerting
from .logpane import LogPane
from .options import MonitorOptions
from .session import Frame, MonitorSession
from .stacks import fresh_lines
from .throttle import RedrawBudget, Throttle

# what the app may use of the sources: their one error, checking a source argument, the demo's replay, and
# closing the ssh connections at exit (the app imports nothing of the engine or sources itself)
__all__ = ["Alerting", "Connection", "Frame", "LogPane", "MonitorOptions", "MonitorSession", "RedrawBudget",
           "SourceError", "Throttle", "check_spec", "close_connections", "fresh_lines", "start_replay",
           "stop_programs"]
