"""Shared fixtures: a guard against leaked threads, and helpers to read run directories."""

from __future__ import annotations

import csv
import json
import os
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def no_leaked_threads():
    """Fail a test that leaves threads running (a writer not closed, a follower not stopped)."""
    before = set(threading.enumerate())
    yield
    leaked = [t for t in threading.enumerate() if t not in before and t.is_alive()
              and t.name.startswith("mstop")]
    for t in leaked:
        t.join(timeout=2)
    leaked = [t.name for t in leaked if t.is_alive()]
    assert not leaked, f"threads left running: {leaked}"


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
