"""Append-only line files that survive the faults of a long training job.

Every line reaches its file in one ``os.write`` on a descriptor opened with
``O_APPEND``, so a reader never sees two writers' bytes interleaved and sees a
line either whole or (after a partial write on a full disk) cut, never
reordered. Errors are never raised to the caller: they are counted, reported
once per kind through :mod:`logging`, and writing is retried later.

Only a regular file is ever written: a FIFO, device or socket at the path is
refused (opened non-blocking, so even a FIFO without a reader never blocks).
A file truncated under us (logrotate's ``copytruncate``) is noticed before
the next line and started again with its header.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import time
from typing import Callable

from .schema import file_kind

log = logging.getLogger("mstop_writer")

#: Seconds between two checks that the file we hold is still the one at its path.
CHECK_INTERVAL = 1.0
#: Seconds between two attempts to write again after an error.
RETRY_INTERVAL = 5.0


class LineFile:
    """One append-only text file that is written a whole line at a time.

    ``on_open`` is called with the file's current header line (or None for
    a new, empty file) each time the file is (re)opened or found truncated, and
    returns the bytes to write first (a header for a new file), so a file
    recreated after its directory was removed, or emptied by ``copytruncate``,
    starts with a header again. ``warn(message, kind)`` is told about problems;
    the caller warns once per kind.
    """

    def __init__(
        self,
        path: str,
        on_open: Callable[[bytes | None], bytes],
        warn: Callable[[str, str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self._on_open = on_open
        self._warn = warn
        self._clock = clock
        self._fd: int | None = None
        self._ino: tuple[int, int] | None = None
        self._next_check = 0.0
        self._next_retry = 0.0
        self._cut_tail = False
        self._unverified = 0
        self._end = 0  # bytes we know the file holds: a file shorter than that was truncated under us
        #: lines not written since the last successful write
        self.dropped = 0
        #: times the file was found truncated and started again
        self.truncations = 0

    def write(self, line: bytes) -> bool:
        """Append ``line`` (ending in a newline); return False if it was dropped."""
        return self.ready() and self.append(line)

    def ready(self) -> bool:
        """Make sure the file is open and still the one at its path; count a dropped line if not.

        Call it before building a line whose layout depends on the file's header
        (``on_open`` may change it), then :meth:`append` the line.
        """
        now = self._clock()
        if self._fd is None:
            if now < self._next_retry or not self._open():
                self.dropped += 1
                return False
        elif now >= self._next_check:
            self._next_check = now + CHECK_INTERVAL
            if self._still_ours():
                self._unverified = 0
            else:
                # Lines written since the last check went to the file we held: lost when it was deleted, kept
                # when it still has a name (renamed away by a rotation: readers read rank0.csv.1 too)
                if not self._still_named():
                    self.dropped += self._unverified
                self._unverified = 0
                if not self._open():
                    self.dropped += 1
                    return False
        return True

    def opened(self) -> bool:
        """Open the file now if it is not (made, with its header); whether it is open. Nothing is counted
        dropped: no line was asked for (the life lock wants the file before the first event is written)."""
        return self._fd is not None or (self._clock() >= self._next_retry and self._open())

    def append(self, line: bytes) -> bool:
        """Write ``line`` in one ``os.write`` to the file :meth:`ready` opened."""
        fd = self._fd
        try:
            size = os.lseek(fd, 0, os.SEEK_END)  # type: ignore[arg-type]
            if size < self._end:  # emptied under us (copytruncate): a header first, as for a new file
                self.truncations += 1
                self._warn(f"{self.path} was truncated (log rotation?): starting it again with its header",
                           "truncated")
                self._cut_tail = False
                first = self._on_open(None)
                if first:
                    size += os.write(fd, first)  # type: ignore[arg-type]
            if self._cut_tail:
                line = b"\n" + line
            n = os.write(fd, line)  # type: ignore[arg-type]
        except OSError as e:
            self._fail(f"cannot write {self.path}: {e}", _kind("write", e))
            self.dropped += 1
            return False
        self._end = size + n
        self._cut_tail = False
        self._unverified += 1
        if n < len(line):
            # A full disk cut the line: the next line starts on a new one, so the
            # cut line is one bad row for readers, not a corrupted good one.
            self._cut_tail = True
            self.dropped += 1
            return False
        return True

    def take_dropped(self) -> int:
        """Return the count of dropped lines and start counting again."""
        n, self.dropped = self.dropped, 0
        return n

    def close(self) -> None:
        """Close the descriptor; a later write opens the file again."""
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None

    # -- internals ---------------------------------------------------------

    def _open(self) -> bool:
        self.close()
        try:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            # O_NONBLOCK: a FIFO at the path (with or without a reader) must not block the job. Read and
            # write, so the header is read through the descriptor checked to be a regular file; write only
            # where the file may not be read
            # O_NOFOLLOW: a link planted at the path (dangling or not) must not send the job's rows to, or
            # create, a file outside the run dir
            flags = os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | _NOFOLLOW
            try:
                fd, readable = os.open(self.path, os.O_RDWR | flags, 0o644), True
            except PermissionError:
                fd, readable = os.open(self.path, os.O_WRONLY | flags, 0o644), False
        except OSError as e:
            if e.errno == errno.ENXIO:  # a FIFO without a reader
                self._fail(f"cannot write {self.path}: it is a FIFO, not a regular file", "not a file")
            elif e.errno == errno.ELOOP and os.path.islink(self.path):
                self._fail(f"cannot write {self.path}: it is a symbolic link, not a regular file (a link is "
                           "never followed: it could send the rows outside the run directory)", "not a file")
            else:
                self._fail(f"cannot open {self.path}: {e}", _kind("open", e))
            return False
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                os.close(fd)
                self._fail(f"cannot write {self.path}: it is {file_kind(st.st_mode)}, not a regular file", "not a file")
                return False
            if not readable and st.st_size:  # appending to a file whose header cannot be read: refused
                raise PermissionError(errno.EACCES, "cannot read its header to append to it", self.path)
            # two processes opening one new file at once both saw it empty and both wrote a header (a
            # phantom bad row): looking and writing the header happen under the file's lock
            locked = _lock(fd)
            try:
                st = os.fstat(fd) if locked else st
                header, ends_cut = self._inspect(fd, st) if readable else (None, False)
                self._cut_tail = ends_cut
                first = self._on_open(header)
                if first:
                    if self._cut_tail:
                        first = b"\n" + first
                    os.write(fd, first)
                    self._cut_tail = False
            finally:
                if locked:
                    _unlock(fd)
        except OSError as e:
            os.close(fd)
            self._fail(f"cannot write {self.path}: {e}", _kind("write", e))
            return False
        self._end = os.lseek(fd, 0, os.SEEK_END)
        self._fd = fd
        self._ino = (st.st_dev, st.st_ino)
        self._next_check = self._clock() + CHECK_INTERVAL
        return True

    def _inspect(self, fd: int, st: os.stat_result) -> tuple[bytes | None, bool]:
        """Return the file's first line (None if empty) and whether it ends mid-line, read through the
        descriptor already checked to be a regular file (the path could be swapped since)."""
        if st.st_size == 0:
            return None, False
        head = os.pread(fd, 1 << 20, 0)
        nl = head.find(b"\n")
        first = head if nl < 0 else head[: nl + 1]
        ends_cut = os.pread(fd, 1, st.st_size - 1) != b"\n"
        return first, ends_cut

    def _still_ours(self) -> bool:
        try:
            st = os.stat(self.path)
        except OSError:
            if self._still_named():
                self._warn(f"{self.path} was renamed away (log rotation?): writing a new one", "rotated")
            else:
                self._warn(f"{self.path} disappeared (run directory removed?): writing it again", "disappeared")
            return False
        if (st.st_dev, st.st_ino) != self._ino:
            if self._still_named():
                self._warn(f"{self.path} was renamed away and replaced (log rotation?): writing to the new file",
                           "rotated")
            else:
                self._warn(f"{self.path} was replaced: writing to the new file", "replaced")
            return False
        return True

    def _still_named(self) -> bool:
        """Whether the file we hold still has a name (a link count above 0): renamed, not deleted."""
        try:
            return self._fd is not None and os.fstat(self._fd).st_nlink > 0
        except OSError:
            return False

    def _fail(self, message: str, kind: str) -> None:
        self.close()
        self._next_retry = self._clock() + RETRY_INTERVAL
        self._warn(message, kind)


class LifeLock:
    """A shared ``flock`` on the rank's events file, held for the process's life: the kernel lets it go when
    the process ends, however it ends. The exit witness cannot say every end: a rank that is PID 1 of its own
    pid namespace (a container) takes the witness with it. A reader that can take the file's exclusive lock
    knows no process holds it any more (mstop.sources.files.lock_free). The descriptor is its own (read only,
    close-on-exec: a program the rank execs does not keep it; a child it forks does, and keeps the rank
    "alive" to readers while it lives: the safe side). Held again on the file at the path after a rotation
    made a new one (:meth:`keep`, from the heartbeat)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        self._ino: tuple[int, int] | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def keep(self) -> bool:
        """Hold the lock on the file at the path now (again, when the path names another file or the lock
        was lost); whether it is held. Never blocks: a reader's probe holds the exclusive lock for a moment,
        so a refusal is tried again a few times, then at the next call."""
        try:
            import fcntl

            st = os.stat(self.path)
        except (ImportError, OSError):  # no flock here (not POSIX), or no file yet
            return self.held
        if self._fd is not None and (st.st_dev, st.st_ino) == self._ino:
            return True
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | _NOFOLLOW)
        except OSError:
            return self.held
        for _ in range(3):
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                break
            except OSError:
                time.sleep(0.001)
        else:
            os.close(fd)
            return self.held
        self.release()
        self._fd, self._ino = fd, (st.st_dev, st.st_ino)
        return True

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass


