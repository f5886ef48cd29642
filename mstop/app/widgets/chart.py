"""Line charts (plotext) that never stop the monitor: a plotting failure shows its message.

User-controlled text (run names, notes, column names, host names, paths) is always wrapped in
``rich.text.Text``, never parsed as markup.
"""

from __future__ import annotations

import math

import numpy as np
from rich.text import Text
from textual_plotext import PlotextPlot

from ...view import Series


def _finite(s: Series | None) -> tuple[list[float], list[float]]:
    if s is None:
        return [], []
    ok = np.isfinite(s.y) & np.isfinite(s.x)
    return s.x[ok].tolist(), s.y[ok].tolist()


def _log_ticks(lo: float, hi: float) -> list[float]:
    """Tick positions (log10 values) for a log axis over [lo, hi]: the decades inside, else the ends and
    their geometric middle (a range inside one decade)."""
    decades = [float(k) for k in range(math.ceil(lo), math.floor(hi) + 1)]
    if len(decades) >= 2:
        step = max(1, len(decades) // 5)
        return decades[::step]
    return sorted({lo, (lo + hi) / 2, hi})


class Chart(PlotextPlot):
    """A line chart of one or more series (one plot object per widget: its own ``self.plt``).

    Lines use half-block "hd" marks rather than braille: block elements are in
    every monospace font, braille is missing from many (then it is drawn wider
    and the chart runs past its frame).
    """

    def show_series(self, title: str, lines: list[tuple[str, Series | None]], *, log: bool = False,
                    right: tuple[str, Series | None] | None = None,
                    hlines: list[float] = (), vlines: list[float] = (),
                    points: list[tuple[list[float], list[float], str]] = ()) -> None:
        plt = self.plt
        plt.clear_figure()
        self._title = title  # set at render time, cut to the width: plotext leaves a longer title out entirely
        lows, highs = [], []
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
                # plotext's legend reads three marks of a line (label only lines that have them) and
                # fails on log axes: the title names the lines there
                plt.plot(xs, ys, marker="hd", label=label if len(xs) >= 3 and not log else None)

        if right is not None:  # a second quantity on its own axis (lr and grad norm differ by 10^4)
            xs, ys = _finite(right[1])
            if xs:
                plt.plot(xs, ys, marker="hd", label=f"{right[0]} (right axis)" if len(xs) >= 3 else None,
                         yside="right")
        for xs, ys, label in points:
            if log:
                pairs = [(x, math.log10(y)) for x, y in zip(xs, ys) if y > 0]
                xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
            if xs:  # checkpoints as "C", incidents as "!", evaluations as "x"
                plt.scatter(xs, ys, marker={"checkpoint": "C", "incident": "!"}.get(label, "x"),
                            label=label if len(xs) >= 3 and not log else None)
        for y in hlines:
            if not log or y > 0:
                plt.hline(math.log10(y) if log else y)
        for x in vlines[:20]:
            plt.vline(x)
        if log and lows:
            ticks = _log_ticks(min(lows), max(highs))
            plt.yticks(ticks, [f"{10 ** t:.3g}" for t in ticks])
        self.refresh()

    def render(self):
        """Draw the plot; a plotting failure shows its message instead of stopping the monitor."""
        if self.size.height < 5 or self.size.width < 24:
            return Text("")  # too small to read: an empty panel beats an unreadable one
        try:
            title = getattr(self, "_title", "")
            room = self.size.width - 4  # plotext leaves out a title within 4 columns of the width (measured)
            self.plt.title(title if len(title) <= room else title[: max(0, room - 1)] + "…")
            return super().render()
        except Exception as e:  # noqa: BLE001 - plotext has corner cases; the screen must go on
            return Text(f"(chart unavailable: {type(e).__name__}: {e})")
