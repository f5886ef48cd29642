"""The exit witness: a tiny process beside each rank that says when and how the rank ended.

When one rank of an ``msrun`` job dies, msrun ends the others within a second, and their files stop at the
same step: which rank died first is told by the processes, not by the files. So the writer starts this
module as its own program (``python -I -S witness.py ...``, standard library only, about 8 MB) in its own
session (a kill of the job's process group does not take it first). It watches the rank's process:

- its end, within 0.1 s: ``os.pidfd_open`` and ``poll`` where the kernel has them (the kernel wakes it),
  else a poll of ``/proc/PID/stat`` every 0.1 s. It appends an ``exit`` event (time to the millisecond, the exit status
  when the process is still a zombie to read it from, the last state seen, and ``peers_alive``: the pids of its
  parent's other children still running at that moment, an order of ends no clock margin blurs) and ends itself;
- its process facts from ``/proc/PID/stat``, looked at every second: state (R/S/D/T/t/Z), CPU seconds,
  RSS, threads, and from ``/proc/PID/schedstat`` the seconds its main thread was runnable but not running
  (``run_delay_s``: a host busy with something else), as a ``proc`` event every heartbeat interval, and at
  once when the state becomes stopped, uninterruptible (D for two looks) or zombie, or comes back (a stopped
  rank writes no heartbeat of its own);
- the stacks file the rank's ``faulthandler`` writes into (``rank<R>.stacks.txt``, :mod:`.stacks`): each
  dump that appears becomes a ``stack`` event (threads and frames as JSON), read while the rank is stuck or
  just after it crashed; and the first look: a rank silent past the pace its stacks file's header gives is
  sent the signal that header names, once per silence, and dumps its stacks at once (:meth:`Witness.ask`).

It writes only the rank's events file (opened ``O_APPEND|O_NOFOLLOW``, never created, a regular file only),
sends only that signal to only its rank, and reads only ``/proc`` and the stacks file. The process it watches
is identified by pid and start time (``/proc/PID/stat`` field 22): a pid reused by another process is an end,
never a new life. It outlives the
rank by at most one poll (0.1 s) plus one write.
"""

from __future__ import annotations

import json
import math
import os
import select
import signal
import stat
import sys
import time

#: Seconds between two looks at the process's facts and its stacks file. Its end needs no look: the pidfd
#: wakes the witness at once (a kernel without pidfds is polled every POLL_S instead)
LOOK_S = 1.0
POLL_S = 0.1
#: seconds between the looks just after a first look was asked for (the dump holding still is read at once)
HURRY_S = 0.2
#: most threads and frames per thread a stack event carries (faulthandler itself stops at 100 of each)
MAX_THREADS = 32
MAX_FRAMES = 48
#: the most of a stacks file read at once
STACKS_READ = 1 << 20


