"""A fresh stack of a rank's process, taken from outside with ``py-spy dump`` (the stacks view's ``d``).

The writer's faulthandler dumps a rank's stacks only when its step overran; ``py-spy dump --pid P`` reads
them at any moment from outside (ptrace), without stopping the rank for long or needing anything of it.
Where it cannot, the words say why: py-spy not installed (``pip install 'mstop[pyspy]'``), the process on
another host, ptrace not permitted (``kernel.yama.ptrace_scope``, another user, a container without
``CAP_SYS_PTRACE``).

**Identity, never a guess** (issue 38, item 7): a pid from a start event is trusted only on its own host (the
host name and the boot id it recorded), in the same pid namespace as mstop, with the process start time it
recorded (``/proc/PID/stat`` field 22): a pid reused by another process, a process of another container or
of a host with the same name is "not visible from here", never dumped in its place.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from typing import Any

from mstop_writer.witness import identity, own_start_ticks

from . import followers

#: seconds one dump may take (py-spy reads the process's memory: well under a second for a training rank)
TIMEOUT = 15.0


def not_visible(start: dict[str, Any]) -> str | None:
    """Why the process a start event names is not the process of that pid here (None: it is)."""
    pid = start.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool):
        return "its start event gives no pid"
    if start.get("host") not in (None, socket.gethostname()):
        return f"it runs on {start.get('host')}, not on this host"
    boot = start.get("boot_id")
    if boot is None or start.get("pid_start") is None:
        return "its writer recorded no process identity (boot id, start time): an older writer"
    mine = identity()
    if boot != mine["boot_id"]:
        return "it ran in another boot of this host (or on another host of the same name)"
    if start.get("pid_ns") != mine["pid_ns"]:
        return "it runs in another pid namespace (another container)"
    ticks = own_start_ticks(pid)
    if ticks is None:
        return "the process has ended"
    if ticks != start.get("pid_start"):
        return f"pid {pid} is another process now (the rank's process ended)"
    return None


def executable() -> str | None:
    """py-spy beside this Python (a venv's bin), else on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return here if os.access(here, os.X_OK) else shutil.which("py-spy")


def dump_over_ssh(host: str, start: dict[str, Any], connection: Any) -> tuple[list[str] | None, str]:
    """The same on ``host`` (a ``host:/path`` source's), over its shared ssh connection: the identity is
    checked there and py-spy run there (mstop.sources.followers.pyspy_follower)."""
    from ..safe import loads
    from .remote import RemoteError, run_program

    request = {k: start.get(k) for k in ("pid", "host", "boot_id", "pid_ns", "pid_start")}
    program = followers.program("pyspy_follower")
    try:
        out = loads(run_program(host, program, request, connection=connection, timeout=30.0))
    except (RemoteError, ValueError) as e:
        return None, f"{host}: no dump: {e}"
    return answer(host, out)


#: the most of a dump's answer kept: lines (a stack of every thread of a process is some hundreds), and
#: characters a line or a reason
MAX_LINES = 5000
MAX_LINE = 1000


def answer(host: str, out: object) -> tuple[list[str] | None, str]:
    """The dump the other side answered, each field type-checked and bounded: ``{"lines": [str, ...]}`` or
    ``{"why": str}``; anything else is said as an answer mstop cannot read, never shown as it came."""
    from ..safe import clean

    if isinstance(out, dict):
        lines, why = out.get("lines"), out.get("why")
        if isinstance(lines, list) and all(isinstance(x, str) for x in lines):
            kept = [clean(x, MAX_LINE) for x in lines[:MAX_LINES]]
            if len(lines) > MAX_LINES:
                kept.append(f"... {len(lines) - MAX_LINES:,} more lines not shown")
            return kept, ""
        if lines is None and isinstance(why, str) and why:
            return None, f"{host}: {clean(why, MAX_LINE)}"
    return None, f"{host}: no dump: an answer mstop cannot read ({clean(type(out).__name__, 40)})"


def dump(start: dict[str, Any]) -> tuple[list[str] | None, str]:
    """``py-spy dump`` of the process a start event names: (its lines, "") or (None, why not)."""
    exe = executable()
    if exe is None:
        return None, "py-spy is not installed (pip install 'mstop[pyspy]')"
    why = not_visible(start)
    if why is not None:
        return None, f"the process is not visible from here: {why}"
    try:
        out = subprocess.run([exe, "dump", "--pid", str(start["pid"])], capture_output=True, text=True,
                             timeout=TIMEOUT, errors="replace")
    except subprocess.TimeoutExpired:
        return None, f"py-spy did not answer in {TIMEOUT:.0f} s"
    except OSError as e:
        return None, f"py-spy could not run: {e}"
    if out.returncode != 0:
        err = (out.stderr or out.stdout).strip().splitlines()
        text = err[-1] if err else f"exit code {out.returncode}"
        if "ermission" in text or "ptrace" in text.lower():
            return None, f"ptrace not permitted ({text}): run mstop as the job's user, or allow ptrace"
        return None, f"py-spy failed: {text}"
    return out.stdout.splitlines(), ""
