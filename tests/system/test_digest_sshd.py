"""A node set followed with its hosts' digest (issue 41), through a real OpenSSH on 127.0.0.1 (``lo*`` are
ssh aliases of this machine, ``gw1``/``gw2`` its gateways): each host merges its ranks' rows, the ranks the
screen draws come as written, and the rows held stand for every row written, once."""

from __future__ import annotations

import math
import re
import socket
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mstop.engine import figures
from mstop.engine.folds import WEIGHT
from mstop.engine.store import Store
from mstop.sources import Connection, Sources, read_once
from mstop_writer import MetricsWriter
from mstop_writer.schema import DEVICE_COLUMNS
from tests.helpers.common import processes_with, wait_for


@pytest.fixture
def config(server):
    """The ssh config reaching lo*, gw*: the tier's server (tests/system/conftest.py)."""
    return server.config


def written(store: Store, rank: int) -> int:
    d = store.ranks.get(rank)
    return 0 if d is None else int(figures.row_weights(d, np.arange(d.rows)).sum())


def write(writers: list[MetricsWriter], first: int, last: int, pause: float = 0.0, devices: list[Path] = ()) -> None:
    """Steps ``first``..``last`` of every writer; every 5th step, a sample of two NPUs in each of ``devices``
    (a host's devices file, as its sampler writes it)."""
    for s in range(first, last + 1):
        time.sleep(pause)
        for w in writers:
            w.log(s, loss=float("nan") if s == 7 else 3.0 / s, step_time=0.05 + 0.001 * (s % 3), tokens=512,
                  data_wait=0.002)
        for path in devices if s % 5 == 0 else ():
            host = path.name[len("host_"):-len(".devices.csv")]
            with path.open("a") as f:
                if f.tell() == 0:
                    f.write(",".join(DEVICE_COLUMNS) + "\n")
                for npu in (0, 1):
                    cells = {"time": f"{time.time():.3f}", "host": host, "npu": str(npu), "chip": "0",
                             "aicore": f"{(s % 7) / 10:.1f}", "health": "OK", "pids": str(100 + npu)}
                    f.write(",".join(cells.get(c, "") for c in DEVICE_COLUMNS) + "\n")


def topology(tmp_path: Path, hosts: str) -> str:
    topo = tmp_path / "topology.conf"
    topo.write_text(f"[routes]\n{socket.gethostname().split('.')[0]}: gw[1-2]\ngw[1-2]: {hosts}\n")
    return str(topo)


def test_a_node_set_followed_with_a_digest_holds_what_summary_reads(config, tmp_path):
    """Four hosts of two ranks each, written live: the rows held are fewer, they stand for every row written;
    the job's rank (the lowest) comes as written; tokens, steps and the NaN equal the files read whole; each
    host's NPU samples are the samples its devices file holds."""
    writers = [MetricsWriter(tmp_path / f"lo{h}" / "run", rank=r, world_size=8, heartbeat_interval=1.0)
               for h in range(1, 5) for r in (2 * h - 2, 2 * h - 1)]
    devices = [tmp_path / f"lo{h}" / "run" / f"host_lo{h}.devices.csv" for h in range(1, 5)]
    store = Store()
    src = Sources([f"lo[1-4]:{tmp_path}/%h/run"], store, poll=0.1, connection=Connection(("-F", str(config)), 5.0),
                  digest=0.5)
    src.follow()
    try:
        write(writers, 1, 3)
        assert wait_for(lambda: len(store.ranks) == 8, 30), src.states()
        assert src.raw_ranks() == {0}  # the job's rank, asked for by the sources themselves when its file came
        write(writers, 4, 60, pause=0.15, devices=devices)
        assert wait_for(lambda: all(written(store, r) == 60 for r in range(8)), 60), src.states()
        assert wait_for(lambda: sum(len(v) for v in store.devices.values()) == 4 * 2 * 12, 30), store.devices
    finally:
        for w in writers:
            w.close()
        src.stop()
    whole = read_once(str(tmp_path / "lo1" / "run"))
    for h in range(2, 5):
        other = read_once(str(tmp_path / f"lo{h}" / "run"))
        for r in other.ranks:
            whole.ranks[r] = other.ranks[r]
    assert store.rows_written == 480 and store.rows < 480 - 100, store.rows  # merged: fewer held
    for h in range(1, 5):
        samples = read_once(str(tmp_path / f"lo{h}" / "run")).devices
        assert len(samples) == 2 and all(store.devices[k] == v for k, v in samples.items())
    d0 = store.ranks[0]
    after = d0.col(WEIGHT)[d0.col("step") > 40] if WEIGHT in d0.extras else np.ones(20)
    assert len(after) == 20 and not (after > 1).any(), after  # the job's rank: as written once asked for
    for r in range(8):
        d, e = store.ranks[r], whole.ranks[r]
        assert d.last("step") == 60 and math.isclose(d.last("loss"), 3.0 / 60, rel_tol=1e-6)
        assert np.nansum(d.col("tokens"), dtype=np.float64) == np.nansum(e.col("tokens"), dtype=np.float64) == 60 * 512
        assert [float(d.col("step")[i]) for i, c, _ in d.nonfinite] == [7.0]  # the NaN, at its step
        assert (np.diff(d.col("step")) > 0).all()


