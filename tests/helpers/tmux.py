"""A real terminal for system tests: tmux sessions on their own sockets, read back with capture-pane."""

from __future__ import annotations

import os
import subprocess
import time

from tests.helpers.common import ROOT


def tmux(sock: str, cmd: str, env_extra: dict | None = None, width: int = 120) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX")}
    env.update(env_extra or {})
    subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-x", str(width), "-y", "40", "-c", str(ROOT), cmd],
                   check=True, env=env)


def screen(sock: str) -> str:
    return subprocess.run(["tmux", "-L", sock, "capture-pane", "-p"], capture_output=True, text=True).stdout


def until(sock: str, want: list[str], seconds: float = 30) -> str:
    shown = ""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        shown = screen(sock)
        if all(w in shown for w in want):
            return shown
        time.sleep(0.2)
    missing = [w for w in want if w not in shown]
    raise AssertionError(f"not on screen: {missing}\n{shown}")
