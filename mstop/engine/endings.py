"""How a job that stopped ended, rank by rank, and which rank stopped first.

When one rank of a job dies (killed, its host lost, stopped by a debugger), the others wait in their next
collective until a timeout or the launcher ends them (msrun within about a second). What the files show
is each rank's last sign of life and how its last session ended: an ``end`` event (finished), an
``abort`` (failed: the error it raised), or nothing (died). The rank that stopped first, by a margin, is
the culprit the header names: ``rank 3 stopped first, at step 251, 32 s before the others`` (the others'
errors are the consequence, not the cause); with no margin (every rank within a second or two of the
others, as msrun's ending of the rest leaves them) no rank is named.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from .. import fmt
from . import figures
from .figures import Options
from .store import RankData, Store


@dataclass
class Ending:
    """Per rank how its last session ended, and the rank that stopped first (None: no margin)."""

    finished: list[int] = field(default_factory=list)
    aborted: list[int] = field(default_factory=list)
    died: list[int] = field(default_factory=list)  # no end, no abort: killed or lost
    first: int | None = None
    first_step: int | None = None
    ahead: float = 0.0  # seconds the first stopped before the next one
    steps: dict[int, int | None] = field(default_factory=dict)  # rank -> its last step

    @property
    def culprit(self) -> int | None:
        """The rank a failed or dead run is laid at: the first to stop, else the first that aborted, else the
        first that died (the log pane opens its log; the header and summary name its last error)."""
        if self.first is not None:
            return self.first
        return (self.aborted or self.died or [None])[0]


def ending(store: Store, opts: Options) -> Ending:
    """How each rank's last session ended (ranks with rows or a start), and who stopped first: the rank
    whose last sign of life (on the viewer's clock: mstop.engine.clocks) precedes every other rank's by
    more than :func:`margin`."""
    out = Ending()
    clocks = figures.rank_clocks(store, opts)
    lives: dict[int, float] = {}
    for r, d in sorted(store.ranks.items()):
        if not d.rows and not d.starts:
            continue
        out.steps[r] = int(d.col("step")[-1]) if d.rows else None
        if figures.aborted(d):
            out.aborted.append(r)
            t = _abort_time(d)
        elif figures.finished_cleanly(d):
            out.finished.append(r)
            continue  # a rank that finished stopped when it was done, not first
        else:
            out.died.append(r)
            t = figures.last_life(d)
        if t is not None:
            lives[r] = clocks.local(r, t)
    stopped = sorted(lives.items(), key=lambda kv: kv[1])
    if len(stopped) >= 2 or (len(stopped) == 1 and out.finished):
        r, t = stopped[0]
        nxt = stopped[1][1] if len(stopped) >= 2 else None
        if nxt is None or nxt - t > margin(store):
            out.first, out.first_step = r, out.steps.get(r)
            out.ahead = (nxt - t) if nxt is not None else 0.0
    return out


def margin(store: Store) -> float:
    """How much earlier than the others a rank must have stopped to be called the first: 2 s, or two of the
    job's step times (ranks of one step end within a step of each other)."""
    st = figures.step_time(store)
    return max(2.0, 2.0 * st) if st is not None and math.isfinite(st) else 2.0


def _abort_time(d: RankData) -> float | None:
    s = figures.last_session(d)
    times = [float(a["time"]) for a in d.aborts if a.get("session") is None or str(a["session"]) == s]
    return min(times) if times else figures.last_life(d)


def ranks_text(ranks: list[int]) -> str:
    """``rank 3``, ``ranks 0-2``, ``ranks 0, 2, 5-7``, ``ranks 0-9, 12, 14-15, 20 and 12 more``."""
    rs = sorted(ranks)
    if len(rs) == 1:
        return f"rank {rs[0]}"
    runs: list[list[int]] = []
    for r in rs:
        if runs and runs[-1][1] == r - 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    words = [f"{a}-{b}" if b > a else str(a) for a, b in runs]
    rest = sum(b - a + 1 for a, b in runs[4:])
    return f"ranks {', '.join(words[:4])}" + (f" and {rest} more" if rest else "")


def dead_message(store: Store, opts: Options) -> str:
    """The ``job_dead`` alert's words: who died and who finished, or who stopped first."""
    e = ending(store, opts)
    quiet = fmt.duration(figures.seconds_since_life(store, opts))
    limit = fmt.duration(figures.dead_after(store, opts))
    if e.finished and e.died:
        died = "; ".join(f"rank {r} died at step {_step(e.steps[r])} (no end)" for r in e.died[:3])
        more = f" and {len(e.died) - 3} more" if len(e.died) > 3 else ""
        return f"{died}{more}; {ranks_text(e.finished)} finished: the job did not finish cleanly"
    first = ""
    if e.first is not None:
        first = (f"rank {e.first} stopped first, at step {_step(e.first_step)}, {fmt.duration(e.ahead)} before "
                 "the others; ")
    lost = sorted(r for r, d in store.ranks.items() if figures.lost(d) is not None)
    if lost:  # the scheduler names the worker it stopped hearing from first: measured here, when rank 1 was
        # killed it named rank 0 (blocked in a collective with the dead one) as often as rank 1
        return (f"{first}msrun's scheduler timed out {ranks_text(lost)} and ended the job: a worker exited "
                "abnormally, was killed or stopped (the scheduler names the first it stopped hearing from, "
                "not always the one that died: see the worker logs)")
    return (f"{first}no rank shows a sign of life for {quiet} (dead after {limit}): the job was killed or its "
            "hosts are gone")


def failure_message(store: Store, opts: Options) -> tuple[str, str]:
    """The ``job_failed`` alert's words (the culprit's first meaningful error line) and the whole error."""
    e = ending(store, opts)
    culprit = e.first if e.first is not None else (e.aborted[0] if e.aborted else None)
    if culprit is None:
        return "a rank aborted", ""
    d = store.ranks[culprit]
    if culprit in e.died:  # it died silently first; the others' errors followed
        return (f"rank {culprit} stopped first, at step {_step(e.first_step)}, {fmt.duration(e.ahead)} before "
                f"the others (no end, no error); then {ranks_text(e.aborted)} aborted"), ""
    s = figures.last_session(d)
    mine = [a for a in d.aborts if a.get("session") is None or str(a["session"]) == s] or d.aborts
    a = min(mine, key=lambda x: float(x["time"]))
    step = a.get("step")
    where = f" at step {int(step)}" if isinstance(step, (int, float)) and math.isfinite(step) else ""
    error = str(a.get("error") or "no error given")
    who = f"rank {culprit} aborted{where}"
    if e.first == culprit and len(e.aborted) + len(e.died) > 1:
        who += f", {fmt.duration(e.ahead)} before the others"
    return f"{who}: {first_line(error)}", error


def _step(s: int | None) -> str:
    return "n/a" if s is None else f"{s:,}"


_SEPARATOR = re.compile(r"^[-=_*#~ ]*$")
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b")


def error_lines(error: str) -> list[str]:
    """An error's lines (its line breaks, which mstop.safe shows as ``\\x0a``, split again), blank and
    separator lines left out."""
    parts = re.split(r"\\x0d\\x0a|\\x0a|\\x0d|\r?\n", error)
    return [p.strip() for p in parts if p.strip() and not _SEPARATOR.match(p.strip())]


def first_line(error: str) -> str:
    """The line of a multi-line error a header shows: the exception of a Python traceback, else its first
    line (MindSpore's ``RuntimeError: ...`` above its call stacks)."""
    lines = error_lines(error)
    if not lines:
        return error.strip()
    if lines[0].startswith("Traceback"):
        found = [ln for ln in lines if _EXCEPTION.match(ln)]
        return found[-1] if found else lines[-1]
    return lines[0]
