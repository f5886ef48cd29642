"""Cluster detection on small clusters: a noisy row is no straggler, a lagging rank, a rank whose heartbeats
stopped or whose process ended, liveness without events; stat scans over many files. Runs are written by the
real ``MetricsWriter`` (its start events, rows and heartbeats, at generated times). Hundreds and thousands of
ranks: tests/system/test_cluster_at_scale.py."""

from __future__ import annotations

import os
from dataclasses import replace

import mstop.sources.local as local
from mstop.engine.store import Store
from mstop.sources.local import FollowTuning, LocalSource
from tests.helpers.cluster_common import alerts, cluster
from tests.helpers.runs import steps, write_rank


def test_a_noisy_row_or_two_is_not_a_straggler(tmp_path):
    def dw(r, s, g):
        return 0.5 if r == 5 and s in (55, 58) else abs(g.gauss(0.02, 0.005))

    last = cluster(tmp_path, 64, data_wait=dw)
    assert not [a for a in alerts(tmp_path, last + 1) if a.kind == "straggler"]






def test_a_lagging_rank(tmp_path):
    now = 10_000.0 + 60 + 2
    cluster(tmp_path, 16, last_step=lambda r: 45 if r == 3 else 60, heartbeat_at=lambda r: now - 3)
    got = [a for a in alerts(tmp_path, now) if a.kind in ("lagging_rank", "dead_rank")]
    assert [(a.kind, a.rank) for a in got] == [("lagging_rank", 3)]
    assert "15 steps behind the median rank (60)" in got[0].message


def test_ranks_that_wait_for_no_one_are_never_lagging(tmp_path):
    """Issue 58, item 9: the demo's ranks (no collective: ``parallel_mode`` ``stand_alone``) drift apart freely;
    its first screen called the slower ones ``lagging_rank``. A rank behind is lagging only where the others
    wait for it (a collective parallel mode, or one not known)."""
    now = 10_000.0 + 60 + 2
    for mode, want in (("stand_alone", []), ("data_parallel", [3])):
        run = tmp_path / mode
        cluster(run, 16, last_step=lambda r: 45 if r == 3 else 60, heartbeat_at=lambda r: now - 3,
                parallel_mode=mode)
        assert [a.rank for a in alerts(run, now) if a.kind == "lagging_rank"] == want, mode


def test_a_lagging_rank_whose_heartbeats_stopped_says_how_long_not_that_it_is_alive(tmp_path):
    """Issue 40 item 4: a rank killed with no exit witness (a host mstop cannot see) keeps its place among
    the living until the heartbeat deadline; while it trails it was ``lagging_rank ... and alive``. Its
    words now say how long it has been silent and when it will be called dead."""
    now = 10_000.0 + 60 + 2
    # heartbeats every 30 s: dead after 90; rank 3's last row and heartbeat 70 s ago
    cluster(tmp_path, 16, last_step=lambda r: 45 if r == 3 else 60,
            heartbeat_at=lambda r: now - 70 if r == 3 else now - 3,
            t0_of=lambda r: now - 70 - 45 if r == 3 else 10_000.0)
    got = [a for a in alerts(tmp_path, now) if a.kind in ("lagging_rank", "dead_rank")]
    assert [(a.kind, a.rank) for a in got] == [("lagging_rank", 3)]
    assert got[0].message.endswith("no heartbeat for 70 s (dead after 90 s)"), got[0].message
    assert "alive" not in got[0].message


def test_a_rank_whose_process_ended_says_only_what_the_files_show_of_the_others(tmp_path):
    """Issue 40 item 4: ``dead_rank`` said "while 1 other rank is alive" for 3 s after every process was
    gone (the others' ends not read yet). Its words now say how many others gave a sign of life or ended
    after it (a past fact), never that one is alive now."""
    from tests.helpers.common import read_events
    from tests.helpers.runs import write_events

    now = 10_000.0 + 60 + 1
    cluster(tmp_path, 4, last_step=lambda r: 58 if r == 1 else 60,
            heartbeat_at=lambda r: 10_058.0 if r == 1 else 10_060.0)
    for r, t in ((1, 10_058.5), (0, 10_060.5)):  # rank 1 killed; rank 0 ended after every other sign of life
        (begun,) = [e for e in read_events(tmp_path / f"rank{r}.events.jsonl") if e["kind"] == "start"]
        write_events(tmp_path, r, [{"kind": "exit", "time": t, "pid": begun["pid"], "session": begun["session"],
                                    "how": "signal", "signal": "SIGKILL", "code": -9, "source": "witness"}])
    got = [a for a in alerts(tmp_path, now) if a.kind == "dead_rank"]
    words = {a.rank: a.message for a in got}
    assert words[1].endswith("(killed by SIGKILL), 3 other ranks ran on after it"), words
    assert words[0].endswith("the other ranks' last signs of life are from before it"), words
    assert not any("alive" in m for m in words.values()), words


