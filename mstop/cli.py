"""The ``mstop`` command line: the parsers, and dispatch through ``set_defaults(func=...)``.

The bodies live beside the rooms they use: ``mstop summary``, ``compare`` and ``report`` in
:mod:`mstop.commands.run`; ``mstop RUN_DIR`` and ``mstop demo``, which open Textual apps, in
:mod:`mstop.app.launch`. A body is named as ``"module:function"`` and imported only when its command runs, so
``mstop --help`` and a typo load neither pandas nor Textual."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

from . import __version__
from .commands import arguments
from .commands.arguments import (
    add_alert_rules,
    add_depth,
    add_health,
    add_hosts,
    add_peak,
    add_ssh,
    add_window,
    count,
    positive_float,
    smoothing,
)
from .sources.protocol import Connection

COMMANDS = ("summary", "compare", "report", "export", "silence", "demo")


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``mstop COMMAND ...``; each command's ``func`` is the body that runs it."""
    ap = argparse.ArgumentParser(prog="mstop", description="top for MindSpore training. The live monitor: "
                                 "mstop RUN_DIR [--baseline SOURCE] ... (mstop RUN_DIR --help); or a COMMAND:")
    ap.add_argument("-V", "--version", action="version", version=f"mstop {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    s = sub.add_parser("summary", help="print a run's figures once (a table, or JSON with --json)",
                       description="Print a run's figures once: a table for people, or JSON for scripts.")
    s.set_defaults(func="mstop.commands.run:summary")
    s.add_argument("source", metavar="SOURCE", nargs="+",
                   help="run directory, or [user@]host:/path over ssh; several are merged by rank id; a folder of "
                        "runs: each run's summary ({\"runs\": [...]} with --json)")
    add_ssh(s)
    s.add_argument("--json", action="store_true", help="print one JSON object (keys in docs/summary.md)")
    s.add_argument("--poll", type=positive_float, metavar="SEC",
                   help="with --wait: seconds between checks for the directory (default: 1)")
    add_peak(s)
    s.add_argument("--smoothing", type=smoothing, default=0.9, metavar="W",
                   help="weight of the loss EMA, 0 to <1 (default: 0.9)")
    s.add_argument("--wait", action="store_true", help="wait for SOURCE to appear instead of failing")
    add_depth(s)
    s.add_argument("--fail-on", metavar="alert|incident|KIND[,KIND]",
                   help="exit 1 when any alert is active (alert), when the run's history holds any incident "
                        "(incident), or when an alert of one of these kinds is active")
    add_health(s)
    c = sub.add_parser("compare", help="compare runs at the same steps: a table with changes against a baseline",
                       description="Compare runs over one window of steps (never of wall time). The first run is "
                                   "the baseline; a run may be a comma-joined group of repeats (base-1,base-2).")
    c.set_defaults(func="mstop.commands.run:compare")
    c.add_argument("baseline", metavar="BASELINE", help="run directory or [user@]host:/path; a,b = repeats")
    c.add_argument("runs", metavar="RUN", nargs="+", help="runs to compare with the baseline (same forms)")
    add_window(c)
    c.add_argument("--format", choices=("table", "markdown", "csv", "json"), default="table",
                   help="output: a terminal table (default), markdown, csv or json")
    add_peak(c)
    add_ssh(c)
    rp = sub.add_parser("report", help="PNG plots and report.md (the compare table) of runs, for afterwards",
                        description="Write PNG plots (loss, lr, grad norm, tokens/s, MFU, memory headroom, data "
                                    "wait; runs overlaid by step) and DIR/report.md with the table of mstop compare "
                                    "--format markdown. Needs matplotlib: pip install -e ./writer -e '.[report]'.")
    rp.set_defaults(func="mstop.commands.run:report")
    rp.add_argument("sources", metavar="SOURCE", nargs="+",
                    help="run directories or [user@]host:/path (the first is the baseline; a,b = repeats)")
    rp.add_argument("--out", required=True, metavar="DIR", help="directory to write into (created)")
    add_window(rp)
    rp.add_argument("--smoothing", type=smoothing, default=0.9, metavar="W",
                    help="weight of the loss EMA, 0 to <1 (default: 0.9)")
    add_peak(rp)
    add_ssh(rp)
    arguments.add_export(sub), arguments.add_silence(sub)
    _add_demo(sub)
    return ap


def _add_demo(sub: Any) -> None:
    d = sub.add_parser("demo", help="train the tiny MindSpore example in a temporary directory and watch it",
                       description="Start examples/train_tiny_lm.py (2 ranks as processes) into a temporary run "
                                   "directory and open the monitor on it; quitting stops the job.")
    d.set_defaults(func="mstop.app.launch:demo")
    d.add_argument("--ranks", type=count(1, 64), default=2, help="rank processes, 1 to 64 (default: 2)")
    d.add_argument("--steps", type=count(1, 10**7), default=3000, help="optimizer steps, at least 1 (default: 3000)")
    d.add_argument("--keep", metavar="DIR", help="write the run here and keep it, instead of a temporary directory")
    d.add_argument("--replay", action="store_true",
                   help="play a recorded run of the demo job at real speed (no MindSpore needed)")
    d.add_argument("--speed", type=positive_float, default=1.0, metavar="X",
                   help="with --replay: play X times faster (default: 1)")


