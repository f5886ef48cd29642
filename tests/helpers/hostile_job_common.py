"""Builders the tests of hostile job share (system/test_hostile_job_mindspore.py): plain functions and data, no
fixtures."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path


def tree(path: Path) -> dict[str, str]:
    """Every entry under ``path`` (not following links) with what it is and holds: a change outside the
    run directory shows as a difference."""
    out = {}
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            p = os.path.join(root, name)
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    out[p] = "file " + hashlib.sha256(f.read()).hexdigest() + f" {st.st_mtime_ns}"
            elif stat.S_ISLNK(st.st_mode):
                out[p] = "link " + os.readlink(p)
            else:
                out[p] = f"mode {st.st_mode:o}"
    return out


def plant(path: Path, kind: str, outside: Path) -> None:
    """Put a hostile ``kind`` of thing at ``path``."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link-out":
        path.symlink_to(outside / "target")
    elif kind == "link-stdin":
        path.symlink_to("/dev/stdin")
    elif kind == "directory":
        path.mkdir()
    elif kind == "device":
        if os.geteuid() != 0:
            path.symlink_to("/dev/zero")  # not root: a link to a device instead (refused as a link)
        else:
            os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero's numbers
    else:
        raise AssertionError(kind)


