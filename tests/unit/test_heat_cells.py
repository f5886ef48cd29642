"""The heat strip's cells as array work (mstop.view.marks.heat_cells) equal the cell-by-cell reading the widget
did before (issue 39 step 4: no per-rank Python in a frame), written here plainly as the definition."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from mstop.view.frame import RankTable, View
from mstop.view.marks import LEVELS, OUTLIER_K, OUTLIER_MARGIN, heat_cells


def _plain(v: View, attr: str, high_bad: bool, per: int, selected: int | None):
    """The strip as the widget worked it out cell by cell (its code before the arrays)."""
    ranks = v.ranks.column("rank")
    if attr == "lag":
        at = v.ranks.column("step")
        steps = sorted(x for x in at if x is not None)
        med_s = steps[len(steps) // 2] if steps else None
        value = {r: None if s is None or med_s is None else float(med_s - s) for r, s in zip(ranks, at)}
    else:
        value = dict(zip(ranks, v.ranks.column(attr)))
    known = np.array([x for x in value.values() if x is not None and math.isfinite(x)])
    med = float(np.median(known)) if len(known) else 0.0
    mad = float(np.median(np.abs(known - med))) * 1.4826 if len(known) else 0.0
    margin = OUTLIER_MARGIN * abs(med)
    lo, hi = (float(known.min()), float(known.max())) if len(known) else (0.0, 0.0)
    if hi - lo < margin:
        lo, hi = med - margin / 2, med + margin / 2
    sign = 1.0 if high_bad else -1.0
    glyphs, kinds, picks, sel = [], [], [], None
    for i, cell in enumerate([ranks[i:i + per] for i in range(0, len(ranks), per)]):
        vals = [(value[r], r) for r in cell if value[r] is not None and math.isfinite(value[r])]
        marked = next((r for r in cell if r in v.marks), None)
        if marked is not None:
            glyph, kind, pick = v.marks[marked], "alert", marked
        elif not vals:
            glyph, kind, pick = "?", "missing", cell[0]
        else:
            x, pick = max(vals) if high_bad else min(vals)
            k = 0 if hi <= lo else int((x - lo) / (hi - lo) * (len(LEVELS) - 1) + 0.5)
            glyph = LEVELS[max(0, min(len(LEVELS) - 1, k))]
            kind = "outlier" if sign * (x - med) > max(OUTLIER_K * mad, margin) and len(known) >= 3 else "normal"
        glyphs.append(glyph)
        kinds.append(kind)
        picks.append(pick)
        if selected is not None and selected in cell:
            sel = i
    return "".join(glyphs), kinds, picks, sel


few = st.sampled_from([0.0, 1.0, 2.5, -3.0, math.inf, -math.inf, math.nan, 1e9])
values = st.one_of(st.none(), few, few, few, st.floats(-1e6, 1e6))  # ties in a cell are common


@given(st.lists(st.tuples(values, st.one_of(st.none(), st.integers(0, 50)), st.booleans()), max_size=40),
       st.sampled_from(["step_time", "headroom", "lag"]), st.booleans(), st.integers(1, 5),
       st.one_of(st.none(), st.integers(-1, 45)), st.integers(0, 3))
@example([(1.0, 3, False), (1.0, 4, False), (2.0, 5, False), (2.0, 5, False)], "step_time", True, 2, 1, 0)
@example([(1.0, 3, False), (1.0, 4, False), (2.0, 5, False), (2.0, 5, False)], "headroom", False, 2, None, 1)
def test_heat_cells_equal_the_plain_reading(rows, attr, high_bad, per, selected, gap):
    ranks = [i * (1 + gap) for i in range(len(rows))]  # rank numbers need not be 0..n-1
    value = np.array([np.nan if x is None else x for x, _, _ in rows], dtype=np.float64)
    cols = {"rank": np.array(ranks, np.float64),
            "step": np.array([np.nan if s is None else s for _, s, _ in rows], np.float64),
            attr if attr != "lag" else "step_time": value}
    v = View(ranks=RankTable(cols))
    v.marks = {r: "DSLMW"[r % 5] for r, (_, _, m) in zip(ranks, rows) if m}
    glyphs, kinds, picks, sel = _plain(v, attr, high_bad, per, selected)
    got = heat_cells(v, attr, high_bad, per, selected)
    assert got.glyphs == glyphs
    assert [("normal", "outlier", "alert", "missing")[k] for k in got.kinds.tolist()] == kinds
    assert got.picks == picks and got.selected == sel
