"""Stopping the processes mstop starts (the demo's job, ssh clients): each in a session of its own."""

from __future__ import annotations

import os
import signal
import subprocess


def stop_group(proc: subprocess.Popen, grace: float = 10.0, *, leftovers: bool = False) -> None:
    """Stop a process started with ``start_new_session`` and everything in its process group: SIGTERM,
    then SIGKILL after ``grace`` seconds; the leader is reaped (no ``<defunct>`` left). With ``leftovers``
    the group is signalled again afterwards: children a launcher left behind when it exited."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except OSError:
            pass
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                proc.kill()
            proc.wait()
    if leftovers:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except OSError:
            pass