def monitor_parser() -> argparse.ArgumentParser:
    """The parser of ``mstop RUN_DIR ...`` (no command word): the live monitor."""
    ap = argparse.ArgumentParser(prog="mstop", description="top for MindSpore training: watch a run directory live. "
                                 "Other commands: mstop summary, mstop compare, mstop report, mstop demo "
                                 "(mstop COMMAND --help).")
    ap.set_defaults(func="mstop.app.launch:monitor", command=None)
    ap.add_argument("source", metavar="RUN_DIR", nargs="+",
                    help="run directory written by mstop_writer, or [user@]host:/path over ssh (several: merged); "
                         "a folder of runs (runs below it, up to 3 levels) opens the runs list")
    ap.add_argument("--poll", type=positive_float, metavar="SEC",
                    help="poll files every SEC seconds instead of file events (network filesystems)")
    add_peak(ap)
    ap.add_argument("--baseline", metavar="SOURCE",
                    help="another run (directory or host:/path) whose loss, tokens/s and MFU curves are overlaid "
                         "by step, with the differences at the current step in the panels (b: choose another)")
    add_depth(ap)
    ap.add_argument("--wait", action="store_true",
                    help="wait for RUN_DIR to appear even when its parent does not exist yet (one whose parent "
                         "exists is always waited for)")
    ap.add_argument("--bell", action="store_true", help="ring the terminal bell on each new alert")
    ap.add_argument("--logs", metavar="DIR",
                    help="where the ranks' own logs are (msrun's worker_<R>.log, MindFormers' rank_<R>/info.log), "
                         "for the log pane (L) when the run does not say")
    ap.add_argument("--on-alert", metavar="CMD",
                    help="run CMD (split like a shell would, never run through one) for each new alert, "
                         "the alert as JSON on its standard input")
    add_ssh(ap)
    add_hosts(ap)
    add_health(ap)
    add_alert_rules(ap, monitor=True)
    return ap


def parse_command_line(argv: list[str]) -> argparse.Namespace:
    """``argv`` parsed by the parser it is for: a COMMAND's, or the monitor's (``mstop RUN_DIR``). A usage
    error exits 2 with argparse's message, as a command line should; a typo'd command or option says what
    was meant."""
    if argv and argv[0] not in COMMANDS + ("-h", "--help", "-V", "--version"):
        typo = arguments.typo_of(argv[0], COMMANDS)
        if typo is not None:
            print(f"mstop: {argv[0]!r} is no command and no directory: did you mean {typo}? "
                  f"(mstop {typo} --help)", file=sys.stderr)
            raise SystemExit(2)
        parser = monitor_parser()
        arguments.refuse_unknown_option(argv, parser, "mstop", also=arguments.options_of(build_parser()))
        args = parser.parse_args(argv)
    else:
        top = build_parser()
        if argv and argv[0] in COMMANDS:
            arguments.refuse_unknown_option(argv[1:], arguments.subparser(top, argv[0]), f"mstop {argv[0]}")
        args = top.parse_args(argv)
    if hasattr(args, "ssh_option"):  # how host:/path sources are reached, made once and passed whole
        if args.topology is not None:
            from .sources.fanout import check_topology

            try:
                check_topology(args.topology)
            except ValueError as e:
                print(f"mstop: --topology: {e}", file=sys.stderr)
                raise SystemExit(2) from None
        args.connection = Connection.of(args.ssh_config, args.ssh_option, args.connect_timeout, args.topology,
                                        getattr(args, "hosts", None) == "auto")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run mstop with ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    try:
        args = parse_command_line(sys.argv[1:] if argv is None else argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 2
    if not getattr(args, "func", None):
        build_parser().print_help()
        return 2
    module, _, name = args.func.partition(":")
    return getattr(importlib.import_module(module), name)(args)


def run() -> None:
    """Console-script entry point. SIGTERM and SIGHUP end mstop as Ctrl-C would (exit code 128 + the signal),
    so cleanups run: ssh clients and their remote followers stopped, temporary directories removed."""
    import signal

    def stop(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # mstop summary --json | head: the reader left; no traceback for that
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 141  # as a shell reports SIGPIPE
    except KeyboardInterrupt:  # Ctrl-C during a long read: a word, not a traceback
        print("mstop: interrupted", file=sys.stderr)
        code = 130  # as a shell reports SIGINT
    sys.exit(code)
