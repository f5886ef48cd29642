"""Each rank's stacks read now from outside: a ``py-spy dump`` of its process, here or over ssh on its
source's host (the t view's d key). It starts processes and waits for them: the live room's, off the
screen's thread."""

from __future__ import annotations

from typing import Any

from ..engine.endings import ranks_text
from ..engine.reader import RunReader
from ..engine.store import Snapshot
from ..safe import clean
from ..sources import DEFAULT_CONNECTION, pyspy
from ..sources.remote import parse_target, rank_host

#: ranks dumped at most by one press of d (the culprit and the lowest ranks first)
FRESH_RANKS = 16


def fresh_lines(store: Snapshot, connection: Any = None) -> list[tuple[str, str]]:
    """(style, text) lines of a fresh ``py-spy dump`` of each rank's process (mstop.sources.pyspy), where its
    pid is provably that process: here, or over ssh on the host of the rank's ``host:/path`` source (through
    ``connection``), or with ``--hosts auto`` on the host its start event names; ranks that cannot be dumped
    grouped by why. Slow (a dump per rank): call it off the screen's thread."""
    run = RunReader(store)
    starts = {r: s for r in run.ranks if (s := run.start(r)) is not None}
    owners = dict(run.snapshot.owners)

    def one(r: int, start: dict[str, Any]) -> tuple[list[str] | None, str]:
        try:
            target = parse_target(owners.get(r, ""))
        except Exception:  # noqa: BLE001 - a label that is no source spec: a local run
            target = None
        conn = connection or DEFAULT_CONNECTION
        if target is not None:
            return pyspy.dump_over_ssh(target.host, start, conn)
        host = rank_host(start) if conn.hosts else None
        if host is not None:  # a run read here (a shared filesystem), the rank on another host
            return pyspy.dump_over_ssh(host, start, conn)
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
