"""A guard for the unit tier: a test that starts a process or opens a network socket is failed, named, with
what it started (tests/unit/conftest.py applies it to every phase of every unit test).

Every way Python starts a program ends in one of a few entry points (``subprocess.Popen._execute_child``,
``_posixsubprocess.fork_exec`` under multiprocessing, ``os.fork``, ``os.posix_spawn``, ``os.system``); every
network socket, TCP or Unix, is connected or bound. The guard patches those for one phase and keeps what was
tried even when the code under test swallows the error (the writer swallows its own), so the phase fails at its
end. ``socket.socketpair`` stays allowed: asyncio's event loop wakes itself through one, and it reaches no other
process.
"""

from __future__ import annotations

import _posixsubprocess
import contextlib
import os
import socket
import subprocess
from collections.abc import Iterator

import pytest


class StartedOutsideTheProcess(RuntimeError):
    """Raised where a unit test starts a process or opens a network socket."""


def _what(name: str, args: tuple) -> str:
    """A short account of the call: the program's argv where there is one, else the address."""
    for a in args:
        if isinstance(a, (list, tuple)) and a and all(isinstance(x, (str, bytes, os.PathLike)) for x in a):
            return f"{name} {[os.fsdecode(x) for x in a][:6]}"
        if name.startswith("socket"):
            return f"{name} {a!r}"
        if isinstance(a, (str, bytes)):
            return f"{name} {os.fsdecode(a)[:200]!r}"
    return name


@contextlib.contextmanager
def in_process(nodeid: str, phase: str) -> Iterator[None]:
    """Fail the phase ``phase`` of test ``nodeid`` if it starts a process or opens a network socket."""
    tried: list[str] = []

    def refuse(name: str):
        def refused(*args, **kwargs):
            what = _what(name, args)
            tried.append(what)
            raise StartedOutsideTheProcess(f"{nodeid} ({phase}) is a unit test and tried {what}: a test that "
                                           "needs a process or a socket belongs in tests/system")
        return refused

    mp = pytest.MonkeyPatch()
    mp.setattr(subprocess.Popen, "_execute_child", lambda self, args, *rest: refuse("subprocess")(args))
    mp.setattr(_posixsubprocess, "fork_exec", refuse("fork_exec"))
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "execv", "execve", "execvp",
                 "execvpe"):
        if hasattr(os, name):
            mp.setattr(os, name, refuse(f"os.{name}"))
    for name in ("connect", "connect_ex", "bind"):
        mp.setattr(socket.socket, name, lambda self, address, _n=name: refuse(f"socket.{_n}")(address))
    try:
        yield
    finally:
        mp.undo()
    if tried:
        pytest.fail(f"{nodeid} ({phase}) is a unit test and tried {'; '.join(dict.fromkeys(tried))}: a test that "
                    "needs a process or a socket belongs in tests/system", pytrace=False)
