"""What the ranks' processes say (issue 38): their end, their state, their stacks.

The files of an ``msrun`` job whose rank died stop at the same step on every rank (msrun ends the others
within a second), so the files alone cannot say which rank it was; the processes can. Each rank's exit
witness (mstop_writer.witness) writes ``exit`` (when and how the process ended), ``proc`` (its state, CPU,
RSS, threads from /proc) and ``stack`` events (every thread's stack, dumped by the rank's faulthandler when
a step overran or it crashed). This module reads them for the rank's *current* process: the pid of its
newest ``start`` event (a restarted rank's old process ended long ago and says nothing of the new one).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Any

from .store import RankData, Snapshot
from .store.rank import HOLDING

#: process states (``/proc/PID/stat``) and what they mean for a training rank
STATES = {"R": "running", "S": "sleeping", "D": "in uninterruptible sleep (D)", "T": "stopped",
          "t": "stopped by a debugger", "Z": "a zombie", "X": "dead", "I": "idle"}


def current_pid(d: RankData) -> int | None:
    """The pid of the rank's newest process (its newest start event's), or None (no start, no pid)."""
    pid = d.last_start.get("pid") if d.last_start else None
    return pid if isinstance(pid, int) and not isinstance(pid, bool) else None


def _start_time(d: RankData) -> float:
    return float(d.last_start["time"]) if d.last_start else -math.inf


def exited(d: RankData) -> dict[str, Any] | None:
    """The ``exit`` event of the rank's current process, or None while it runs (or nobody watched it)."""
    pid, since = current_pid(d), _start_time(d)
    for e in reversed(d.exits):
        if (pid is None or e.get("pid") == pid) and float(e["time"]) >= since - 1.0:
            return e
    return None


def clean_exit(e: dict[str, Any] | None) -> bool:
    """An exit with status 0: the process ended of its own accord, successfully."""
    return e is not None and e.get("how") == "exit" and e.get("code") == 0


def process(d: RankData) -> dict[str, Any] | None:
    """The newest ``proc`` facts of the rank's current process (state, cpu_s, rss, threads, since,
    cpu_rate), or None."""
    pid = current_pid(d)
    if pid is not None:
        p = d.procs.get(pid)
        return p if p is not None and float(p["time"]) >= _start_time(d) - 1.0 else None
    if d.procs:
        newest = max(d.procs.values(), key=lambda p: float(p["time"]))
        return newest if float(newest["time"]) >= _start_time(d) - 1.0 else None
    return None


#: seconds of a process's samples its rates are measured over
RATES_S = 60.0


def rates(p: dict[str, Any] | None, since: float = -math.inf) -> tuple[float, float]:
    """A process's CPU seconds a second and the share of the time its main thread was runnable but not
    running, over its last samples (its ``proc`` events' trail, mstop.engine.store) within RATES_S seconds of
    the newest and from ``since`` on (its session's first row: compilation's CPU is no step's; a rank busier
    by 0.15 s a step read as 0.078 s with it, seconds into its steps); NaN with fewer than two such samples
    (or no run delay: an older witness, a kernel without it)."""
    trail = p.get("trail", ()) if p else ()
    if len(trail) < 2:
        return math.nan, math.nan
    last = trail[-1]
    first = next((s for s in trail if s[0] >= max(last[0] - RATES_S, since)), last)
    dt = last[0] - first[0]
    if dt <= 0:
        return math.nan, math.nan
    cpu = max(0.0, (last[1] - first[1]) / dt)
    delay = math.nan if last[2] is None or first[2] is None else max(0.0, (last[2] - first[2]) / dt)
    return cpu, delay


#: seconds a rank's process must have been seen in D, its rank writing no row since, before it holds the others
#: up: a process is in D for every disk read and every page it faults in, and on a loaded host its watcher saw
#: a healthy rank in D at two looks a second apart. D that lasts is told by a later ``proc`` event (a change or
#: the heartbeat, 5 s) still saying D
D_HOLD_S = 3.0


def holding(d: RankData) -> dict[str, Any] | None:
    """The current process's facts when it is stopped or traced, or in D for D_HOLD_S with no row of its rank
    since it went in (and has not exited since)."""
    p = process(d)
    if p is None or p.get("state") not in HOLDING:
        return None
    e = exited(d)
    if e is not None and float(e["time"]) >= float(p["time"]):
        return None
    return p if p["state"] != "D" or stuck_in_d(d, p) else None


