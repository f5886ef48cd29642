"""Each figure against hand-computed values, on run directories read from real files."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mstop.engine import figures
from mstop.engine.figures import Options
from mstop.engine.store import Batch, Store
from mstop.sources.local import LocalSource
from tests.helpers.runs import start, steps, write_events, write_rank


def load(run) -> Store:
    store = Store()
    LocalSource(str(run), store).read_all()
    return store


def test_throughput_mfu_and_data_wait_over_the_recent_window(tmp_path):
    for r, st in enumerate([0.5, 1.0, 2.0]):
        write_events(tmp_path, r, [start("s1", flops_per_token=10.0, world_size=3, peak_flops=1e4)])
        # 5 old rows that the 20-row window must ignore, then 20 recent ones
        write_rank(tmp_path, r, steps(1, 5, step_time=100.0, data_wait=90.0, tokens=1000, mfu=0.99))
        tps = 1000 / st
        write_rank(tmp_path, r, steps(6, 25, t0=2000, step_time=st, data_wait=0.1 * st * (r + 1), tokens=1000,
                                      mfu=10.0 * tps / (3 * 1e4)))
    store = load(tmp_path)
    assert figures.tokens_per_s(store) == pytest.approx(1000.0)  # median of 2000, 1000, 500
    assert figures.data_wait_frac(store) == pytest.approx(0.3)  # max of 0.1, 0.2, 0.3
    assert figures.mfu(store, Options()) == pytest.approx(10.0 * 1000 / 3e4)
    # --peak-tflops: derived from tokens/s and the recorded FLOPs per token
    assert figures.mfu(store, Options(peak_flops=2e4)) == pytest.approx(10.0 * 1000 / (3 * 2e4))
    assert figures.step(store) == 25


def test_mfu_derived_when_the_column_is_empty(tmp_path):
    write_events(tmp_path, 0, [start("s1", flops_per_token=6.0, world_size=2, peak_flops=100.0)])
    write_rank(tmp_path, 0, steps(1, 4, step_time=2.0, tokens=10))
    assert figures.mfu(load(tmp_path), Options()) == pytest.approx(6.0 * 5.0 / (2 * 100.0))


def test_memory_headroom_per_rank_and_per_host(tmp_path):
    write_events(tmp_path, 0, [start("a", memory_source="device", host="n0")])
    write_events(tmp_path, 1, [start("a", memory_source="device", host="n0")])
    write_rank(tmp_path, 0, steps(1, 3, mem_peak=lambda s: 5e9 + s * 1e8 * (s == 2), mem_total=8e9, session="a"))
    write_rank(tmp_path, 1, steps(1, 3, mem_peak=7e9, mem_total=8e9, session="a"))
    store = load(tmp_path)
    assert figures.headrooms(store) == pytest.approx({"rank 0": 1 - 5.2e9 / 8e9, "rank 1": 0.125})
    assert figures.mem_headroom(store) == pytest.approx(0.125)
    host = tmp_path / "host"
    for r in (0, 1):
        write_events(host, r, [start("a", memory_source="host", host="n1")])
        write_rank(host, r, steps(1, 3, mem_peak=3e9, mem_total=8e9, session="a"))
    assert figures.mem_headroom(load(host)) == pytest.approx(1 - 6e9 / 8e9)  # the host's RAM is shared


def test_loss_and_debiased_ema(tmp_path):
    write_rank(tmp_path, 1, steps(1, 3, loss=lambda s: float(s)))
    write_rank(tmp_path, 2, steps(1, 3, loss=9.0))
    store = load(tmp_path)
    assert figures.loss(store) == 3.0  # the lowest rank present
    assert figures.loss_ema(store, Options(ema_weight=0.5)) == pytest.approx(2.125 / 0.875)
    assert figures.ema(np.array([1.0, 2.0, 3.0]), 0.0) == 3.0


def test_nan_loss_is_shown_and_skipped_by_the_ema(tmp_path):
    write_rank(tmp_path, 0, steps(1, 3, loss=lambda s: {1: 1.0, 2: 3.0, 3: "nan"}[s]))
    store = load(tmp_path)
    assert math.isnan(figures.loss(store))
    assert figures.loss_ema(store, Options(ema_weight=0.5)) == pytest.approx((0.5 * (0.5 * 1 + 3)) / 0.75)
    write_rank(tmp_path / "empty", 0, steps(1, 3, loss=lambda s: 2.0 if s == 1 else None))
    assert figures.loss(load(tmp_path / "empty")) == 2.0  # an empty cell is missing, not NaN


def test_resume_from_an_earlier_checkpoint(tmp_path):
    write_events(tmp_path, 0, [start("A", t=0), {"time": 5, "kind": "checkpoint", "step": 5, "path": "c5"},
                               start("B", t=20)])
    write_rank(tmp_path, 0, steps(1, 10, session="A", loss=1.0))
    write_rank(tmp_path, 0, steps(6, 12, session="B", t0=1100, loss=2.0))
    store = load(tmp_path)
    d = store.ranks[0]
    assert d.col("step")[d.effective()].tolist() == list(range(1, 13))
    assert figures.repeated_steps(store) == 5 and figures.segments(store) == 2
    assert figures.step(store) == 12 and figures.loss(store) == 2.0
    assert figures.last_checkpoint(store) == {"step": 5, "time": 5.0, "path": "c5"}


@pytest.mark.parametrize("case, expected", [
    ("empty", "waiting"), ("start only", "starting"), ("recent", "running"), ("old", "stalled"),
    ("ended", "finished"), ("restarted", "starting"),
])
def test_status(tmp_path, case, expected):
    now = 10_000.0
    tmp_path.mkdir(exist_ok=True)
    if case != "empty":
        write_events(tmp_path, 0, [start("A", t=now - 500)])
    if case in ("recent", "old", "ended", "restarted"):
        t0 = now - 100 if case != "recent" else now - 10
        write_rank(tmp_path, 0, steps(1, 5, session="A", t0=t0, dt=1.0, step_time=1.0))
    if case == "ended":
        write_events(tmp_path, 0, [{"time": now - 90, "kind": "end", "session": "A"}])
    if case == "restarted":
        write_events(tmp_path, 0, [start("B", t=now - 5)])
    assert figures.status(load(tmp_path), Options(clock=lambda: now)) == expected


def test_stall_threshold_follows_the_step_time(tmp_path):
    write_rank(tmp_path, 0, steps(1, 20, dt=30.0, step_time=30.0))  # slow steps: 10 x 30 s
    store = load(tmp_path)
    assert figures.stall_after(store) == 300.0
    last = 1000.0 + 20 * 30.0
    assert figures.status(store, Options(clock=lambda: last + 200)) == "running"
    assert figures.status(store, Options(clock=lambda: last + 301)) == "stalled"


def test_series_downsampling_keeps_extremes_and_nans(tmp_path):
    def loss(s):
        return "nan" if s == 5000 else 50.0 if s == 7777 else -3.0 if s == 123 else 1.0 + (s % 7) / 10
    write_rank(tmp_path, 0, steps(1, 10_000, loss=loss))
    store = load(tmp_path)
    xs, ys = store.series(0, "loss", 60)
    assert len(xs) <= 60 and np.all(np.diff(xs) >= 0)
    assert 50.0 in ys and -3.0 in ys and np.isnan(ys).sum() == 1 and xs[np.isnan(ys)][0] == 5000
    xs, ys = store.series(0, "loss", 60, steps=(4000, 6000))
    assert xs.min() >= 4000 and xs.max() <= 6000 and np.isnan(ys).any()
    assert len(store.series(0, "loss", 100_000)[0]) == 10_000


def test_memory_per_row_is_under_100_bytes(tmp_path):
    """84 B of values a row (time and step in float64, 17 columns in float32), one byte of session, and
    at most a sixteenth of slack: 91 B (the whole process must stay under 100 B at 10,000 ranks)."""
    write_rank(tmp_path, 0, steps(1, 50_000, loss=1.0))
    store = load(tmp_path)
    assert store.rows == 50_000 and store.nbytes() / store.rows < 91
    assert store.table.arrays["session"].itemsize == 1


def test_a_rank_of_many_sessions_keeps_every_rows_session():
    """A byte a row holds a rank's session while it has fewer than 256; the 256th widens it, and every
    row keeps its session (and the timeline its rows), read a row at a time or in one batch."""
    from mstop.formats.parse import N_EXACT, NUMERIC, Rows

    def rows(first: int, names: list[str]) -> Rows:
        n = len(names)
        exact = np.column_stack([1000.0 + np.arange(first, first + n), np.arange(first, first + n, dtype=float)])
        floats = np.ones((n, len(NUMERIC) - N_EXACT), np.float32)
        return Rows(exact, floats, {}, np.arange(n, dtype=np.int32), names)

    one, batch = Store(), Store()
    names = [f"s{k}" for k in range(300)]
    for k, name in enumerate(names):
        one.append(Batch.of(0, rows(k, [name])))
    batch.append(Batch.of(0, rows(0, names[:200])))
    batch.append(Batch.of(0, rows(200, names[200:])))
    for store in (one, batch):
        d = store.ranks[0]
        assert d.col("session").tolist() == list(range(300))
        assert [s.session for s in d.segments] == names and d.effective().all()
    assert one.table.arrays["session"].itemsize == 4


def test_long_series_from_block_summaries_keep_extremes_and_nans(tmp_path):
    def loss(s):
        return "nan" if s == 50_000 else "inf" if s == 60_001 else 90.0 if s == 77_777 else -5.0 if s == 1234 \
            else 1.0 + (s % 13) / 10
    write_rank(tmp_path, 0, steps(1, 100_000, loss=loss))
    store = load(tmp_path)
    assert store.ranks[0].monotonic and store.rows == 100_000
    xs, ys = store.series(0, "loss", 90)
    assert len(xs) <= 90 and np.all(np.diff(xs) > 0)
    assert 90.0 in ys and -5.0 in ys and np.isinf(ys).sum() == 1 and np.isnan(ys).sum() == 1
    assert xs[np.isnan(ys)][0] == 50_000 and xs[np.isinf(ys)][0] == 60_001
    xs, ys = store.series(0, "loss", 90, steps=(40_000, 70_000))
    assert xs.min() >= 40_000 and xs.max() <= 70_000 and np.isnan(ys).sum() == 1 and np.isinf(ys).sum() == 1
    assert -5.0 not in ys and 90.0 not in ys  # outside the range


def test_a_snapshot_copies_only_the_ranks_that_changed_and_shows_every_change(tmp_path):
    """A frame's snapshot reuses the frozen copy of a rank nothing touched since the last one (10,000 ranks
    cost 0.1 s a frame to copy); new rows, new events and a reset each make a fresh copy that shows them."""
    run = tmp_path / "run"
    for r in range(3):
        write_events(run, r, [start("s1", t=999.0)])
        write_rank(run, r, steps(1, 5, t0=1000.0, loss=1.0))
    store = Store()
    src = LocalSource(str(run), store)
    src.read_all()
    a = store.snapshot()
    write_rank(run, 1, steps(6, 6, t0=1000.0, loss=1.0))  # rank 1: a row
    write_events(run, 2, [{"time": 1010.0, "kind": "checkpoint", "step": 5, "path": "ck"}])  # rank 2: an event
    src.read_all()
    b = store.snapshot()
    assert b.ranks[0] is a.ranks[0]  # untouched: the same copy
    assert b.ranks[1] is not a.ranks[1] and (a.ranks[1].rows, b.ranks[1].rows) == (5, 6)
    assert b.ranks[2] is not a.ranks[2] and len(a.ranks[2].checkpoints) == 0 and len(b.ranks[2].checkpoints) == 1
    store.reset_rank(0)
    c = store.snapshot()
    assert c.ranks[0] is not b.ranks[0] and c.ranks[0].rows == 0 and b.ranks[0].rows == 5


@pytest.mark.parametrize("reader", ["arrow", "pandas"])
def test_rows_appended_after_a_large_read_do_not_copy_the_rows_read(tmp_path, monkeypatch, reader):
    """A long run read in one go, then followed: its rows land in the table with room after them, so the
    next rows land in place (copying 2,000 rows of each of 10,000 ranks at their first new row was a third of
    a core while following); the rows are the same either way."""
    import mstop.formats.parse as parse

    monkeypatch.setattr(parse, "TUNING", parse.ParseTuning(large_reader=reader))
    write_rank(tmp_path, 0, steps(1, 3000, loss=lambda s: 1.0 + (s % 2)))
    store = Store()
    store.keep_rows = None  # every row held (a store over its budget copies the rows it keeps: test_spill)
    src = LocalSource(str(tmp_path), store)
    src.read_all()
    d = store.ranks[0]
    before = dict(store.table.arrays), int(store.table.lo[d.slot])
    write_rank(tmp_path, 0, steps(3001, 3002, loss=lambda s: 2.0), header=False)
    src.read_all()
    assert d.rows == 3002 and d.col("step")[-3:].tolist() == [3000.0, 3001.0, 3002.0]
    assert d.col("loss")[-3:].tolist() == [1.0, 2.0, 2.0]
    assert all(store.table.arrays[c] is a for c, a in before[0].items()) and store.table.lo[d.slot] == before[1]
