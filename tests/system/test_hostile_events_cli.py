"""Issue 26, events with wrong types: a profile event (or a start event's ``profile_steps``) with any field
of any JSON type, ``±Infinity`` and 400-digit numbers included, is read or counted bad by every reader
(``summary``, ``compare``, ``report``, the monitor's frame), never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers.common import ROOT
from tests.helpers.hostile_events_common import CASES, write
from tests.helpers.runs import start


def mstop(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mstop", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_hostile_profile_field_is_one_bad_event_in_summary_compare_and_report(tmp_path, case):
    run = tmp_path / "run"
    events = [CASES[case]] if CASES[case]["kind"] == "start" else [start("s1", t=999.0, world_size=1), CASES[case]]
    write(run, events)
    s = mstop("summary", str(run), "--json")
    assert s.returncode == 0, s.stderr
    got = json.loads(s.stdout)
    assert got["rows"] == 40 and got["bad_events"] == 1 and got["profile"] is None
    c = mstop("compare", str(run), str(run), "--format", "json")
    assert c.returncode == 0 and "Traceback" not in c.stderr, c.stderr
    pytest.importorskip("matplotlib")
    r = mstop("report", str(run), str(run), "--out", str(tmp_path / "rep"), timeout=240)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr











