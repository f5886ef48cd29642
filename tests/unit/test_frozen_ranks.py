"""A snapshot's rank read late equals the rank frozen when the snapshot was taken (issue 39 step 4).

A snapshot holds a rank that only got rows since its last frozen copy as what it took of it (its rows'
bounds, its ledger's running figures, its file's time) and makes the record when a reader first asks
(mstop.engine.store.FrozenRanks). Here stores are fed read rounds of one row a rank (the path that takes
that shortcut), rounds of several rows, rows that go back a step, new sessions, literal NaN, events,
checkpoints, file times, resets and spills in random order; at every snapshot each rank is also frozen the
old way, at once, and its record read (or not) at random moments afterwards must say the same.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mstop.engine.spill import SpillBudget
from mstop.engine.store import FLOAT_INDEX, Batch, FrozenRanks, Store
from mstop.formats.parse import N_EXACT, NUMERIC, Rows

RANKS = 4

_round = st.tuples(st.just("round"), st.lists(st.integers(0, RANKS - 1), min_size=1, max_size=RANKS, unique=True),
                  st.sampled_from(["a", "a", "a", "a", "b"]), st.sampled_from([1, 1, 1, 1, 2, 0, -1]))
op = st.one_of(
    _round, _round, _round, _round, _round, _round, _round, _round,
    st.tuples(st.just("round"), st.lists(st.integers(0, RANKS - 1), min_size=1, max_size=RANKS, unique=True),
              st.sampled_from(["a", "a", "a", ""]), st.integers(0, 1)),
    st.tuples(st.just("rows"), st.integers(0, RANKS - 1), st.sampled_from(["a", "b", ""]), st.integers(1, 5)),
    st.tuples(st.just("nan"), st.integers(0, RANKS - 1), st.sampled_from(["a", "b"]), st.just(1)),
    st.tuples(st.just("mtime"), st.integers(0, RANKS - 1), st.just(""), st.integers(0, 3)),
    st.tuples(st.just("event"), st.integers(0, RANKS - 1), st.sampled_from(["a", "b"]),
              st.sampled_from(["checkpoint", "checkpoint", "start", "end", "abort", "heartbeat"])),
    st.tuples(st.just("reset_rows"), st.integers(0, RANKS - 1), st.just(""), st.just(0)),
    st.tuples(st.just("reset_events"), st.integers(0, RANKS - 1), st.just(""), st.just(0)),
    st.tuples(st.just("snapshot"), st.just(0), st.just(""), st.booleans()),
    st.tuples(st.just("snapshot"), st.just(0), st.just(""), st.booleans()),
    st.tuples(st.just("snapshot"), st.just(0), st.just(""), st.booleans()),
    st.tuples(st.just("snapshot"), st.just(0), st.just(""), st.booleans()),
    st.tuples(st.just("read"), st.integers(0, 50), st.integers(0, RANKS - 1), st.just(0)),
)


def _rows(t0: float, step0: float, n: int, session: str, nan: bool = False) -> Rows:
    exact = np.column_stack([t0 + np.arange(n, dtype=float), step0 + np.arange(n, dtype=float)])
    floats = np.full((n, len(NUMERIC) - N_EXACT), np.nan, np.float32)
    floats[:, FLOAT_INDEX["loss"]] = 2.0 + 0.01 * np.arange(n)
    floats[:, FLOAT_INDEX["step_time"]] = 0.5 + 0.1 * (np.arange(n) % 3)
    floats[:, FLOAT_INDEX["data_wait"]] = 0.05
    floats[:, FLOAT_INDEX["tokens"]] = 128
    nonfinite = []
    if nan:
        floats[-1, FLOAT_INDEX["loss"]] = np.nan
        nonfinite.append((n - 1, "loss", math.nan))
    return Rows(exact, floats, {}, np.zeros(n, np.int32), [session], nonfinite, 0)


def _print(d) -> tuple:
    """What a reader can read of a rank record, as plain values (NaN as a string: equal to itself)."""
    def vals(a):
        return tuple("nan" if x != x else x for x in np.asarray(a, dtype=np.float64).tolist())
    led = d.ledger
    cols = tuple(vals(d.col(c)) for c in ("time", "step", "loss", "step_time", "data_wait", "session"))
    return (d.rank, d.rows, d.base, cols, vals(d.effective()), vals(d.steady()), d.monotonic, d.csv_mtime,
            led.settled, vals(led.sums), vals([led.top]), vals(led.sess_t),  # (its saved rows and checkpoints are
            # shared with the live ledger: only classifying reads them)
            [(s.session, s.first_row, s.first_step) for s in d.segments], list(d.nonfinite),
            len(d.checkpoints), dict(d.ends), len(d.aborts), d.last_heartbeat, d.ev_stamp)


@pytest.mark.parametrize("budget", [SpillBudget(keep_rows=None),  # every row held
                                    SpillBudget(keep_rows=0, chunk_rows=2, min_held=2)],  # past two rows: spilled
                         ids=["held", "spilled"])
@given(ops=st.lists(op, min_size=6, max_size=40))
def test_a_snapshots_rank_read_late_equals_the_rank_frozen_at_once(budget, ops):
    store = Store(budget)
    t, step = 1000.0, dict.fromkeys(range(RANKS), 1.0)
    for r in range(RANKS):  # every rank has a row of session "a": a round's row of "a" takes the short way
        store.append(Batch.of(r, _rows(t, 1.0, 1, "a")))
    store.snapshot()
    taken: list[tuple[FrozenRanks, dict[int, tuple]]] = []
    for kind, a, b, c in ops:
        t += 1.0
        if kind == "round":  # one row a rank (rows of a rank going back when c < 0), read together
            batches = []
            for r in a:
                step[r] += c
                batches.append((r, _rows(t, step[r], 1, b)))
            store.append(Batch.round(batches))
        elif kind in ("rows", "nan"):
            store.append(Batch.of(a, _rows(t, step[a] + 1, c, b, nan=kind == "nan")))
            step[a] += c
            t += c
        elif kind == "mtime":
            store.file_time(a, "csv", t + 100.0 * c)
        elif kind == "event":
            e = {"kind": c, "time": t, "session": b}
            if c == "checkpoint":
                e["step"] = step[a] - (int(t) % 3)
            if c == "abort":
                e["error"] = "boom"
            store.ingest_events(a, [e])
        elif kind == "reset_rows":
            store.reset_rank(a)
            step[a] = 0.0
        elif kind == "reset_events":
            store.reset_events(a)
        elif kind == "snapshot":
            with store.lock:  # the old way: every rank frozen at once, at the same moment
                want = {r: _print(d.frozen()) for r, d in store.ranks.items()}
                snap = store.snapshot()
            assert isinstance(snap.ranks, FrozenRanks) and sorted(snap.ranks) == sorted(want)
            if c:  # some read at once, the others later
                for r in list(snap.ranks)[::2]:
                    assert _print(snap.ranks[r]) == want[r]
            taken.append((snap.ranks, want))
        elif taken:  # a rank of an older snapshot read now
            ranks, want = taken[a % len(taken)]
            if b in want:
                assert _print(ranks[b]) == want[b]
    for ranks, want in taken:
        assert {r: _print(ranks[r]) for r in ranks} == want
        assert dict(ranks.items()).keys() == want.keys() and ranks.get(RANKS + 1) is None
