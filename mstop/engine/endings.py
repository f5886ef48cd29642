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
from . import figures, processes, rankstate
from .figures import Options
from .store import RankData, Snapshot


@dataclass
class Culprit:
    """The rank a dead, failed or hung job is laid at, and the fact that named it: ``exit`` (its process
    ended first), ``state`` (stopped, traced or in D), ``stack`` (stuck somewhere the others are not),
    ``no_abort`` (the one rank that did not abort when the others did), ``first_stop`` (its last sign of
    life came first, by a margin: the files' account)."""

    rank: int
    fact: str
    time: float | None
    words: str

    def public(self) -> dict[str, object]:
        """As ``summary --json`` gives it."""
        return {"rank": self.rank, "fact": self.fact, "time": self.time, "words": self.words}


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
    named: Culprit | None = None  # the culprit and the fact that named it (see culprit_of)

    @property
    def culprit(self) -> int | None:
        """The rank a failed or dead run is laid at: the one a fact names (:func:`culprit_of`), else none (a
        job killed whole, or ranks that all aborted with nothing to tell which began it: no fact, no rank).
        The log pane opens its log; the header and summary name its last error."""
        return self.named.rank if self.named is not None else None


def ending(store: Snapshot, opts: Options) -> Ending:
    """How each rank's last session ended (ranks with rows or a start), and who stopped first: the rank
    whose last sign of life (on the viewer's clock: mstop.engine.clocks) precedes every other rank's by
    more than :func:`margin`."""
    out = Ending()
    clocks = figures.rank_clocks(store, opts)
    lives: dict[int, float] = {}
    exits: set[int] = set()  # ranks whose process's end a witness saw (not cleanly)
    for r, d in sorted(store.ranks.items()):
        if not d.rows and not d.starts:
            continue
        out.steps[r] = int(d.last("step")) if d.rows else None
        if rankstate.aborted(d):
            out.aborted.append(r)
            t = _abort_time(d)
        elif rankstate.finished_cleanly(d):
            out.finished.append(r)
            continue  # a rank that finished stopped when it was done, not first
        else:
            out.died.append(r)
            t = rankstate.last_life(d)
        e = processes.exited(d)
        if e is not None and not processes.clean_exit(e) and not e.get("found_ended"):  # found: no order
            exits.add(r)
            if r in out.died:  # its end is known to the tenth of a second: more exact than its last sign of life
                t = float(e["time"])
        if t is not None:
            lives[r] = clocks.local(r, t)
    stopped = sorted(lives.items(), key=lambda kv: kv[1])
    if len(stopped) >= 2 or (len(stopped) == 1 and out.finished):
        r, t = stopped[0]
        nxt = stopped[1][1] if len(stopped) >= 2 else None
        if nxt is None or nxt - t > margin(store):
            out.first, out.first_step = r, out.steps.get(r)
            out.ahead = (nxt - t) if nxt is not None else 0.0
    out.named = culprit_of(store, out, lives, exits)
    return out


def culprit_of(store: Snapshot, e: Ending, lives: dict[int, float], exits: set[int]) -> Culprit | None:
    """The rank the facts name, in this order: the first rank whose process ended (by a margin), unless it
    aborted as others did (aborts cascade: a collective that timed out waiting for a stuck rank); a rank
    whose process is stopped, traced or in D; in a hang, the rank whose stack differs from the others';
    the one rank that did not abort while the others did; the first to stop by the files (margin.)"""
    stopped = sorted(lives.items(), key=lambda kv: kv[1])
    held = _held(store)
    if held is not None and (not stopped or held.time is None or held.time < stopped[0][1]):
        return held  # stopped (or in D) before any rank ended: the others' ends followed from it
    ends = [processes.End(r, t, processes.exited(store.ranks[r]) if r in exits else None,
                          store.ranks[r].last_start or {}) for r, t in stopped]
    found = processes.first_end(ends, margin(store))
    if found is not None and not (found[0].rank in e.aborted and len(e.aborted) > 1):
        first, lead = found
        ex = first.exit or {}
        when = float(ex.get("time", first.time))
        if len(ends) == 1:
            after = ""
        elif lead >= 0.01:
            after = f", {_seconds(lead)} before the others"
        else:  # ends closer than their clocks tell apart, ordered by sight
            after = ", while the others still ran"
        crash = processes.where(store.ranks[first.rank], stuck_only=False)
        crashed = f"; it {crash.crash_words}" if crash is not None and crash.reason == "fatal" else ""
        return Culprit(first.rank, "exit", when, f"rank {first.rank}'s process ended at {fmt.clock_ms(when)} "
                                                 f"({processes.how_words(ex)}){after}{crashed}")
    live = held or _stuck(store)
    if live is not None:
        return live
    if len(e.aborted) >= 2 and len(e.died) == 1:
        r = e.died[0]
        return Culprit(r, "no_abort", None, f"rank {r} did not abort while {ranks_text(e.aborted)} did (their "
                                            "collective timed out waiting for it)")
    if e.first is not None:
        return Culprit(e.first, "first_stop", lives.get(e.first),
                       f"rank {e.first} stopped first, at step {fmt.step(e.first_step)}, {fmt.duration(e.ahead)} "
                       "before the others")
    return _alone(e, lives)


