"""Line charts (plotext) that never stop the monitor: a plotting failure shows its message.

User-controlled text (run names, notes, column names, host names, paths) is always wrapped in
``rich.text.Text``, never parsed as markup.
"""

from __future__ import annotations

import math
import re

import numpy as np
from rich.text import Text
from textual_plotext import PlotextPlot

from ... import fmt
from ...view import Series


def _finite(s: Series | None) -> tuple[list[float], list[float]]:
    if s is None:
        return [], []
    ok = np.isfinite(s.y) & np.isfinite(s.x)
    return s.x[ok].tolist(), s.y[ok].tolist()


def _key(s: Series | None) -> tuple | None:
    """What identifies a series' drawing: its values (a few hundred points: cheap to compare)."""
    return None if s is None else (s.x.tobytes(), s.y.tobytes())


def _log_ticks(lo: float, hi: float) -> list[float]:
    """Tick positions (log10 values) for a log axis over [lo, hi]: the decades inside, else the ends and
    their geometric middle (a range inside one decade)."""
    decades = [float(k) for k in range(math.ceil(lo), math.floor(hi) + 1)]
    if len(decades) >= 2:
        step = max(1, len(decades) // 5)
        return decades[::step]
    return sorted({lo, (lo + hi) / 2, hi})


#: how a line is drawn, by its role: a marker that reads without colour, and a colour
MAIN_MARKERS = ("hd", "dot", "x", "o")  # a second or third line of this run differs by its glyph too
ROLES = {"raw": ("dot", "gray"), "baseline": ("+", "orange"), "right": ("*", "magenta")}
MAIN_COLORS = ("blue+", "green+", "red+", "cyan+", "yellow+")
#: what each marker looks like in the legend line
SAMPLES = {"hd": "▀▄", "dot": "••", "+": "++", "*": "**", "C": "C", "!": "!", "x": "xx", "o": "oo"}


#: runs overlaid from the runs list: their mark number as the marker (reads without colour), one colour each
OVERLAY_COLORS = ("orange", "green", "red", "cyan", "magenta", "yellow", "white", "gray")
#: a line whose label starts with this is an overlaid run: "run 2: NAME" (marker "2", legend "NAME")
OVERLAY = re.compile(r"^run (\d): (.*)$", re.S)


def _role(label: str) -> str:
    return "raw" if label == "raw" else "baseline" if label.startswith("baseline") else "main"


def _style(label: str, mains: int) -> tuple[str, str, str]:
    """(marker, colour, legend label) of a line."""
    m = OVERLAY.match(label)
    if m is not None:
        n = int(m.group(1))
        return m.group(1), OVERLAY_COLORS[(n - 2) % len(OVERLAY_COLORS)], m.group(2)
    role = _role(label)
    marker, color = ROLES.get(role, (MAIN_MARKERS[mains % len(MAIN_MARKERS)], MAIN_COLORS[mains % len(MAIN_COLORS)]))
    return marker, color, label


class Chart(PlotextPlot):
    """A line chart of one or more series (one plot object per widget: its own ``self.plt``).

    Lines use half-block "hd" marks rather than braille: block elements are in
    every monospace font, braille is missing from many (then it is drawn wider
    and the chart runs past its frame).
    """

    def show_series(self, title: str, lines: list[tuple[str, Series | None]], *, log: bool = False,
                    right: tuple[str, Series | None] | None = None,
                    hlines: list[float] = (), vlines: list[float] = (),
                    points: list[tuple[list[float], list[float], str]] = (), xkind: str = "step",
                    yunit: str = "") -> None:
        """Draw ``lines`` (and ``right``, on its own axis) with 1-2-5 ticks: whole steps on the step axis,
        elapsed m:ss on the time axis, SI labels with ``yunit`` on y. The same inputs as last time change
        nothing: the chart keeps its drawing (plotext building a chart's text is most of a frame)."""
        key = (title, [(label, _key(s)) for label, s in lines], log,
               None if right is None else (right[0], _key(right[1])), tuple(hlines), tuple(vlines),
               [(tuple(xs), tuple(ys), label) for xs, ys, label in points], xkind, yunit)
        if key == getattr(self, "_inputs", None):
            return
        self._inputs = key
        self._drawn = None
        plt = self.plt
        plt.clear_figure()
        self._title = title  # set at render time, cut to the width: plotext leaves a longer title out entirely
        lows, highs = [], []
        spans: list[tuple[float, float, float, float]] = []  # (x lo, x hi, y lo, y hi) of each line drawn
        self._legend: list[tuple[str, str]] = []  # (marker, label) of everything drawn: the line above the plot
        self._label_width = 0  # of the y tick labels: plotext leaves out a title wider than the plot beside them
        self._right = right is not None
        mains = 0
        for label, series in lines:
            xs, ys = _finite(series)
            if log:  # drawn as log10 with decade labels: plotext's own log scale transforms its data in
                # place, so a second render of the same figure (a resize) failed with a math domain error
                pairs = [(x, math.log10(y)) for x, y in zip(xs, ys) if y > 0]
                xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
                if ys:
                    lows.append(min(ys))
                    highs.append(max(ys))
            if xs:
                marker, color, shown = _style(label, mains)
                mains += OVERLAY.match(label) is None and _role(label) == "main"
                plt.plot(xs, ys, marker=marker, color=color)  # the legend is a line above the plot, not on the data
                self._legend.append((marker, shown))
                spans.append((min(xs), max(xs), min(ys), max(ys)))

        if right is not None:  # a second quantity on its own axis (lr and grad norm differ by 10^4)
            xs, ys = _finite(right[1])
            if xs:
                marker, color = ROLES["right"]
                plt.plot(xs, ys, marker=marker, color=color, yside="right")
                self._legend.append((marker, f"{right[0]} (right axis)"))
        for xs, ys, label in points:
            if log:
                pairs = [(x, math.log10(y)) for x, y in zip(xs, ys) if y > 0]
                xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
            if xs:  # checkpoints as "C", incidents as "!", evaluations as "x"
                marker = {"checkpoint": "C", "incident": "!"}.get(label, "x")
                side = "right" if label.startswith("eval ") and "loss" not in label else "left"  # not loss units
                plt.scatter(xs, ys, marker=marker, color="white" if marker == "C" else "red+", yside=side)
                self._legend.append((marker, label + (" (right axis)" if side == "right" else "")))
        for y in hlines:
            if not log or y > 0:
                plt.hline(math.log10(y) if log else y)
        for x in vlines[:20]:
            plt.vline(x)
        if log and lows:
            ticks = _log_ticks(min(lows), max(highs))
            plt.yticks(ticks, [fmt.tick(10 ** t, yunit) for t in ticks])
        # ticks depend on the chart's size: set when it is drawn (show_series may run before layout)
        self._tick_args = (spans, xkind, None if log else yunit) if spans else None
        self.refresh()

    def _ticks(self, spans: list[tuple[float, float, float, float]], xkind: str, yunit: str | None) -> None:
        """Readable ticks instead of plotext's own (``150.8``, raw unix seconds, ``34717.5``)."""
        plt = self.plt
        lo, hi = min(s[0] for s in spans), max(s[1] for s in spans)
        count = max(2, min(6, self.size.width // 14 or 5))
        if xkind == "time":  # elapsed since the first point drawn (the title says from when)
            ticks = [lo + t for t in fmt.nice_ticks(0.0, hi - lo, count, whole=True)]
            plt.xticks(ticks, [fmt.clock_tick(t, elapsed_from=lo) for t in ticks])
        else:
            ticks = fmt.nice_ticks(lo, hi, count, whole=xkind == "step")
            plt.xticks(ticks, [fmt.tick(t) for t in ticks])
        if yunit is not None:
            ylo, yhi = min(s[2] for s in spans), max(s[3] for s in spans)
            if self.size.height < 8:  # room for one label: a round value mid-range (two would overwrite each other)
                mid = (ylo + yhi) / 2
                ticks = [next((r for r in (float(f"{mid:.1g}"), float(f"{mid:.2g}")) if ylo <= r <= yhi), mid)]
            else:
                ticks = fmt.nice_ticks(ylo, yhi, min(5, self.size.height // 3))
            labels = [fmt.tick(t, yunit) for t in ticks]
            plt.yticks(ticks, labels)
            self._label_width = max((len(x) for x in labels), default=0)

    def legend(self) -> Text:
        """What each mark stands for, in one line above the plot (never on the data): shown when the chart
        has more than one thing drawn. Each mark differs by its glyph, so it reads without colour."""
        items = getattr(self, "_legend", [])
        if len(items) < 2:
            return Text("")
        t = Text(no_wrap=True, overflow="ellipsis")
        for i, (marker, label) in enumerate(items):
            t.append(("  " if i else " ") + SAMPLES.get(marker, marker) + " ")
            t.append(Text(label))
        return t

    def render(self):
        """Draw the plot (the legend line above it); a plotting failure shows its message instead of
        stopping the monitor."""
        if self.size.height < 5 or self.size.width < 24:
            return Text("")  # too small to read: an empty panel beats an unreadable one
        size = (self.size.width, self.size.height, self.app.theme)
        drawn = getattr(self, "_drawn", None)
        if drawn is not None and drawn[0] == size:
            return drawn[1]  # the same series at the same size: the text built last time
        text = self._build_text()
        self._drawn = (size, text)
        return text

    def _build_text(self):
        try:
            title = getattr(self, "_title", "")
            if getattr(self, "_tick_args", None) is not None:
                self._ticks(*self._tick_args)
            legend = self.legend()
            small = self.size.height < 12  # a short chart keeps its rows for the data: the legend joins the title
            if small and legend.plain:
                title = f"{title}  |{legend.plain}" if title else legend.plain.strip()
            # plotext leaves out a title within 4 columns of its plot's width (measured): the plot is the
            # width less the tick labels beside it
            room = self.size.width - 4 - getattr(self, "_label_width", 0) - (6 if getattr(self, "_right", False) else 0)
            self.plt.title(title if len(title) <= room else title[: max(0, room - 1)] + "…")
            if not legend.plain or small:
                return super().render()
            width, height = self.size.width, self.size.height - 1  # the legend takes a row from the plot
            self.plt.plotsize(width, height)
            self.plt._set_size(width, height)  # as PlotextPlot.render does (textual-plotext issue 5)
            self.plt.theme(self._get_plotext_theme_name(self.app.theme))
            legend.append("\n")
            return legend.append_text(Text.from_ansi(self.plt.build()))
        except Exception as e:  # noqa: BLE001 - plotext has corner cases; the screen must go on
            return Text(f"(chart unavailable: {type(e).__name__}: {e})")
