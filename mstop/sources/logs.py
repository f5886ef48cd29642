"""Where a rank's own log is, and reading its tail while it grows (the monitor's log pane, ``L``).

In order, a rank's log is:

1. under ``--logs DIR``: msrun's ``worker_<R>.log``, or MindFormers' ``rank_<R>/info.log``;
2. for a job read from its own logs (:mod:`mstop.sources.mflog`): msrun's ``worker_<R>.log`` beside the run
   (a MindFormers job's ``output/msrun_log/``: a Python traceback goes to standard error, which msrun
   writes there, not to ``info.log``), else the rank's ``info.log``;
3. for a writer's run: the files the writer found its standard output and error going to when it started
   (its start event's ``logs``: msrun's worker log, ``nohup.out``, ``> train.log``).

:class:`LogTail` reads the last :data:`TAIL_BYTES` of one, then what is appended; it never blocks (a FIFO
is refused) and starts again from the end when the file was truncated or replaced.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field

from ..engine.logs import LastError, clean_lines, last_error
from ..engine.store import Store
from .mflog import LOG_NAME, MSRUN_DIR, find_logs
from .protocol import SourceError
from .remote import parse_target

#: How much of a log's end is read when it is opened (about 10,000 lines of 100 characters).
TAIL_BYTES = 1 << 20
#: Most lines a pane keeps while it follows (the oldest are dropped).
MAX_LINES = 20_000


def rank_log(store: Store, specs: list[str], rank: int, logs_dir: str | None = None) -> str | None:
    """The path of rank ``rank``'s log (see the module docstring), or None when none is known here."""
    for path in candidates(store, specs, rank, logs_dir):
        if os.path.isfile(path):
            return path
    return None


def candidates(store: Store, specs: list[str], rank: int, logs_dir: str | None = None) -> list[str]:
    """Every place rank ``rank``'s log may be, best first."""
    out: list[str] = []
    if logs_dir:
        out += [os.path.join(logs_dir, f"worker_{rank}.log"), os.path.join(logs_dir, f"rank_{rank}", LOG_NAME),
                os.path.join(logs_dir, MSRUN_DIR, f"worker_{rank}.log")]
    for spec in specs:
        try:
            if parse_target(spec) is not None:
                continue  # host:/path: the log is on the other host
        except SourceError:
            continue
        found = find_logs(spec).get(rank)
        if found is not None:
            folder, name = found
            if name == LOG_NAME:  # MindFormers' rank_<R>/info.log: msrun's worker log holds the tracebacks
                root = os.path.dirname(os.path.dirname(folder))  # output/log/rank_R -> output
                out += [os.path.join(r, MSRUN_DIR, f"worker_{rank}.log") for r in (root, os.path.dirname(root))]
            out.append(os.path.join(folder, name))
    d = store.ranks.get(rank)
    logs = (d.last_start or {}).get("logs") if d is not None else None
    if isinstance(logs, list):
        out += [p for p in logs if isinstance(p, str) and os.path.isabs(p)]
    return out


@dataclass
class LogTail:
    """One log file read from near its end, then as it grows: its complete lines, cleaned for a terminal."""

    path: str
    lines: list[str] = field(default_factory=list)
    offset: int = 0
    error: str | None = None  # why it cannot be read now
    dropped: int = 0  # lines dropped from the start of ``lines`` to keep MAX_LINES
    _ident: tuple[int, int] | None = None
    _partial: bytes = b""

    def read(self) -> list[str]:
        """Read what is new; return the lines it added (the first call: the file's last TAIL_BYTES)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError as e:
            self.error = f"cannot open {self.path}: {e.strerror or e}"
            return []
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                self.error = f"{self.path} is not a regular file"
                return []
            ident = (st.st_dev, st.st_ino)
            notes = []
            mid_line = False
            if ident != self._ident or st.st_size < self.offset:  # replaced or truncated: from its end again
                if self._ident is not None:
                    notes.append(f"-- {os.path.basename(self.path)} was truncated or replaced: read again --")
                self._ident, self._partial = ident, b""
                self.offset = max(0, st.st_size - TAIL_BYTES)
                mid_line = self.offset > 0  # the tail starts inside a line: that piece is left out
            data = os.pread(fd, min(max(0, st.st_size - self.offset), TAIL_BYTES), self.offset)
        except OSError as e:
            self.error = f"cannot read {self.path}: {e.strerror or e}"
            return []
        finally:
            os.close(fd)
        self.error = None
        self.offset += len(data)
        data = self._partial + data
        cut = data.rfind(b"\n")
        self._partial = data[cut + 1:]
        body = data[: cut + 1]
        if mid_line:
            body = body[body.find(b"\n") + 1:]
        new = notes + (clean_lines(body.decode("utf-8", "replace"))[:-1] if body else [])
        self.lines += new
        if len(self.lines) > MAX_LINES:
            self.dropped += len(self.lines) - MAX_LINES
            del self.lines[: len(self.lines) - MAX_LINES]
        return new


def last_error_of(path: str) -> LastError | None:
    """The last error a log's tail holds (mstop.engine.logs.last_error), read once; None without one."""
    tail = LogTail(path)
    tail.read()
    return last_error(tail.lines)


def job_rank_of(store: Store) -> int:
    """The rank whose log stands for the job: the lowest with rows (figures.lowest_rank), else the lowest
    known (a job that died before its first row), else 0."""
    from ..engine.figures import lowest_rank

    got = lowest_rank(store) if store.ranks else None
    return got if got is not None else min(store.ranks, default=0)