def _lock(fd: int) -> bool:
    """An exclusive lock on an open file between processes (a POSIX record lock: advisory; not flock, which
    the device sampler holds on its file for its whole life), waited for at most ~1 s; False where none can
    be had (a file system without locks): the file is written anyway."""
    import fcntl

    for _ in range(100):
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EACCES):
                return False
            time.sleep(0.01)
    return False


def _unlock(fd: int) -> None:
    import fcntl

    try:
        fcntl.lockf(fd, fcntl.LOCK_UN)
    except OSError:
        pass


def _kind(what: str, e: OSError) -> str:
    """A warning kind per operation and error: a full disk is not hidden by an earlier permission error."""
    name = errno.errorcode.get(e.errno or 0, "error")
    return f"{what}:{name}"



# -- small control files (profile.request, profile.plan) ----------------------------------------------

#: open flags for reading a control file: never blocks on a FIFO, never follows a symlink at the name
#: never follow a link at a path the writer opens (O_NOFOLLOW where the system has it)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_READ_FLAGS = (os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_NOFOLLOW", 0)
               | getattr(os, "O_CLOEXEC", 0))


class NotRegular(OSError):
    """A control file's name holds something that is not a regular file (a FIFO, a device, a directory,
    a socket, a symlink): it is never read through, written through nor removed."""


