"""A line chart drawn into text with numpy: half-block lines, marker glyphs, 1-2-5 ticks.

Why not plotext (which the monitor used until issue 18): building five charts' text with plotext, then
decoding its ANSI output back into rich text, was 60-110 ms of every frame here; this draws the same
charts in a few milliseconds. Lines are half blocks (``▀ ▄ █``: two points a cell vertically, in every
monospace font, unlike braille); a line whose role has a glyph (raw ``•``, baseline ``+``, right axis
``*``, overlaid runs by their digit, marks ``C ! x``) is drawn with it, so each reads without colour.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from rich.style import Style
from rich.text import Text

#: the colour names the chart uses, as rich colours
COLORS = {"blue+": "bright_blue", "green+": "bright_green", "red+": "bright_red", "cyan+": "bright_cyan",
          "yellow+": "bright_yellow", "gray": "grey50", "orange": "dark_orange", "magenta": "magenta",
          "green": "green", "red": "red", "cyan": "cyan", "yellow": "yellow", "white": "white"}
#: glyphs of the markers that are not half blocks
GLYPHS = {"dot": "•", "+": "+", "*": "*", "x": "x", "o": "o", "C": "C", "!": "!"}
AXIS = Style(color="grey62")
GUIDE = Style(color="grey35")


@dataclass
class Layer:
    """One thing drawn: ``xs``/``ys`` (finite), how (``hd``: a half-block line; else a glyph at each point)
    and in which colour; ``right``: on the right axis."""

    xs: np.ndarray
    ys: np.ndarray
    marker: str
    color: str
    right: bool = False
    scatter: bool = False  # points only, never joined


@dataclass
class Figure:
    """What a chart shows; :func:`draw` turns it into text of a given size."""

    title: str = ""
    layers: list[Layer] = field(default_factory=list)
    hlines: list[float] = field(default_factory=list)
    vlines: list[float] = field(default_factory=list)
    xticks: tuple[list[float], list[str]] | None = None
    yticks: tuple[list[float], list[str]] | None = None
    rticks: tuple[list[float], list[str]] | None = None
    #: marks on the x axis itself, (x, glyph, colour): checkpoints, which no data point may hide nor they one
    xmarks: list[tuple[float, str, str]] = field(default_factory=list)
    #: x values the axis runs over besides the layers' (NaN/Inf rows: no point, still a place on the axis)
    xextent: list[float] = field(default_factory=list)


def span(values: list[np.ndarray]) -> tuple[float, float]:
    """The range of some arrays, widened when it is a single value (a flat line sits mid-chart)."""
    vals = [v for v in values if len(v)]
    if not vals:
        return 0.0, 1.0
    lo, hi = min(float(v.min()) for v in vals), max(float(v.max()) for v in vals)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return 0.0, 1.0
    if hi - lo <= abs(hi) * 1e-12:
        pad = abs(lo) * 0.05 or 0.5
        return lo - pad, hi + pad
    return lo, hi


def _scale(v: np.ndarray, lo: float, hi: float, n: int) -> np.ndarray:
    """Values onto 0..n-1 (lo at 0); a range too wide for float64 (1e308 apart) still lands inside."""
    with np.errstate(all="ignore"):
        f = (np.asarray(v, np.float64) - lo) / (hi - lo)
        if not np.isfinite(hi - lo):  # scaled in two steps: each half of the range is finite
            f = (np.asarray(v, np.float64) / 2 - lo / 2) / (hi / 2 - lo / 2)
        f = np.nan_to_num(f, nan=0.0, posinf=1.0, neginf=0.0)
    return np.clip(np.rint(f * (n - 1)), 0, n - 1).astype(np.int64)


def _line_pixels(cols: np.ndarray, rows: np.ndarray, width: int, height: int) -> np.ndarray:
    """A (height, width) mask of a line through the points (column, pixel row), consecutive points joined:
    each column covers every pixel row its stretch of the line crosses."""
    lo = np.full(width, height, np.int64)
    hi = np.full(width, -1, np.int64)
    np.minimum.at(lo, cols, rows)
    np.maximum.at(hi, cols, rows)
    if len(cols) > 1:  # segments between points in different columns: the rows at each column they cross
        c0, c1, r0, r1 = cols[:-1], cols[1:], rows[:-1], rows[1:]
        n = np.abs(c1 - c0)
        far = n > 0
        if far.any():
            c0, c1, r0, r1, n = c0[far], c1[far], r0[far], r1[far], n[far]
            seg = np.repeat(np.arange(len(n)), n + 1)
            k = np.arange(len(seg)) - np.repeat(np.cumsum(n + 1) - (n + 1), n + 1)  # 0..n within a segment
            step = np.sign(c1 - c0)[seg]
            c = c0[seg] + step * k
            frac = k / n[seg]
            r_at = r0[seg] + (r1[seg] - r0[seg]) * frac  # the row where the segment crosses column c
            half = 0.5 * np.abs(r1[seg] - r0[seg]) / n[seg]  # half a column's worth of rise either side
            np.minimum.at(lo, c, np.rint(np.maximum(r_at - half, np.minimum(r0[seg], r1[seg]))).astype(np.int64))
            np.maximum.at(hi, c, np.rint(np.minimum(r_at + half, np.maximum(r0[seg], r1[seg]))).astype(np.int64))
    r = np.arange(height)[:, None]
    return (r >= lo[None, :]) & (r <= hi[None, :])


def _labels_row(width: int, cols: list[int], labels: list[str]) -> list[tuple[int, str]]:
    """(start column, label) for tick labels centred under their columns, a space apart, none cut."""
    out: list[tuple[int, str]] = []
    end = -1
    for c, label in zip(cols, labels):
        start = min(max(0, c - len(label) // 2), width - len(label))
        if start > end and start >= 0:
            out.append((start, label))
            end = start + len(label)
    return out


@dataclass
class _Frame:
    """Where things go: the plot's size and the value range of each axis."""

    pw: int
    ph: int
    x: tuple[float, float]
    y: tuple[float, float]
    r: tuple[float, float]

    def column_at(self, v: float) -> int:
        return int(_scale(np.array([v]), *self.x, self.pw)[0])

    def row(self, v: float, right: bool = False) -> int:
        return self.ph - 1 - int(_scale(np.array([v]), *(self.r if right else self.y), self.ph)[0])