def _alone(e: Ending, lives: dict[int, float]) -> Culprit | None:
    """What is left when no time orders the ends: the one rank that aborted while the others died with no
    error (``abort``), or the job's one rank that did not finish (``died``/``abort``). Ranks that all died
    (a whole job killed at once) or all aborted are told apart by nothing: None."""
    if len(e.aborted) == 1 and e.died:
        r = e.aborted[0]
        return Culprit(r, "abort", lives.get(r), f"rank {r} aborted; {ranks_text(e.died)} ended with no error "
                                                 "of their own")
    ended = e.aborted + e.died
    if len(ended) == 1:
        r = ended[0]
        fact = "abort" if e.aborted else "died"
        return Culprit(r, fact, lives.get(r), f"rank {r} {'aborted' if e.aborted else 'died'}, the job's only "
                                              "rank that did not finish")
    return None


def culprit(store: Snapshot, opts: Options) -> Culprit | None:
    """The rank the job's trouble is laid at, and why: for a dead or failed job the ending's culprit (a fact
    names it, else None); for a job still running or stalled, a rank whose process
    is stopped, traced or in D, or the odd one out of a hang's stacks; None when nothing names one."""
    status = figures.status(store, opts)
    if status in ("dead", "failed"):
        return ending(store, opts).named
    if status in ("running", "stalled", "starting"):
        return _held(store) or _stuck(store)
    return None


def _held(store: Snapshot) -> Culprit | None:
    """The rank whose process is (or was, until it ended: the others gave up waiting for it) stopped, traced
    or in D: the earliest such."""
    for facts, words in ((processes.holding, "is {state} since {since}"),
                         (processes.held_until_end, "was {state} from {since} until it ended")):
        found = [(r, p) for r, d in sorted(store.ranks.items()) if (p := facts(d)) is not None]
        if found:
            r, p = min(found, key=lambda rp: float(rp[1]["since"]))
            since = float(p["since"])
            said = words.format(state=processes.state_words(p), since=fmt.clock_ms(since))
            return Culprit(r, "state", since, f"rank {r}'s process {said}")
    return None


def _stuck(store: Snapshot) -> Culprit | None:
    """In a hang, the rank whose stack differs from all the others' (mstop.engine.processes.odd_one)."""
    odd = processes.odd_one(store)
    return Culprit(odd.rank, "stack", odd.time, stack_words(store, odd)) if odd is not None else None


def stack_words(store: Snapshot, odd: processes.Where) -> str:
    """``rank 2 is in next (mindspore/dataset/engine/iterators.py:120) in step 120, while ranks 0-1, 3 wait
    in _exec_pip (mindspore/common/api.py:1010)`` (the step it is in: the one after the last that ended)."""
    groups = processes.stack_groups(store)
    rest = [w for g in groups for w in g if w.rank != odd.rank]
    since = f" in step {odd.step + 1:,}" if odd.step is not None else " before its first step"
    others = f", while {ranks_text([w.rank for w in rest])} wait in {rest[0].place}" if rest else ""
    return f"rank {odd.rank} is in {odd.place}{since}{others}"


def _seconds(s: float) -> str:
    """A short gap to the hundredth of a second (exit times are that exact), longer ones as durations."""
    return f"{s:.2f} s" if s < 10 else fmt.duration(s)


def margin(store: Snapshot) -> float:
    """How much earlier than the others a rank must have stopped to be called the first: 2 s, or two of the
    job's step times (ranks of one step end within a step of each other)."""
    st = figures.step_time(store)
    return max(2.0, 2.0 * st) if st is not None and math.isfinite(st) else 2.0


def _abort_time(d: RankData) -> float | None:
    s = rankstate.last_session(d)
    times = [float(a["time"]) for a in d.aborts if a.get("session") is None or str(a["session"]) == s]
    return min(times) if times else rankstate.last_life(d)


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


