"""Reading the new bytes of growing files: offsets, half lines, truncation and replacement.

Nothing here imports textual or watchdog: it is the pure file-following core
that the local source (and, later, the remote follower) drive.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: Bytes read from a file in one call once it has been read (more arrives on the next call).
CHUNK = 8 << 20
#: Bytes read in the first call: a whole long run at once when it fits, so it is parsed in one go.
FIRST_CHUNK = 512 << 20
#: A line still waiting for its newline is dropped (counted bad) once it is longer than this, so a
#: runaway line is never held in memory. Complete lines of any length go to the parsers.
MAX_LINE = 1 << 20
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

    def read(self) -> Chunk:
        """Read what was appended since the last call.

        Plain ``os`` calls (open, fstat, pread, close): following 1,024 files
        makes this the hottest path of the engine.
        """
        out = Chunk()
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return out  # gone or unreadable for now: try again next time
        try:
            st = os.fstat(fd)
            ident = (st.st_dev, st.st_ino)
            if self._ident is not None and (ident != self._ident or st.st_size < self.offset):
                if not self._same_start(fd, st.st_size):
                    self._restart()
                    out.reset = True
            self._ident = ident
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

    def feed(self, data: bytes, *, reset: bool = False) -> Chunk:
        """Take bytes appended to a file read elsewhere (a remote follower), as :meth:`read` would."""
        out = Chunk(reset=reset)
        if reset:
            self._restart()
        self.offset += len(data)
        self._split(data, out)
        return out

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

    def _split(self, data: bytes, out: Chunk) -> None:
        last = data.rfind(b"\n")
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
            complete = complete[complete.find(b"\n") + 1:]  # the end of an overlong line
            self._skipping = False
        elif self._partial:
            complete = bytes(self._partial) + complete
            self._partial.clear()
        out.blob = complete
        if len(tail) > MAX_LINE:
            self._skipping = True
            out.overlong += 1
        else:
            self._partial += tail
