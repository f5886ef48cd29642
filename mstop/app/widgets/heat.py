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
from ...view.marks import CELL_KINDS, heat_cells

#: heat strip metrics (m cycles): label, RankRow attribute, whether a high value is bad
HEAT_METRICS = (("step time", "step_time", True), ("data wait", "data_wait", True),
                ("headroom", "headroom", False), ("lag", "lag", True), ("last-row age", "age", True),
                ("comm share", "comm_share", True), ("idle share", "idle_share", True))
#: metrics offered only when several ranks have a value (profiles: mstop_writer.profiling)
PROFILE_METRICS = frozenset({"comm_share", "idle_share"})
#: the most lines of cells the strip uses; beyond, one cell stands for several ranks (their worst)
HEAT_LINES = 10


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
        _label, attr, high_bad = HEAT_METRICS[self.metric]
        width = self._width()
        got = heat_cells(v, attr, high_bad, self._per_cell(len(v.ranks)), selected)
        self._picks = got.picks
        styles = {n: self.get_component_rich_style(f"heat-strip--{n}", partial=True)
                  for n in (*CELL_KINDS, "selected")}
        # glyphs of one style are appended as one span (1,024 spans cost the compositor ~80 ms per frame, a
        # few long runs almost nothing); a line's end goes with the run before it
        t = Text(no_wrap=True, overflow="crop")
        key = got.kinds.copy()
        if not len(key):
            self.update(t)
            return
        if got.selected is not None:
            key[got.selected] += len(CELL_KINDS)
        starts = [0, *(np.flatnonzero(np.diff(key)) + 1).tolist(), len(key)]
        # the glyphs, a line break before each line's first cell: cell i is at i + i // width
        text = "\n".join(got.glyphs[i:i + width] for i in range(0, len(got.glyphs), width))
        for a, b in zip(starts, starts[1:]):  # cells a..b-1, with the line break before cell b
            style = styles[CELL_KINDS[int(got.kinds[a])]] + (styles["selected"] if a == got.selected else Style())
            t.append(text[a + a // width:b + b // width], style)
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


