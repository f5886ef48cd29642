"""Every thread's Python stack, written by the rank itself when a step does not end or the process crashes.

``faulthandler``'s watchdog is a C thread: it needs no Python code, no GIL and no help from the stuck rank
to write the stacks. The writer arms ``faulthandler.dump_traceback_later`` as steps end (the limit from the
job's own pace: ``max(60 s, 20 x the median step)``, or the ``stack_after`` option), so a rank whose step
does not end writes each thread's stack into ``rank<R>.stacks.txt`` while it is stuck; and
``faulthandler.enable`` into the same file, so a fatal signal (a segfault in an op) leaves its Python stack.

Each place a dump may land is preceded by a header line the writer keeps current (one ``pwrite`` per step,
about 1 us): ``# mstop-stacks step=120 since=1764754959.300 armed=... limit=60.0``: the last step that
ended and when (the rank is stuck since then), when the watchdog was armed and for how long. Re-arming
starts a new C thread (90 us measured here), so it is done only when a quarter of the limit has passed since
the last arming: a dump then comes between 3/4 of the limit and the limit after the last step end. The
rank's exit witness (mstop_writer.witness) turns each dump into a ``stack`` event.

A first look comes sooner than the limit: the writer also registers a real-time signal (``LOOK_SIGNAL``)
with ``faulthandler.register`` into the same file, and the header says which (``sig=``) and after how long
a silence the rank's exit witness may send it (``look=``: max(5 s, 3 x the median step), once steps have
ended; never before the first one, whose compilation may take minutes). The witness, which sees the header
age, asks a silent rank for its stacks once per silence: a hang's odd rank is named seconds after it, while
MindSpore's own collective timeout (30 s on CPU) has not yet ended the job. A signal the job already handles
is left to it (no ``sig=``), and the handler stays for the process's life (a signal sent just as training
ended must still find it: a real-time signal's default action ends the process).

Where the job already uses faulthandler (``PYTHONFAULTHANDLER``, ``-X faulthandler``, its own
``faulthandler.enable``), fatal stacks stay where the job sends them: the start event says so.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import stat
import time
from collections import deque
from typing import Callable

#: bytes of each header line (padded with spaces): rewritten in place at every step
HEADER_BYTES = 128
#: the least limit of the automatic choice, and how many median steps it is otherwise
LEAST_S = 60.0
STEPS = 20.0
#: the first look: the least silence after which the witness may ask for the stacks, and how many median
#: steps it is otherwise
LOOK_LEAST_S = 5.0
LOOK_STEPS = 3.0
#: the signal the witness asks with (a real-time one: no library of the job is known to use it)
#: steps between two reckonings of the pace (besides each arming)
PACE_EVERY = 16
LOOK_SIGNAL = getattr(signal, "SIGRTMIN", 34) + 7

#: the one StackDumps that owns this process's faulthandler (the newest writer's), and whether we enabled it
_OWNER: list[StackDumps] = []
_ENABLED: list[bool] = [False]
#: the signal this process registered for first looks (registered once, kept: see the module's words)
_REGISTERED: list[int | None] = [None]


class StackDumps:
    """faulthandler into one rank's stacks file; :meth:`step_end` at each step's end."""

    def __init__(self, path: str, limit: float | None, warn: Callable[[str, str], None],
                 clock: Callable[[], float] = time.time) -> None:
        """``limit``: seconds a step may run before the dump; None: from the job's pace; 0: no timed dumps (the
        header is still kept current, so a fatal signal's stack says its step)."""
        self.path, self._warn, self._clock = path, warn, clock
        self.auto, self.timed = limit is None, limit != 0
        self.fd: int | None = None
        self.pos = 0
        self.start_at = 0
        self.armed = -1e18
        self.limit = limit or LEAST_S
        self.times: deque[float] = deque(maxlen=64)
        self.fatal = "off"
        self.sig: int | None = None
        self.look: float | None = None  # the first look's silence (s): known once steps have ended
        self.paused = False
        self.counted = 0  # step times seen
        self.step: int | None = None
        self.since = 0.0
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(path, flags, 0o644)
        except OSError as e:
            warn(f"stacks not written: cannot open {path}: {e}", "stacks:open")
            self.fatal = f"not written: {e}"
            return
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            warn(f"stacks not written: {path} is not a regular file", "stacks:open")
            self.fatal = "not written: not a regular file"
            return
        self.fd = fd
        self.pos = self.start_at = os.lseek(fd, 0, os.SEEK_END)  # earlier processes' dumps are kept
        old = list(_OWNER)
        for o in old:
            o.pause()
        _OWNER[:] = [self]
        if faulthandler.is_enabled() and not _ENABLED[0]:
            self.fatal = "the job's own (faulthandler was enabled before mstop: fatal stacks go where it sends them)"
        else:
            try:
                faulthandler.enable(file=fd, all_threads=True)
                _ENABLED[0] = True
                self.fatal = "stacks file"
            except (OSError, RuntimeError, ValueError) as e:
                self.fatal = f"not written: {e}"
        self.sig = _register(fd) if self.timed else None
        self.step_end(None, None)
        for o in old:  # faulthandler writes to this writer's descriptor now: the old one may be closed
            o.close()

    @property
    def active(self) -> bool:
        return self.fd is not None and bool(_OWNER) and _OWNER[0] is self

    def step_end(self, step: int | None, step_time: float | None) -> None:
        """A step ended: its header is rewritten, the watchdog armed again when a quarter of its time passed."""
        if not self.active:
            return
        try:
            now = self._clock()
            if step_time is not None and step_time > 0:
                self.times.append(step_time)
                self.counted += 1
            rearm = self.timed and not self.paused and now - self.armed >= self.limit / 4
            if self.times and (rearm or self.counted % PACE_EVERY == 1):  # the pace: the first step's and then
                # every few steps' (a sort of 64 floats, about 3 us)
                median = sorted(self.times)[len(self.times) // 2]
                if self.auto and rearm:  # the limit the watchdog is armed with: changed only as it is armed
                    self.limit = max(LEAST_S, STEPS * median)
                self.look = max(LOOK_LEAST_S, LOOK_STEPS * median)
            self.step, self.since = step, now
            self._header(now if rearm else self.armed)
            if rearm:
                faulthandler.dump_traceback_later(self.limit, repeat=False, file=self.fd)  # type: ignore[arg-type]
                self.armed = now
        except (OSError, ValueError, RuntimeError, TypeError) as e:
            self._warn(f"stacks not armed: {type(e).__name__}: {e}", "stacks:arm")

    def _header(self, armed: float) -> None:
        """The header line rewritten in place (after a dump that landed since the last one: it is kept)."""
        fd = self.fd
        at = os.lseek(fd, 0, os.SEEK_CUR)  # type: ignore[arg-type]
        if at > self.pos + HEADER_BYTES:  # a dump landed after the header (the rank was stuck, or crashed):
            self.pos = at  # kept, and the next header goes after it
            self.armed = armed = -1e18
        step = self.step
        text = (f"# mstop-stacks step={'none' if step is None else int(step)} since={self.since:.3f} "
                f"armed={armed:.3f} limit={self.limit:.1f}")
        if (self.sig is not None and self.look is not None and step is not None and self.look < self.limit
                and not self.paused):
            text += f" sig={self.sig} look={self.look:.1f}"
        line = text.encode()[: HEADER_BYTES - 1].ljust(HEADER_BYTES - 1) + b"\n"
        os.pwrite(fd, line, self.pos)  # type: ignore[arg-type]
        if at != self.pos + HEADER_BYTES:  # faulthandler writes where the descriptor stands: after the header
            os.lseek(fd, self.pos + HEADER_BYTES, os.SEEK_SET)  # type: ignore[arg-type]

    def pause(self) -> None:
        """Training is over (the writer closed): no dump for a step that will never end, and the header says
        no first look may be asked (the handler itself stays: see the module's words). Fatal stacks stay."""
        if self.active:
            self.paused = True
            try:
                faulthandler.cancel_dump_traceback_later()
                self._header(self.armed)
            except Exception:  # noqa: BLE001
                pass

    def close(self) -> None:
        """Close the file once faulthandler no longer writes to it (another writer of this process took it
        over): a descriptor closed under faulthandler could be reused by another file it would then write."""
        if self.fd is not None and not self.active:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None


def _register(fd: int) -> int | None:
    """``LOOK_SIGNAL`` dumps every thread's stack into ``fd`` (the witness's first look); None where the job
    handles that signal itself, or faulthandler cannot register one (not on this platform)."""
    register = getattr(faulthandler, "register", None)
    if register is None or _REGISTERED[0] is None and signal.getsignal(LOOK_SIGNAL) != signal.SIG_DFL:
        return None
    try:
        register(LOOK_SIGNAL, file=fd, all_threads=True, chain=False)
    except (OSError, RuntimeError, ValueError):
        return None
    _REGISTERED[0] = LOOK_SIGNAL
    return LOOK_SIGNAL
