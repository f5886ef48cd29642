"""The stacks view's lines (``t``): where each rank's main thread is, ranks grouped (mstop.engine.processes).

A group reads ``ranks 0-1, 3: in _exec_pip (mindspore/graph/api.py:2432) since step 120 (14:02:11.300)``,
then its main thread's frames, innermost first. Stacks a rank went on from (an overrun that passed) come
last and say so; a crash's stack says ``crashed: Segmentation fault``.
"""

from __future__ import annotations

from .. import fmt
from ..engine.diagnosis import diagnose
from ..engine.endings import ranks_text
from ..engine.processes import stack_view
from ..engine.store import Snapshot

#: frames shown per group (the rest are counted)
FRAMES = 12
#: the diagnosis's verdicts the stacks view says first (issue 60: why the job is stuck or died), and the
#: waits listed at most
STUCK_KINDS = {"hang": "hang", "root_cause": "root cause"}
WAITS_SHOWN = 8


def verdict_lines(store: Snapshot) -> list[tuple[str, str]]:
    """The hang and the root cause the diagnosis tells (the wait-for graph of the ranks' logs, the errors
    told root or cascade), each with the waits it was told by."""
    out: list[tuple[str, str]] = []
    for v in diagnose(store):
        if v.kind not in STUCK_KINDS:
            continue
        out.append(("bold red", f"{STUCK_KINDS[v.kind]}: {v.words}"))
        waits = v.evidence.get("waits_for") or []  # ordered from the rank waited for outwards
        for w in waits[:WAITS_SHOWN]:
            out.append(("", f"  | {ranks_text(w['ranks'])} waited for rank {w['peer']} (its log's timeout)"))
        if len(waits) > WAITS_SHOWN:
            out.append(("dim", f"  | ... {len(waits) - WAITS_SHOWN} more peers waited for"))
    return out


def stacks_lines(store: Snapshot) -> list[tuple[str, str]]:
    """(style, text) lines: a title, each group and its frames, the ranks without a stack."""
    store = store.snapshot()
    groups, none = stack_view(store)
    out: list[tuple[str, str]] = [("bold", "stacks: where each rank's main thread is, from its newest dump")]
    told = verdict_lines(store)
    if told:
        out += [("", "")] + told
    if not groups:
        out.append(("", ""))
        out.append(("", "no rank has dumped its stacks: a rank dumps them when it is silent past a few steps' "
                        "time (max(5 s, 3 median steps): its witness asks), when a step runs past its limit "
                        "(stack_after: max(60 s, 20 median steps)) or when it crashes"))
    for g in groups:
        steps = (f" in step {g.steps[0] + 1:,}" if len(g.steps) == 1 else
                 f" in steps {g.steps[0] + 1:,}-{g.steps[-1] + 1:,}") if g.steps else " before its first step"
        since = f" since {fmt.clock_ms(g.since)}" if g.since is not None else ""
        what = f"crashed ({g.error or 'fatal signal'})" if g.reason == "fatal" else f"in {g.place}{steps}{since}"
        what += ", its dump cut short (faulthandler stopped within it, most often a second fault)" if g.cut else ""
        what += " (a first look)" if g.reason == "asked" else ""
        then = " (then went on: the step ended after the dump)" if g.stale else ""
        out.append(("", ""))
        out.append(("bold red" if g.reason == "fatal" else ("dim" if g.stale else "bold"),
                    f"{ranks_text(g.ranks)}: {what}{then}"))
        for f in g.frames[:FRAMES]:
            out.append(("", f"  | {f}"))
        if len(g.frames) > FRAMES:
            out.append(("dim", f"  | ... {len(g.frames) - FRAMES} outer frames"))
        if g.cut and not g.frames:
            out.append(("dim", "  | no frame of its main thread was written before the dump stopped"))
    if none:
        out.append(("", ""))
        out.append(("dim", f"{ranks_text(none)}: no stack (their steps end on time, or no exit witness runs "
                           "beside them)"))
    return out
