"""The words and letters the screen gives an alert: the heat strip's letter for a rank's most telling
alert, and how long an alert has held."""

from __future__ import annotations

from typing import Any

from .. import fmt

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
