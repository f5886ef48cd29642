"""Builders the tests of mflog share (system/test_mflog_cli.py, unit/test_mflog.py): plain functions and data, no
fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.common import ROOT
from tests.helpers.mflines import Log

KIT = ROOT.parent / "shared" / "mindformers" / "captured" / "info.log"


needs_kit = pytest.mark.skipif(not KIT.exists(), reason=f"the MindFormers kit's captured log is not at {KIT}")


def mf_output(tmp_path: Path, logs: dict[int, str]) -> Path:
    out = tmp_path / "output"
    for r, text in logs.items():
        d = out / "log" / f"rank_{r}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "info.log").write_text(text)
    return out


def _finished_log() -> Log:
    log = Log()
    log.info(".........Starting Training Model..........")
    for s in range(1, 11):
        log.step(1, 1, s, 10, 2.0)
    return log


