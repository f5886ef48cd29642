"""The ``mstop`` command line."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run mstop with ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-V", "--version"):
        from . import __version__

        print(f"mstop {__version__}")
        return 0
    print(
        "mstop: the viewer is not built yet. The writer is: see README.md "
        "(`from mstop_writer import MstopCallback`) and examples/train_tiny_lm.py.",
        file=sys.stderr,
    )
    return 2


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
