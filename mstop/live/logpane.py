"""The log pane's content (the monitor's ``L``): one rank's log lines, its error lines, and search.

What the pane draws comes from here, so it can be built and tested without a screen: :class:`LogPane`
follows the file (:class:`mstop.sources.logs.LogTail`), knows which lines are errors
(:mod:`mstop.formats.logs`), and answers the keys: the next or previous error line (``n``/``N``) and the next
line holding a text (``/``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..formats.logs import LastError, is_error, last_error
from ..safe import clean
from ..sources.logs import LogTail


@dataclass
class LogPane:
    """One rank's log as the pane shows it."""

    rank: int
    path: str | None
    tail: LogTail | None = None
    errors: list[int] = field(default_factory=list)  # indexes of error lines in ``lines``
    at: int | None = None  # the line the keys moved to (shown at the top)
    refused: str | None = None  # why a file named as the rank's log is not read (mstop.sources.logs)
    #: how the rank's process crashed and where its stack is (``crashed (Segmentation fault): its Python stack
    #: at the crash is in the stacks view``: RunReader.crash): faulthandler writes it to the stacks file, not to
    #: this log, which then holds no error line of it
    crash: str | None = None

    @property
    def pointer(self) -> str | None:
        """Where the answer is when this log does not hold it: a crash's stack, in the stacks view (t)."""
        if self.crash is None:
            return None
        return f"rank {self.rank} {clean(self.crash, 400)} (t), not in this log"

    def __post_init__(self) -> None:
        if self.path is not None and self.tail is None:
            self.tail = LogTail(self.path)

    @property
    def lines(self) -> list[str]:
        return self.tail.lines if self.tail is not None else []

    @property
    def problem(self) -> str | None:
        """Why there is nothing to show: no log known for the rank, or it cannot be read."""
        if self.path is None and self.refused is not None:
            return f"rank {self.rank}'s log is not shown: {clean(self.refused, 600)}"
        if self.path is None:
            return (f"no log is known for rank {self.rank}: a writer's run records where its standard output "
                    "goes when that is a file (msrun, nohup, > train.log); give the folder with --logs DIR")
        if self.tail is not None and self.tail.error is None and getattr(self.tail, "remote", False) \
                and not self.tail.opened:
            return f"reading {clean(self.tail.path, 300)} over ssh ..."
        return self.tail.error if self.tail is not None else None

    def read(self) -> list[str]:
        """Read what the log gained; return the new lines (error lines are indexed as they come)."""
        if self.tail is None:
            return []
        dropped = self.tail.dropped
        new = self.tail.read()
        shift = self.tail.dropped - dropped  # lines dropped from the start to keep MAX_LINES
        if shift:
            self.errors = [i - shift for i in self.errors if i >= shift]
            if self.at is not None:
                self.at = max(0, self.at - shift)
        first = len(self.tail.lines) - len(new)  # where the new lines begin (below 0: some already dropped)
        self.errors += [first + k for k, line in enumerate(new) if first + k >= 0 and is_error(line)]
        return new

    def last_error(self) -> LastError | None:
        return last_error(self.lines)

    def next_error(self, forward: bool = True) -> int | None:
        """The error line after (``forward``) or before the current one; wraps around; None without any."""
        if not self.errors:
            return None
        at = self.at if self.at is not None else (-1 if forward else len(self.lines))
        later = [i for i in self.errors if i > at] if forward else [i for i in self.errors if i < at]
        self.at = (later[0] if forward else later[-1]) if later else (self.errors[0] if forward else self.errors[-1])
        return self.at

    def find(self, text: str, forward: bool = True) -> int | None:
        """The next line (after the current one, wrapping) holding ``text`` (case-insensitive); None if none."""
        if not text:
            return None
        needle, lines = text.lower(), self.lines
        n = len(lines)
        start = self.at if self.at is not None else (-1 if forward else n)
        for k in range(1, n + 1):
            i = (start + k) % n if forward else (start - k) % n
            if needle in lines[i].lower():
                self.at = i
                return i
        return None

