"""The ``mstop`` command line."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from . import __version__


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return v


def _smoothing(text: str) -> float:
    v = float(text)
    if not 0 <= v < 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1): {text!r}")
    return v


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="mstop", description="top for MindSpore training")
    ap.add_argument("-V", "--version", action="version", version=f"mstop {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    s = sub.add_parser("summary", help="print a run's figures once (a table, or JSON with --json)",
                       description="Print a run's figures once: a table for people, or JSON for scripts.")
    s.add_argument("source", metavar="SOURCE", help="run directory")
    s.add_argument("--json", action="store_true", help="print one JSON object (keys documented in the README)")
    s.add_argument("--poll", type=_positive_float, metavar="SEC",
                   help="with --wait: seconds between checks for the directory (default: 1)")
    s.add_argument("--peak-tflops", type=_positive_float, metavar="X",
                   help="peak dense TFLOP/s of one device, overriding what the run recorded (for MFU)")
    s.add_argument("--smoothing", type=_smoothing, default=0.9, metavar="W",
                   help="weight of the loss EMA, 0 to <1 (default: 0.9)")
    s.add_argument("--wait", action="store_true", help="wait for SOURCE to appear instead of failing")
    return ap


def cmd_summary(args: argparse.Namespace) -> int:
    from .figures import Options
    from .source import LocalSource
    from .store import Store
    from .summary import missing_message, render_table, summarize

    run_dir = args.source
    while not os.path.isdir(run_dir):
        if not args.wait:
            print(missing_message(run_dir), file=sys.stderr)
            return 2
        time.sleep(args.poll or 1.0)
    store = Store()
    LocalSource(run_dir, store).read_all()
    opts = Options(peak_flops=args.peak_tflops * 1e12 if args.peak_tflops else None, ema_weight=args.smoothing)
    summary = summarize(store, run_dir, opts)
    if args.json:
        print(json.dumps(summary, ensure_ascii=False))
    else:
        from rich.console import Console

        Console().print(render_table(summary, store))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run mstop with ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    if argv and argv[0] not in ("summary", "-h", "--help", "-V", "--version"):
        print("mstop: the live monitor is not built yet; `mstop summary RUN_DIR` works. "
              "The writer: see README.md (`from mstop_writer import MstopCallback`).", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    if args.command == "summary":
        return cmd_summary(args)
    parser.print_help()
    return 2


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