#: one line of a chart: (text, style) runs
Row = list[tuple[str, "Style | None"]]


def to_text(rows: list[Row]) -> Text:
    """Lines of runs as one rich Text."""
    out = Text()
    for i, row in enumerate(rows):
        if i:
            out.append("\n")
        for chunk, style in row:
            out.append(chunk, style)
    return out


def draw(fig: Figure, width: int, height: int) -> list[Row]:
    """The figure as ``height`` lines of at most ``width`` cells: the title, the plot with its y ticks on the
    left (and the right axis's on the right), the x axis with its ticks, their labels."""
    ylab = max((len(s) for s in fig.yticks[1]), default=0) if fig.yticks else 0
    rlab = max((len(s) for s in fig.rticks[1]), default=0) if fig.rticks else 0
    right = rlab + 1 if rlab else 0
    pw, ph = width - ylab - 1 - right, height - 3  # the plot: less the title, the x axis and its labels
    if pw < 4 or ph < 1:
        return [[(fig.title[:width], None)]]

    def with_ticks(arrays: list[np.ndarray], ticks: tuple[list[float], list[str]] | None) -> tuple[float, float]:
        return span(arrays + ([np.array(ticks[0])] if ticks else []))

    fr = _Frame(pw, ph, with_ticks([ly.xs for ly in fig.layers] + [np.array(fig.xextent, np.float64)], fig.xticks),
                with_ticks([ly.ys for ly in fig.layers if not ly.right] + [np.array(fig.hlines)], fig.yticks),
                with_ticks([ly.ys for ly in fig.layers if ly.right], fig.rticks))
    top, bottom, guides = _raster(fig, fr)
    title = fig.title if len(fig.title) <= width else fig.title[: max(0, width - 1)] + "…"
    rows: list[Row] = [[(title.center(width).rstrip(), None)]]
    yrows = _tick_rows(fig.yticks, fr, False)
    rrows = _tick_rows(fig.rticks, fr, True)
    styles = _styles(fig)
    for r in range(ph):
        label = yrows.get(r)
        guide = guides[r, 0] == "─"  # a limit's line meets the axis
        row: Row = [((label or "").rjust(ylab) + (("┼" if guide else "┤") if label else ("├" if guide else "│")),
                     AXIS)]
        row += _plot_row(top[r], bottom[r], guides[r], styles)
        if right:
            label = rrows.get(r)
            row.append((("├" if label else "│") + (label or ""), AXIS))
        rows.append(row)
    return rows + _x_axis(fig, fr, ylab, bool(right))


def _styles(fig: Figure) -> dict:
    """Each layer's glyph and colour (the styles of the pairs a cell shows are made as they are met)."""
    return {"glyph": [None] + [GLYPHS.get(ly.marker, ly.marker[:1]) for ly in fig.layers],
            "colour": [None] + [COLORS.get(ly.color, ly.color) for ly in fig.layers]}


