"""Builders the tests of writer share (system/test_writer_processes.py, unit/test_writer.py): plain functions and
data, no fixtures."""

from __future__ import annotations

import logging


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "mstop_writer" and r.levelno >= logging.WARNING]


