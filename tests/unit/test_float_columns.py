"""A rank's float columns held only once they vary (issue 39 step 4, memory a row): every column reads back
exactly what was appended, however the rows came and whichever columns were constant, empty or varying; a
frozen copy keeps what it saw."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mstop.engine.store import FLOAT_COLS, FloatColumns

NF = len(FLOAT_COLS)
cell = st.sampled_from([np.nan, 0.0, 1.0, 1.0, 1.0, 2.5, -0.0, np.inf])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.lists(cell, min_size=NF, max_size=NF), min_size=1, max_size=90), min_size=1,
                max_size=8))
def test_every_column_reads_back_what_was_appended(batches):
    cols = FloatColumns()
    seen: list[np.ndarray] = []
    frozen: list[tuple[FloatColumns, np.ndarray]] = []
    for b in batches:
        values = np.array(b, np.float32)
        cols.extend(values)
        seen.append(values)
        frozen.append((cols.frozen(), np.concatenate(seen)))
    whole = np.concatenate(seen)
    for c, rows in [(cols, whole), *frozen]:
        assert c.n == len(rows)
        for j in range(NF):
            np.testing.assert_array_equal(c.column(j), rows[:, j])
    # a column is an array only once a row differs from its first
    varying = {j for j in range(NF) if not np.array_equal(whole[:, j], np.full(len(whole), whole[0, j]),
                                                          equal_nan=True)}
    assert set(np.flatnonzero(cols.where >= 0).tolist()) == varying
    assert cols.nbytes <= 4 * len(varying) * (len(whole) + len(whole) // 16 + 64) + 4 * 64 * NF