def proc_facts(pid: int, ticks: float, page: int) -> dict | None:
    """The process's state, CPU seconds, RSS (bytes), threads, start time (ticks since boot) and, for a
    zombie, its exit status (field 52, readable while the parent has not reaped it); None when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    close = raw.rfind(b")")  # the command name may hold spaces and parentheses: fields follow the last ')'
    fields = raw[close + 2:].split()
    if len(fields) < 22:
        return None
    out = {
        "state": fields[0].decode("ascii", "replace"),
        "ppid": int(fields[1]),
        "cpu_s": round((int(fields[11]) + int(fields[12])) / ticks, 3),
        "threads": int(fields[17]),
        "start_ticks": int(fields[19]),
        "rss": int(fields[21]) * page,
        "exiting": bool(int(fields[6]) & PF_EXITING),
    }
    if len(fields) >= 50 and out["state"] == "Z":
        out["exit_status"] = int(fields[49])
    delay = run_delay(pid)
    if delay is not None:
        out["run_delay_s"] = delay
    return out


def run_delay(pid: int) -> float | None:
    """Seconds the process's main thread has been runnable but not running (waiting for a CPU another task
    held), from ``/proc/PID/schedstat``'s second field (nanoseconds; the kernel's scheduler statistics): a host
    busy with something else shows here. None where the kernel keeps no such statistics."""
    try:
        with open(f"/proc/{pid}/schedstat", "rb") as f:
            return round(int(f.read().split()[1]) / 1e9, 4)
    except (OSError, ValueError, IndexError):
        return None


def running(pid: int, ticks: float, page: int, start_ticks: int | None = None) -> bool:
    """Process ``pid`` exists and has not ended (neither zombie nor dead, nor ending: a SIGKILL pending, which
    a process of a whole job killed at once holds while it waits for a CPU to exit on, or already exiting);
    ``start_ticks``: and it is the process that started then (not another given its pid since)."""
    facts = proc_facts(pid, ticks, page)
    return (facts is not None and facts["state"] not in "ZX" and not facts["exiting"] and not killed(pid)
            and (start_ticks is None or facts["start_ticks"] == start_ticks))


#: PF_EXITING in ``/proc/PID/stat``'s flags (field 9): the main thread has taken its fatal signal and is in the
#: kernel's exit. It still shows R or D while a large process's memory is freed, tens of milliseconds on a
#: loaded host: of a whole job killed at once, one rank's end was seen while the others were exiting so
PF_EXITING = 0x4


#: SIGKILL's bit in /proc/PID/status's signal masks
_SIGKILL_BIT = 1 << 8


def killed(pid: int) -> bool:
    """A SIGKILL is pending for the process (its own or its thread group's), so it is ending: no order of ends
    can be seen between it and an end already certain."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith((b"SigPnd:", b"ShdPnd:")) and int(line.split()[1], 16) & _SIGKILL_BIT:
                    return True
    except (OSError, ValueError, IndexError):
        return False
    return False


def children(ppid: int) -> list[int]:
    """The pids of process ``ppid``'s children (``/proc/PPID/task/*/children``; where the kernel lacks that
    file, a scan of ``/proc`` for their parent field). Read once, at an end: not worth a cheaper way."""
    out: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{ppid}/task")
    except OSError:
        return []
    found = False
    for tid in tasks:
        try:
            with open(f"/proc/{ppid}/task/{tid}/children", "rb") as f:
                out.update(int(x) for x in f.read().split())
            found = True
        except (OSError, ValueError):
            continue
    if not found:
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    with open(f"/proc/{name}/stat", "rb") as f:
                        raw = f.read()
                except OSError:
                    continue
                fields = raw[raw.rfind(b")") + 2:].split()
                if len(fields) > 1 and fields[1] == str(ppid).encode():
                    out.add(int(name))
    return sorted(out)


def describe_status(status: int) -> dict:
    """A wait status (as /proc gives a zombie's) in the fields of an ``exit`` event."""
    import signal

    if status & 0x7F:
        sig = status & 0x7F
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return {"how": "signal", "signal": name, "code": -sig, "core": bool(status & 0x80)}
    return {"how": "exit", "code": (status >> 8) & 0xFF}


class Witness:
    """Watches one process; writes its ``proc``, ``stack`` and ``exit`` events."""

    def __init__(self, pid: int, start_ticks: int, events: str, stacks: str | None, rank: int,
                 interval: float) -> None:
        self.pid, self.start_ticks, self.rank = pid, start_ticks, rank
        self.events_path, self.stacks_path = events, stacks
        self.interval = interval
        self.ticks = float(os.sysconf("SC_CLK_TCK"))
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.fd: int | None = None
        self.last: dict | None = None
        self.last_written = 0.0
        self.d_seen = 0
        self.said_state: str | None = None
        self.stacks_at = 0  # bytes of the stacks file turned into events
        self.stacks_size = -1  # its size at the previous look: a dump is read once its size holds still
        self.header: dict = {}  # the stacks file's newest header: the rank's last step end, and its first look
        self.head: str | None = None  # the header of the last dump read: a dump after it is under it too
        self.asked: float | None = None  # the silence (its ``since``) the rank was asked for its stacks in
        self.pidfd: int | None = None
        self.hurry = 0  # looks left at HURRY_S (just after asking)
        # the events file as the writer started this witness: the session's start event comes after (its
        # fields name this process), and the witness's first event waits for it (the file begins a session
        # with its start); an interval at most
        self.born = time.monotonic()
        self.size_at_birth = self.size()
        #: the rank's parent (its launcher), known from the first look at its process: a rank killed before
        #: the witness's first report (its start event not yet seen) still has its launcher's other workers
        #: looked at when it ends
        self.ppid: int | None = None
        self._note_parent(proc_facts(pid, self.ticks, self.page))

    def size(self) -> int:
        try:
            return os.stat(self.events_path).st_size
        except OSError:
            return 0

    def started(self) -> bool:
        """Whether the session's start event is written (the events file grew), or an interval passed."""
        return time.monotonic() - self.born >= self.interval or self.size() > self.size_at_birth

    # -- writing ------------------------------------------------------------------

    def write(self, obj: dict) -> None:
        try:
            text = json.dumps(obj, separators=(",", ":"), allow_nan=False)
        except ValueError:  # a number that is no JSON (inf, nan): written as null, the line stays a line
            text = json.dumps(_finite(obj), separators=(",", ":"))
        line = (text + "\n").encode()
        if self.fd is None:
            try:
                fd = os.open(self.events_path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK | os.O_NOFOLLOW
                             | os.O_CLOEXEC)
            except OSError:
                return
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                return
            self.fd = fd
        try:
            os.write(self.fd, line)
        except OSError:
            pass

    def event(self, kind: str, at: float | None = None, **fields: object) -> None:
        """Append one event of this rank's process (``at``: its time, now by default)."""
        obj = {"time": round(time.time() if at is None else at, 3), "kind": kind, "rank": self.rank,
               "pid": self.pid, "source": "witness"}
        obj.update(fields)
        self.write(obj)

    # -- watching -----------------------------------------------------------------

    def ours(self, facts: dict | None) -> bool:
        return facts is not None and facts["start_ticks"] == self.start_ticks and facts["state"] not in "ZX"

    def run(self) -> int:
        pidfd = None
        try:
            pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            pidfd = None
        self.pidfd = pidfd
        poller = None
        if pidfd is not None:
            poller = select.poll()
            poller.register(pidfd, select.POLLIN)
        next_look = 0.0
        while True:
            now = time.monotonic()
            if poller is not None:
                ended = bool(poller.poll(max(0.0, next_look - now) * 1000))
            else:
                time.sleep(POLL_S)
                ended = False
            now = time.monotonic()
            looking = now >= next_look
            facts = proc_facts(self.pid, self.ticks, self.page) if (ended or looking or poller is None) else self.last
            if ended or not self.ours(facts):
                self.finish(facts)
                return 0
            if looking:
                next_look = now + (HURRY_S if self.hurry else LOOK_S)
                self.hurry = max(0, self.hurry - 1)
                self.look(facts)
                self.read_stacks(final=False)
                self.ask(facts)

    def _note_parent(self, facts: dict | None) -> None:
        if facts is not None and facts.get("start_ticks") == self.start_ticks and facts.get("ppid", 0) > 1:
            self.ppid = facts["ppid"]

    def look(self, facts: dict | None) -> None:
        """A proc event when the state turns abnormal or back, or when the heartbeat interval is due."""
        self._note_parent(facts)
        if facts is None or (self.said_state is None and not self.started()):
            return
        self.last = facts
        state = facts["state"]
        self.d_seen = self.d_seen + 1 if state == "D" else 0
        shown = state if state in "TtZ" or (state == "D" and self.d_seen >= 2) else "ok"
        now = time.monotonic()
        if shown != self.said_state or now - self.last_written >= self.interval:
            changed = shown != self.said_state
            self.said_state = shown
            self.last_written = now
            self.event("proc", **self.public(facts), changed=changed)

    @staticmethod
    def public(facts: dict) -> dict:
        return {k: facts[k] for k in ("state", "cpu_s", "rss", "threads", "run_delay_s") if k in facts}

    def peers_alive(self, facts: dict | None) -> list[int]:
        """The other children of the rank's parent (its launcher's other workers) still running now: seen at
        the rank's end, they ended after it. An order no clock can blur (msrun ends the others within a second
        of the first death; their witnesses' times alone cannot order ends that close). The parent is read
        from the zombie's facts (``facts``), else as the witness found it at its start or its last look."""
        ours = facts is not None and facts.get("start_ticks") == self.start_ticks
        ppid = facts.get("ppid") if ours else self.ppid
        if not isinstance(ppid, int) or ppid <= 1:
            return []
        return [c for c in children(ppid) if c != self.pid and running(c, self.ticks, self.page)]

    def finish(self, facts: dict | None) -> None:
        """The process ended (or its pid is another's now): its last stacks, then the exit event."""
        t = time.time()  # the end as seen, before the stacks are read
        fields: dict = {"peers_alive": self.peers_alive(facts)}
        self.read_stacks(final=True)
        if facts is not None and facts.get("start_ticks") == self.start_ticks and "exit_status" in facts:
            fields.update(describe_status(facts["exit_status"]))
        else:
            fields["how"] = "unknown"  # reaped before we could read its status
        if self.last is not None:
            fields.update(last_state=self.last["state"], cpu_s=self.last["cpu_s"], rss=self.last["rss"])
        self.event("exit", at=t, **fields)

    def read_stacks(self, *, final: bool) -> None:
        """Turn each complete dump that appeared in the stacks file into a ``stack`` event."""
        if not self.stacks_path:
            return
        try:
            fd = os.open(self.stacks_path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return
            size = st.st_size
            if size < self.stacks_at:  # the rank started it again (a new process under the same rank)
                self.stacks_at = 0
            if size <= self.stacks_at or (size != self.stacks_size and not final):
                self.stacks_size = size
                return  # nothing new, or a dump being written: read when it holds still
            self.stacks_size = size
            blob = os.pread(fd, min(size - self.stacks_at, STACKS_READ), self.stacks_at)
        finally:
            os.close(fd)
        pieces = split_dumps(blob, final=final, head=self.head)
        used = sum(n for _, n in pieces)
        heads = _positions(blob, HEADER.encode())
        if heads:
            self.header = parse_header(_line(blob, heads[-1]))
            done = [h for h in heads if h < used]
            if done:
                self.head = _line(blob, done[-1])
        for block, consumed in pieces:
            self.stacks_at += consumed
            if block is not None:
                self.event("stack", **block)

    def ask(self, facts: dict | None) -> None:
        """The first look: a rank silent past the header's ``look`` (its steps' pace; never before its first step
        ended) is sent the signal the header names, once per silence: its faulthandler writes every thread's
        stack into the stacks file at once, long before the timed dump. Not a rank stopped, traced or in D (it
        could not write: its state says why), nor one whose header names no signal (the job's own handler)."""
        h = self.header
        since, look, sig = h.get("since"), h.get("look"), h.get("sig")
        if not (isinstance(since, float) and isinstance(look, (int, float)) and isinstance(sig, int)):
            return
        if since == self.asked or time.time() - since < look or facts is None or facts["state"] not in "RS":
            return
        self.asked = since
        try:
            send = getattr(signal, "pidfd_send_signal", None)
            if self.pidfd is not None and send is not None:
                send(self.pidfd, sig)  # the process itself, even were its pid another's by now
            elif self.ours(proc_facts(self.pid, self.ticks, self.page)):
                os.kill(self.pid, sig)
        except OSError:
            return
        self.hurry = 3  # the dump is written at once: read as it holds still, in a fraction of a second


# -- reading faulthandler's dumps --------------------------------------------------------------------------

#: the line the writer puts before each place faulthandler may write a dump (see mstop_writer.stacks)
HEADER = "# mstop-stacks "


def split_dumps(blob: bytes, *, final: bool, head: str | None = None) -> list[tuple[dict | None, int]]:
    """The dumps in ``blob`` (the text after each header line), each as a ``stack`` event's fields with the
    bytes it took. The last header with nothing after it is the place of a dump that has not happened: it
    is left for later (the rank rewrites it at every step) unless ``final``, when the rank has ended. Text
    before the first header is a dump that followed one already read (the timed dump after a first look, a
    crash after a timed dump): read under that one's header ``head``, else passed over (not ours)."""
    mark = HEADER.encode()
    starts = [i for i in _positions(blob, mark)]
    lead = starts[0] if starts else len(blob)
    out: list[tuple[dict | None, int]] = []
    if lead > 0:
        text = blob[:lead].decode("utf-8", "replace")
        out += _pieces(head, text, lead) if head is not None and text.strip() else [(None, lead)]
    for k, s in enumerate(starts):
        last = k + 1 == len(starts)
        chunk = blob[s: len(blob) if last else starts[k + 1]]
        nl = chunk.find(b"\n")
        body = chunk[nl + 1:] if nl >= 0 else b""
        if last and not final and not body.strip():
            break
        head = chunk[:nl if nl >= 0 else len(chunk)].decode("utf-8", "replace")
        text = body.decode("utf-8", "replace")
        out += _pieces(head, text, len(chunk)) if text.strip() else [(None, len(chunk))]
    return out


def _pieces(head: str, text: str, size: int) -> list[tuple[dict | None, int]]:
    """The dumps one header's text holds (a first look's, then the timed one's, then a crash's: each but the
    first begins with faulthandler's ``Timeout (`` or ``Fatal Python error:`` line), the bytes given to the
    last."""
    pieces: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.startswith(("Timeout (", "Fatal Python error:")) and any(x.strip() for x in pieces[-1]):
            pieces.append([])
        pieces[-1].append(line)
    out: list[tuple[dict | None, int]] = [(parse_dump(head, "\n".join(p)), 0) for p in pieces]
    out[-1] = (out[-1][0], size)
    return out


def _line(blob: bytes, at: int) -> str:
    """The line of ``blob`` that begins at ``at``."""
    nl = blob.find(b"\n", at)
    return blob[at: nl if nl >= 0 else len(blob)].decode("utf-8", "replace")


def _positions(blob: bytes, mark: bytes) -> list[int]:
    """Where ``mark`` begins a line of ``blob``."""
    out = []
    i = blob.find(mark)
    while i >= 0:
        if i == 0 or blob[i - 1: i] == b"\n":
            out.append(i)
        i = blob.find(mark, i + 1)
    return out


def _number(v: str) -> int | float | str | None:
    """A header's value: an int, a finite float, None for a number that is no JSON number (``1e999``,
    ``nan``: the stack must stay readable), else the text."""
    try:
        return int(v)
    except ValueError:
        pass
    try:
        f = float(v)
    except ValueError:
        return v
    return f if math.isfinite(f) else None


def _finite(v: object) -> object:
    """``v`` with every float that is not finite made None (lists and dicts walked)."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    return v


def parse_header(line: str) -> dict:
    """``# mstop-stacks step=12 since=1700000000.123 armed=... limit=60.0`` as a dict of numbers."""
    out: dict = {}
    for word in line[len(HEADER):].split():
        k, _, v = word.partition("=")
        out[k] = None if v == "none" else _number(v)
    return out


def parse_dump(header: str, body: str) -> dict:
    """One faulthandler dump (``Timeout (0:01:00)!`` or ``Fatal Python error: Segmentation fault`` then
    ``Thread 0x... (most recent call first):`` and ``  File "x.py", line 3 in f`` lines) as the fields of a
    ``stack`` event: why (``timeout``, ``fatal``, or ``asked``: the witness's signal, whose dump has no line of
    its own), the step it was in, since when, and each thread's frames (innermost first); ``cut`` when a crash's
    dump was cut short."""
    h = parse_header(header)
    reason, error = "asked", None  # no line of faulthandler's own before the threads: the witness's first look
    threads: list[dict] = []
    cur: dict | None = None
    for line in body.splitlines():
        s = line.strip()
        if not s:
            continue
        if s.startswith("Fatal Python error:"):
            reason, error = "fatal", s[len("Fatal Python error:"):].strip()
        elif s.startswith("Timeout ("):
            reason = "timeout"
        elif s.startswith(("Thread 0x", "Current thread 0x", "Stack (most recent")):
            words = s.split()
            cur = {"thread": words[2] if words[0] == "Current" else words[1] if words[0] == "Thread" else "",
                   "current": words[0] == "Current", "frames": []}
            if len(threads) < MAX_THREADS:
                threads.append(cur)
        elif s.startswith("File ") and cur is not None:
            if len(cur["frames"]) < MAX_FRAMES:
                cur["frames"].append(_frame(s))
        elif s.startswith("<no Python frame>") and cur is not None:
            cur["frames"].append("<no Python frame>")
    out = {"reason": reason, "step": h.get("step"), "since": h.get("since"), "limit": h.get("limit"),
           "stacks": threads}
    if error:
        out["error"] = error
    if reason == "fatal" and (cur is None or not cur["frames"]):
        out["cut"] = True  # faulthandler writes a frame or "<no Python frame>" under every thread's line: a
        # crash's dump that ends at a thread's line was cut short (a second fault while it read another thread's
        # state: a signal handler takes no lock, and a thread ending meanwhile frees what it reads)
    return out


def _frame(s: str) -> str:
    """``File "/x/y.py", line 12 in run`` as ``run (/x/y.py:12)``."""
    try:
        rest = s[len('File "'):]
        path, _, tail = rest.partition('", line ')
        line, _, func = tail.partition(" in ")
        return f"{func.strip()} ({path}:{line.strip()})"
    except Exception:  # noqa: BLE001
        return s


# -- starting one, from the rank ----------------------------------------------------------------------------

#: the witness started per (our pid, events file): a writer made again in the same process (each
#: ``Model.train`` call) keeps the one already watching
_STARTED: dict[tuple[int, str], object] = {}


def own_start_ticks(pid: int | None = None) -> int | None:
    """A process's start time in clock ticks since boot (``/proc/PID/stat`` field 22): with the pid, the
    process's identity on its host (a pid alone may be reused)."""
    f = proc_facts(pid or os.getpid(), 100.0, 4096)
    return None if f is None else f["start_ticks"]


def identity(pid: int | None = None) -> dict[str, object]:
    """What makes a pid mean one process to a reader (issue 38): the host's boot id, the process's pid
    namespace and its start time (clock ticks since boot). A reader trusts a pid only on the same host, boot
    and namespace, with the same start time."""
    def read(path: str) -> str | None:
        try:
            with open(path) as f:
                return f.read().strip() or None
        except OSError:
            return None

    try:
        ns: str | None = os.readlink(f"/proc/{pid or 'self'}/ns/pid")
    except OSError:
        ns = None
    return {"boot_id": read("/proc/sys/kernel/random/boot_id"), "pid_ns": ns,
            "pid_start": own_start_ticks(pid or os.getpid())}


def start(events: str, stacks: str | None, stacks_from: int, rank: int, interval: float) -> tuple[int | None, str]:
    """Start the witness of this process (or keep the one already watching for this events file).
    Returns (its pid, what was done) or (None, why not)."""
    import subprocess

    if not sys.platform.startswith("linux"):
        return None, f"not started: no /proc on {sys.platform}"
    me = os.getpid()
    key = (me, os.path.abspath(events))
    old = _STARTED.get(key)
    if old is not None and old.poll() is None:  # type: ignore[attr-defined]
        return old.pid, "running"  # type: ignore[attr-defined]
    ticks = own_start_ticks(me)
    exe = sys.executable
    if not os.path.isfile(os.path.abspath(__file__)):
        return None, f"not started: {__file__} is not a file (the writer was installed zipped)"
    if ticks is None or not exe:
        return None, "not started: " + ("cannot read /proc/self/stat" if ticks is None else "no Python executable")
    events, stacks = os.path.abspath(events), (os.path.abspath(stacks) if stacks else None)  # it runs in /
    argv = [exe, "-I", "-S", os.path.abspath(__file__), str(me), str(ticks), events, stacks or "-", str(rank),
            repr(float(interval)), str(int(stacks_from))]
    try:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             close_fds=True, start_new_session=True, cwd="/")
    except OSError as e:
        return None, f"not started: {type(e).__name__}: {e}"
    _STARTED[key] = p
    return p.pid, "started"


def stop(events: str) -> None:
    """End this process's witness for ``events`` (the writer closed: training is over)."""
    p = _STARTED.pop((os.getpid(), os.path.abspath(events)), None)
    if p is not None and p.poll() is None:  # type: ignore[attr-defined]
        try:
            p.terminate()  # type: ignore[attr-defined]
            p.wait(1.0)  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - it ends by itself with the process
            pass


def main(argv: list[str]) -> int:
    """``witness.py PID START_TICKS EVENTS_PATH STACKS_PATH|- RANK INTERVAL [STACKS_FROM]``."""
    pid, ticks, events, stacks, rank, interval = argv[:6]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C in the job's terminal is the job's, not ours
    w = Witness(int(pid), int(ticks), events, None if stacks == "-" else stacks, int(rank), float(interval))
    if len(argv) > 6:
        w.stacks_at = int(argv[6])
    return w.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
