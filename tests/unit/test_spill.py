"""Memory bounded by a budget of rows (issue 39 step 6): a store's oldest rows go to its spill file and are
read back the same, to the bit, by every way a reader asks for rows; nothing is left on disk, nothing is lost
when the spill file cannot be written."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mstop.engine import spill
from mstop.engine.spill import SpillBudget
from mstop.engine.store import EXACT, FLOAT_COLS, FLOAT_INDEX, Batch, Store
from mstop.formats.parse import NUMERIC, Rows

N_EXACT = 2
NAMES = (*EXACT, *FLOAT_COLS, "session", "extra_metric")


def _rows(first_step: float, n: int, session: str, seed: int, extra: bool) -> Rows:
    """``n`` rows from ``first_step``: some columns vary, some are one value, NaN, -0.0 and Inf among them."""
    rng = np.random.default_rng(seed)
    exact = np.column_stack([1e9 + first_step * 2.5 + np.arange(n) * 2.5, first_step + np.arange(n)])
    floats = np.full((n, len(NUMERIC) - N_EXACT), np.nan, np.float32)
    floats[:, FLOAT_INDEX["loss"]] = rng.choice([1.5, np.nan, np.inf, -0.0, 2.25], n)
    floats[:, FLOAT_INDEX["step_time"]] = rng.uniform(0.5, 2.0, n)
    floats[:, FLOAT_INDEX["tokens"]] = 4096.0  # one value: held as that value
    if seed % 3 == 0:
        floats[:, FLOAT_INDEX["lr"]] = rng.uniform(0, 1e-3, n)
    if seed % 4 == 1:  # every float column one value: a rank may hold no varying column at all
        floats[:, FLOAT_INDEX["loss"]] = floats[:, FLOAT_INDEX["step_time"]] = floats[:, FLOAT_INDEX["lr"]] = 1.0
    extras = {"extra_metric": rng.uniform(0, 1, n).astype(np.float32)} if extra else {}
    return Rows(exact.reshape(n, N_EXACT), floats, extras, np.zeros(n, np.int32), [session])


batches = st.lists(st.tuples(st.integers(0, 2),  # rank
                             st.integers(1, 90),  # rows (a block of no varying column holds room for 64)
                             st.integers(0, 2),  # session (a new one resumes 5 steps back)
                             st.booleans(),  # the batch has the extra column
                             st.booleans()),  # a round of its own (Store.append) or with others (one Batch)
                   min_size=1, max_size=30)


def _feed(store: Store, plan: list, snaps: list | None = None) -> None:
    steps: dict[int, float] = {}
    pending: list = []
    for k, (r, n, sess, extra, alone) in enumerate(plan):
        first = steps.get(r, 0.0) + 1 - (5 if sess and r in steps else 0)
        steps[r] = first + n - 1
        rows = _rows(first, n, f"s{sess}", k, extra)
        if alone:
            if pending:
                store.append(Batch.round(pending))
                pending = []
            store.append(Batch.of(r, rows))
        else:
            pending.append((r, rows))
        if snaps is not None and k % 4 == 0:
            if pending:
                store.append(Batch.round(pending))
                pending = []
            snaps.append(store.snapshot())
    if pending:
        store.append(Batch.round(pending))


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


#: chunks of 4 rows, 2 always held: every run spills
SMALL = SpillBudget(keep_rows=0, chunk_rows=4, min_held=2)


@given(batches, st.data())
def test_rows_read_back_from_the_spill_file_are_the_rows_held(plan, data):
    held, spilled = Store(SpillBudget(keep_rows=None)), Store(SMALL)
    snaps: list = []
    _feed(held, plan)
    _feed(spilled, plan, snaps)
    for r, a in held.ranks.items():
        b = spilled.ranks[r]
        assert b.base + b.held_rows == a.rows == b.rows
        assert b.held_rows < SMALL.min_held + SMALL.chunk_rows  # at most a chunk over its share
        for name in NAMES:
            assert _bits(b.col(name)) == _bits(a.col(name)), name
            assert b.has_values(name) == a.has_values(name)
            lo = data.draw(st.integers(0, a.rows), "lo")
            hi = data.draw(st.integers(lo, a.rows + 3), "hi")
            assert _bits(b.span(name, lo, hi)) == _bits(a.col(name)[lo:hi]), (name, lo, hi)
            idx = np.array(sorted(data.draw(st.lists(st.integers(0, a.rows - 1), max_size=6), "idx")), np.int64)
            assert _bits(b.take(name, idx)) == _bits(a.col(name)[idx])
            assert _bits(b.take(name, idx[::-1])) == _bits(a.col(name)[idx[::-1]])  # again: the points kept
            i = data.draw(st.integers(-a.rows, a.rows - 1), "i")
            assert _bits(np.float64(b.at(name, i))) == _bits(np.float64(a.col(name)[i]))
        assert b.effective().tolist() == a.effective().tolist() and b.steady().tolist() == a.steady().tolist()
        if a.monotonic and len(a.segments) <= 1:
            for s in (0.5, 1.0, float(a.rows) / 2, float(a.rows), a.rows + 7.0):
                for side in ("left", "right"):
                    assert b.search_step(s, side) == int(np.searchsorted(a.col("step"), s, side))
        ga = [(s.session, s.first_row, s.first_step, s.first_time, s.first_step_time) for s in a.segments]
        gb = [(s.session, s.first_row, s.first_step, s.first_time, s.first_step_time) for s in b.segments]
        assert repr(ga) == repr(gb)
        assert b.ledger.sums == a.ledger.sums
    for snap in snaps:  # a snapshot taken before later spills reads the rows it had, the same
        for r, d in snap.ranks.items():
            live = spilled.ranks[r]
            for name in ("time", "step", "loss", "session"):
                assert _bits(d.col(name)) == _bits(live.col(name)[:d.rows])


def test_a_rank_holds_its_share_of_the_budget_and_a_long_run_stays_flat():
    """Rows arriving for ever: each rank holds at most its share of the budget and a chunk; the bytes held stop
    growing."""
    store = Store(SpillBudget(keep_rows=4 * 1000, chunk_rows=256, min_held=32))
    sizes = []
    for k in range(60):
        store.append(Batch.round([(r, _rows(1 + 100 * k, 100, "s0", k, False)) for r in range(4)]))
        sizes.append(store.nbytes())
    assert store.rows == 4 * 6000
    for d in store.ranks.values():
        assert 1000 <= d.held_rows < 1000 + 256 and d.base % 256 == 0
    # flat once the budget is reached (the blocks' slack moves a little), where every row held grew 6x
    assert max(sizes[30:]) <= 1.15 * max(sizes[10:30]) and sizes[-1] < 2 * sizes[10]
    assert store.spill.written > 0


def test_the_spill_file_is_private_and_never_left_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("MSTOP_SPILL_DIR", str(tmp_path))
    store = Store(SpillBudget(keep_rows=0, chunk_rows=4, min_held=1))
    store.append(Batch.of(0, _rows(1, 50, "s0", 1, False)))
    assert store.ranks[0].base >= 44
    assert os.listdir(tmp_path) == []  # unlinked at once: nothing to find, nothing left however mstop ends
    st_ = store.spill.stat()
    assert st_ is not None and stat.S_IMODE(st_.st_mode) == 0o600 and st_.st_nlink == 0


def test_a_spill_file_that_cannot_be_written_keeps_every_row_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("MSTOP_SPILL_DIR", str(tmp_path / "not-there"))
    store = Store(SpillBudget(keep_rows=0, chunk_rows=4, min_held=1))
    for k in range(5):
        store.append(Batch.of(0, _rows(1 + 10 * k, 10, "s0", k, False)))
    d = store.ranks[0]
    assert d.base == 0 and d.rows == 50 and d.col("step").tolist() == list(range(1, 51))
    assert [n for n in store.notes if "could not be moved out of memory" in n]


def test_the_budget_is_read_from_the_environment(monkeypatch):
    assert spill.env_int("X_UNSET", 7, 0) == 7
    monkeypatch.setenv("X_SET", "1_000")
    assert spill.env_int("X_SET", 7, 0) == 1000
    monkeypatch.setenv("X_SET", "all")
    assert spill.env_int("X_SET", 7, 0) is None
    monkeypatch.setenv("X_SET", "lots")
    assert spill.env_int("X_SET", 7, 0) == 7
    # read by each store made, not when mstop is imported: a setting made later is heard
    monkeypatch.setenv("MSTOP_SPILL_ROWS", "8")
    monkeypatch.setenv("MSTOP_KEEP_ROWS", "all")
    assert Store().spill_budget == SpillBudget(keep_rows=None, chunk_rows=8, min_held=4)
    monkeypatch.delenv("MSTOP_SPILL_ROWS")
    monkeypatch.delenv("MSTOP_KEEP_ROWS")
    assert Store().spill_budget == SpillBudget() and Store().keep_rows == 1_000_000


@pytest.mark.skipif(spill.fs_type("/dev/shm") != "tmpfs", reason="no RAM disk at /dev/shm here")
def test_a_spill_file_on_a_ram_disk_is_said_to_save_nothing(monkeypatch):
    monkeypatch.setenv("MSTOP_SPILL_DIR", "/dev/shm")
    store = Store(SpillBudget(keep_rows=0, chunk_rows=4, min_held=1))
    store.append(Batch.of(0, _rows(1, 20, "s0", 1, False)))
    assert store.ranks[0].base and [n for n in store.notes if "/dev/shm, a RAM disk: set MSTOP_SPILL_DIR" in n]
