"""What tests/unit/test_writer.py and tests/system/test_writer.py share."""

from __future__ import annotations

import logging


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "mstop_writer" and r.levelno >= logging.WARNING]