def stuck_in_d(d: RankData, p: dict[str, Any], until: float | None = None) -> bool:
    """Whether the process's D (its facts ``p``) has lasted D_HOLD_S by its watcher's reports (or to ``until``:
    its end), with no row of the rank written since it began: a rank whose steps go on is doing I/O, not stuck
    in it."""
    since = float(p["since"])
    end = float(p["time"]) if until is None else until
    return end - since >= D_HOLD_S and not (d.rows and d.last("time") >= since)


#: seconds between the end of a stopped stretch and the process's end within which it counts as held until its
#: end: a kill wakes a stopped process to die, and its witness may see it running for that moment
HELD_GRACE = 3.0


def held_until_end(d: RankData) -> dict[str, Any] | None:
    """The current process's last facts when it was stopped, traced or in D until it ended (or until a moment
    before: the kill that ended it woke it, HELD_GRACE), as facts of that held state."""
    e = exited(d)
    p = process(d)
    if e is None or p is None:
        return None
    if p.get("state") in HOLDING and e.get("last_state") in HOLDING \
            and (p["state"] != "D" or stuck_in_d(d, p, float(e["time"]))):
        return p
    held = p.get("held")
    if isinstance(held, dict) and float(e["time"]) - float(held["until"]) <= HELD_GRACE \
            and (held["state"] != "D" or stuck_in_d(d, held, float(held["until"]))):
        return {**p, "state": held["state"], "since": held["since"]}
    return None


def how_words(e: dict[str, Any]) -> str:
    """``killed by SIGKILL``, ``exited with code 1``, ``ended`` (its status was reaped before it was read)."""
    if e.get("how") == "signal":
        return f"killed by {e.get('signal') or 'a signal'}"
    if e.get("how") == "exit":
        return f"exited with code {e.get('code')}"
    return "ended"


def state_words(p: dict[str, Any]) -> str:
    """``stopped (SIGSTOP?)``, ``in uninterruptible sleep (D)``: a holding state in words."""
    s = str(p.get("state"))
    if s == "T":
        return "stopped (SIGSTOP or Ctrl-Z)"
    return STATES.get(s, s)


#: how much earlier a process must have ended than another to be called the first by their times alone: exit
#: times of one host are read off one clock, each when its witness woke on the pidfd (milliseconds, more on a
#: loaded host: ranks killed together must not look ordered). Across hosts the clocks agree only so well.
#: msrun ends the others 0-1 s after the first death (it polls its workers once a second): closer ends are
#: ordered by sight (:func:`outlived`), not by time
EXIT_MARGIN_ONE_HOST = 0.1
EXIT_MARGIN_HOSTS = 1.0


@dataclass(frozen=True)
class End:
    """One rank's end as the ordering of ends needs it: its time on the viewer's clock, its ``exit`` event
    (None: the end is known by its files only) and its ``start`` event (host, boot, pid namespace)."""

    rank: int
    time: float
    exit: dict[str, Any] | None
    start: dict[str, Any]


def _one_machine(a: End, b: End) -> bool:
    sa, sb = a.start, b.start
    return (sa.get("host") is not None and sa.get("host") == sb.get("host")
            and sa.get("boot_id") == sb.get("boot_id"))


def _one_watcher(a: End, b: End) -> bool:
    ea, eb = a.exit or {}, b.exit or {}
    return (ea.get("source") in ("viewer", "follower") and ea.get("source") == eb.get("source")
            and ea.get("host") == eb.get("host"))


def outlived(a: End, b: End) -> bool:
    """Rank b's process still ran when rank a's end was seen: b's pid is among the ``peers_alive`` of a's exit
    (its witness read them from the launcher's children, a watcher from the workers it watched, after a's end
    was certain), and the two pids are of one pid namespace (one machine and namespace, or one watcher)."""
    ea, eb = a.exit, b.exit
    if ea is None or eb is None or not isinstance(ea.get("peers_alive"), list) or eb.get("pid") is None:
        return False
    if eb["pid"] not in ea["peers_alive"]:
        return False
    return _one_watcher(a, b) or _one_namespace(a, b)


def _one_namespace(a: End, b: End) -> bool:
    """The two ranks' pids are of one pid namespace on one machine: one names the other's process."""
    return _one_machine(a, b) and a.start.get("pid_ns") == b.start.get("pid_ns")


