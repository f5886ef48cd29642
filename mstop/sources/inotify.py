"""Linux inotify on one directory, read by the thread that follows it: the cheap path for busy runs.

watchdog's observer costs many times more CPU per file event (its event
objects, queues, dispatch thread and handler; the measured figures are in
benchmarks/README.md, from ``benchmarks/bench_inotify.py``); a run of 1,024
ranks writing a row a second each makes 1,024 events a second. Reading the
kernel's events directly, in batches, from the thread that then reads the
files is the cheap path. Only the directory is watched, and
only for what changes a rank file (modifications, creations, deletions,
renames): our own opens and reads never come back as events. watchdog stays
for everything else (polling, other systems, a kernel without inotify).
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import struct
import threading
from dataclasses import dataclass, field

IN_MODIFY = 0x002
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
MASK = IN_MODIFY | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF

_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len (struct inotify_event)
_libc: ctypes.CDLL | None = None


def _lib() -> ctypes.CDLL:
    """libc's functions, from this process's own symbols (Python is linked against libc): no ``ldconfig -p``
    started to look for it, as ``ctypes.util.find_library`` does."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


@dataclass
class Changes:
    """What one read of the events said: names modified, names created/moved/deleted, and whether the
    kernel's queue overflowed (events were lost: every file must be looked at) or the directory itself
    went away."""

    modified: set[str] = field(default_factory=set)
    changed: set[str] = field(default_factory=set)
    overflow: bool = False
    gone: bool = False
    events: int = 0


class DirectoryWatch:
    """An inotify watch of one directory, non-blocking, with a pipe to interrupt :meth:`wait`."""

    def __init__(self, path: str, *, modifications: bool = True) -> None:
        """Raise OSError when inotify is not available or the directory cannot be watched. Without
        ``modifications``, only creations, deletions and renames (growth is then found by scans)."""
        try:
            lib = _lib()
            init1, add_watch = lib.inotify_init1, lib.inotify_add_watch
        except (OSError, AttributeError) as e:
            raise OSError(errno.ENOSYS, f"no inotify here ({e})") from None
        fd = init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), f"inotify_init1: {os.strerror(ctypes.get_errno())}")
        mask = MASK if modifications else MASK & ~IN_MODIFY
        if add_watch(fd, os.fsencode(path), mask | IN_ONLYDIR) < 0:
            err = ctypes.get_errno()
            os.close(fd)
            raise OSError(err, f"cannot watch {path}: {os.strerror(err)}")
        self.fd = fd
        self._lock = threading.Lock()  # wake() from other threads never writes to a closed (reused) fd
        try:
            self._wake_r, self._wake_w = os.pipe()
        except OSError:
            os.close(fd)
            raise
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._poll = select.poll()
        self._poll.register(fd, select.POLLIN)
        self._poll.register(self._wake_r, select.POLLIN)

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for events or :meth:`wake`; return whether either came."""
        try:
            return bool(self._poll.poll(max(0, int(timeout * 1000))))
        except InterruptedError:
            return True

    def wake(self) -> None:
        """Make a :meth:`wait` (now or the next one) return at once (any thread)."""
        with self._lock:
            if self._wake_w < 0:
                return  # closed
            try:
                os.write(self._wake_w, b"!")
            except OSError:
                pass  # already woken: the pipe is full

    def read(self) -> Changes:
        """Every event queued now (never blocks), by file name."""
        out = Changes()
        try:
            while os.read(self._wake_r, 4096):
                pass
        except (BlockingIOError, OSError):
            pass
        while True:
            try:
                buf = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return out
            except OSError:
                out.gone = True
                return out
            if not buf:
                return out
            self.parse(buf, out)

    @staticmethod
    def parse(buf: bytes, out: Changes) -> None:
        off, size = 0, _HEADER.size
        while off + size <= len(buf):
            _wd, mask, _cookie, n = _HEADER.unpack_from(buf, off)
            name = buf[off + size: off + size + n].split(b"\0", 1)[0]
            off += size + n
            out.events += 1
            if mask & IN_Q_OVERFLOW:
                out.overflow = True
            elif mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED):
                out.gone = True
            elif name:
                text = os.fsdecode(name)
                (out.modified if mask & IN_MODIFY else out.changed).add(text)

    def close(self) -> None:
        """Close the watch and its pipe (a later :meth:`wake` does nothing)."""
        with self._lock:
            fds, self.fd, self._wake_r, self._wake_w = (self.fd, self._wake_r, self._wake_w), -1, -1, -1
        for fd in fds:
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
