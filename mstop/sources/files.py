"""Reading the new bytes of growing files: offsets, half lines, truncation and replacement.

Nothing here imports textual or watchdog: it is the pure file-following core
that the local source (and, later, the remote follower) drive.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
from dataclasses import dataclass

from mstop_writer.schema import file_kind

#: Bytes read from a file in one call once it has been read (more arrives on the next call).
CHUNK = 8 << 20
#: Bytes a quick read (a kept descriptor, following) asks for; a larger growth takes more calls.
QUICK_CHUNK = 64 << 10
#: Bytes read in the first call: a whole long run at once when it fits, so it is parsed in one go.
FIRST_CHUNK = 512 << 20
#: A line still waiting for its newline is dropped (counted bad) once it is longer than this, so a
#: runaway line is never held in memory. Complete lines of any length go to the parsers.
MAX_LINE = 1 << 20
#: Bytes of a file's start read for its first lines when it is read from near its end (start_near_end).
HEAD_BYTES = 64 << 10
#: Bytes remembered from a file's start to recognise it after an rsync-style replacement.
SIGNATURE = 256


#: Descriptors kept for reserve (sockets, the terminal, libraries) when FileTails keep theirs open.
FD_RESERVE = 512

_kept_lock = threading.Lock()
_kept = 0  # descriptors FileTails hold open now, all of them together
_keep_limit: int | None = None  # how many they may hold (see keep_limit)


def keep_limit() -> int:
    """How many descriptors FileTails may keep open: the process's soft limit, raised to its hard limit
    (capped at 65,536) once, less FD_RESERVE. Files past it are opened for each read as before."""
    global _keep_limit
    if _keep_limit is None:
        try:
            import resource

            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            want = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
            if soft != resource.RLIM_INFINITY and soft < want:
                try:
                    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
                    soft = want
                except (OSError, ValueError):
                    pass
            soft = 65536 if soft == resource.RLIM_INFINITY else soft
        except ImportError:  # not a POSIX system
            soft = 0
        _keep_limit = max(0, soft - FD_RESERVE)
    return _keep_limit


def slots_free() -> bool:
    """Whether a FileTail could keep one more descriptor open now."""
    return _kept < keep_limit()


def _take_slot() -> bool:
    global _kept
    with _kept_lock:
        if _kept >= keep_limit():
            return False
        _kept += 1
        return True


def _give_slot() -> None:
    global _kept
    with _kept_lock:
        _kept -= 1


def _pread(fd: int, n: int, offset: int) -> bytes:
    """Read ``n`` bytes at ``offset`` (fewer only at the end of the file)."""
    parts, got = [], 0
    while got < n:
        b = os.pread(fd, n - got, offset + got)
        if not b:
            break
        parts.append(b)
        got += len(b)
    return parts[0] if len(parts) == 1 else b"".join(parts)


@dataclass
class Chunk:
    """What one read of a file gave: complete lines, and what happened on the way.

    ``blob`` holds the complete lines, each ending with its newline; parsers of
    large reads use it whole, ``lines`` splits it for small ones.
    """

    blob: bytes = b""
    reset: bool = False  # the file was read again from its start: drop what came from it before
    more: bool = False  # the read stopped at its size limit: read again for the rest
    overlong: int = 0  # lines dropped for being longer than MAX_LINE
    mtime: float | None = None  # the file's modification time (this machine's clock for local files)

    @property
    def lines(self) -> list[bytes]:
        return self.blob.split(b"\n")[:-1] if self.blob else []


class FileTail:
    """Follow one append-only file by offset; deliver only complete lines.

    A full :meth:`read` looks at the path (a ``stat``; an ``open`` when the file
    is new or was replaced) and keeps the descriptor open while the process has
    descriptors to spare (:func:`keep_limit`): a ``quick`` read then reads the
    kept descriptor alone, no ``open`` or ``stat``, which on a network
    filesystem are each a round trip to its metadata server. A file that shrank
    or whose inode changed is found by a full read and continued from the old
    offset when its first bytes still match what was read (rsync and scp
    replace files with a longer copy this way); otherwise it is read again from
    the start and the chunk says ``reset``. :meth:`close` gives the descriptor
    back.
    """

    def __init__(self, path: str, *, keep: bool = False, first: int = FIRST_CHUNK) -> None:
        self._fd: int | None = None  # the descriptor kept open (a regular file's), or None
        self.path = path
        #: bytes the first read takes (a rank file's rows in one go; an events file's in CHUNKs, as its lines
        #: are parsed one by one and most are heartbeats only counted: its memory stays bounded)
        self.first = first
        #: keep the descriptor open between reads (a source that follows the file; a one-shot read does not)
        self.keep = keep
        self.offset = 0  # bytes consumed, partial tail included
        self.resets = 0
        self._ident: tuple[int, int] | None = None
        self._signature = b""
        self._partial = bytearray()
        self._skipping = False  # inside an overlong line, dropping until its newline
        self._after_cr = False  # the last line ended with CR: a LF that follows is its CRLF, not a line
        #: why the path cannot be followed (not a regular file), or None
        self.refused: str | None = None

    @property
    def ident(self) -> tuple[int, int] | None:
        """The (device, inode) of the file last read, or None before the first read: how a source finds the
        file again under another name (a rotation renames it)."""
        return self._ident

    @property
    def kept(self) -> bool:
        """Whether a descriptor is kept open, so that a quick read needs no metadata operation."""
        return self._fd is not None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit the module's globals may be gone
            pass

    def close(self) -> None:
        """Close the kept descriptor (the next read opens the file again)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            _give_slot()
            try:
                os.close(fd)
            except OSError:
                pass

    def read(self, *, quick: bool = False) -> Chunk:
        """Read what was appended since the last call.

        ``quick``: read the kept descriptor only (when there is one), without
        looking at the path: an empty quick read says nothing about truncation
        or replacement, which the next full read finds. Plain ``os`` calls:
        following 10,000 ranks makes this the hottest path of the engine.
        """
        if quick and self._fd is not None:
            return self._read_kept()
        out = Chunk()
        try:
            fd, st = self._descriptor()
        except PermissionError:
            self.close()
            self.refused = "permission denied"  # said, and tried again next time
            return out
        except OSError:
            self.close()  # gone or unreadable for now: try again next time
            return out
        kept = fd == self._fd
        try:
            self.refused = None if stat.S_ISREG(st.st_mode) else not_regular(st.st_mode)
            if self.refused is not None:
                return out
            ident = (st.st_dev, st.st_ino)
            if self._ident is not None and (ident != self._ident or st.st_size < self.offset
                                            or (st.st_size > self.offset and not self._starts_as_read(fd))):
                if not self._same_start(fd, st.st_size):
                    self._restart()
                    out.reset = True
            self._ident = ident
            out.mtime = st.st_mtime
            if (self.offset == 0 or self._skipping) and st.st_size > self.offset:
                self._skip_hole(fd, st.st_size, out)
            if st.st_size <= self.offset:
                return out
            limit = self.first if self.offset == 0 else CHUNK
            data = _pread(fd, min(limit, st.st_size - self.offset), self.offset)
            out.more = st.st_size - self.offset > limit
        except OSError:
            return out
        finally:
            if not kept:
                self._keep(fd, st)
        self._take(data, out)
        return out

    def _descriptor(self) -> tuple[int, os.stat_result]:
        """A descriptor of the file at the path now and its stat: the kept one when the path still names
        its file (one ``stat``), else a fresh one (``open`` and ``fstat``; the caller keeps or closes it)."""
        if self._fd is not None:
            st = os.stat(self.path)
            if (st.st_dev, st.st_ino) == self._ident:
                return self._fd, st
        # O_NONBLOCK: opening a FIFO that nobody writes would block forever
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        try:
            return fd, os.fstat(fd)
        except OSError:
            os.close(fd)
            raise

    def _keep(self, fd: int, st: os.stat_result) -> None:
        """Keep ``fd`` (a regular file's, instead of the one kept before) if a slot is free, else close it."""
        if self._fd is not None and fd != self._fd:
            self.close()
        if self.keep and stat.S_ISREG(st.st_mode) and self.refused is None and _take_slot():
            self._fd = fd
        else:
            os.close(fd)

    def _skip_hole(self, fd: int, size: int, out: Chunk) -> None:
        """Step over a hole (a sparse file's unwritten bytes, zeros: no line end among them) without reading
        it, when it lies inside a line already too long or is itself longer than MAX_LINE: a 100 GB hole
        named rank1.csv costs one ``lseek``, not 100 GB of reads. The line it is in counts as overlong."""
        gap = hole_at(fd, self.offset, size)
        if gap <= 0 or (not self._skipping and len(self._partial) + gap <= MAX_LINE):
            return
        if not self._skipping:
            self._partial.clear()
            self._skipping = True
            out.overlong += 1
        self.offset += gap

    def _read_kept(self) -> Chunk:
        out = Chunk()
        if self._skipping:  # inside an overlong line: step over holes first (see _skip_hole)
            try:
                self._skip_hole(self._fd, os.fstat(self._fd).st_size, out)  # type: ignore[arg-type]
            except OSError:
                pass
        try:
            # one pread of at most QUICK_CHUNK: fewer bytes is the end of the file for now, and a full
            # one says "more" (asking 8 MiB for a row made Python allocate and shrink 8 MiB each time)
            data = os.pread(self._fd, QUICK_CHUNK, self.offset)  # type: ignore[arg-type]
        except OSError:
            self.close()
            return out
        if data:
            if not self._starts_as_read(self._fd):  # type: ignore[arg-type]
                # rewritten in place (open(p, "w") and more bytes than before, between two reads): what
                # lies past the old offset is the new file's middle; read the new file from its start
                self._restart()
                out.reset = True
                try:
                    data = os.pread(self._fd, QUICK_CHUNK, 0)  # type: ignore[arg-type]
                except OSError:
                    self.close()
                    return out
            out.more = len(data) == QUICK_CHUNK
            out.mtime = time.time()  # appended since the last read: modified no later than now
            self._take(data, out)
        return out

    def _starts_as_read(self, fd: int) -> bool:
        """Whether the file still starts with the bytes read from its start (one ``pread`` of at most
        SIGNATURE bytes): a file truncated and written again between two reads grows past the old offset,
        so only its first bytes tell it from an appended one."""
        sig = self._signature
        if not sig:
            return True
        try:
            return _pread(fd, len(sig), 0) == sig
        except OSError:
            return True  # the read that follows says what is wrong

    def _take(self, data: bytes, out: Chunk) -> None:
        if len(self._signature) < SIGNATURE and self.offset < SIGNATURE:
            self._signature = (bytes(self._signature) + data[: SIGNATURE - self.offset])[:SIGNATURE]
        self.offset += len(data)
        self._split(data, out)

    def start_near_end(self, tail: int, head: int = 1) -> Chunk:
        """Begin a file that is not read yet near its end (the runs list reads each run's last rows, not its
        history): a chunk with its first ``head`` complete lines (a CSV's header; an events file's first
        start), and the next :meth:`read` goes on from the first line that starts in its last ``tail``
        bytes. A file smaller than that is read whole as usual (an empty chunk here)."""
        out = Chunk()
        if self.offset or self._ident is not None:
            return out
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return out
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size <= tail + HEAD_BYTES:
                return out
            first = _pread(fd, HEAD_BYTES, 0)
            end = _pread(fd, tail, st.st_size - tail)
        except OSError:
            return out
        finally:
            os.close(fd)
        cut = 0
        for _ in range(head):
            nl = first.find(b"\n", cut)
            if nl < 0:
                break
            cut = nl + 1
        nl = end.find(b"\n")
        if cut == 0 or nl < 0:
            return out  # no complete first line, or one line longer than the tail: read it as usual
        self._ident = (st.st_dev, st.st_ino)
        self._signature = first[:SIGNATURE]
        self.offset = st.st_size - tail + nl + 1
        out.mtime = st.st_mtime
        out.blob = first[:cut]
        return out

    def feed(self, data: bytes, *, reset: bool = False) -> Chunk:
        """Take bytes appended to a file read elsewhere (a remote follower), as :meth:`read` would."""
        out = Chunk(reset=reset)
        if reset:
            self._restart()
        self._take(data, out)  # its first bytes kept too: the follower checks them when it is started again
        return out

    def skip_to(self, offset: int) -> bool:
        """The file's bytes up to ``offset`` were taken another way (a remote follower's digest: its rows
        merged, mstop.sources.followers.follower): the tail goes on from there. Only at a line's end and forward: False
        (nothing changed) when a line is waiting for its newline, or ``offset`` is behind."""
        if self._partial or self._skipping or offset < self.offset:
            return False
        self.offset = offset
        self._after_cr = False
        return True

    @property
    def signature(self) -> bytes:
        """The file's first bytes as read (up to SIGNATURE): a remote follower checks them on reconnect."""
        return bytes(self._signature)

    @property
    def pending(self) -> int:
        """Bytes of a line still waiting for its newline."""
        return len(self._partial)

    def _same_start(self, fd: int, size: int) -> bool:
        if size < self.offset or not self._signature:
            return False
        return _pread(fd, len(self._signature), 0) == self._signature

    def drop_line(self) -> int:
        """The line being split is dropped as overlong (its bytes were stepped over: a hole): 1, counted
        where it begins, else 0 (it was counted already)."""
        if self._skipping:
            return 0
        self._partial.clear()
        self._skipping = True
        return 1

    def _restart(self) -> None:
        self.offset = 0
        self.resets += 1
        self._signature = b""
        self._partial.clear()
        self._skipping = False
        self._after_cr = False

    def _split(self, data: bytes, out: Chunk) -> None:
        if self._after_cr and data[:1] == b"\n":
            data = data[1:]  # the LF of a CRLF that the previous read cut after its CR
        self._after_cr = False
        last = max(data.rfind(b"\n"), data.rfind(b"\r"))  # a lone CR ends a line too (old Mac files)
        if last < 0:  # no line ends here
            if not self._skipping:
                if len(self._partial) + len(data) > MAX_LINE:
                    self._partial.clear()
                    self._skipping = True
                    out.overlong += 1
                else:
                    self._partial += data
            return
        complete, tail = data[: last + 1], data[last + 1:]
        if self._skipping:
            end = min(i for i in (complete.find(b"\n"), complete.find(b"\r")) if i >= 0)
            if complete[end: end + 2] == b"\r\n":
                end += 1
            complete = complete[end + 1:]  # the end of an overlong line
            self._skipping = False
        elif self._partial:
            complete = bytes(self._partial) + complete
            self._partial.clear()
        out.blob = complete
        self._after_cr = not tail and complete.endswith(b"\r")
        if len(tail) > MAX_LINE:
            self._skipping = True
            out.overlong += 1
        else:
            self._partial += tail


def hole_at(fd: int, offset: int, size: int) -> int:
    """The bytes of a hole (a sparse file's unwritten bytes) that begin at ``offset``, found by one
    ``lseek(SEEK_DATA)``; 0 where there is data there, or where the system or file system cannot tell."""
    seek_data = getattr(os, "SEEK_DATA", None)
    if seek_data is None:  # this system cannot tell holes
        return 0
    try:
        data = os.lseek(fd, offset, seek_data)
    except OSError as e:
        if e.errno != errno.ENXIO:  # this file system cannot tell holes
            return 0
        data = size  # no data after the offset: a hole to the end
    return max(0, min(data, size) - offset)


def lock_free(path: str) -> bool | None:
    """Whether no process holds a ``flock`` on ``path``: True when the exclusive lock could be taken (and was
    let go at once): the writer that held its life lock there has ended (mstop_writer._files.LifeLock); False
    while one holds it; None when it cannot be told (no file, no locks on this file system)."""
    try:
        import fcntl

        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (ImportError, OSError):
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        except OSError:
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    finally:
        os.close(fd)


def not_regular(mode: int) -> str:
    """Why a file of this mode is not followed: only regular files are rank files."""
    return f"{file_kind(mode)}, not a regular file"
