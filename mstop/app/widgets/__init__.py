"""The monitor's widgets: each turns a part of a :class:`~mstop.view.View` into something drawable.

    chart.py   Chart: line charts (drawn by canvas.py)
    canvas.py  the chart drawing: numpy to half blocks, glyphs, ticks
    header.py  Header, AlertsPanel
    panels.py  LossPanel, ThroughputPanel, MfuPanel, MemoryPanel, DataPanel
    ranks.py   RanksTable, RankDetail, DeviceStrip (the hosts' NPUs)
    heat.py    HeatStrip
    footer.py  KeysFooter: Textual's footer, made again once a refresh
    runs.py    RunsTable: the runs list's table
"""

from __future__ import annotations

from .chart import Chart
from .footer import KeysFooter
from .header import AlertsPanel, Header
from .heat import HEAT_METRICS, PROFILE_METRICS, HeatStrip
from .panels import DataPanel, LossPanel, MemoryPanel, MfuPanel, ThroughputPanel
from .ranks import DeviceStrip, RankDetail, RanksTable

__all__ = ["HEAT_METRICS", "PROFILE_METRICS", "AlertsPanel", "Chart", "DataPanel", "DeviceStrip", "Header", "HeatStrip",
           "KeysFooter", "LossPanel", "MemoryPanel", "MfuPanel", "RankDetail", "RanksTable", "ThroughputPanel"]
