"""Equal figures, however the bytes arrive (issue 30's contract).

A random run (ranks, restarts that resume at an earlier step, NaN and Inf losses, gaps in time, hostile
lines between the rows) is read three ways: whole, each file's chunks parsed on their own (the reading
before read rounds were batched); whole, by ``read_once`` (what ``mstop summary`` does); and followed,
its bytes appended to every file in random pieces and read round by round by the local source (kept
descriptors; a round's chunks of many files parsed together, :class:`mstop.sources.rankfiles.Round`).
``summary --json`` and the monitor's frame (every part of it, charts included) must be equal to the last
digit.
"""

from __future__ import annotations