def test_without_events_liveness_falls_back_to_rows_and_says_so(tmp_path):
    now = 10_000.0 + 60 + 5
    for r in range(8):
        n = 20 if r == 6 else 60
        write_rank(tmp_path, r, steps(1, n, t0=10_000.0 if r != 6 else 9_000.0, dt=1.0, loss=1.0, step_time=1.0))
    got = [a for a in alerts(tmp_path, now) if a.kind == "dead_rank"]
    assert [a.rank for a in got] == [6] and "(no heartbeats: judged by rows)" in got[0].message


def test_stat_scans_over_many_files_take_a_slice_each_and_miss_none(tmp_path, monkeypatch):
    """While busy, growth is found by stat scans; with more files than the budget allows per scan, each scan
    stats the next slice (so a scan's cost, and a network filesystem's round trips, stay bounded), and every
    file that grew is found within files / slice scans."""
    for r in range(47):
        write_rank(tmp_path, r, steps(1, 1))
    store = Store()
    src = LocalSource(str(tmp_path), store, tuning=FollowTuning(scan_budget=100))  # 10 files a scan (0.1 s)
    src.read_all()
    for r in range(47):
        write_rank(tmp_path, r, steps(2, 2))
    found, sizes = set(), []
    for _ in range(5):  # ceil(47 / 10)
        grew, got = src.scan(events=False)
        assert grew == len(got)
        sizes.append(len(got))
        found |= got
    assert max(sizes) <= 10 and found == {f"rank{r}.csv" for r in range(47)}
    for name in sorted(found):
        src.read_file(name)
    assert store.rows == 2 * 47 and src.scan(events=False) == (0, set())


def test_scans_read_kept_descriptors_and_verify_finds_a_silent_truncation(tmp_path, monkeypatch):
    """Following keeps the files' descriptors: a scan's slice is read through them (the rows arrive with
    no stat), and the verify slices (VERIFY_BUDGET) find a truncation that no event told of."""
    for r in range(47):
        write_rank(tmp_path, r, steps(1, 1))
    store = Store()
    # 10 files a scan; 20 files a check (every 2 s), though every file is due each second
    src = LocalSource(str(tmp_path), store, tuning=FollowTuning(scan_budget=100, verify_budget=10, verify_every=1.0))
    src.keep_open()  # as follow() does, without its thread
    src.read_all()
    for r in range(47):
        write_rank(tmp_path, r, steps(2, 2))
    stats = []
    with monkeypatch.context() as m:
        m.setattr(local.os, "stat", lambda *a, _real=os.stat, **k: stats.append(a) or _real(*a, **k))
        grown = sum(src.scan(events=False)[0] for _ in range(5))
    assert grown == 47 and store.rows == 2 * 47 and stats == []
    write_rank(tmp_path, 5, steps(1, 3, session="again"), mode="w")  # truncated and rewritten, no event
    with monkeypatch.context() as m:
        m.setattr(local.os, "stat", lambda *a, _real=os.stat, **k: stats.append(a) or _real(*a, **k))
        src.verify()
    assert len(stats) == 20  # one slice: a stat of each path
    src.verify()
    src.verify()  # ceil(47 / 20) slices: every file looked at
    assert store.ranks[5].rows == 3 and store.ranks[5].segments[-1].session == "again"
    src.tuning = replace(src.tuning, verify_every=30.0)
    stats.clear()
    with monkeypatch.context() as m:
        m.setattr(local.os, "stat", lambda *a, _real=os.stat, **k: stats.append(a) or _real(*a, **k))
        src.verify()
    assert len(stats) == 4  # 47 files each every 30 s: ceil(47 x 2 / 30) a check


def test_files_read_before_following_get_their_descriptors_kept_by_the_next_scans(tmp_path, monkeypatch):
    """A run read whole first (the cold open) and then followed: files that never change again (an events
    file with no heartbeats) are read once by their path by the next scans and kept from then on, not
    stat'ed at every scan for ever."""
    import mstop.sources.local as local

    for r in range(6):
        write_rank(tmp_path, r, steps(1, 1))
    src = LocalSource(str(tmp_path), Store())
    src.read_all()
    assert not any(f.tail.kept for f in src.files.values())
    src.keep_open()  # as follow() does
    src.scan(events=True)
    assert all(f.tail.kept for f in src.files.values())
    stats = []
    monkeypatch.setattr(local.os, "stat", lambda *a, _real=os.stat, **k: stats.append(a) or _real(*a, **k))
    assert src.scan(events=True) == (0, set()) and stats == []
    src.stop()




def test_alert_words_say_steps_as_the_header_does(tmp_path):
    """Issue 58, item 9: ``step 2608 ... (2881)`` in an alert beside ``step 2,881`` in the header."""
    now = 10_000.0 + 2881 + 2
    cluster(tmp_path, 3, rows=2881, last_step=lambda r: 2608 if r == 2 else 2881, heartbeat_at=lambda r: now - 3)
    (a,) = [a for a in alerts(tmp_path, now) if a.kind == "lagging_rank"]
    assert "rank 2 is at step 2,608, 273 steps behind the median rank (2,881)" in a.message, a.message
