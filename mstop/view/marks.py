"""The words and letters the screen gives an alert: the heat strip's letter for a rank's most telling
alert, and how long an alert has held."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import fmt
from .frame import View

#: the letter the heat strip shows for a rank with a per-rank alert; when a rank has several, the more
#: telling wins, in this order: dead over straggler over lagging over memory over data wait
MARKS = {"dead_rank": "D", "straggler": "S", "lagging_rank": "L", "oom_risk": "M", "data_starvation": "W"}


def heat_marks(alerts: list[Any]) -> dict[int, str]:
    """Each rank's heat-strip letter: its most telling per-rank alert (see MARKS)."""
    order = list(MARKS)
    out: dict[int, str] = {}
    for a in sorted((a for a in alerts if a.rank is not None and a.kind in MARKS), key=lambda a: order.index(a.kind)):
        out.setdefault(a.rank, MARKS[a.kind])
    return out


#: the heat strip's glyph levels, lowest first: a glyph's height is its value
LEVELS = "▁▂▃▄▅▆▇█"
#: a cell is an outlier when it is this many robust deviations (1.4826·MAD) from the median on the bad side,
#: and at least OUTLIER_MARGIN of the median away (a flat run's tiny MAD must not light up noise)
OUTLIER_K, OUTLIER_MARGIN = 4.0, 0.25
#: what a heat strip cell shows, by its code in :attr:`HeatCells.kinds`
CELL_KINDS = ("normal", "outlier", "alert", "missing")


@dataclass
class HeatCells:
    """The heat strip's cells, in rank order: a glyph each, its kind (a code of CELL_KINDS), the rank it shows
    (a click selects it) and the cell holding the selected rank."""

    glyphs: str
    kinds: np.ndarray
    picks: list[int]
    selected: int | None


def heat_cells(v: View, attr: str, high_bad: bool, per: int, selected: int | None = None) -> HeatCells:
    """The heat strip of metric ``attr`` (a number field of the ranks table; ``lag``: steps behind the median
    rank), ``per`` ranks a cell (their worst: the highest value when ``high_bad``, else the lowest, the rank
    named by a tie the one ``max``/``min`` of (value, rank) names). A cell whose ranks include one with a
    per-rank alert shows the first such rank's letter (:func:`heat_marks`); one with no finite value ``?``.
    Levels span the values' range, never less than OUTLIER_MARGIN of the median. Array work over the ranks (at
    1,024 ranks a cell a rank in Python took 5 ms of each redraw)."""
    ranks = v.ranks.values("rank")
    n = len(ranks)
    if attr == "lag":
        at = v.ranks.values("step")
        have = np.sort(at[~np.isnan(at)])
        value = have[len(have) // 2] - at if len(have) else np.full(n, np.nan)
    else:
        value = v.ranks.values(attr).astype(np.float64)
    fin = np.isfinite(value)
    known = value[fin]
    med = float(np.median(known)) if len(known) else 0.0
    mad = float(np.median(np.abs(known - med))) * 1.4826 if len(known) else 0.0
    margin = OUTLIER_MARGIN * abs(med)
    lo, hi = (float(known.min()), float(known.max())) if len(known) else (0.0, 0.0)
    if hi - lo < margin:  # a flat run: centre a minimum span on the median
        lo, hi = med - margin / 2, med + margin / 2
    cells = -(-n // per)
    pad = cells * per - n
    vals = np.concatenate([np.where(fin, value, np.nan), np.full(pad, np.nan)]).reshape(cells, per)
    rk = np.concatenate([ranks, np.full(pad, -1.0)]).reshape(cells, per).astype(np.int64)
    ok = ~np.isnan(vals)
    have = ok.any(axis=1)
    rows = np.arange(cells)
    if high_bad:  # the highest value; of equal ones the last (the highest rank)
        j = per - 1 - np.argmax(np.where(ok, vals, -np.inf)[:, ::-1], axis=1)
    else:  # the lowest; of equal ones the first
        j = np.argmin(np.where(ok, vals, np.inf), axis=1)
    x, picks = vals[rows, j], rk[rows, j]
    with np.errstate(invalid="ignore"):
        level = np.zeros(cells, np.int64) if hi <= lo else \
            np.clip(np.trunc(np.nan_to_num((x - lo) / (hi - lo) * (len(LEVELS) - 1) + 0.5)), 0, len(LEVELS) - 1)
        outlier = ((1.0 if high_bad else -1.0) * (x - med) > max(OUTLIER_K * mad, margin)) & (len(known) >= 3)
    glyphs = np.array(list(LEVELS))[level.astype(np.int64)]
    kinds = np.where(outlier, 1, 0)
    missing = ~have
    glyphs[missing], kinds[missing], picks[missing] = "?", 3, rk[missing, 0]
    if v.marks:
        marked = np.isin(rk, np.fromiter(v.marks, np.int64, len(v.marks)))
        for c in np.flatnonzero(marked.any(axis=1)).tolist():  # an alert's rank first: its letter, it selects
            r = int(rk[c, int(np.argmax(marked[c]))])
            glyphs[c], kinds[c], picks[c] = v.marks[r], 2, r
    at = v.ranks.index_of(selected) if selected is not None else None
    return HeatCells("".join(glyphs.tolist()), kinds, picks.tolist(), None if at is None else at // per)


def since_text(a: Any, now: float) -> str:
    """How long an alert has held, for its line: ``since step 1,021 (40 s ago)``; a held one (``hold_s``)
    says when it cleared instead, so the line never reads as the present."""
    if a.cleared is not None:
        return f"cleared {fmt.duration(max(0.0, now - a.cleared))} ago"
    step, t = a.since_step, a.since_time
    if t is None:
        return ""
    at = f"since step {step:,}" if isinstance(step, int) else "since"
    return f"{at} ({fmt.duration(max(0.0, now - t))} ago)"
