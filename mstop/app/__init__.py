"""The Textual monitor: the only part of mstop that imports textual."""

from .monitor import MonitorApp

__all__ = ["MonitorApp"]
