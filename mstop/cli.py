"""The ``mstop`` command line."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from . import __version__


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return v


def _count(low: int, high: int):
    """An argparse type: a whole number in [low, high] (a usage error, exit 2, otherwise)."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if not low <= v <= high:
            raise argparse.ArgumentTypeError(f"must be from {low} to {high}: {text!r}")
        return v
    return parse


def _fraction(text: str) -> float:
    """A share, over 0 and under 1 (``--data-wait 15`` is a usage error, not a rule turned off)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"must be a fraction over 0 and under 1 (0.1 for 10 %): {text!r}")
    return v


def _smoothing(text: str) -> float:
    v = float(text)
    if not 0 <= v < 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1): {text!r}")
    return v


def _depth_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--depth", type=_count(1, 32), default=3, metavar="N",
                   help="for a folder of runs: look for runs down to N levels below it (default: 3)")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="mstop", description="top for MindSpore training. The live monitor: "
                                 "mstop RUN_DIR [--baseline SOURCE] ... (mstop RUN_DIR --help); or a COMMAND:")
    ap.add_argument("-V", "--version", action="version", version=f"mstop {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    s = sub.add_parser("summary", help="print a run's figures once (a table, or JSON with --json)",
                       description="Print a run's figures once: a table for people, or JSON for scripts.")
    s.add_argument("source", metavar="SOURCE", nargs="+",
                   help="run directory, or [user@]host:/path over ssh; several are merged by rank id; a folder of "
                        "runs: each run's summary ({\"runs\": [...]} with --json)")
    _ssh_arguments(s)
    s.add_argument("--json", action="store_true", help="print one JSON object (keys documented in the README)")
    s.add_argument("--poll", type=_positive_float, metavar="SEC",
                   help="with --wait: seconds between checks for the directory (default: 1)")
    _peak_argument(s)
    s.add_argument("--smoothing", type=_smoothing, default=0.9, metavar="W",
                   help="weight of the loss EMA, 0 to <1 (default: 0.9)")
    s.add_argument("--wait", action="store_true", help="wait for SOURCE to appear instead of failing")
    _depth_argument(s)
    s.add_argument("--fail-on", metavar="alert|incident|KIND[,KIND]",
                   help="exit 1 when any alert is active (alert), when the run's history holds any incident "
                        "(incident), or when an alert of one of these kinds is active")
    _health_arguments(s)
    c = sub.add_parser("compare", help="compare runs at the same steps: a table with changes against a baseline",
                       description="Compare runs over one window of steps (never of wall time). The first run is "
                                   "the baseline; a run may be a comma-joined group of repeats (base-1,base-2).")
    c.add_argument("baseline", metavar="BASELINE", help="run directory or [user@]host:/path; a,b = repeats")
    c.add_argument("runs", metavar="RUN", nargs="+", help="runs to compare with the baseline (same forms)")
    _window_arguments(c)
    c.add_argument("--format", choices=("table", "markdown", "csv", "json"), default="table",
                   help="output: a terminal table (default), markdown, csv or json")
    _peak_argument(c)
    _ssh_arguments(c)
    rp = sub.add_parser("report", help="PNG plots and report.md (the compare table) of runs, for afterwards",
                        description="Write PNG plots (loss, lr, grad norm, tokens/s, MFU, memory headroom, data "
                                    "wait; runs overlaid by step) and DIR/report.md with the table of mstop compare "
                                    "--format markdown. Needs matplotlib: pip install 'mstop[report]'.")
    rp.add_argument("sources", metavar="SOURCE", nargs="+",
                    help="run directories or [user@]host:/path (the first is the baseline; a,b = repeats)")
    rp.add_argument("--out", required=True, metavar="DIR", help="directory to write into (created)")
    _window_arguments(rp)
    rp.add_argument("--smoothing", type=_smoothing, default=0.9, metavar="W",
                    help="weight of the loss EMA, 0 to <1 (default: 0.9)")
    _peak_argument(rp)
    _ssh_arguments(rp)
    d = sub.add_parser("demo", help="train the tiny MindSpore example in a temporary directory and watch it",
                       description="Start examples/train_tiny_lm.py (2 ranks as processes) into a temporary run "
                                   "directory and open the monitor on it; quitting stops the job.")
    d.add_argument("--ranks", type=_count(1, 64), default=2, help="rank processes, 1 to 64 (default: 2)")
    d.add_argument("--steps", type=_count(1, 10**7), default=3000, help="optimizer steps, at least 1 (default: 3000)")
    d.add_argument("--keep", metavar="DIR", help="write the run here and keep it, instead of a temporary directory")
    d.add_argument("--replay", action="store_true",
                   help="play a recorded run of the demo job at real speed (no MindSpore needed)")
    d.add_argument("--speed", type=_positive_float, default=1.0, metavar="X",
                   help="with --replay: play X times faster (default: 1)")
    return ap


def monitor_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="mstop", description="top for MindSpore training: watch a run directory live. "
                                 "Other commands: mstop summary, mstop compare, mstop report, mstop demo "
                                 "(mstop COMMAND --help).")
    ap.add_argument("source", metavar="RUN_DIR", nargs="+",
                    help="run directory written by mstop_writer, or [user@]host:/path over ssh (several: merged); "
                         "a folder of runs (runs below it, up to 3 levels) opens the runs list")
    ap.add_argument("--poll", type=_positive_float, metavar="SEC",
                    help="poll files every SEC seconds instead of file events (network filesystems)")
    _peak_argument(ap)
    ap.add_argument("--baseline", metavar="SOURCE",
                    help="another run (directory or host:/path) whose loss, tokens/s and MFU curves are overlaid "
                         "by step, with the differences at the current step in the panels (b: choose another)")
    _depth_argument(ap)
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
    _ssh_arguments(ap)
    _health_arguments(ap)
    return ap


def _no_terminal(what: str) -> bool:
    """True (after saying why) when standard output is not a terminal: the monitor would draw an 80x24
    screen into a pipe or file and garble the terminal behind it (``mstop demo | tee log``)."""
    if sys.stdout is not None and sys.stdout.isatty():
        return False
    print(f"mstop: {what} draws on a terminal, and standard output is not one (a pipe or a file): run it "
          "in a terminal, or use `mstop summary` for text", file=sys.stderr)
    return True


def cmd_monitor(argv: list[str]) -> int:
    args = monitor_parser().parse_args(argv)
    from .sources import SourceError, check_spec

    try:
        for spec in args.source:
            try:
                check_spec(spec)
            except SourceError as e:
                # a run directory the job is about to make (msrun makes it a moment after starting): waited
                # for, and the header says so, when its parent exists or --wait says to
                parent = os.path.dirname(os.path.abspath(spec))
                if not (e.missing and (args.wait or os.path.isdir(parent))):
                    raise
    except SourceError as e:
        hint = " (the monitor waits for a directory whose parent exists, or with --wait)" if e.missing else ""
        print(f"mstop: {e}{hint}", file=sys.stderr)
        return 2
    if args.baseline:
        try:
            check_spec(args.baseline)
        except SourceError as e:
            print(f"mstop: --baseline {e}", file=sys.stderr)
            return 2
    if _no_terminal("the monitor"):
        return 2
    rules = _rules(args, args.source)
    if rules is None:
        return 2
    try:
        watches = runs_watches(args.source, args)
    except SourceError as e:
        print(f"mstop: {e}", file=sys.stderr)
        return 2
    if watches is not None:
        from .app.runs import RunsApp

        app = RunsApp(watches, label=" ".join(args.source), peak_tflops=args.peak_tflops, rules=rules,
                      ssh_options=_ssh_options(args), connect_timeout=args.connect_timeout, poll=args.poll)
        app.run()
        return app.return_code or 0
    from .app import MonitorApp

    app = MonitorApp(args.source, poll=args.poll, peak_tflops=args.peak_tflops, ssh_options=_ssh_options(args),
                     connect_timeout=args.connect_timeout, rules=rules, bell=args.bell, on_alert=args.on_alert,
                     baseline=args.baseline, logs_dir=args.logs)
    app.run()
    return app.return_code or 0  # Textual printed the traceback of a crash: it is never a success


def runs_watches(specs: list[str], args: argparse.Namespace) -> list | None:
    """The sources as folders of runs (:mod:`mstop.sources.runs`) when they are that: a local folder that
    is not a run itself and has runs below it, or a remote one the host says the same of (one ssh
    connection asks); None when every source is a run (the monitor). SourceError when ssh fails."""
    from .sources import check_spec
    from .sources.remote_runs import RemoteRunsWatch, probe
    from .sources.runs import RunsWatch, find_runs, kind_of

    targets = [check_spec(spec, exists=False) for spec in specs]  # checked already: None for a local one
    depth = getattr(args, "depth", 3)
    kinds = []
    for spec, target in zip(specs, targets):
        if target is None:
            kinds.append("runs" if kind_of(spec) is None and find_runs(spec, depth)[0] else "run")
        else:
            kinds.append(probe(target, ssh_options=_ssh_options(args), connect_timeout=args.connect_timeout))
    if "runs" not in kinds:
        return None
    out: list = []
    for spec, target, kind in zip(specs, targets, kinds):
        if target is None:
            out.append(RunsWatch(spec, max_depth=depth) if kind == "runs" else RunsWatch.single(spec))
        else:
            out.append(RemoteRunsWatch(target, single=kind == "run", ssh_options=_ssh_options(args),
                                       connect_timeout=args.connect_timeout, max_depth=depth))
    return out


def cmd_demo(args: argparse.Namespace) -> int:
    import importlib.util
    import shutil
    import tempfile

    from .procs import stop_group

    if _no_terminal("mstop demo"):
        return 2
    if args.replay:
        return _replay_demo(args)
    if importlib.util.find_spec("mindspore") is None:
        print("mstop demo trains a real MindSpore model: install it with  pip install 'mstop[mindspore]'\n"
              "or watch a recorded run of it:  mstop demo --replay", file=sys.stderr)
        return 2
    example = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples",
                           "train_tiny_lm.py")
    if not os.path.exists(example):
        print(f"mstop demo: {example} not found (the demo runs from a source checkout)", file=sys.stderr)
        return 2
    run_dir = args.keep or tempfile.mkdtemp(prefix="mstop-demo-")
    log_path = os.path.join(tempfile.gettempdir(), f"mstop-demo-{os.getpid()}.log") if not args.keep else \
        os.path.join(run_dir, "job.log")
    job = _start_demo_job(example, run_dir, log_path, args)
    failed: list[bool] = []  # whether the job ended by itself with an error (before we stopped it)

    def stop_job() -> None:
        if not failed:
            failed.append(job.poll() is not None and job.returncode > 0)
        stop_group(job, leftovers=True)

    def remove() -> None:
        if not args.keep:
            shutil.rmtree(run_dir, ignore_errors=True)
            if not failed or not failed[0]:  # a failed job's output is kept for the user to read
                try:
                    os.unlink(log_path)
                except OSError:
                    pass

    code = 0
    try:
        from .app import MonitorApp

        app = MonitorApp(run_dir, job=job, job_log=log_path)
        app.cleanups += [stop_job, remove]  # also run when a signal ends the app and its screen cannot close
        app.run()
        code = app.return_code or 0
    finally:
        stop_job()
        remove()
    if failed[0]:
        print(f"mstop demo: the job exited with code {job.returncode}; its output: {log_path}", file=sys.stderr)
        return code or 1
    return code


def _start_demo_job(example: str, run_dir: str, log_path: str, args: argparse.Namespace) -> Any:
    """Start the demo's training job. Its output goes to a log (shown on screen if the job fails); it runs
    in a process group of its own that every way out of mstop stops: q, Ctrl-C, SIGTERM, SIGHUP (a
    dropped ssh), and, on Linux, mstop's own death."""
    import subprocess

    os.makedirs(run_dir, exist_ok=True)
    with open(log_path, "wb") as log:
        return subprocess.Popen([sys.executable, example, "--run-dir", run_dir, "--ranks", str(args.ranks),
                                 "--steps", str(args.steps), "--ckpt-every", str(max(1, args.steps // 10)),
                                 "--data-delay", "0.02", "--run-name", "mstop-demo"],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=_die_with_parent)


def _die_with_parent() -> None:
    """In the job's child process (Linux): receive SIGTERM when mstop itself dies, even by SIGKILL."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, 15)  # PR_SET_PDEATHSIG, SIGTERM
    except (OSError, AttributeError):
        pass


def _ssh_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-F", "--ssh-config", metavar="FILE", help="ssh configuration file (ssh -F)")
    p.add_argument("-o", "--ssh-option", action="append", default=[], metavar="OPTION",
                   help="an ssh option, as ssh -o takes it (repeatable), e.g. -o ProxyJump=login1")
    p.add_argument("--connect-timeout", type=_positive_float, default=10.0, metavar="SEC",
                   help="seconds to wait for an ssh connection (default: 10)")


def _peak_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--peak-tflops", type=_positive_float, metavar="X",
                   help="peak dense TFLOP/s of one device, overriding what the run recorded (for MFU)")


def _peak_flops(args: argparse.Namespace) -> float | None:
    return args.peak_tflops * 1e12 if args.peak_tflops else None


def _window_arguments(p: argparse.ArgumentParser) -> None:
    """The comparison's window (mstop compare and mstop report)."""
    p.add_argument("--steps", metavar="A:B", help="the window of steps, inclusive (default: the steps every run "
                                                  "covers, minus a warm-up: see the README)")
    p.add_argument("--loss-at", type=int, metavar="N", help="the step of the loss column (default: the window's last)")


def _health_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("health rules (defaults in the README; also mstop.toml in the run directory)")
    g.add_argument("--spike-k", type=_positive_float, metavar="K", help="spike: K standard deviations (default: 6)")
    g.add_argument("--oom-critical", type=_fraction, metavar="FRAC",
                   help="memory headroom alert under FRAC, 0 to 1 (default: 0.05)")
    g.add_argument("--data-wait", type=_fraction, metavar="FRAC",
                   help="data-wait share alert above FRAC, 0 to 1 (default: 0.10)")
    g.add_argument("--no-checkpoint", type=_positive_float, metavar="SEC",
                   help="alert when no checkpoint for SEC seconds (default: 3 x the usual interval)")


def _rules(args: argparse.Namespace, run_dirs: list[str]):
    """The health rules from config files and flags; None (after saying why) when a setting is wrong."""
    from .engine.health import Rules

    try:
        return Rules.load(run_dirs, {"spike_k": args.spike_k, "oom_critical": args.oom_critical,
                                     "data_wait": args.data_wait, "no_checkpoint_s": args.no_checkpoint})
    except (ValueError, TypeError) as e:
        print(f"mstop: {e}", file=sys.stderr)
        return None


def _ssh_options(args: argparse.Namespace) -> tuple[str, ...]:
    opts: list[str] = []
    if args.ssh_config:
        opts += ["-F", args.ssh_config]
    for o in args.ssh_option:
        opts += ["-o", o]
    return tuple(opts)


def cmd_summary(args: argparse.Namespace) -> int:
    from .commands.summary import render_table, summarize
    from .engine.figures import Options
    from .engine.store import Store
    from .sources import SourceError, Sources

    if not args.wait:
        try:
            watches = runs_watches(args.source, args) if all(_exists(p) for p in args.source) else None
        except SourceError as e:
            print(f"mstop: {e}", file=sys.stderr)
            return 2
        if watches is not None:
            return summary_of_runs(watches, args)
    store = Store()
    try:
        sources = Sources(args.source, store, ssh_options=_ssh_options(args), connect_timeout=args.connect_timeout)
        sources.read_all(wait=(args.poll or 1.0) if args.wait else None)
    except SourceError as e:
        hint = "; use --wait to wait for it" if e.missing and not args.wait else ""
        print(f"mstop: {e}{hint}", file=sys.stderr)
        return 2
    run_dir = sources.label
    opts = Options(peak_flops=_peak_flops(args), ema_weight=args.smoothing,
                   clock=sources.clock)
    from .engine.health import Health

    fail_on = _fail_kinds(args)
    rules = _rules(args, args.source)
    if fail_on is None or rules is None:
        return 2
    summary = summarize(store, run_dir, opts, Health(rules), specs=list(args.source))
    if not store.ranks and not store.rank_files:  # said beside the figures: a typo'd path reads as "waiting"
        print(f"mstop: no rank files (rank*.csv) nor MindFormers logs in {clean_text(run_dir)}, nor runs below it "
              "(up to 3 levels): status waiting", file=sys.stderr)
    denied = [n for n, why in sorted(store.refused.items()) if why == "permission denied"]
    denied += [n for n in store.notes if "permission denied" in n]
    if denied and not store.rows:  # nothing read because nothing may be: an error, not "waiting"
        print(f"mstop: {clean_text(run_dir)}: permission denied: {', '.join(clean_text(n) for n in denied[:5])}",
              file=sys.stderr)
    if args.json:
        print(json.dumps(summary, ensure_ascii=False))
    else:
        _print_rich(render_table(summary, store, opts))
    if denied and not store.rows:
        return 2
    return 1 if _fails(summary, fail_on, args) else 0


def clean_text(text: str) -> str:
    from .safe import clean

    return clean(text, 4096)


def _exists(spec: str) -> bool:
    from .sources import SourceError, check_spec

    try:
        check_spec(spec)
        return True
    except SourceError:
        return False


def _fail_kinds(args: argparse.Namespace) -> set[str] | None:
    """--fail-on's alert kinds (empty: none, or 'incident'); None after saying a kind is unknown."""
    from .engine.health import KINDS

    if not args.fail_on or args.fail_on == "incident":
        return set()
    kinds = set(KINDS) if args.fail_on == "alert" else set(args.fail_on.split(","))
    unknown = kinds - set(KINDS)
    if unknown:
        print(f"mstop: --fail-on: unknown kinds {sorted(unknown)}; known: alert, incident, {', '.join(KINDS)}",
              file=sys.stderr)
        return None
    return kinds


def _fails(summary: dict[str, Any], kinds: set[str], args: argparse.Namespace) -> bool:
    """Whether --fail-on makes this summary a failure."""
    if kinds and any(a["kind"] in kinds for a in summary["alerts"]):
        return True
    return args.fail_on == "incident" and bool(summary["incidents"])


def summary_of_runs(watches: list, args: argparse.Namespace) -> int:
    """``mstop summary DIR`` for a folder of runs: each run read whole and summarised (the same object as for
    one run), ``{"runs": [...]}`` with --json, else a line per run; --fail-on applies to each run and the
    exit code is the worst (1 when any run fails it, 2 when a run cannot be read at all)."""
    from .commands.summary import runs_table, summarize
    from .engine.figures import Options
    from .engine.health import Health
    from .sources import SourceError, read_once
    from .sources.runs import run_spec

    kinds = _fail_kinds(args)
    rules = _rules(args, args.source)
    if kinds is None or rules is None:
        return 2
    worst, out, errors = 0, [], []
    for w in watches:
        try:
            w.discover()
        except SourceError as e:
            print(f"mstop: {e}", file=sys.stderr)
            worst = 2
            continue
        for problem in w.problems:
            print(f"mstop: {problem}", file=sys.stderr)
        for run in sorted(w.runs.values(), key=lambda r: r.name):
            spec = run_spec(run)
            # named as the argument names its folder: a relative folder gives relative paths
            shown = spec if run.host or os.path.isabs(w.label) else os.path.join(w.label, run.name)
            try:
                store = read_once(spec, ssh_options=_ssh_options(args), connect_timeout=args.connect_timeout)
                opts = Options(peak_flops=_peak_flops(args), ema_weight=args.smoothing)
                summary = summarize(store, shown, opts, Health(rules), specs=[spec])
            except SourceError as e:
                print(f"mstop: {e}", file=sys.stderr)
                worst = 2
                continue
            except Exception as e:  # noqa: BLE001 - one run that breaks a figure never hides the others
                why = f"cannot be summarised: {type(e).__name__}: {e} (a bug: please report it)"
                print(f"mstop: {clean_text(spec)}: {clean_text(why)}", file=sys.stderr)
                errors.append({"run_dir": clean_text(spec), "error": clean_text(why)})
                worst = 2
                continue
            out.append(summary)
            if _fails(summary, kinds, args):
                worst = max(worst, 1)
    if args.json:
        print(json.dumps({"runs": out, **({"errors": errors} if errors else {})}, ensure_ascii=False))
    else:
        _print_rich(runs_table(out))
    return worst


def _print_rich(renderable: Any) -> None:
    """Print a rich table: to a terminal at its width; into a pipe or file as wide as the table needs
    (:func:`~mstop.commands.plain_text`)."""
    from rich.console import Console

    from .commands import plain_text

    if sys.stdout.isatty():
        Console().print(renderable)
        return
    sys.stdout.write(plain_text(renderable))


def load_runs(args_runs: list[str], args: argparse.Namespace):
    """Read every member of every run argument once; a missing source raises ValueError (said, exit 2)."""
    from .commands.compare import read_runs, split_group

    return read_runs([split_group(arg) for arg in args_runs], ssh_options=_ssh_options(args),
                     connect_timeout=args.connect_timeout)


def _compared(args: argparse.Namespace, specs: list[str], opts: Any) -> tuple[list, Any] | None:
    """Read the runs and compare them over the asked window (mstop compare and report); None after saying
    why it cannot be done."""
    from .commands.compare import CompareError, compare, parse_steps

    try:
        steps = parse_steps(args.steps) if args.steps else None
        runs = load_runs(specs, args)
        return runs, compare(runs, steps=steps, loss_at=args.loss_at, opts=opts)
    except (CompareError, ValueError) as e:
        print(f"mstop {args.command}: {e}", file=sys.stderr)
        return None


def cmd_compare(args: argparse.Namespace) -> int:
    from .commands.compare import render
    from .engine.figures import Options

    got = _compared(args, [args.baseline, *args.runs], Options(peak_flops=_peak_flops(args)))
    if got is None:
        return 2
    out = render(got[1], args.format)
    if isinstance(out, str):
        sys.stdout.write(out if out.endswith("\n") else out + "\n")
    else:
        _print_rich(out)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .commands.report import available, write_report
    from .engine.figures import Options

    missing = available()
    if missing:
        print(f"mstop report: {missing}", file=sys.stderr)
        return 2
    opts = Options(peak_flops=_peak_flops(args), ema_weight=args.smoothing)
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


def _replay_demo(args: argparse.Namespace) -> int:
    import shutil
    import tempfile
    from pathlib import Path

    from .app import MonitorApp
    from .sources.replay import start_replay

    run_dir = Path(args.keep or tempfile.mkdtemp(prefix="mstop-replay-"))
    thread, stop = start_replay(run_dir, speed=args.speed)
    try:
        MonitorApp(str(run_dir)).run()
    finally:
        stop.set()
        thread.join(timeout=5)
        if not args.keep:
            shutil.rmtree(run_dir, ignore_errors=True)
    return 0


COMMANDS = ("summary", "compare", "report", "demo")


def _typo(word: str) -> str | None:
    """The command ``word`` was meant to be (``summry`` -> ``summary``), when it is no path that exists."""
    import difflib

    if os.path.exists(word) or "/" in word or ":" in word or word.startswith("-"):
        return None
    close = difflib.get_close_matches(word, COMMANDS, n=1, cutoff=0.7)
    return close[0] if close else None


def main(argv: list[str] | None = None) -> int:
    """Run mstop with ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    if argv and argv[0] not in COMMANDS + ("-h", "--help", "-V", "--version"):
        typo = _typo(argv[0])
        if typo is not None:
            print(f"mstop: {argv[0]!r} is no command and no directory: did you mean {typo}? "
                  f"(mstop {typo} --help)", file=sys.stderr)
            return 2
        return cmd_monitor(argv)
    args = parser.parse_args(argv)
    if args.command == "summary":
        return cmd_summary(args)
    if args.command == "compare":
        return cmd_compare(args)
    if args.command == "report":
        return cmd_report(args)
    if args.command == "demo":
        return cmd_demo(args)
    parser.print_help()
    return 2


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