def ended_before_seen(a: End, b: End) -> bool:
    """Rank b's process no longer ran when rank a's end was seen: a's witness looked at its launcher's other
    children (``peers_alive``) and b, a child of that same launcher (``ppid`` at their starts) in one pid
    namespace, was not among them. Both ended before a's end was seen, so the witnesses' times (each when its
    own witness woke: a quarter of a second apart on a loaded host) cannot order them."""
    ea, eb = a.exit, b.exit
    if ea is None or eb is None or not isinstance(ea.get("peers_alive"), list) or eb.get("pid") is None:
        return False
    if eb["pid"] in ea["peers_alive"] or ea.get("source") != "witness":
        return False
    ppid = a.start.get("ppid")
    return isinstance(ppid, int) and ppid > 1 and ppid == b.start.get("ppid") and _one_namespace(a, b)


def first_end(ends: list[End], files_margin: float) -> tuple[End, float] | None:
    """The end that came before every other by a fact: seen while the other still ran (:func:`outlived`), or
    earlier by more than the margin of the two times (one clock: EXIT_MARGIN_ONE_HOST, two hosts:
    EXIT_MARGIN_HOSTS, an end known by the files only: ``files_margin``) unless the other was seen ended by
    then (:func:`ended_before_seen`); only an end an exit tells can be first. With its lead over the next end
    by time (negative when sight ordered ends its clock could not)."""
    for a in sorted(ends, key=lambda e: (e.time, e.rank)):
        if a.exit is None:
            continue
        lead = math.inf
        for b in ends:
            if b is a:
                continue
            gap = b.time - a.time
            if b.exit is not None and outlived(a, b):
                lead = min(lead, gap)
                continue
            if ended_before_seen(a, b):
                break
            if b.exit is None:
                need = files_margin
            else:
                need = EXIT_MARGIN_ONE_HOST if _one_machine(a, b) or _one_watcher(a, b) else EXIT_MARGIN_HOSTS
            if gap <= need:
                break
            lead = min(lead, gap)
        else:
            return a, lead
    return None


# -- stacks --------------------------------------------------------------------------------------------------

@dataclass
class Where:
    """Where one rank's main thread is, from its newest stack dump."""

    rank: int
    frames: list[str]  # innermost first
    step: int | None
    since: float | None
    reason: str  # "timeout" (a step overran), "asked" (its witness's first look) or "fatal" (a crash)
    error: str | None
    time: float
    stack: dict[str, Any] | None = None  # the dump itself: every thread's frames

    @property
    def key(self) -> tuple[str, ...]:
        """What ranks stuck at the same place share: the innermost frames' functions and files (line numbers
        differ between MindSpore builds, not between the ranks of one job: they are kept)."""
        return tuple(self.frames[:KEY_FRAMES])

    @property
    def place(self) -> str:
        """The innermost frame in words: ``_exec_pip (mindspore/common/api.py:1234)``."""
        return short_frame(self.frames[0]) if self.frames else "no Python frame"

    @property
    def cut(self) -> bool:
        """A crash's dump that faulthandler did not finish (the witness's ``cut``: a thread's line with no
        frame under it)."""
        return self.reason == "fatal" and bool((self.stack or {}).get("cut"))

    @property
    def crash_words(self) -> str:
        """A crash and where its answer is, for a culprit's words and the log pane: ``crashed (Segmentation
        fault): its Python stack at the crash is in the stacks view``, or that the stack was cut short."""
        said = f"crashed ({self.error or 'a fatal signal'}): its Python stack at the crash "
        if self.cut:
            return said + ("was cut short (faulthandler stopped within its dump, most often a second fault while "
                           "it read another thread): what it wrote is in the stacks view")
        return said + "is in the stacks view"


#: frames two ranks must share to be called stuck at the same place
KEY_FRAMES = 3
_FRAME = re.compile(r"^(?P<func>.*) \((?P<path>.*):(?P<line>\d+)\)$")


def short_frame(frame: str) -> str:
    """``func (/long/path/mindspore/common/api.py:12)`` as ``func (mindspore/common/api.py:12)``: the path from
    the package's folder (site-packages' child) or its last two parts."""
    m = _FRAME.match(frame)
    if m is None:
        return frame
    path = m.group("path")
    parts = path.replace(os.sep, "/").split("/")
    if "site-packages" in parts:
        parts = parts[parts.index("site-packages") + 1:]
    else:
        parts = parts[-2:]
    return f"{m.group('func')} ({'/'.join(parts)}:{m.group('line')})"


