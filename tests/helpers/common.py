"""Helpers every kind of test uses: where the checkout is, waiting for a condition, reading a run's files, the
processes of a test, a small full disk."""

from __future__ import annotations

import csv
import ctypes
import json
import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: the job scripts and stand-ins the system tests start
HELPERS = ROOT / "tests" / "helpers"


def wait_for(cond, timeout: float = 20.0) -> bool:
    """Poll ``cond`` until it holds or ``timeout`` seconds pass; return its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def read_rows(path: str | os.PathLike[str]) -> tuple[list[str], list[dict[str, str]]]:
    """The header and rows of a rank CSV, as the csv module reads them."""
    with open(path, newline="") as f:
        r = csv.reader(f)
        header = next(r)
        return header, [dict(zip(header, row)) for row in r]


def read_events(path: str | os.PathLike[str]) -> list[dict]:
    """Every line of an events file as JSON (strict: a broken line fails the test)."""
    with open(path) as f:
        return [json.loads(line) for line in f]


def ancestors(pid: int) -> list[int]:
    """The parent of ``pid``, its parent, and so on up to (not including) init (read from /proc)."""
    out = []
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        out.append(pid)
    return out


def processes_with(text: str, under: Iterable[int] | None = None) -> list[tuple[int, str]]:
    """(pid, command line) of the processes whose command line contains ``text`` (read from /proc, so
    no procps is needed), this test process excluded; ``under``: only those descending from one of these
    processes (a test's own sshd: another worker's tests run beside it under pytest-xdist)."""
    roots = None if under is None else set(under)
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if text in cmd and (roots is None or roots & set(ancestors(int(pid)))):
            out.append((int(pid), cmd))
    return out


def proc_state(pid: int) -> str:
    """The process's state letter from /proc/PID/stat (R, S, T stopped, Z zombie, ...), or "" when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


class Starved:
    """Seconds a thread of this process that wakes every ``tick`` seconds woke more than ``tick`` late, summed
    from now to :meth:`stop`: the time this process could not run (a loaded machine's), which a deadline
    mstop keeps on its own clock may add (the fanout's tick moves each host's deadline by it,
    mstop.sources.fanout.Fanout.tick) and a bound on a wall-clock latency can allow for. Zero on a quiet
    machine."""

    def __init__(self, tick: float) -> None:
        self.tick, self.seconds = tick, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(self.tick):
            now = time.monotonic()
            late = now - last - self.tick
            last = now
            if late > self.tick:
                self.seconds += late

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.seconds


class FullDisk:
    """A small tmpfs mounted for one test: ``fill()`` takes every free byte, ``free()`` gives them back."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._filler = path / "filler"

    @staticmethod
    def mount(path: Path, size: str = "256k") -> str | None:
        """Mount a tmpfs of ``size`` at ``path`` by the mount(2) system call; None, or why it could not."""
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.mount(b"tmpfs", os.fsencode(path), b"tmpfs", 0, f"size={size}".encode()) == 0:
            return None
        return os.strerror(ctypes.get_errno())

    @staticmethod
    def unmount(path: Path) -> None:
        """Detach the tmpfs at ``path`` (lazily, as ``umount -l``: a file still open does not keep it)."""
        ctypes.CDLL(None, use_errno=True).umount2(os.fsencode(path), 2)  # MNT_DETACH

    def fill(self) -> None:
        with open(self._filler, "ab", buffering=0) as f:
            try:
                while True:
                    f.write(b"\0" * 4096)
            except OSError:
                pass  # ENOSPC: the disk is full now

    def free(self) -> None:
        self._filler.unlink()
