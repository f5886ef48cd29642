"""Reading the new bytes of growing files: offsets, half lines, truncation and replacement.

Nothing here imports textual or watchdog: it is the pure file-following core
that the local source (and, later, the remote follower) drive.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from mstop_writer.schema import file_kind

#: Bytes read from a file in one call once it has been read (more arrives on the next call).
CHUNK = 8 << 20
#: Bytes read in the first call: a whole long run at once when it fits, so it is parsed in one go.
FIRST_CHUNK = 512 << 20
#: A line still waiting for its newline is dropped (counted bad) once it is longer than this, so a
#: runaway line is never held in memory. Complete lines of any length go to the parsers.
MAX_LINE = 1 << 20
#: Bytes of a file's start read for its first lines when it is read from near its end (start_near_end).
HEAD_BYTES = 64 << 10
#: Bytes remembered from a file's start to recognise it after an rsync-style replacement.
SIGNATURE = 256


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

    The file is opened, read and closed on each call, so following 1,024 ranks
    never holds 1,024 descriptors. A file that shrank or whose inode changed is
    continued from the old offset when its first bytes still match what was
    read (rsync and scp replace files with a longer copy this way); otherwise
    it is read again from the start and the chunk says ``reset``.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0  # bytes consumed, partial tail included
        self.resets = 0
        self._ident: tuple[int, int] | None = None
        self._signature = b""
        self._partial = bytearray()
        self._skipping = False  # inside an overlong line, dropping until its newline
        self._after_cr = False  # the last line ended with CR: a LF that follows is its CRLF, not a line
        #: why the path cannot be followed (not a regular file), or None
        self.refused: str | None = None

    def read(self) -> Chunk:
        """Read what was appended since the last call.

        Plain ``os`` calls (open, fstat, pread, close): following 1,024 files
        makes this the hottest path of the engine.
        """
        out = Chunk()
        try:
            # O_NONBLOCK: opening a FIFO that nobody writes would block forever
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return out  # gone or unreadable for now: try again next time
        try:
            st = os.fstat(fd)
            self.refused = None if stat.S_ISREG(st.st_mode) else not_regular(st.st_mode)
            if self.refused is not None:
                return out
            ident = (st.st_dev, st.st_ino)
            if self._ident is not None and (ident != self._ident or st.st_size < self.offset):
                if not self._same_start(fd, st.st_size):
                    self._restart()
                    out.reset = True
            self._ident = ident
            out.mtime = st.st_mtime
            if st.st_size <= self.offset:
                return out
            limit = FIRST_CHUNK if self.offset == 0 else CHUNK
            data = _pread(fd, min(limit, st.st_size - self.offset), self.offset)
            out.more = st.st_size - self.offset > limit
        except OSError:
            return out
        finally:
            os.close(fd)
        if len(self._signature) < SIGNATURE and self.offset < SIGNATURE:
            self._signature = (bytes(self._signature) + data[: SIGNATURE - self.offset])[:SIGNATURE]
        self.offset += len(data)
        self._split(data, out)
        return out

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
        self.offset += len(data)
        self._split(data, out)
        return out

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


def not_regular(mode: int) -> str:
    """Why a file of this mode is not followed: only regular files are rank files."""
    return f"{file_kind(mode)}, not a regular file"
