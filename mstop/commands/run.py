"""The bodies of ``mstop summary``, ``mstop compare`` and ``mstop report``: each takes the parsed arguments
(``set_defaults(func=...)`` in :mod:`mstop.cli` points here) and returns the exit code."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ..engine.reader import RunReader
from ..sources.protocol import Connection
from .arguments import (
    clean_text,
    exists,
    fail_kinds,
    fails,
    peak_flops,
    print_rich,
    rules,
    runs_watches,
)


def summary(args: argparse.Namespace) -> int:
    """``mstop summary SOURCE...``: one run's figures (a table, or JSON); a folder of runs: each run's."""
    from ..engine.figures import Options
    from ..engine.health import Health
    from ..sources import SourceError, Sources
    from .summary import render_table, summarize

    if not args.wait:
        try:
            watches = runs_watches(args.source, depth=args.depth, connection=args.connection) \
                if all(exists(p) for p in args.source) else None
        except SourceError as e:
            print(f"mstop: {e}", file=sys.stderr)
            return 2
        if watches is not None:
            return summary_of_runs(watches, args)
    try:
        sources = Sources(args.source, connection=args.connection)
        store = sources.store
        every = args.poll or 1.0
        sources.read_all(wait=every if args.wait else None,
                         waiting=lambda why: print(f"mstop: {why}: waiting for it (a look every {every:g} s; Ctrl-C "
                                                   "stops)", file=sys.stderr, flush=True))
    except SourceError as e:
        hint = "; use --wait to wait for it" if e.missing and not args.wait else ""
        print(f"mstop: {e}{hint}", file=sys.stderr)
        return 2
    run_dir = sources.label
    opts = Options(peak_flops=peak_flops(args), ema_weight=args.smoothing, clock=sources.clock)
    _log_waits(sources, args.source, opts)
    kinds, health_rules = fail_kinds(args), rules(args, args.source)
    if kinds is None or health_rules is None:
        return 2
    figures = summarize(store, run_dir, opts, Health(health_rules), specs=list(args.source))
    if RunReader(store).empty() and not store.rank_files:  # said beside the figures: a typo'd path reads as "waiting"
        print(f"mstop: no rank files (rank*.csv) nor MindFormers logs in {clean_text(run_dir)}, nor runs below it "
              "(up to 3 levels): status waiting", file=sys.stderr)
    denied = [n for n, why in sorted(store.refused.items()) if why == "permission denied"]
    denied += [n for n in store.notes if "permission denied" in n]
    if denied and not store.rows:  # nothing read because nothing may be: an error, not "waiting"
        print(f"mstop: {clean_text(run_dir)}: permission denied: {', '.join(clean_text(n) for n in denied[:5])}",
              file=sys.stderr)
    if args.json:
        print(json.dumps(figures, ensure_ascii=False))
    else:
        print_rich(render_table(figures, store, opts))
    if denied and not store.rows:
        return 2
    return 1 if fails(figures, kinds, args) else 0


def _log_waits(sources: Any, specs: list[str], opts: Any) -> None:
    """A writer's run that stalled or died: its ranks' own logs read for the peers their collectives waited
    for (mstop.sources.logs.add_log_waits), so the diagnosis's hang has its wait-for graph."""
    from ..engine.figures import status
    from ..sources.logs import add_log_waits

    if status(sources.store.snapshot(), opts) in ("stalled", "dead", "failed"):
        add_log_waits(sources.store, specs)


def summary_of_runs(watches: list, args: argparse.Namespace) -> int:
    """``mstop summary DIR`` for a folder of runs: each run read whole and summarised (the same object as for
    one run), ``{"runs": [...]}`` with --json, else a line per run; --fail-on applies to each run and the
    exit code is the worst (1 when any run fails it, 2 when a run cannot be read at all)."""
    from ..engine.health import Health
    from .summary import runs_table

    kinds, health_rules = fail_kinds(args), rules(args, args.source)
    if kinds is None or health_rules is None:
        return 2
    worst, out, errors = 0, [], []
    for w in watches:
        got, code = _summaries_of(w, args, Health(health_rules))
        worst = max(worst, code)
        for figures in got:
            if "error" in figures:
                errors.append(figures)
                continue
            out.append(figures)
            if fails(figures, kinds, args):
                worst = max(worst, 1)
    if args.json:
        print(json.dumps({"runs": out, **({"errors": errors} if errors else {})}, ensure_ascii=False))
    else:
        print_rich(runs_table(out))
    return worst