def dead_message(store: Snapshot, opts: Options) -> str:
    """The ``job_dead`` alert's words: who died and who finished, or who stopped first."""
    e = ending(store, opts)
    quiet = fmt.duration(figures.seconds_since_life(store, opts))
    # the silence the verdict waited: the start-up allowance (30 s) for a job with no row yet, not the 15 s
    waited = figures.silence_verdict(store, opts)
    limit = fmt.duration(waited if waited is not None else figures.dead_after(store, opts))
    if e.finished and e.died:
        died = "; ".join(f"rank {r} died at step {fmt.step(e.steps[r])} (no end)" for r in e.died[:3])
        more = f" and {len(e.died) - 3} more" if len(e.died) > 3 else ""
        return f"{died}{more}; {ranks_text(e.finished)} finished: the job did not finish cleanly"
    first = f"{e.named.words}; " if e.named is not None else ""
    ended = [r for r in e.died + e.aborted if processes.exited(store.ranks[r]) is not None]
    every = ended and len(ended) == len(e.died) + len(e.aborted)
    lost = sorted(r for r, d in store.ranks.items() if rankstate.lost(d) is not None)
    if lost:  # the scheduler names the worker it stopped hearing from first: measured here, when rank 1 was
        # killed it named rank 0 (blocked in a collective with the dead one) as often as rank 1
        return (f"{first}msrun's scheduler timed out {ranks_text(lost)} and ended the job: a worker exited "
                "abnormally, was killed or stopped (the scheduler names the first it stopped hearing from, "
                "not always the one that died: see the worker logs)"
                + (f"; every process of the job has ended ({_hows(store, ended)})" if every else ""))
    if every:
        return f"{first}every process of the job has ended ({_hows(store, ended)})"
    return (f"{first}no rank shows a sign of life for {quiet} (dead after {limit}): the job was killed or its "
            "hosts are gone")


def _hows(store: Snapshot, ranks: list[int]) -> str:
    """``4 killed by SIGKILL`` / ``rank 1 killed by SIGKILL, ranks 0, 2-3 killed by SIGTERM`` / ``ranks 0-3:
    found ended (their logs show them on this host; their order is unknown)``."""
    by: dict[str, list[int]] = {}
    for r in ranks:
        e = processes.exited(store.ranks[r]) or {}
        how = processes.how_words(e)
        if e.get("found_ended"):
            how = ("found ended (their life locks let go, their witnesses gone with them: in no known order)"
                   if e.get("found_by") == "life lock" else
                   "found ended (their logs show them on this host, in no known order)")
        by.setdefault(how, []).append(r)
    if len(by) == 1:
        (how,) = by
        return f"{ranks_text(ranks)}: {how}"
    return ", ".join(f"{ranks_text(rs)} {how}" for how, rs in sorted(by.items(), key=lambda kv: min(kv[1])))


def failure_message(store: Snapshot, opts: Options) -> tuple[str, str]:
    """The ``job_failed`` alert's words (the culprit's first meaningful error line) and the whole error."""
    e = ending(store, opts)
    if e.named is None:
        return _no_culprit_failure(store, e)
    culprit = e.named.rank
    d = store.ranks[culprit]
    if culprit not in e.aborted:  # it died or hung; the others' errors followed
        return (f"{e.named.words} (no end, no error); then {ranks_text(e.aborted)} aborted"), ""
    s = rankstate.last_session(d)
    mine = [a for a in d.aborts if a.get("session") is None or str(a["session"]) == s] or d.aborts
    a = min(mine, key=lambda x: float(x["time"]))
    step = a.get("step")
    # an abort event names the step of the rank's last row: the error came after it (in the next step, or
    # after training), never "at" it ("aborted at step 119" was said of an exception raised in step 120)
    where = f" after step {fmt.step(step)}" if isinstance(step, (int, float)) and math.isfinite(step) else ""
    error = str(a.get("error") or "no error given")
    who = f"rank {culprit} aborted{where}"
    if e.named.fact == "exit" and len(e.aborted) + len(e.died) > 1:
        who = f"{e.named.words}: it aborted{where}"
    elif e.first == culprit and len(e.aborted) + len(e.died) > 1:
        who += f", {fmt.duration(e.ahead)} before the others"
    return f"{who}: {first_line(error)}", error


def earliest_abort(store: Snapshot, e: Ending) -> tuple[dict, int] | None:
    """The earliest ``abort`` event of the ranks that aborted, and its rank (None: no abort)."""
    said = [(a, r) for r in e.aborted for a in store.ranks[r].aborts]
    return min(said, key=lambda ar: float(ar[0]["time"])) if said else None


def error_rank(store: Snapshot, opts: Options) -> int | None:
    """Whose log a dead or failed run's error comes from (the header, ``L``, ``summary``'s ``error_line``):
    the culprit, else the rank whose abort came first (as the ``job_failed`` alert quotes it), else None."""
    e = ending(store, opts)
    if e.culprit is not None:
        return e.culprit
    first = earliest_abort(store, e)
    return first[1] if first is not None else None


def _no_culprit_failure(store: Snapshot, e: Ending) -> tuple[str, str]:
    """A failure no fact lays at one rank: every rank that aborted, and the earliest error as what they
    said (not as the cause)."""
    found = earliest_abort(store, e)
    if found is None:  # processes that exited with an error code, no abort written
        ended = [r for r in e.died if processes.exited(store.ranks[r]) is not None]
        if ended:
            return (f"every process ended and none wrote an error ({_hows(store, ended)}): see the ranks' "
                    "logs"), ""
        return "a rank aborted", ""
    a, r = found
    error = str(a.get("error") or "no error given")
    return (f"{ranks_text(e.aborted)} aborted and no fact tells which began it; the earliest error, rank {r}'s: "
            f"{first_line(error)}"), error


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
