"""Cluster-scale detection: one straggler among 64, a dead rank among 256, a hung job, a lagging rank.

Runs are written by the real ``MetricsWriter`` (its start events, rows and heartbeats, at generated times)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from tests.helpers.cluster_common import alerts, beats, cluster, load  # noqa: F401
from tests.helpers.common import ROOT


def test_one_straggler_among_64_is_found_and_only_it(tmp_path):
    def dw(r, s, g):
        return 0.30 + g.gauss(0, 0.01) if r == 17 and s > 30 else abs(g.gauss(0.02, 0.005))

    # written to end just now: the summary below judges it live on the real clock
    last = cluster(tmp_path, 64, data_wait=dw, t0=time.time() - 61)
    got = [a for a in alerts(tmp_path, last + 1) if a.kind == "straggler"]
    assert [a.rank for a in got] == [17]
    assert got[0].severity > 5 and "x the median rank" in got[0].message
    assert got[0].step <= 51 and "since step" not in got[0].message  # the panel says since when, once
    out = subprocess.run([sys.executable, "-m", "mstop", "summary", str(tmp_path), "--json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert json.loads(out.stdout)["stragglers"] == [17]


def test_healthy_1024_ranks_with_heartbeats_raise_nothing(tmp_path):
    t = time.perf_counter()
    last = cluster(tmp_path, 1024, rows=40)
    assert alerts(tmp_path, last + 1) == []
    assert time.perf_counter() - t < 120


