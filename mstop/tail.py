"""Reading the new bytes of growing files: offsets, half lines, truncation and replacement.

Nothing here imports textual or watchdog: it is the pure file-following core
that the local source (and, later, the remote follower) drive.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

#: Bytes read from a file in one call (more arrives on the next call).
CHUNK = 8 << 20
#: A line longer than this is dropped (counted bad) without being held in memory.
MAX_LINE = 1 << 20
#: Bytes remembered from a file's start to recognise it after an rsync-style replacement.
SIGNATURE = 256


@dataclass
class Chunk:
    """What one read of a file gave: complete lines, and what happened on the way."""

    lines: list[bytes] = field(default_factory=list)
    reset: bool = False  # the file was read again from its start: drop what came from it before
    overlong: int = 0  # lines dropped for being longer than MAX_LINE


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
        """Read what was appended since the last call."""
        out = Chunk()
        try:
            with open(self.path, "rb") as f:
                st = os.fstat(f.fileno())
                ident = (st.st_dev, st.st_ino)
                if self._ident is not None and (ident != self._ident or st.st_size < self.offset):
                    if not self._same_start(f, st.st_size):
                        self._restart()
                        out.reset = True
                self._ident = ident
                if st.st_size <= self.offset:
                    return out
                f.seek(self.offset)
                data = f.read(min(CHUNK, st.st_size - self.offset))
        except OSError:
            return out  # gone or unreadable for now: try again next time
        if len(self._signature) < SIGNATURE and self.offset < SIGNATURE:
            self._signature = (bytes(self._signature) + data[: SIGNATURE - self.offset])[:SIGNATURE]
        self.offset += len(data)
        self._split(data, out)
        return out

    @property
    def pending(self) -> int:
        """Bytes of a line still waiting for its newline."""
        return len(self._partial)

    def _same_start(self, f, size: int) -> bool:
        if size < self.offset or not self._signature:
            return False
        f.seek(0)
        return f.read(len(self._signature)) == self._signature

    def _restart(self) -> None:
        self.offset = 0
        self.resets += 1
        self._signature = b""
        self._partial.clear()
        self._skipping = False

    def _split(self, data: bytes, out: Chunk) -> None:
        parts = data.split(b"\n")
        tail = parts.pop()  # after the last newline: a line still being written
        if parts:
            if self._skipping:
                del parts[0]  # the end of an overlong line
                self._skipping = False
            elif self._partial:
                parts[0] = bytes(self._partial) + parts[0]
                self._partial.clear()
            if max(map(len, parts)) > MAX_LINE:
                kept = [p for p in parts if len(p) <= MAX_LINE]
                out.overlong += len(parts) - len(kept)
                parts = kept
            out.lines.extend(parts)
        if self._skipping:
            return
        if len(self._partial) + len(tail) > MAX_LINE:
            self._partial.clear()
            self._skipping = True
            out.overlong += 1
        else:
            self._partial += tail
