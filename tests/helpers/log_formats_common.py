"""Builders the tests of log formats share (system/test_following_live.py, system/test_log_formats_msrun.py,
unit/test_log_formats.py): plain functions and data, no fixtures."""

from __future__ import annotations

import logging

V06_FILE = "[%(levelname)s] %(asctime)s [%(pathname)s:%(lineno)d] %(funcName)s: %(message)s"


LOSS_MONITOR = "epoch: %s step: %s, loss is %s"


def _logger_line(fmt: str, t: float, msg: str, *args: object) -> str:
    rec = logging.LogRecord("mindformers", logging.INFO, "mindformers/core/callback/callback.py", 271, msg, args,
                            None, "print_output_info")
    rec.created, rec.msecs = t, (t - int(t)) * 1000
    return logging.Formatter(fmt).format(rec)


def _rank_log(root, rank: int, lines: list[str], name: str = "info.log"):
    d = root / "output" / "log" / f"rank_{rank}"
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text("".join(ln + "\n" for ln in lines))
    return root / "output"


