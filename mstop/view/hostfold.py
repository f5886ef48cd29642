"""The ranks view grouped by host, at cluster scale (issue 41): healthy hosts folded into node sets.

With 480 hosts the grouped table is 480 lines that all say the same. As ``clush -b`` folds hosts whose
output is the same, hosts with nothing to say (no alert on any of their ranks, no rank in trouble) and the
same number of ranks fold into one line, ``node[001-480] ok · 8 ranks each``, where its first host would
be; a host with something to say keeps its own line, in its place. Enter on a folded line opens it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Fold:
    """Hosts folded into one line: their names (in the table's order) and each one's number of ranks."""

    hosts: list[str] = field(default_factory=list)
    ranks_each: int = 0


def fold_hosts(order: list[tuple[str, int]], apart: set[str], *, least: int = 2) -> list[str | Fold]:
    """``order``: (host, its number of ranks) as the table shows them; ``apart``: hosts shown on their own
    line (something to say, or the user opened them). The lines: a host's name, or a Fold of at least
    ``least`` other hosts of one rank count (fewer stay as they are)."""
    folds: dict[int, Fold] = {}
    for host, n in order:
        if host not in apart:
            folds.setdefault(n, Fold(ranks_each=n)).hosts.append(host)
    keep = {n: f for n, f in folds.items() if len(f.hosts) >= least}
    folded = {h: n for n, f in keep.items() for h in f.hosts}
    out: list[str | Fold] = []
    for host, _ in order:
        n = folded.get(host)
        if n is None:
            out.append(host)
        elif keep[n].hosts[0] == host:
            out.append(keep[n])
    return out
