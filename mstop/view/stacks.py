"""The stacks view's lines (``t``): where each rank's main thread is, ranks grouped (mstop.engine.processes).

A group reads ``ranks 0-1, 3: in _exec_pip (mindspore/graph/api.py:2432) since step 120 (14:02:11.300)``,
then its main thread's frames, innermost first. Stacks a rank went on from (an overrun that passed) come
last and say so; a crash's stack says ``crashed: Segmentation fault``.
"""

from __future__ import annotations

from typing import Any

from .. import fmt
from ..engine.endings import ranks_text
from ..engine.processes import stack_view
from ..engine.reader import RunReader
from ..engine.store import Store

#: frames shown per group (the rest are counted)
FRAMES = 12


def stacks_lines(store: Store) -> list[tuple[str, str]]:
    """(style, text) lines: a title, each group and its frames, the ranks without a stack."""
    with store.lock:
        groups, none = stack_view(store)
    out: list[tuple[str, str]] = [("bold", "stacks: where each rank's main thread is, from its newest dump")]
    if not groups:
        out.append(("", ""))
        out.append(("", "no rank has dumped its stacks: a rank dumps them when a step runs past its limit "
                        "(stack_after: max(60 s, 20 median steps)) or when it crashes"))
    for g in groups:
        steps = (f" in step {g.steps[0] + 1:,}" if len(g.steps) == 1 else
                 f" in steps {g.steps[0] + 1:,}-{g.steps[-1] + 1:,}") if g.steps else " before its first step"
        since = f" since {fmt.clock_ms(g.since)}" if g.since is not None else ""
        what = f"crashed ({g.error or 'fatal signal'})" if g.reason == "fatal" else f"in {g.place}{steps}{since}"
        then = " (then went on: the step ended after the dump)" if g.stale else ""
        out.append(("", ""))
        out.append(("bold red" if g.reason == "fatal" else ("dim" if g.stale else "bold"),
                    f"{ranks_text(g.ranks)}: {what}{then}"))
        for f in g.frames[:FRAMES]:
            out.append(("", f"  | {f}"))
        if len(g.frames) > FRAMES:
            out.append(("dim", f"  | ... {len(g.frames) - FRAMES} outer frames"))
    if none:
        out.append(("", ""))
        out.append(("dim", f"{ranks_text(none)}: no stack (their steps end on time, or no exit witness runs "
                           "beside them)"))
    return out


#: ranks dumped at most by one press of d (the culprit and the lowest ranks first)
FRESH_RANKS = 16


def fresh_lines(store: Store, connection: Any = None) -> list[tuple[str, str]]:
    """(style, text) lines of a fresh ``py-spy dump`` of each rank's process (mstop.sources.pyspy), where its
    pid is provably that process: here, or over ssh on the host of the rank's ``host:/path`` source (through
    ``connection``); ranks that cannot be dumped grouped by why. Slow (a dump per rank): call it off the
    screen's thread."""
    from ..safe import clean
    from ..sources import DEFAULT_CONNECTION, pyspy
    from ..sources.remote import parse_target

    run = RunReader(store)
    starts = {r: s for r in run.ranks if (s := run.start(r)) is not None}
    owners = dict(run.store.owners)

    def one(r: int, start: dict[str, Any]) -> tuple[list[str] | None, str]:
        try:
            target = parse_target(owners.get(r, ""))
        except Exception:  # noqa: BLE001 - a label that is no source spec: a local run
            target = None
        if target is not None:
            return pyspy.dump_over_ssh(target.host, start, connection or DEFAULT_CONNECTION)
        return pyspy.dump(start)

    out: list[tuple[str, str]] = [("bold", "py-spy dump: each rank's stacks now, read from outside (d: again)")]
    why_not: dict[str, list[int]] = {}
    for r, start in list(starts.items())[:FRESH_RANKS]:
        lines, why = one(r, start)
        if lines is None:
            why_not.setdefault(why, []).append(r)
            continue
        out.append(("", ""))
        out.append(("bold", f"rank {r} (pid {start['pid']}):"))
        out += [("", "  | " + clean(ln.strip(), 300)) for ln in lines
                if ln.strip() and not ln.startswith(("Process ", "Python v"))]
    for why, ranks in why_not.items():
        out.append(("", ""))
        out.append(("dim", f"{ranks_text(ranks)}: {why}"))
    if len(starts) > FRESH_RANKS:
        out.append(("dim", f"{len(starts) - FRESH_RANKS} more ranks not dumped (the first {FRESH_RANKS} only)"))
    if not starts:
        out.append(("dim", "no rank has a start event with a pid: nothing to dump"))
    return out