def _raster(fig: Figure, fr: _Frame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which layer holds each cell's upper and lower half (0: none; a glyph layer -i in ``top``), and the
    guide lines' characters under them."""
    pw, ph = fr.pw, fr.ph
    guides = np.full((ph, pw), " ", dtype="<U1")
    for y in fig.hlines:  # guides under the data
        if fr.y[0] <= y <= fr.y[1]:
            guides[fr.row(y), :] = "─"
    for x in fig.vlines:
        if fr.x[0] <= x <= fr.x[1]:
            guides[:, fr.column_at(x)] = "│"
    top = np.zeros((ph, pw), np.int64)
    bottom = np.zeros((ph, pw), np.int64)
    glyphs: list[tuple[int, np.ndarray, np.ndarray]] = []
    for i, ly in enumerate(fig.layers, start=1):
        if not len(ly.xs):
            continue
        lo, hi = fr.r if ly.right else fr.y
        cols = _scale(ly.xs, *fr.x, pw)
        if ly.marker == "hd" and not ly.scatter:
            pix = _line_pixels(cols, (2 * ph - 1) - _scale(ly.ys, lo, hi, 2 * ph), pw, 2 * ph)
            top[pix[0::2]] = i
            bottom[pix[1::2]] = i
        else:
            glyphs.append((i, ph - 1 - _scale(ly.ys, lo, hi, ph), cols))
    for i, rows, cols in glyphs:  # glyphs over lines, in the order drawn
        top[rows, cols] = -i
    return top, bottom, guides


def _tick_rows(ticks: tuple[list[float], list[str]] | None, fr: _Frame, right: bool) -> dict[int, str]:
    """Each tick's label by its row; labels that would sit on neighbouring rows (few rows for the ticks:
    the rows round 2,1,2 apart) are thinned to every other tick, so the spacing reads evenly."""
    lo, hi = fr.r if right else fr.y
    shown = [(fr.row(v, right), s) for v, s in zip(*ticks) if lo <= v <= hi] if ticks else []
    while len(shown) > 2 and min(abs(a[0] - b[0]) for a, b in zip(shown, shown[1:])) < 2:
        shown = shown[::2]
    return dict(shown)


def _plot_row(top: np.ndarray, bottom: np.ndarray, guides: np.ndarray, styles: dict) -> Row:
    """One row of the plot: each cell's character and style found with numpy, cells of one style as one run."""
    glyph, colour = styles["glyph"], styles["colour"]
    a, b = top.astype(np.int64), bottom.astype(np.int64)
    # a cell's look, as (foreground layer, background layer, character kind): equal looks make one run
    fgl = np.where(a < 0, -a, np.where(a > 0, a, b))
    bgl = np.where((a > 0) & (b > 0) & (a != b), b, 0)
    kind = np.where(a < 0, 1, np.where((a > 0) & (b > 0), np.where(a == b, 2, 3),
                                       np.where(a > 0, 3, np.where(b > 0, 4, 0))))
    key = (fgl * 1024 + bgl) * 8 + kind
    cuts = np.flatnonzero(key[1:] != key[:-1]) + 1
    row: Row = []
    cache = styles.setdefault("cache", {})
    for lo, hi in zip(np.concatenate([[0], cuts]), np.concatenate([cuts, [len(key)]])):
        k, f, g = int(kind[lo]), int(fgl[lo]), int(bgl[lo])
        if k == 0:
            row.append(("".join(guides[lo:hi]), GUIDE))
            continue
        ch = glyph[f] if k == 1 else "█" if k == 2 else "▀" if k == 3 else "▄"
        style = cache.get((f, g))
        if style is None:
            style = cache[(f, g)] = Style(color=colour[f], bgcolor=colour[g] if g else None)
        row.append((ch * (hi - lo), style))
    return row


def _x_axis(fig: Figure, fr: _Frame, ylab: int, right: bool) -> list[Row]:
    """The x axis (a tick mark at each tick) and the line of its labels."""
    axis = ["─"] * fr.pw
    cols, shown = [], []
    for v, s in zip(*(fig.xticks or ([], []))):
        if fr.x[0] <= v <= fr.x[1]:
            c = fr.column_at(v)
            axis[c] = "┬"
            cols.append(c)
            shown.append(s)
    labels = [" "] * (ylab + 1 + fr.pw)
    for start, s in _labels_row(fr.pw, cols, shown):
        labels[ylab + 1 + start:ylab + 1 + start + len(s)] = list(s)
    marked: dict[int, tuple[str, str]] = {}
    for x, glyph, colour in fig.xmarks:
        if fr.x[0] <= x <= fr.x[1]:
            marked[fr.column_at(x)] = (glyph[:1], colour)
    row: Row = [(" " * ylab + "└", AXIS)]
    last = 0
    for c in sorted(marked):
        if c > last:
            row.append(("".join(axis[last:c]), AXIS))
        glyph, colour = marked[c]
        row.append((glyph, Style(color=COLORS.get(colour, colour), bold=True)))
        last = c + 1
    row.append(("".join(axis[last:]) + ("┘" if right else ""), AXIS))
    return [row, [("".join(labels).rstrip(), AXIS)]]
