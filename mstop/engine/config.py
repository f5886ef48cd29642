"""Settings files: ``~/.config/mstop/config.toml``, then ``mstop.toml`` in each run directory.

A file holds a ``[health]`` table (or the settings at its top level). A later file overrides an earlier
one; a setting nobody knows is an error naming the file and the known settings.
"""

from __future__ import annotations

import os
from typing import Any


def settings_paths(run_dirs: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The files read, in order (those that do not exist are skipped)."""
    return [os.path.expanduser("~/.config/mstop/config.toml"),
            *(os.path.join(d, "mstop.toml") for d in run_dirs if os.path.isdir(d))]


def read_settings(run_dirs: list[str] | tuple[str, ...], table: str, known: set[str]) -> dict[str, Any]:
    """The ``table`` settings of every settings file, later files winning. ValueError for an unknown
    setting; a file that is missing, or a FIFO or device that open() would block on, is skipped."""
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        import tomli as tomllib

    values: dict[str, Any] = {}
    for path in settings_paths(run_dirs):
        if not os.path.isfile(path):
            continue
        try:
            with open(path, "rb") as f:
                data = tomllib.load(f)
        except FileNotFoundError:
            continue
        got = data.get(table, data)
        unknown = set(got) - known
        if unknown:
            raise ValueError(f"{path}: unknown {table} settings {sorted(unknown)}; known: {sorted(known)}")
        values.update(got)
    return values