def read_regular(path: str, limit: int) -> bytes:
    """At most ``limit`` bytes of the regular file at ``path``: ``FileNotFoundError`` when there is none,
    :class:`NotRegular` for a symlink, FIFO, device, socket or directory at the name. Never blocks: what is
    at the name is looked at (``lstat``) before it is opened, so a FIFO or device is never opened at all,
    and the open itself is non-blocking and refuses a link (a FIFO swapped in between the two)."""
    lstat_regular(path)
    fd = os.open(path, _READ_FLAGS)  # ELOOP for a link swapped in since the lstat
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(errno.EINVAL, f"{file_kind(st.st_mode)}, not a regular file", path)
        return os.read(fd, limit)
    finally:
        os.close(fd)


def lstat_regular(path: str) -> os.stat_result:
    """``os.lstat`` of ``path``, :class:`NotRegular` when it is not a regular file (a link is not)."""
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegular(errno.EINVAL, f"{file_kind(st.st_mode)}, not a regular file", path)
    return st


def replace_file(directory: str, name: str, data: bytes) -> None:
    """Make ``directory/name`` a regular file holding ``data``, whole or not at all for every reader: the
    bytes go to a new file of a random name made with ``O_CREAT|O_EXCL|O_NOFOLLOW`` in ``directory``
    (``tempfile.mkstemp``: nothing planted at a guessable name is written through), then renamed over
    ``name``. A rename replaces a link or FIFO at ``name`` itself, never what it points to. A directory
    at ``name`` is an ``OSError``; the new file is removed on any failure."""
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=directory)
    try:
        try:
            os.fchmod(fd, 0o644)  # readable by the viewer's user, as the rank files are
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, os.path.join(directory, name))
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