@pytest.mark.parametrize("route", ["flat", "gateways"])
def test_a_rank_the_screen_asks_for_comes_as_written_and_no_row_is_lost(config, server, tmp_path, route,
                                                                        monkeypatch):
    """The ranks view picks rank 5: its host's follower is started again with the new request; from then on
    its rows come one by one, and every rank's rows stand for every row written, once (flat, and through
    gateways, where the host's old follower ran on until its worker ended, one more a rank picked: the new
    one ends it)."""
    monkeypatch.setenv("CLUSTERSHELL_GW_PYTHON_EXECUTABLE", sys.executable)
    writers = [MetricsWriter(tmp_path / f"lo{h}" / "run", rank=r, world_size=8, heartbeat_interval=1.0)
               for h in range(1, 5) for r in (2 * h - 2, 2 * h - 1)]
    store = Store()
    topo = topology(tmp_path, "lo[1-4]") if route == "gateways" else None
    src = Sources([f"lo[1-4]:{tmp_path}/%h/run"], store, poll=0.1,
                  connection=Connection(("-F", str(config)), 5.0, topo), digest=0.5)
    src.follow()
    try:
        write(writers, 1, 30)
        assert wait_for(lambda: all(written(store, r) == 30 for r in range(8)), 90), src.states()
        held = store.ranks[5].rows
        assert held < 30  # merged so far

        def lo3() -> set[int]:  # lo3's followers (this worker's server: another's tests run beside it)
            return {p for p, c in processes_with("'mstop-follower'", under=[server.proc.pid])
                    if Path(c.split(" ", 1)[0]).name.startswith("python")
                    and re.search(r" lo3 [0-9a-f]{16} [0-9]+ ?$", c)}

        before = lo3()
        assert src.show(5) == 1  # the job's rank and the shown one: lo3 (ranks 4, 5) asked again
        assert src.raw_ranks() == {0, 5} and src.show(5) == 0  # told again: nothing changes
        assert wait_for(lambda: not src.states(), 30), src.states()
        # one follower of lo3, started since: the old one ended (through a gateway its new one ends it)
        assert wait_for(lambda: len(got := lo3()) == 1 and not got & before, 20), (before, lo3())
        write(writers, 31, 60, pause=0.15)
        assert wait_for(lambda: all(written(store, r) == 60 for r in range(8)), 90), src.states()
    finally:
        for w in writers:
            w.close()
        src.stop()
    d = store.ranks[5]
    wt = d.col(WEIGHT)[-20:]
    assert np.isnan(wt).all() or (wt[~np.isnan(wt)] == 1).all(), wt  # its last rows as written
    for r in range(8):
        assert (np.diff(store.ranks[r].col("step")) > 0).all() and written(store, r) == 60


def test_one_host_followed_with_a_digest_is_asked_again_for_a_rank_and_loses_nothing(config, tmp_path):
    """``mstop lo1:/run --digest SEC``: one host, one ssh. Asked for rank 1 as written, its follower is started
    again at once (no fault said), and every rank's rows stand for every row written, once."""
    from mstop.sources.remote import RemoteSource, Target

    run = tmp_path / "lo1" / "run"
    writers = [MetricsWriter(run, rank=r, world_size=2, heartbeat_interval=1.0) for r in (0, 1)]
    store = Store()
    src = RemoteSource(Target("lo1", str(run)), store, poll=0.1, connection=Connection(("-F", str(config)), 5.0),
                       digest=0.5)
    src.follow()
    try:
        write(writers, 1, 20)
        assert wait_for(lambda: all(written(store, r) == 20 for r in range(2)), 60), src.state
        assert store.ranks[1].rows < 20  # merged
        assert src.want_raw(frozenset({0, 1}))
        said = set()
        for _ in range(60):  # 3 s: the restart happens at once; a fault would say "reconnecting, try 1 ..."
            said.add(src.state.connection)
            time.sleep(0.05)
        assert said == {"connected"}, said
        write(writers, 21, 40, pause=0.15)
        assert wait_for(lambda: all(written(store, r) == 40 for r in range(2)), 60), src.state
        assert src.state.connection == "connected", src.state  # never "reconnecting": no fault
    finally:
        for w in writers:
            w.close()
        src.stop()
    d = store.ranks[1]
    late = d.col(WEIGHT)[d.col("step") > 30] if WEIGHT in d.extras else np.ones(10)
    assert len(late) == 10 and not (late > 1).any(), late  # as written once asked for
    for r in range(2):
        assert (np.diff(store.ranks[r].col("step")) > 0).all()


def test_a_rank_file_rotated_on_a_host_followed_with_a_digest_loses_nothing(config, tmp_path):
    """Issue 58 item 8 in digest mode (a node set's hosts merge their ranks' rows): rank 3's file renamed away
    by a rotation mid-run (``mv rank3.csv rank3.csv.1``, the writer going on into it, then into a new
    rank3.csv): every row written stands in the store once, the steps in order, no file read again."""
    import os

    writers = [MetricsWriter(tmp_path / f"lo{h}" / "run", rank=r, world_size=4, heartbeat_interval=1.0)
               for h in (1, 2) for r in (2 * h - 2, 2 * h - 1)]
    store = Store()
    src = Sources([f"lo[1-2]:{tmp_path}/%h/run"], store, poll=0.1, connection=Connection(("-F", str(config)), 5.0),
                  digest=0.5)
    src.follow()
    try:
        write(writers, 1, 20, pause=0.05)
        assert wait_for(lambda: all(written(store, r) == 20 for r in range(4)), 60), src.states()
        run = tmp_path / "lo2" / "run"
        os.rename(run / "rank3.csv", run / "rank3.csv.1")
        write(writers, 21, 60, pause=0.05)  # 2 s: the writer notices within a second and makes a new file
        assert (run / "rank3.csv").exists()
        assert wait_for(lambda: all(written(store, r) == 60 for r in range(4)), 60), [written(store, r) for r in
                                                                                       range(4)]
        time.sleep(1.0)
    finally:
        for w in writers:
            w.close()
        src.stop()
    assert store.resets == 0 and written(store, 3) == 60
    d = store.ranks[3]
    assert (np.diff(d.col("step")) > 0).all() and d.last("step") == 60
