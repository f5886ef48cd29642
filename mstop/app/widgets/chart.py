"""Line charts that never stop the monitor: a drawing failure shows its message (drawn by canvas.py).

User-controlled text (run names, notes, column names, host names, paths) is always wrapped in
``rich.text.Text``, never parsed as markup.
"""

from __future__ import annotations

import math

import numpy as np
from rich.cells import cell_len
from rich.segment import Segment
from rich.text import Text
from textual.strip import Strip
from textual.widget import Widget

from ... import fmt
from ...view import Line, Series
from .canvas import Figure, Layer, Row, draw, to_text


def _finite(s: Series | None, log: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """A series' finite points; ``log``: those with a positive y, y as its log10 (a log axis is drawn as
    log10 with decade labels)."""
    if s is None:
        return np.empty(0), np.empty(0)
    x, y = np.asarray(s.x, np.float64), np.asarray(s.y, np.float64)
    ok = np.isfinite(y) & np.isfinite(x)
    if log:
        ok &= y > 0
        return x[ok], np.log10(y[ok])
    return x[ok], y[ok]


def _key(s: Series | None) -> tuple | None:
    """What identifies a series' drawing: its values (a few hundred points: cheap to compare)."""
    return None if s is None else (s.x.tobytes(), s.y.tobytes())


#: how a line is drawn, by its role: a marker that reads without colour, and a colour
MAIN_MARKERS = ("hd", "dot", "x", "o")  # a second or third line of this run differs by its glyph too
ROLES = {"raw": ("dot", "gray"), "baseline": ("+", "orange"), "right": ("*", "magenta")}
MAIN_COLORS = ("blue+", "green+", "red+", "cyan+", "yellow+")
#: what each marker looks like in the legend line
SAMPLES = {"hd": "▀▄", "dot": "••", "+": "++", "*": "**", "C": "C", "!": "!", "x": "xx", "o": "oo", "#": "##",
           "%": "%%", "&": "&&", "@": "@@"}
#: one glyph per evaluation metric (``eval_loss`` x, ``eval_acc`` o, ...): they read apart without colour
EVAL_MARKERS = ("x", "o", "#", "%", "&", "@")


#: runs overlaid from the runs list: their mark number as the marker (reads without colour), one colour each
OVERLAY_COLORS = ("orange", "green", "red", "cyan", "magenta", "yellow", "white", "gray")


def _style(line: Line, mains: int) -> tuple[str, str]:
    """(marker, colour) of a line, by its role; this run's own lines (``main``) differ by glyph and colour."""
    if line.role == "overlay":
        n = int(line.mark) if line.mark and line.mark.isdigit() else 2
        return line.mark or "?", OVERLAY_COLORS[(n - 2) % len(OVERLAY_COLORS)]
    return ROLES.get(line.role, (MAIN_MARKERS[mains % len(MAIN_MARKERS)], MAIN_COLORS[mains % len(MAIN_COLORS)]))


def _short(label: str) -> str:
    """A legend label's short form: ``eval eval_loss`` → ``eval_loss``, ``grad norm (right axis)`` →
    ``grad norm (R)``, ``checkpoint`` → ``ckpt``."""
    label = label.replace(" (right axis)", " (R)")
    if label.startswith("eval ") and any(w in label[5:].lower() for w in ("eval", "val", "test")):
        label = label[5:]
    return {"checkpoint": "ckpt", "smoothed": "smooth", "incident": "incid."}.get(label, label)


#: the narrowest y axis, as a share of its values' size: a line flat to four significant digits (a memory
#: headroom of 95.6195 to 95.62 %) is drawn flat on ticks of four digits, not on ticks of six (``95.6195 %``)
NARROWEST = 1e-3


def _readable(lo: float, hi: float) -> tuple[float, float]:
    """The y range widened about its middle to :data:`NARROWEST` of its size (a flat line stays flat)."""
    size = max(abs(lo), abs(hi))
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi - lo >= NARROWEST * size:
        return lo, hi
    mid, half = (lo + hi) / 2, NARROWEST * size / 2
    return mid - half, mid + half


class Chart(Widget):
    """A line chart of one or more series, drawn into text at the widget's size (see canvas.py).

    Lines use half-block marks rather than braille: block elements are in every monospace font, braille is
    missing from many (then it is drawn wider and the chart runs past its frame).
    """

    DEFAULT_CSS = "Chart { height: 1fr; }"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._inputs: tuple | None = None  # what was last shown: the same again changes nothing
        self._fig: Figure | None = None
        self._title = ""
        self._legend: list[tuple[str, str]] = []  # (marker, label) of everything drawn: the line above the plot
        self._tick_args: tuple | None = None  # set when drawn: ticks depend on the chart's size
        self._drawn: tuple | None = None  # (size, lines, strips, styles) of the last drawing

    def show_series(self, title: str, lines: list[Line], *, log: bool = False, right: Line | None = None,
                    hlines: list[float] = (), vlines: list[float] = (),
                    points: list[tuple[list[float], list[float], str]] = (), xkind: str = "step",
                    yunit: str = "", nan_x: list[float] = ()) -> None:
        """Draw ``lines`` (and ``right``, on its own axis) with 1-2-5 ticks: whole steps on the step axis,
        elapsed m:ss on the time axis, SI labels with ``yunit`` on y. ``nan_x``: where the drawn quantity
        was NaN/Inf (no point to draw): a red ``×`` on the x axis at each, and the axis runs to the last of
        them (a loss gone NaN must not read as a chart that simply ends). The same inputs as last time change
        nothing: the chart keeps its drawing."""
        key = (title, [(ln.label, ln.role, ln.mark, _key(ln.series)) for ln in lines], log,
               None if right is None else (right.label, _key(right.series)), tuple(hlines), tuple(vlines),
               [(tuple(xs), tuple(ys), label) for xs, ys, label in points], xkind, yunit, tuple(nan_x))
        if key == self._inputs:
            return
        self._inputs = key
        self._drawn = None
        fig = Figure()
        self._title = title
        spans: list[tuple[float, float, float, float]] = []  # (x lo, x hi, y lo, y hi) of each line drawn
        self._legend = []
        mains = 0
        for line in lines:
            xs, ys = _finite(line.series, log)
            if len(xs):
                marker, color = _style(line, mains)
                mains += line.role == "main"
                fig.layers.append(Layer(xs, ys, marker, color))
                self._legend.append((marker, line.label))
                spans.append((float(xs.min()), float(xs.max()), float(ys.min()), float(ys.max())))
        rspan = self._marks(fig, right, points, log)
        fig.hlines = [math.log10(y) if log else y for y in hlines if not log or y > 0]
        fig.vlines = list(vlines[:20])
        bad = [float(x) for x in nan_x if math.isfinite(float(x))]
        if bad:
            fig.xmarks += [(x, "×", "red") for x in bad]
            fig.xextent = [min(bad), max(bad)]
            self._legend.append(("×", "NaN/Inf"))
            if spans:  # the axis and its ticks run over them too
                spans.append((min(bad), max(bad), spans[0][2], spans[0][3]))
        if log and spans:
            ticks = fmt.log_ticks(min(sp[2] for sp in spans), max(sp[3] for sp in spans))
            fig.yticks = (ticks, fmt.ticks([10 ** t for t in ticks], yunit, log=True))
        self._fig = fig
        # ticks depend on the chart's size: set when it is drawn (show_series may run before layout)
        self._tick_args = (spans, xkind, None if log else yunit, rspan) if spans else None
        self.refresh()

    def _marks(self, fig: Figure, right: Line | None,
               points: list[tuple[list[float], list[float], str]], log: bool) -> tuple[float, float] | None:
        """Add the right axis's line and the marks; the right axis's value range (None: nothing on it).

        Checkpoints ("C") sit on the x axis at their step, where no data point hides them nor they a point;
        each evaluation metric has its own glyph (x, o, #, ...), drawn over the lines; incidents ("!") last, at
        the value that raised them."""
        rs: list[float] = []
        if right is not None:  # a second quantity on its own axis (lr and grad norm differ by 10^4)
            xs, ys = _finite(right.series)
            if len(xs):
                marker, color = ROLES["right"]
                fig.layers.append(Layer(xs, ys, marker, color, right=True))
                self._legend.append((marker, f"{right.label} (right axis)"))
                rs += [float(ys.min()), float(ys.max())]
        evals = 0
        order = {"checkpoint": 0, "incident": 2}
        for xs, ys, label in sorted(points, key=lambda p: order.get(p[2], 1)):
            side = "right" if label.startswith("eval ") and "loss" not in label else "left"  # not loss units
            if label == "checkpoint":  # on the x axis itself: it hides no point, none hides it
                at = [float(x) for x in xs if math.isfinite(float(x))]
                fig.xmarks += [(x, "C", "white") for x in at]
                if at:
                    self._legend.append(("C", label))
                continue
            # the right axis is linear: on a log chart only the left (loss) axis is log
            xs, ys = _finite(Series(np.asarray(xs, np.float64), np.asarray(ys, np.float64)), log and side == "left")
            if not len(xs):
                continue
            if label == "incident":
                marker = "!"
            else:
                marker, evals = EVAL_MARKERS[evals % len(EVAL_MARKERS)], evals + 1
            fig.layers.append(Layer(xs, ys, marker, "white" if marker == "C" else "red+", right=side == "right",
                                    scatter=True))
            self._legend.append((marker, label + (" (right axis)" if side == "right" else "")))
            if side == "right":
                rs += [float(ys.min()), float(ys.max())]
        return (min(rs), max(rs)) if rs else None

    def _ticks(self, fig: Figure, spans: list[tuple[float, float, float, float]], xkind: str, yunit: str | None,
               rspan: tuple[float, float] | None, height: int) -> None:
        """Readable ticks: whole steps, elapsed time, SI labels (never raw unix seconds or ``34717.5``)."""
        lo, hi = min(s[0] for s in spans), max(s[1] for s in spans)
        count = max(2, min(6, self.size.width // 14 or 5))
        if xkind == "time":  # elapsed since the first point drawn (the title says from when)
            ticks = [lo + t for t in fmt.nice_ticks(0.0, hi - lo, count, whole=True)]
            fig.xticks = (ticks, [fmt.clock_tick(t, elapsed_from=lo) for t in ticks])
        else:
            ticks = fmt.nice_ticks(lo, hi, count, whole=xkind == "step")
            fig.xticks = (ticks, fmt.ticks(ticks))
        if yunit is not None:
            fig.yticks = self._yticks(min(s[2] for s in spans), max(s[3] for s in spans), yunit, height)
        if rspan is not None:
            fig.rticks = self._yticks(rspan[0], rspan[1], "", height)

    @staticmethod
    def _yticks(ylo: float, yhi: float, unit: str, height: int) -> tuple[list[float], list[str]]:
        if height < 8:  # room for one label: a round value mid-range (two would overwrite each other)
            mid = (ylo + yhi) / 2
            ticks = [next((r for r in (float(f"{mid:.{g}g}") for g in (1, 2, 3)) if ylo <= r <= yhi),
                          float(f"{mid:.3g}"))]
        elif unit == "B":  # round in the axis's binary unit (528.5 MiB), not in bytes (554,200,000 B)
            scale = fmt.binary_scale(max(abs(ylo), abs(yhi)))
            ticks = [t * scale for t in fmt.nice_ticks(ylo / scale, yhi / scale, min(5, height // 3))]
        else:
            ylo, yhi = _readable(ylo, yhi)
            ticks = fmt.nice_ticks(ylo, yhi, min(5, height // 3))
        return ticks, fmt.ticks(ticks, unit)

    def legend(self, width: int | None = None) -> Text:
        """What each mark stands for, in one line above the plot (never on the data): shown when the chart
        has more than one thing drawn. Each mark differs by its glyph, so it reads without colour. Narrower
        than ``width`` by shortening the words first (``eval eval_loss`` → ``eval_loss``, ``(right axis)`` →
        ``(R)``, ``checkpoint`` → ``ckpt``), then each label alike, so no mark's meaning falls off the end."""
        items = self._legend
        if len(items) < 2:
            return Text("")

        def line(labels: list[str]) -> str:
            return "".join(("  " if i else " ") + SAMPLES.get(m, m) + " " + lab
                           for i, ((m, _), lab) in enumerate(zip(items, labels)))

        labels = [lab for _, lab in items]
        if width is not None and len(line(labels)) > width:
            labels = [_short(lab) for lab in labels]
            longest = max(len(lab) for lab in labels)
            while len(line(labels)) > width and longest > 3:
                longest -= 1
                labels = [lab if len(lab) <= longest else lab[:longest - 1] + "…" for lab in labels]
        return Text(line(labels), no_wrap=True, overflow="ellipsis")

    def render(self) -> Text:
        """The chart as one rich Text (what :meth:`render_line` draws line by line)."""
        return to_text(self._lines())

    def render_line(self, y: int) -> Strip:
        """Line ``y`` of the chart for Textual's line API: no rich Text to convert on every frame."""
        lines = self._lines()
        strips, styles = self._drawn[2], self._drawn[3]
        strip = strips.get(y)
        if strip is None:
            width, base = self.size.width, styles.get("base")
            if base is None:
                base = styles["base"] = self.rich_style  # a lookup through the CSS: once per drawing
            segments, n = [], 0
            for chunk, style in lines[y] if y < len(lines) else []:
                st = styles.get(style)
                if st is None:
                    st = styles[style] = base + style if style is not None else base
                segments.append(Segment(chunk, st))
                n += cell_len(chunk)
            if n < width:
                segments.append(Segment(" " * (width - n), base))
            strip = strips[y] = Strip(segments, max(n, width)).crop(0, width) if n > width else \
                Strip(segments, width)
        return strip

    def _lines(self) -> list[Row]:
        """The chart's lines at its size, built once per change of series or size."""
        size = (self.size.width, self.size.height)
        drawn = self._drawn
        if drawn is None or drawn[0] != size:
            self._drawn = drawn = (size, self._build(), {}, {})  # lines, their strips, styles on the base
        return drawn[1]

    def _build(self) -> list[Row]:
        """Draw the plot (the legend line above it); a drawing failure shows its message instead of stopping
        the monitor."""
        if self.size.height < 5 or self.size.width < 24:
            return []  # too small to read: an empty panel beats an unreadable one
        try:
            fig = self._fig or Figure()
            title = self._title
            small = self.size.height < 12  # a short chart keeps its rows for the data: the legend joins the title
            legend = self.legend(max(24, self.size.width - len(title) - 3) if small else self.size.width)
            if small and legend.plain:
                title = f"{title}  |{legend.plain}" if title else legend.plain.strip()
            height = self.size.height - (1 if legend.plain and not small else 0)
            if self._tick_args is not None:
                self._ticks(fig, *self._tick_args, height=height)
            fig.title = title
            plot = draw(fig, self.size.width, height)
            if not legend.plain or small:
                return plot
            return [[(legend.plain, None)]] + plot
        except Exception as e:  # noqa: BLE001 - the screen must go on whatever a chart meets
            return [[(f"(chart unavailable: {type(e).__name__}: {e})", None)]]
