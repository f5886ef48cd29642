"""A rank's own log, read for what went wrong: error lines, tracebacks, and the last error.

A MindSpore job's standard output and error hold what no metric says: the Python traceback of a failed
rank, MindSpore's ``[ERROR] ME(...)`` lines, MindFormers' ``- ERROR -`` records, the C++ exception text a
``RuntimeError`` carries over several lines, a ``Segmentation fault``. This module knows only lines: which
are errors (:func:`error_indexes`), and the one that says why the rank stopped (:func:`last_error`): the
exception line closing the last traceback with the lines of its message, else the last error line. Lines
come in already decoded and cleaned of control codes (:func:`clean_lines`): they are shown on a terminal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..safe import clean

#: Longest line kept for the screen (a log line of megabytes is cut, and says so by its ellipsis).
MAX_LINE = 2000

#: The start of a Python traceback.
TRACEBACK = "Traceback (most recent call last):"

_ERROR = re.compile(
    r"^\[(?:ERROR|CRITICAL)\]"                      # MindSpore's glog lines: [ERROR] ME(pid:tid,...)
    r"|\s-\s(?:ERROR|CRITICAL)\s-\s"               # MindFormers' and Python logging's records
    r"|^(?:ERROR|CRITICAL|FATAL)\b[\s:]"            # plain level-first lines
    r"|^Traceback \(most recent call last\):"
    r"|^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Failure)(?::|$)"  # ValueError: ...
    r"|Segmentation fault|core dumped|\bKilled\b|\bAborted\b|\bout of memory\b|\bOOM\b"
    r"|^\s*E[0-9A-Z]\d{4}[:\s]"                        # CANN's error codes: E39999: Inner Error!, EE9999 ...
)
#: CANN's error code lines (``EE9999: Inner Error!``, ``EH9999 ...``, ``E19999``): the Ascend cause a
#: framework's error line is followed by, under ``- Ascend Error Message:``
CANN = re.compile(r"^\s*E[0-9A-Z]\d{4}[:\s]")
#: msrun's launcher quoting other ranks' logs grep-style (``scheduler.log-58-[WARNING] ...``,
#: ``worker_1.log:60:[ERROR] ...``): another file's line, no error of this log's and no part of a message
_QUOTED = re.compile(r"^[\w./-]{1,200}\.log[-:]\d{1,9}[-:]")
#: the section heads of MindSpore's exception text: the Ascend one is part of the message, the others end it
_ASCEND_HEAD = re.compile(r"^-\s*Ascend Error Message:")
#: An exception line that closes a traceback (at the line's start: frames are indented).
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Failure|Warning)(?::|$)")
#: Where MindSpore's multi-line exception text ends: its C++ call stack for framework developers.
_MESSAGE_END = re.compile(r"^-{10,}|^- C\+\+ Call Stack|^\s*$|^\[(?:ERROR|WARNING|INFO|DEBUG|CRITICAL)\]")
#: Terminal escape sequences (colours, cursor moves) that a log written for a terminal holds: dropped, as a
#: terminal would not print them; any other control code is shown escaped (mstop.safe.clean).
#: an escape sequence a terminal would act on; an OSC (``ESC ]``) never reaches past its line (one without
#: its end would hide every later line of the chunk from the pane and from the error search)
_ANSI = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b\n\r]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
#: Most lines of one error message kept.
MESSAGE_LINES = 8


def clean_lines(text: str) -> list[str]:
    """Lines of decoded log text, each without control codes (a progress bar's carriage returns end lines
    too: the last state of the bar is what a terminal shows) and cut to MAX_LINE characters."""
    lines = _ANSI.sub("", text).replace("\r\n", "\n").split("\n")
    out = []
    for line in lines:
        if "\r" in line:
            line = line.rstrip("\r").rsplit("\r", 1)[-1]
        out.append(clean(line.expandtabs(4), MAX_LINE))
    return out


def is_error(line: str) -> bool:
    """Whether a log line reports an error (see the module docstring for the forms known; a line another
    log's, quoted by msrun's launcher, is not this log's error)."""
    return _ERROR.search(line) is not None and _QUOTED.match(line) is None


def error_indexes(lines: list[str]) -> list[int]:
    """Indexes of the lines that report errors, in order: each traceback's first line and its exception
    line, MindSpore's and MindFormers' error records, crashes (the n/N keys jump between them)."""
    return [i for i, line in enumerate(lines) if is_error(line)]


@dataclass
class LastError:
    """Why a rank stopped, as its log says: the message's lines (the first is the exception or error line),
    and where in the log it is."""

    lines: list[str]
    at: int  # index of its first line in the lines read

    @property
    def text(self) -> str:
        """The message, its lines joined by newlines (never escaped: shown as lines)."""
        return "\n".join(self.lines)


def last_error(lines: list[str]) -> LastError | None:
    """The error that ended the log: the exception line after the last traceback (with the lines of its
    message, up to MESSAGE_LINES or the C++ call stack), else the last error line; None when no line
    reports an error."""
    tb = max((i for i, line in enumerate(lines) if line.startswith(TRACEBACK)), default=None)
    if tb is not None:
        for i in range(tb + 1, len(lines)):
            if _EXCEPTION.match(lines[i]):
                return LastError(_message(lines, i), i)
    found = [i for i in error_indexes(lines) if not lines[i].startswith(TRACEBACK)]
    if not found:
        return None
    last = found[-1]
    if CANN.match(lines[last]):  # an Ascend cause: the error line whose message it is, when there is one
        last = _cause_of(lines, last)
    return LastError(_message(lines, last), last)


def _cause_of(lines: list[str], i: int) -> int:
    """For CANN's code line ``i``: the error line it is the Ascend cause of (up the block of code lines,
    separators and the ``- Ascend Error Message:`` head, within MESSAGE_LINES lines of its own), else ``i``;
    the first code line of its block when no error line heads it."""
    first = i
    for j in range(i - 1, max(-1, i - 4 * MESSAGE_LINES), -1):
        line = lines[j]
        if CANN.match(line):
            first = j
        elif _ASCEND_HEAD.match(line) or line.startswith("-" * 10) or not line.strip():
            continue
        elif is_error(line) and first - j <= MESSAGE_LINES:
            return j
        else:
            break
    return first


def _ascend_block_at(lines: list[str], j: int) -> bool:
    """Whether blank lines from ``j`` lead to a ``- Ascend Error Message:`` block (its separator, its head)."""
    k = j
    while k < len(lines) and not lines[k].strip() and k - j < 3:
        k += 1
    return k + 1 < len(lines) and lines[k].startswith("-" * 10) and bool(_ASCEND_HEAD.match(lines[k + 1]))


def _message(lines: list[str], i: int) -> list[str]:
    """Line ``i`` and the lines that continue its message: MindSpore's exception text up to its C++ call
    stack, with the Ascend cause CANN gives under ``- Ascend Error Message:`` (its separators left out)."""
    out = [lines[i]]
    j = i + 1
    while j < len(lines) and len(out) < MESSAGE_LINES:
        line = lines[j]
        if not line.strip() and _ascend_block_at(lines, j):
            j += 1  # MindSpore 2.x leaves a blank line between the error and its Ascend cause
            continue
        if line.startswith("-" * 10) and j + 1 < len(lines) and _ASCEND_HEAD.match(lines[j + 1]):
            j += 3 if j + 2 < len(lines) and lines[j + 2].startswith("-" * 10) else 2  # into the Ascend cause
            continue
        if CANN.match(line) and len(out) > 0:
            out.append(line)
            j += 1
            continue
        if _MESSAGE_END.match(line) or _EXCEPTION.match(line) or line.startswith(TRACEBACK) or _QUOTED.match(line):
            break
        out.append(line)
        j += 1
    return out
