"""mstop's in-job writer: per-rank metric CSVs and event files from a training job.

``import mstop_writer`` uses the standard library only. ``MstopCallback``
(a MindSpore ``Callback``) is loaded on first use, so a job that only calls
``MetricsWriter.log`` never imports MindSpore through us.
"""

from __future__ import annotations

from typing import Any

from ._version import __version__
from .metrics import MetricsWriter, WriterOptions
from .schema import COLUMNS, EVENT_KINDS, SCHEMA_VERSION, UNITS

__all__ = ["COLUMNS", "EVENT_KINDS", "SCHEMA_VERSION", "UNITS", "MetricsWriter", "WriterOptions", "MstopCallback",
           "GradNormTrainOneStepCell", "__version__"]


def __getattr__(name: str) -> Any:
    if name in ("MstopCallback", "GradNormTrainOneStepCell"):
        from . import callback

        return getattr(callback, name)
    raise AttributeError(f"module 'mstop_writer' has no attribute {name!r}")
