"""Folds (issue 39 step 3): state that advances with the rows equals the same state computed from all the
rows, however the rows arrive (in pieces, rank by rank, interleaved, with a rank's file read again)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mstop.engine.figures import lasts
from mstop.engine.parse import NUMERIC, Rows
from mstop.engine.store import Store

N_EXACT = 2


def _rows(times: list[float], steps: list[int]) -> Rows:
    n = len(times)
    exact = np.column_stack([np.array(times, float), np.array(steps, float)]).reshape(n, N_EXACT)
    floats = np.full((n, len(NUMERIC) - N_EXACT), np.nan, np.float32)
    return Rows(exact, floats, {}, np.zeros(n, np.int32), ["s"], [], 0)


def _truth(store: Store) -> dict[int, tuple[float, float]]:
    """Each rank's last row, from its columns."""
    return {r: (float(d.col("time")[-1]), float(d.col("step")[-1])) for r, d in store.ranks.items() if d.rows}


batches = st.lists(st.tuples(st.integers(0, 40),  # rank
                             st.one_of(st.integers(1, 6), st.just(-1)),  # rows in the batch; -1: read again
                             st.floats(0, 1e9, allow_nan=False)), max_size=60)


@given(batches)
@settings(max_examples=200, deadline=None)
def test_the_last_rows_fold_equals_each_ranks_last_row_however_the_rows_came(plan):
    store = Store()
    snaps = []
    for k, (r, n, t) in enumerate(plan):
        if n == -1:
            store.reset_rank(r)
        else:
            store.ingest_rows(r, _rows([t + i for i in range(n)], [k * 10 + i for i in range(n)]))
        if k % 7 == 0:  # a snapshot keeps what the fold held when it was taken
            snaps.append((store.snapshot(), _truth(store)))
    for s, truth in [*snaps, (store.snapshot(), _truth(store))]:
        got = lasts(s)
        assert got.ranks == sorted(truth)
        assert {r: (float(a), float(b)) for r, a, b in zip(got.ranks, got.time, got.step)} == truth
