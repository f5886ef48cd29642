"""What tests/unit/test_source_summary.py and tests/system/test_source_summary.py share."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["direct", "watchdog"])
def native(request, monkeypatch):
    """Native file events read by our own inotify reader, or through watchdog's observer (its busy
    threshold for the switch to scans then applies to both, so the switching is tested on each)."""
    import mstop.sources.local as local

    plain = local.FollowTuning()
    monkeypatch.setattr(local, "TUNING", local.FollowTuning(direct_events=request.param == "direct",
                                                            busy_events_direct=plain.busy_events))
    return request.param


