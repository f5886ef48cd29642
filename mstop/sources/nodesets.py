"""Node sets as sources: ``node[001-512]:/local/runs/exp1`` is one run over all those hosts (issue 41).

The host part is read with ClusterShell's NodeSet, the syntax HPC sites already type to ``clush`` and
``nodeset`` (ranges ``node[001-512]``, lists ``node[1,4-6]``, several dimensions ``rack[1-2]-n[1-8]``, and
comma-separated sets ``login1,node[1-4]``). Each host's run directory is the same path, as a local disk's
is on every node; ``%h`` in the path stands for the host's name (``/scratch/%h/run``: one shared
filesystem, a directory per host, or loopback hosts that are all this machine).

A spec with no set in its host part is left as it is: ``node1:/runs/a`` and local paths never reach
ClusterShell. Expanding is cheap (NodeSet's ranges); how the hosts are reached is the transport's
business (mstop.sources.remote today: one ssh connection a host).
"""

from __future__ import annotations

import re

from .protocol import SourceError

#: the most hosts one node set may name: past it, a typo (``node[1-1000000]``) would start a million
#: connections
MAX_HOSTS = 100_000
#: a host part that is a node set: brackets after a name (``node[1-4]``), or several names (``a,b``)
_SET = re.compile(r"^(?:[A-Za-z0-9._%+-]+@)?(?:[A-Za-z0-9._-]+\[[0-9,\-/\[\]A-Za-z._]+\][A-Za-z0-9._\-\[\],]*"
                  r"|[A-Za-z0-9._\-\[\]]+(?:,[A-Za-z0-9._\-\[\]]+)+)$")


def host_part(spec: str) -> tuple[str, str] | None:
    """(host part, path) of a ``host:/path`` spec whose host part is a node set; None otherwise."""
    colon = spec.find(":")
    slash = spec.find("/")
    if colon <= 0 or (slash != -1 and slash < colon):
        return None
    hosts, path = spec[:colon], spec[colon + 1:]
    if hosts.startswith("[") or not _SET.match(hosts):
        return None  # a plain host, or an IPv6 address in brackets ([::1] holds colons: not split here)
    return hosts, path


def is_node_set(spec: str) -> bool:
    """Whether ``spec`` names several hosts in NodeSet syntax."""
    return host_part(spec) is not None


def expand(spec: str) -> list[str]:
    """``spec`` as one ``host:/path`` spec per host of its node set, in the set's order (``%h`` in the path:
    the host's name); a spec that names no set: ``[spec]``. SourceError for a set ClusterShell cannot read,
    an empty one, one over MAX_HOSTS, or no path."""
    part = host_part(spec)
    if part is None:
        return [spec]
    hosts, path = part
    user, _, names = hosts.rpartition("@")
    if not path:
        raise SourceError(f"{spec!r}: no remote path after the colon")
    try:
        from ClusterShell.NodeSet import NodeSet, NodeSetException
    except ImportError as e:  # a dependency of mstop's: an install that lost it
        raise SourceError(f"{hosts!r} is a node set, and ClusterShell is not importable here ({e}): "
                          "pip install ClusterShell") from None
    bound = most_hosts(names)
    if bound > 10 * MAX_HOSTS:  # NodeSet would build every range first (10^8 hosts: minutes and gigabytes)
        raise SourceError(f"{_short(names)!r} names up to {_count(bound)} hosts: more than {MAX_HOSTS:,} (a typo "
                          "in a range?)")
    try:
        nodes = NodeSet(names)
        count = len(nodes)
    except (NodeSetException, ValueError, OverflowError, MemoryError, AssertionError) as e:
        # AssertionError: ClusterShell asserts on a range it cannot hold ("range too large")
        raise SourceError(f"not a node set: {_short(names)!r} ({e})") from None
    if not count:
        raise SourceError(f"{names!r} names no host")
    if count > MAX_HOSTS:
        raise SourceError(f"{_short(names)!r} names {count:,} hosts: more than {MAX_HOSTS:,} (a typo in a range?)")
    prefix = f"{user}@" if user else ""
    return [f"{prefix}{node}:{path.replace('%h', str(node))}" for node in nodes]


_GROUP = re.compile(r"\[([^\[\]]*)\]")


def most_hosts(names: str) -> int:
    """How many hosts ``names`` can name at most, from its text alone (each comma-separated set: the product of
    its brackets' range sizes, steps counted, repeats not removed): a bound checked before ClusterShell
    expands the ranges. 0 when the text is not of that simple shape (ClusterShell then judges it)."""
    total = 0
    for part in re.split(r",(?![^\[]*\])", names):
        size = 1
        for group in _GROUP.findall(part):
            n = 0
            for item in group.split(","):
                m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?(?:/\s*(\d+)\s*)?", item)
                if m is None:
                    return 0
                lo, hi, step = int(m[1]), int(m[2] or m[1]), int(m[3] or 1)
                n += (hi - lo) // max(step, 1) + 1 if hi >= lo else 0
            size *= n
        total += size
    return total


def _count(n: int) -> str:
    """``123,456,789``; past 10^15 as ``10^31`` (a number of 40 digits says nothing more)."""
    return f"{n:,}" if n < 10**15 else f"about 10^{len(str(n)) - 1}"


def _short(text: str) -> str:
    return text if len(text) <= 200 else text[:200] + "..."


def expand_all(specs: list[str]) -> list[str]:
    """Every spec expanded (:func:`expand`), duplicates dropped (a host named twice is read once)."""
    out: list[str] = []
    seen: set[str] = set()
    for spec in specs:
        for one in expand(spec):
            if one not in seen:
                seen.add(one)
                out.append(one)
    return out



def fold(hosts: list[str]) -> str:
    """Host names folded into a node set, as ``nodeset -f`` prints them (``lo[1-3,7]``): mstop.fmt.hosts."""
    from ..fmt import hosts as folded

    return folded(hosts)
