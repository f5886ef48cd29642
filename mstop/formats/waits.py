"""The peer a rank's log says it waits for: a collective's timeout naming the remote rank.

When a collective times out on Ascend, each rank's log names the one peer it waited for. CANN's EI0002
(``The wait execution of the Notify register times out. Reason: The Notify register has not received the
Notify record from remote rank: [24]. ... task information: [..., remote rank:[24]]. group information:
[group:[group_name_1654], ..., rankSize[32], rankId[25 24]]``, as CANN's error reference gives it and as
users publish it) names the remote rank by its number in the communication group the collective ran in:
that is the job's rank only in the world group (``hccl_world_group``, or a group as large as the job). A
remote rank CANN could not tell (``remote rank: [unknown]``) names nobody.

MindSpore's own communicator, when a rank cannot fetch its group's unique id (the group's root rank exited or
never reached that step), names the root by its job rank (``group_ranks().at(0)`` in
``ms_collective_comm_lib.cc``; MindSpore's distributed FAQ quotes the line): ``Failed to fetch the unique id
of the collective lib from the meta server node. Maybe the root rank process of this group has exited or has
not executed to QueryUniqueID step. Please check root rank: 0's log.`` msrun's scheduler naming a node that
timed out (``The node: 3 is timed out``) is no rank's wait: it is read as that worker lost
(mstop.formats.mflog.SchedulerLog), which the job's ending names. The lines come cleaned
(mstop.formats.logs.clean_lines): they are matched as text, never trusted for more than a number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: the remote rank a timeout line names (``remote rank: [24]``, ``remote rank:[24]``, ``remoteRank[24]``)
_REMOTE = re.compile(r"remote\s?rank\s*:?\s*\[\s*(\d{1,7})\s*\]", re.IGNORECASE)
#: the communication group of the collective (CANN's ``group information: [group:[NAME], ... rankSize[N]``)
_GROUP = re.compile(r"group:\s*\[([^\]\s]{1,200})\]")
_SIZE = re.compile(r"rankSize\s*\[\s*(\d{1,7})\s*\]")
#: what a collective timeout says of itself: the line is one only with these words (a remote rank named in
#: another message, such as a link being set up, is no wait)
_TIMEOUT = re.compile(r"time[sd]?\s?out|timed out|EI0002|notify wait", re.IGNORECASE)
#: MindSpore's communicator waiting for its group's root rank (a job rank) that never gave the group's id
_ROOT = re.compile(r"Please check root rank:\s*(\d{1,7})'s log")
#: MindSpore's name of the world group (the job's every rank, numbered as the job numbers them)
WORLD_GROUP = "hccl_world_group"


@dataclass(frozen=True)
class Wait:
    """A rank waiting for ``peer``: its number in ``group`` (None: not said) of ``group_size`` ranks."""

    peer: int
    group: str | None = None
    group_size: int | None = None

    def peer_in(self, world: int | None) -> int | None:
        """The job's rank of the peer: its number as said where the group is the world group (by name, by
        its size equal to the job's, or not said); None in a smaller group (a number of that group)."""
        if self.group is None or self.group == WORLD_GROUP:
            return self.peer
        if world is not None and self.group_size == world:
            return self.peer
        return None


def waited_peer(line: str) -> Wait | None:
    """The wait a log line reports (a collective's timeout naming its remote rank), else None."""
    if "ank" not in line:  # (most lines: no regular expression run)
        return None
    if (r := _ROOT.search(line)) is not None:
        return Wait(int(r.group(1)))  # a job rank, whatever the group
    m = _REMOTE.search(line)
    if m is None or not _TIMEOUT.search(line):
        return None
    g, n = _GROUP.search(line), _SIZE.search(line)
    return Wait(int(m.group(1)), g.group(1) if g else None, int(n.group(1)) if n else None)
