"""The commands for scripts: ``mstop summary``, ``mstop compare``, ``mstop report``, ``mstop export`` (a
follow that writes the figures for Prometheus) and ``mstop silence`` (silences kept beside a run)."""

from __future__ import annotations

from typing import Any


def plain_text(renderable: Any) -> str:
    """A rich table as plain text, as wide as it needs (rich would assume 80 columns and cut cells), no
    colour and no trailing spaces (rich pads every line): what a pipe gets, and what the runs list shows
    for a comparison (the same text as ``mstop compare | cat``)."""
    import io

    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, width=100_000, color_system=None, force_terminal=False, legacy_windows=False)
    console.print(renderable, crop=False, soft_wrap=False)
    return "".join(line.rstrip() + "\n" for line in buf.getvalue().splitlines())
