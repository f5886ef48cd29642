"""``mstop`` run in this process as a user runs it (the same ``main`` the console script calls): its exit code
and what it printed. The unit tier checks the command line's output this way; the system tier runs the real
``mstop`` program (tests/system/test_cli.py and the others)."""

from __future__ import annotations

import contextlib
import io
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Ran:
    """What one run of the command line gave: named as ``subprocess.CompletedProcess`` names it."""

    returncode: int
    stdout: str
    stderr: str


def mstop(*args: str | os.PathLike[str]) -> Ran:
    """Run ``mstop ARGS...`` in this process; its standard output and error are captured, not shown."""
    from mstop.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([os.fspath(a) for a in args])
        except SystemExit as e:  # a body that exits as the console script would
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return Ran(code, out.getvalue(), err.getvalue())
