"""The ranks table's columns (issue 39 step 7: rows built only for the page drawn) give the rows, the order and
the columns a list of RankRow gave: each row equal, every sort equal to sorting the rows, ties in rank order."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from mstop.view import RankRow, RankTable

maybe = st.one_of(st.none(), st.floats(-1e6, 1e6, allow_nan=False), st.sampled_from([0.0, 1.0, 1.0]))
rows = st.lists(st.tuples(maybe, maybe, st.one_of(st.none(), st.integers(0, 50)), st.sampled_from(["a", "b", "?"]),
                          st.sampled_from([None, "S", "T", "ended"])), max_size=30)


def _key(name: str):
    def key(r: RankRow):
        val = getattr(r, name)
        missing = val is None or (isinstance(val, float) and math.isnan(val))
        return (missing, val if not missing else 0)
    return key


@given(rows)
def test_the_columns_are_the_rows_and_sort_as_the_rows_did(spec):
    want = [RankRow(rank=r, host=host, step=step, step_time=a, tokens_per_s=b, headroom=None, data_wait=a, age=b,
                    state=state) for r, (a, b, step, host, state) in enumerate(spec)]
    table = RankTable({
        "rank": np.arange(len(spec), dtype=float), "host": [w.host for w in want],
        "step": np.array([np.nan if w.step is None else w.step for w in want], float),
        "step_time": np.array([np.nan if w.step_time is None else w.step_time for w in want], float),
        "tokens_per_s": np.array([np.nan if w.tokens_per_s is None else w.tokens_per_s for w in want], float),
        "data_wait": np.array([np.nan if w.data_wait is None else w.data_wait for w in want], float),
        "age": np.array([np.nan if w.age is None else w.age for w in want], float),
        "state": [w.state for w in want]})
    assert list(table) == want and len(table) == len(want)
    for name in ("step", "step_time", "tokens_per_s", "age", "host", "state", "headroom"):
        assert table.column(name) == [getattr(w, name) for w in want]
        for reverse in (False, True):
            got = [table[i] for i in table.order(name, reverse)]
            assert got == sorted(want, key=_key(name), reverse=reverse), (name, reverse)
    for w in want:
        assert table[table.index_of(w.rank)] == w
    assert table.index_of(len(want) + 5) is None
