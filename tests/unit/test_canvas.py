"""The chart canvas: any series at any size draws exactly the lines asked for, inside the width, and the
marks land where their values say."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len

from mstop.app.widgets.canvas import Figure, Layer, draw, to_text


def test_a_rising_line_goes_from_bottom_left_to_top_right():
    fig = Figure(title="up", layers=[Layer(np.arange(10.0), np.arange(10.0), "hd", "blue+")],
                 xticks=([0.0, 5.0], ["0", "5"]), yticks=([0.0, 9.0], ["0", "9"]))
    lines = to_text(draw(fig, 30, 12)).plain.split("\n")
    plot = lines[1:-2]
    assert plot[0].startswith("9┤") and plot[-1].startswith("0┤")
    assert plot[-1][2] in "▄▀█" and plot[0].rstrip()[-1] in "▄▀█"  # first point low left, last high right
    assert lines[-2].startswith(" └┬") and lines[-1].split() == ["0", "5"]


def test_glyph_lines_keep_their_glyph_and_marks_sit_over_lines():
    x = np.arange(5.0)
    fig = Figure(layers=[Layer(x, x, "hd", "blue+"), Layer(x, x, "dot", "gray"),
                         Layer(np.array([2.0]), np.array([2.0]), "C", "white", scatter=True)])
    text = to_text(draw(fig, 20, 10)).plain
    assert text.count("C") == 1 and text.count("•") == 4  # the checkpoint hides one raw point


_ends = st.tuples(st.floats(-1e13, 1e13, allow_nan=False), st.floats(1e-9, 1e13)).filter(
    lambda e: e[1] > abs(e[0]) * 1e-9)

@given(_ends, st.integers(2, 6), st.sampled_from(["", "B", "s", "%", "tok/s"]))
def test_a_linear_axis_labels_every_tick_apart_in_one_format(lo_width, count, unit):
    """Whatever the range: one scale and one number of decimals for the whole axis, and no two ticks alike."""
    from mstop import fmt

    lo, width = lo_width
    ticks = fmt.nice_ticks(lo, lo + width, count)
    labels = fmt.ticks(ticks, unit)
    assert len(labels) == len(ticks)
    assert len(set(labels)) == len(set(ticks)), (ticks, labels)
    numbers = [lab.split(" ")[0] for lab in labels]
    suffixes = {lab.partition(" ")[2] for lab in labels}
    assert len(suffixes) == 1, labels  # one unit and prefix
    sci = {("e" in n) for n in numbers if n != "0"}
    assert len(sci) <= 1, labels  # never 0.001 beside 5.0e-04
    if sci != {True}:
        assert len({len(n.partition(".")[2]) for n in numbers}) == 1, labels  # one number of decimals


@given(st.floats(-12, 12), st.floats(0.01, 20))
def test_a_log_axis_ticks_at_values_people_read(lo, width):
    """Log ticks are decades, 1-2-5 or 1..9 times a power of ten, or round linear steps of a narrow range;
    their labels differ and never show a log10 exponent (a negative label for positive values)."""
    import math

    from mstop import fmt

    ticks = fmt.log_ticks(lo, lo + width)
    assert ticks and all(lo - 1e-9 <= t <= lo + width + 1e-9 for t in ticks)
    labels = fmt.ticks([10 ** t for t in ticks], log=True)
    assert len(set(labels)) == len(labels) and not any(lab.startswith("-") for lab in labels), labels
    if width >= math.log10(2):  # wide enough for two round values
        assert len(ticks) >= 2
    for t, label in zip(ticks, labels):  # each a round value its short label reads exactly (3, 0.5, 1.05)
        number = label.split(" ")[0]
        scale = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}.get(label.split(" ")[-1], 1.0) if " " in label else 1.0
        assert math.isclose(10 ** t, float(number) * scale, rel_tol=1e-9) and len(number) <= 10, (ticks, labels)


values = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.floats(-1e6, 1e6))


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
