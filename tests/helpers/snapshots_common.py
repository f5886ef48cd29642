"""Builders the tests of snapshots share (unit/test_snapshots.py): plain functions and data, no fixtures."""

from __future__ import annotations

from mstop.app import MonitorApp

RUN = "tests/fixtures/snap-run"


NOW = 10_000.0 + 600 * 6.0 + 20.0  # 20 s after the last row


def app() -> MonitorApp:
    return MonitorApp(RUN, follow=False, clock=lambda: NOW)


