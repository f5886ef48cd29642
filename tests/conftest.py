"""Fixtures for every test: a guard against leaked threads, a small full disk. Helpers live in tests/helpers/."""

from __future__ import annotations

import shutil
import subprocess
import threading

import pytest

from tests.helpers.common import ROOT, FullDisk

__all__ = ["ROOT"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by its folder (``-m unit``, ``-m system``) as pyproject declares the markers."""
    for item in items:
        kind = item.path.parent.name
        if kind in ("unit", "system"):
            item.add_marker(getattr(pytest.mark, kind))


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


@pytest.fixture
def full_disk(tmp_path):
    """A 256 KiB tmpfs (CI runs as root); skipped with the reason where mounting is not allowed."""
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command: cannot make a small full filesystem")
    got = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True,
                         text=True)
    if got.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {got.stderr.strip()}")
    try:
        yield FullDisk(mnt)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
