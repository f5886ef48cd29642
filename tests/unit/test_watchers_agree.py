"""The three watchers of a rank's process say the same of its end (issue 38): the exit witness the writer
starts (mstop_writer.witness), the viewer watching a log-read job's workers on their host
(mstop.sources.procwatch), and the ssh follower doing that on a remote host (its own copy, Workers in
mstop.sources.follower, a standard-library program sent as text). Same process, same kill: the same how,
signal, code and the same order of ends (``peers_alive``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from mstop.engine.store import Store
from mstop.sources.follower import Workers
from mstop.sources.procwatch import ProcessWatch
from tests.helpers.common import HELPERS, ROOT, read_events, wait_for


def _worker(run, logs, rank: int) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'writer'}{os.pathsep}{ROOT}")
    log = open(logs / f"worker_{rank}.log", "wb")  # noqa: SIM115 (the worker holds it: closed below)
    p = subprocess.Popen([sys.executable, str(HELPERS / "logged_worker.py"), str(run), str(rank)], stdout=log,
                         stderr=subprocess.PIPE, env=env, text=True)
    log.close()
    assert p.stderr.readline().strip() == "ready", p.stderr.read()
    return p


def _exits(run, store: Store, follower: list[tuple[int, dict]], rank: int) -> dict[str, dict]:
    out = {}
    path = run / f"rank{rank}.events.jsonl"
    got = [e for e in read_events(path) if e["kind"] == "exit"] if path.exists() else []
    if got:
        out["witness"] = got[0]
    d = store.ranks.get(rank)
    if d is not None and d.exits:
        out["viewer"] = d.exits[0]
    got = [e for r, e in follower if r == rank and e["kind"] == "exit"]
    if got:
        out["follower"] = got[0]
    return out


def test_the_witness_the_viewer_and_the_follower_agree_on_how_and_in_what_order_ranks_ended(tmp_path):
    run, logs = tmp_path / "run", tmp_path / "logs"
    logs.mkdir()
    p0, p1 = _worker(run, logs, 0), _worker(run, logs, 1)
    store = Store()
    watch = ProcessWatch(store)
    workers = Workers()
    follower: list[tuple[int, dict]] = []
    try:
        for r in (0, 1):
            watch.consider(r, str(logs / f"worker_{r}.log"))
            workers.consider(r, str(logs / f"worker_{r}.log"))
        assert set(watch.watched) == {0, 1}, watch.unseen
        assert set(workers.watched) == {0, 1}, workers.unseen

        def seen(rank: int) -> bool:
            workers.wait(0.05)
            workers.look()
            follower.extend(workers.take())
            return len(_exits(run, store, follower, rank)) == 3

        for victim, other in ((p1, p0), (p0, p1)):
            rank = 1 if victim is p1 else 0
            victim.send_signal(signal.SIGKILL)  # not reaped until the end: its status stays readable
            assert wait_for(lambda r=rank: seen(r), 10), _exits(run, store, follower, rank)
            ends = _exits(run, store, follower, rank)
            for who, e in ends.items():
                assert e["pid"] == victim.pid, (who, e)
                assert (e["how"], e.get("signal"), e.get("code")) == ("signal", "SIGKILL", -9), (who, e)
                if victim is p1:  # the first end: the other worker still ran
                    assert other.pid in e["peers_alive"], (who, e)
                else:
                    assert p1.pid not in e["peers_alive"], (who, e)
            assert {e["source"] for e in ends.values()} == {"witness", "viewer", "follower"}
    finally:
        watch.stop()
        for p in (p0, p1):
            p.kill()
            p.wait()
