"""The heat strip: one cell per rank, the odd rank out among 1,024 at a glance.

User-controlled text (run names, notes, column names, host names, paths) is always wrapped in
``rich.text.Text``, never parsed as markup.
"""

from __future__ import annotations

import math

import numpy as np
from rich.style import Style
from rich.text import Text
from textual import events
from textual.message import Message
from textual.widgets import Static

from ...view import View

LEVELS = "▁▂▃▄▅▆▇█"
#: heat strip metrics (m cycles): label, RankRow attribute, whether a high value is bad
HEAT_METRICS = (("step time", "step_time", True), ("data wait", "data_wait", True),
                ("headroom", "headroom", False), ("lag", "lag", True), ("last-row age", "age", True),
                ("comm share", "comm_share", True), ("idle share", "idle_share", True))
#: metrics offered only when several ranks have a value (profiles: mstop_writer.profiling)
PROFILE_METRICS = frozenset({"comm_share", "idle_share"})
#: the most lines of cells the strip uses; beyond, one cell stands for several ranks (their worst)
HEAT_LINES = 10
#: a cell is an outlier when it is this many robust deviations (1.4826·MAD) from the median on the bad side,
#: and at least OUTLIER_MARGIN of the median away (a flat run's tiny MAD must not light up noise)
OUTLIER_K, OUTLIER_MARGIN = 4.0, 0.25


class HeatStrip(Static, can_focus=False):
    """One cell per rank for the chosen metric, as glyph levels (readable without colour): the odd rank
    out among 1,024 at a glance. Ranks with a per-rank alert show its letter instead: D dead,
    S straggler, L lagging, M memory, W data wait; ``?`` has no value yet. Colour comes from the
    component classes below (NO_COLOR terminals keep the glyphs). Clicking a cell selects that rank.

    Levels span the ranks' range, but never less than OUTLIER_MARGIN of the median: on a healthy run
    the noise between ranks stays in the low glyphs instead of filling the scale."""

    COMPONENT_CLASSES = {"heat-strip--normal", "heat-strip--outlier", "heat-strip--alert",
                         "heat-strip--missing", "heat-strip--selected"}

    class Selected(Message):
        """A cell was clicked: select ``rank`` in the table and show its figures."""

        def __init__(self, rank: int) -> None:
            super().__init__()
            self.rank = rank

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.metric = 0  # index in HEAT_METRICS (m cycles)
        self.selected: int | None = None
        self._picks: list[int] = []  # per cell, in drawing order, the rank it shows (a click selects it)
        self._args: tuple | None = None

    def title(self, v: View) -> str:
        label, _attr, high_bad = HEAT_METRICS[self.metric]
        per = self._per_cell(len(v.ranks))
        return (f"{label} by rank ({len(v.ranks):,}{f', a cell = {per} ranks, their worst' if per > 1 else ''}; "
                f"{'high' if high_bad else 'low'} is bad; m: metric; click a cell; "
                f"D dead S straggler L lagging M memory W data wait)")

    def _width(self) -> int:
        return max(1, self.content_size.width or (self.app.size.width - 2))

    def _per_cell(self, n: int) -> int:
        return max(1, math.ceil(n / (self._width() * HEAT_LINES)))

    def show(self, v: View, selected: int | None = None) -> None:
        self._args = (v,)
        self.selected = selected
        marks = v.marks
        _label, attr, high_bad = HEAT_METRICS[self.metric]
        ranks = v.ranks.column("rank")  # in rank order (the table's columns: no row object per rank)
        value = _values(v, attr)
        known = np.array([x for x in value.values() if x is not None and math.isfinite(x)])
        med = float(np.median(known)) if len(known) else 0.0
        mad = float(np.median(np.abs(known - med))) * 1.4826 if len(known) else 0.0
        margin = OUTLIER_MARGIN * abs(med)
        lo, hi = (float(known.min()), float(known.max())) if len(known) else (0.0, 0.0)
        if hi - lo < margin:  # a flat run: centre a minimum span on the median
            lo, hi = med - margin / 2, med + margin / 2
        sign = 1.0 if high_bad else -1.0
        per = self._per_cell(len(ranks))
        width = self._width()
        cells = [ranks[i:i + per] for i in range(0, len(ranks), per)]
        styles = {n: self.get_component_rich_style(f"heat-strip--{n}", partial=True)
                  for n in ("normal", "outlier", "alert", "missing", "selected")}

        def style_of(key: tuple[str, bool]) -> Style:
            return styles[key[0]] + (styles["selected"] if key[1] else Style())

        t = Text(no_wrap=True, overflow="crop")
        self._picks = []
        run: list[str] = []  # glyphs of one style are appended as one span: 1,024 spans cost the
        run_style = None     # compositor ~80 ms per frame, a few long runs almost nothing
        for i, cell in enumerate(cells):
            if i and i % width == 0:
                run.append("\n")
            vals = [(value[r], r) for r in cell if value[r] is not None and math.isfinite(value[r])]
            marked = next((r for r in cell if r in marks), None)
            if marked is not None:  # a cell of several ranks shows, and selects, an alert's rank first
                glyph, kind, pick = marks[marked], "alert", marked
            elif not vals:
                glyph, kind, pick = "?", "missing", cell[0]
            else:
                x, pick = max(vals) if high_bad else min(vals)  # a cell of several ranks: their worst
                k = 0 if hi <= lo else int((x - lo) / (hi - lo) * (len(LEVELS) - 1) + 0.5)
                glyph = LEVELS[max(0, min(len(LEVELS) - 1, k))]  # the glyph's height is the value
                outlier = sign * (x - med) > max(OUTLIER_K * mad, margin) and len(known) >= 3
                kind = "outlier" if outlier else "normal"
            self._picks.append(pick)
            style = (kind, selected is not None and selected in cell)
            if style != run_style and run:
                t.append("".join(run), style_of(run_style))
                run = []
            run_style = style
            run.append(glyph)
        if run:
            t.append("".join(run), style_of(run_style))
        self.update(t)

    def on_resize(self) -> None:
        if self._args is not None:  # cells per line follow the width
            self.show(*self._args, selected=self.selected)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        width = self._width()
        i = (offset.y + int(self.scroll_offset.y)) * width + offset.x
        if 0 <= i < len(self._picks) and offset.x < width:
            self.post_message(self.Selected(self._picks[i]))


def _values(v: View, attr: str) -> dict[int, float | None]:
    """Each rank's value of a heat strip metric; ``lag`` is steps behind the median rank."""
    ranks = v.ranks.column("rank")
    if attr == "lag":
        at = v.ranks.column("step")
        steps = sorted(x for x in at if x is not None)
        med = steps[len(steps) // 2] if steps else None
        return {r: None if s is None or med is None else float(med - s) for r, s in zip(ranks, at)}
    return dict(zip(ranks, v.ranks.column(attr)))