def _summaries_of(watch: Any, args: argparse.Namespace, health: Any) -> tuple[list[dict[str, Any]], int]:
    """Each run of one folder summarised (or ``{"run_dir", "error"}`` for one that breaks a figure), and the
    exit code its faults give (2 when the folder or a run cannot be read)."""
    from ..engine.figures import Options
    from ..sources import SourceError, read_once
    from ..sources.runs import run_spec
    from .summary import summarize

    code, out = 0, []
    try:
        watch.discover()
    except SourceError as e:
        print(f"mstop: {e}", file=sys.stderr)
        return out, 2
    for problem in watch.problems:
        print(f"mstop: {problem}", file=sys.stderr)
    for run in sorted(watch.runs.values(), key=lambda r: r.name):
        spec = run_spec(run)
        # named as the argument names its folder: a relative folder gives relative paths
        shown = spec if run.host or os.path.isabs(watch.label) else os.path.join(watch.label, run.name)
        try:
            store = read_once(spec, connection=args.connection)
            opts = Options(peak_flops=peak_flops(args), ema_weight=args.smoothing)
            out.append(summarize(store, shown, opts, health, specs=[spec]))
        except SourceError as e:
            print(f"mstop: {e}", file=sys.stderr)
            code = 2
        except Exception as e:  # noqa: BLE001 - one run that breaks a figure never hides the others
            why = f"cannot be summarised: {type(e).__name__}: {e} (a bug: please report it)"
            print(f"mstop: {clean_text(spec)}: {clean_text(why)}", file=sys.stderr)
            out.append({"run_dir": clean_text(spec), "error": clean_text(why)})
            code = 2
    return out, code


def load_runs(args_runs: list[str], connection: Connection) -> list:
    """Read every member of every run argument once; a missing source raises ValueError (said, exit 2)."""
    from .compare import read_runs, split_group

    return read_runs([split_group(arg) for arg in args_runs], connection=connection)


def _compared(args: argparse.Namespace, specs: list[str], opts: Any) -> tuple[list, Any] | None:
    """Read the runs and compare them over the asked window (mstop compare and report); None after saying
    why it cannot be done."""
    from .compare import CompareError, compare, parse_steps

    try:
        steps = parse_steps(args.steps) if args.steps else None
        runs = load_runs(specs, args.connection)
        return runs, compare(runs, steps=steps, loss_at=args.loss_at, opts=opts)
    except (CompareError, ValueError) as e:
        print(f"mstop {args.command}: {e}", file=sys.stderr)
        return None


def compare(args: argparse.Namespace) -> int:
    """``mstop compare BASELINE RUN...``: the table (or markdown, csv, json) at equal steps."""
    from ..engine.figures import Options
    from .compare import render

    got = _compared(args, [args.baseline, *args.runs], Options(peak_flops=peak_flops(args)))
    if got is None:
        return 2
    out = render(got[1], args.format)
    if isinstance(out, str):
        sys.stdout.write(out if out.endswith("\n") else out + "\n")
    else:
        print_rich(out)
    return 0


def report(args: argparse.Namespace) -> int:
    """``mstop report SOURCE... --out DIR``: PNG plots and report.md."""
    from ..engine.figures import Options
    from .report import available, write_report

    missing = available()
    if missing:
        print(f"mstop report: {missing}", file=sys.stderr)
        return 2
    opts = Options(peak_flops=peak_flops(args), ema_weight=args.smoothing)
    got = _compared(args, args.sources, opts)
    if got is None:
        return 2
    try:
        files = write_report(*got, args.out, opts=opts)
    except OSError as e:
        print(f"mstop report: cannot write {args.out}: {e}", file=sys.stderr)
        return 2
    for f in files:
        print(f)
    return 0