def main_thread(stack: dict[str, Any]) -> list[str]:
    """The frames of the thread that runs the training: the one whose outermost frame is ``<module>`` (the
    script), else the current thread (a crash), else the longest."""
    threads = [t for t in stack.get("stacks") or [] if isinstance(t, dict)]
    if not threads:
        return []
    for t in threads:
        frames = t.get("frames") or []
        if frames and str(frames[-1]).startswith("<module> "):
            return [str(f) for f in frames]
    current = [t for t in threads if t.get("current")]
    pick = current[0] if current else max(threads, key=lambda t: len(t.get("frames") or []))
    return [str(f) for f in pick.get("frames") or []]


def where(d: RankData, *, stuck_only: bool = True) -> Where | None:
    """Where the rank's current process is by its newest stack dump; with ``stuck_only``, only a dump no row
    came after (the rank is still in that step)."""
    pid = current_pid(d)
    for s in reversed(d.stacks):
        if pid is not None and s.get("pid") not in (None, pid):
            continue
        t = float(s["time"])
        if t < _start_time(d) - 1.0:
            return None
        if stuck_only and d.rows and d.last("time") > t:
            return None  # the step ended after all
        step = s.get("step")
        return Where(d.rank, main_thread(s), int(step) if isinstance(step, (int, float)) else None,
                     float(s["since"]) if isinstance(s.get("since"), (int, float)) else None,
                     str(s.get("reason") or "timeout"), s.get("error"), t, s)
    return None


#: Python's own library (threading, queue, selectors, ...): never the frame that matters
_STDLIB = re.compile(r"[/\\]lib[/\\]python3[.\d]*[/\\](?!site-packages|dist-packages)|^<frozen |\(<frozen ")
_LIBRARY = re.compile(r"[/\\](site|dist)-packages[/\\]")
#: a stuck thread's kind by its frames, first match wins (issue 60): waiting on input, in the job's
#: communication (a graph's collective runs inside the graph's call), in a file, on a lock
STUCK_KINDS = (
    ("input", re.compile(r"mindspore[/\\]dataset|__getitem__|GeneratorDataset|_get_next|[/\\]datasets?[/\\]")),
    ("collective", re.compile(r"mindspore[/\\]communication|all_?reduce|all_?gather|barrier|hccl|gloo|nccl|"
                              r"_exec_pip|compile_and_run|mindspore[/\\]common[/\\]api\.py", re.I)),
    ("io", re.compile(r"^(\w*_)?(open|read|readinto|readline|write|flush|fsync|save|load|dump)(_\w*)? \(|"
                      r"checkpoint|ckpt|serialization\.py|load_param_into_net")),
    ("lock", re.compile(r"^(acquire|wait|join|_wait_for_tstate_lock) \(.*threading\.py")),
)


def _own(frame: str) -> bool:
    """A frame of the user's or a framework's code (not Python's own library)."""
    return not _STDLIB.search(frame)


def stuck_at(stack: dict[str, Any]) -> tuple[str, str]:
    """The frame that matters in a dump and its kind (``input``, ``collective``, ``io``, ``lock``,
    ``host_compute``): the main thread's innermost frame of the user's or a framework's code; where that thread
    waits for its input (a dataset's iterator), the innermost frame of the user's own code in another thread
    (a dataset worker running the user's ``__getitem__`` or map function) is what it waits for."""
    main = main_thread(stack)
    own = next((f for f in main if _own(f)), main[0] if main else "no Python frame")
    kind = next((k for k, pat in STUCK_KINDS if any(pat.search(f) for f in main[:8])), "host_compute")
    if main and not _own(main[0]) and STUCK_KINDS[3][1].search(main[0]) and kind == "host_compute":
        kind = "lock"  # waiting in threading on a lock or a condition, called from the job's code
    if kind == "input":
        for t in stack.get("stacks") or []:
            frames = [str(f) for f in (t.get("frames") or [])] if isinstance(t, dict) else []
            user = next((f for f in frames if _own(f) and not _LIBRARY.search(f)), None)
            if frames != main and user is not None and any(STUCK_KINDS[0][1].search(f) for f in frames):
                return user, "input"
    return own, kind


