"""The tests of tests/unit/test_canvas.py that take over a second each here: out of the developer's loop."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len

from mstop.app.widgets.canvas import Figure, Layer, draw, to_text

values = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.floats(-1e6, 1e6))

@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.lists(st.tuples(values, values), max_size=40), st.sampled_from(["hd", "dot", "+", "C"]),
                          st.booleans()), max_size=4),
       st.integers(0, 200), st.integers(0, 60), st.lists(values, max_size=3), st.lists(values, max_size=3))
def test_any_series_at_any_size_fits(layers, width, height, hlines, vlines):
    fig = Figure(title="t")
    for points, marker, right in layers:
        xs = np.array([p[0] for p in points], np.float64)
        ys = np.array([p[1] for p in points], np.float64)
        ok = np.isfinite(xs) & np.isfinite(ys)  # the chart gives the canvas finite points only
        fig.layers.append(Layer(xs[ok], ys[ok], marker, "blue+", right=right))
    fig.hlines = [v for v in hlines if np.isfinite(v)]
    fig.vlines = [v for v in vlines if np.isfinite(v)]
    rows = draw(fig, width, height)
    if width - 1 >= 4 and height - 3 >= 1:
        assert len(rows) == height
    text = to_text(rows).plain
    assert all(cell_len(line) <= width for line in text.split("\n"))
    assert not any(ord(c) < 32 and c != "\n" for c in text)


