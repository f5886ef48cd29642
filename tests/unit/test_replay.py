"""``mstop demo --replay``: the recorded demo run played back live."""

from __future__ import annotations

import threading

from mstop.engine.store import Store
from mstop.sources.local import LocalSource
from mstop.sources.replay import RECORDING, replay


def test_replay_writes_every_recorded_line_with_present_times(tmp_path):
    clock = [5_000_000_000.0]

    def fake_clock():
        return clock[0]

    stop = threading.Event()
    orig_wait = stop.wait

    def advance(timeout=None):  # the replay waits: move the clock instead of sleeping
        clock[0] += timeout or 0.0
        return orig_wait(0)

    stop.wait = advance  # type: ignore[method-assign]
    replay(RECORDING, tmp_path, speed=1.0, stop=stop, clock=fake_clock)
    for name in ("rank0.csv", "rank1.csv", "rank0.events.jsonl", "rank1.events.jsonl"):
        assert len((tmp_path / name).read_text().splitlines()) == len((RECORDING / name).read_text().splitlines())
    store = Store()
    LocalSource(str(tmp_path), store).read_all()
    rec = Store()
    LocalSource(str(RECORDING), rec).read_all()
    assert store.rows == rec.rows == 1200 and store.bad_rows == 0
    assert store.ranks[0].col("loss").tolist() == rec.ranks[0].col("loss").tolist()
    t, r = store.ranks[0].col("time"), rec.ranks[0].col("time")
    assert t[0] >= 5_000_000_000.0  # moved to the present
    assert abs((t[-1] - t[0]) - (r[-1] - r[0])) < 1.0  # at the recorded pace


def test_replay_stops_when_asked(tmp_path):
    stop = threading.Event()
    stop.set()
    replay(RECORDING, tmp_path, stop=stop)
    assert len((tmp_path / "rank0.csv").read_text().splitlines()) == 1  # the header only