def stack_groups(store: Snapshot, *, stuck_only: bool = True) -> list[list[Where]]:
    """The ranks with a stack dump, grouped by the place their main thread is at; the largest group first."""
    groups: dict[tuple[str, ...], list[Where]] = {}
    for r in store.ranks_with("stacks"):  # most ranks of a healthy job have none
        w = where(store.ranks[r], stuck_only=stuck_only)
        if w is not None:
            groups.setdefault(w.key, []).append(w)
    return sorted(groups.values(), key=lambda g: (-len(g), g[0].rank))


def odd_one(store: Snapshot) -> Where | None:
    """In a hang, the rank whose stack differs from all the others' (in its input while the rest wait in the
    collective): every stuck rank dumped, one alone at its place, the others all at one other place."""
    groups = stack_groups(store)
    if len(groups) != 2 or len(groups[1]) != 1 or len(groups[0]) < 2:
        return None
    ranked = [r for r, d in store.ranks.items() if d.rows or d.starts]
    if sum(len(g) for g in groups) < len(ranked):
        return None  # a rank without a dump could be the odd one as well
    return groups[1][0]


def facts(d: RankData) -> dict[str, Any] | None:
    """The rank's current process as the ranks view and ``summary --json`` show it: pid, host, state (a
    letter, ``ended`` once it exited), CPU (cores busy, from the last two samples), RSS (bytes), threads,
    since when the state holds, and how it ended. None when no witness reported on it."""
    p, e = process(d), exited(d)
    if p is None and e is None:
        return None
    start = d.last_start or {}
    out: dict[str, Any] = {"pid": current_pid(d) if current_pid(d) is not None else (p or e or {}).get("pid"),
                           "host": start.get("host"), "state": None, "cpu": None, "rss": None, "threads": None,
                           "since": None, "exit": None}
    if p is not None:
        out.update(state=p.get("state"), cpu=p.get("cpu_rate"), rss=p.get("rss"), threads=p.get("threads"),
                   since=p.get("since"))
    if e is not None:
        out["state"] = "ended"
        out["since"] = float(e["time"])
        out["exit"] = {k: e.get(k) for k in ("time", "how", "signal", "code", "found_ended") if e.get(k) is not None}
        out["cpu"] = None
    return out


@dataclass
class StackGroup:
    """Ranks whose main threads are at one place, as the stacks view shows them."""

    ranks: list[int]
    place: str  # the innermost frame, short
    steps: list[int]  # the steps they are stuck in (or crashed in)
    since: float | None  # the earliest of their last step ends
    reason: str  # "timeout", "asked" (a first look) or "fatal"
    error: str | None
    frames: list[str]  # the first rank's main thread, innermost first, short paths
    stale: bool  # every rank of the group went on after its dump (an overrun that passed)
    cut: bool = False  # a crash's dump faulthandler did not finish (Where.cut)


def stack_view(store: Snapshot) -> tuple[list[StackGroup], list[int]]:
    """Each rank's newest stack, ranks grouped by their innermost frames (the largest group first), and the
    ranks with no stack (their steps end on time, or no witness runs beside them)."""
    groups: dict[tuple[str, ...], list[tuple[Where, bool]]] = {}
    none = []
    for r in sorted(store.ranks):
        d = store.ranks[r]
        w = where(d, stuck_only=False)
        if w is None:
            if d.rows or d.starts:
                none.append(r)
            continue
        stale = where(d, stuck_only=True) is None
        groups.setdefault((w.reason == "fatal", w.cut, *w.key), []).append((w, stale))  # a first look and a timed
        # dump at one place are one group
    out = []
    for members in groups.values():
        ws = [w for w, _ in members]
        sinces = [w.since for w in ws if w.since is not None]
        out.append(StackGroup(ranks=[w.rank for w in ws], place=ws[0].place,
                              steps=sorted({w.step for w in ws if w.step is not None}),
                              since=min(sinces) if sinces else None, reason=ws[0].reason, error=ws[0].error,
                              frames=[short_frame(f) for f in ws[0].frames], stale=all(s for _, s in members),
                              cut=ws[0].cut))
    out.sort(key=lambda g: (g.stale, -len(g.ranks), g.ranks[0]))
    return out, none
