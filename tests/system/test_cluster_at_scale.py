"""Runs of hundreds and thousands of ranks: one straggler among 64 found and only it, a dead rank among 256, a
hung job of 256 ranks stalled with the collective hint, 1,024 healthy ranks with heartbeats raise nothing,
1,200 ranks counted with thousands separators in every reader, a thousand ranks grouped by host on three lines.
Runs are written by the real ``MetricsWriter`` (its start events, rows and heartbeats, at generated times);
``mstop`` runs as the program. Small clusters: tests/unit/test_cluster.py."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from mstop.app import MonitorApp
from mstop.app.widgets import Header
from tests.helpers.app_common import grouped_by_host, settle, text
from tests.helpers.cluster_common import alerts, cluster
from tests.helpers.common import ROOT
from tests.helpers.runs import start, steps, write_events, write_rank


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


async def test_counts_of_ranks_read_with_thousands_separators(tmp_path):
    """Issue 40 item 13: `ranks seen 10000` beside `1,230`: every count on screen and in summary has the same
    separators (here 1,200 ranks: the header's world and ranks seen, summary's ranks)."""
    import json
    import time

    from mstop.app import MonitorApp

    t0 = time.time() - 10  # written just now: no clock note takes the header's room
    for r in range(1200):
        write_events(tmp_path, r, [start("s1", t0, world_size=1200)])
        write_rank(tmp_path, r, steps(1, 2, t0=t0, step_time=1.0))
    out = subprocess.run([sys.executable, "-m", "mstop", "summary", str(tmp_path)], cwd=ROOT, capture_output=True,
                         text=True, timeout=300).stdout
    assert any(line.split() == ["ranks", "1,200"] for line in out.splitlines()), out
    assert json.loads(subprocess.run([sys.executable, "-m", "mstop", "summary", "--json", str(tmp_path)], cwd=ROOT,
                                     capture_output=True, text=True, timeout=300).stdout)["ranks"] == 1200
    app = MonitorApp(str(tmp_path), follow=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot, lambda: "ranks seen 1,200" in text(app.query_one(Header)))
        assert "world 1,200" in text(app.query_one(Header))


async def test_a_thousand_ranks_grouped_by_host_are_three_lines(tmp_path):
    """1,024 ranks on 128 hosts, one straggler and one dead rank: the 126 quiet hosts are one line, the two
    with something to say one line each (the alerts' ranks on them)."""
    from tests.helpers.runs import cluster_1024

    now = cluster_1024(tmp_path / "run")
    app = MonitorApp(str(tmp_path / "run"), follow=False, clock=lambda: now)
    async with app.run_test(size=(160, 40)) as pilot:
        table, rows = await grouped_by_host(app, pilot)
        rows = [r[:2] for r in rows]
        assert sorted(rows) == sorted([["+ 126 hosts", "node[000-036,038-063,065-127] ok · 8 ranks each"],
                                       ["+ 8 ranks", "node037"], ["+ 8 ranks", "node064"]]), rows
        assert "of 3 hosts and ranks" in table.border_title


def test_a_dead_rank_among_256(tmp_path):
    now = 10_000.0 + 60 + 5
    # rank 99 stopped writing and beating 200 s ago; the others beat 5 s ago
    last = cluster(tmp_path, 256, last_step=lambda r: 40 if r == 99 else 60,
                   heartbeat_at=lambda r: now - 200 if r == 99 else now - 5,
                   t0_of=lambda r: now - 240 - 40 if r == 99 else 10_000.0)  # its last row: 240 s ago
    got = alerts(tmp_path, now)
    assert [(a.kind, a.rank) for a in got if a.kind in ("dead_rank", "lagging_rank")] == [("dead_rank", 99)]
    assert "no heartbeat for 2" in [a for a in got if a.kind == "dead_rank"][0].message
    assert last


def test_a_hung_job_is_stalled_with_the_collective_hint_not_256_dead_ranks(tmp_path):
    t0 = 10_000.0
    now = t0 + 60 + 400  # rows stopped 400 s ago; every rank still beats
    cluster(tmp_path, 256, heartbeat_at=lambda r: now - 10)
    got = alerts(tmp_path, now)
    assert [a.kind for a in got] == ["stalled"]
    assert "all ranks alive: likely waiting in a collective (heartbeats, the newest 10 s ago)" in got[0].message
