"""Starting the screens from the command line: ``mstop RUN_DIR`` (the monitor, or the runs list for a folder
of runs) and ``mstop demo``. Here, in the app's room, because they open Textual apps; the one-shot commands'
bodies are in :mod:`mstop.commands.run`."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..commands.arguments import alert_rules, runs_watches
from ..commands.arguments import rules as health_rules
from ..live import MonitorOptions


def no_terminal(what: str) -> bool:
    """True (after saying why) when standard output is not a terminal: the monitor would draw an 80x24
    screen into a pipe or file and garble the terminal behind it (``mstop demo | tee log``)."""
    if sys.stdout is not None and sys.stdout.isatty():
        return False
    print(f"mstop: {what} draws on a terminal, and standard output is not one (a pipe or a file): run it "
          "in a terminal, or use `mstop summary` for text", file=sys.stderr)
    return True


def monitor(args: argparse.Namespace) -> int:
    """``mstop RUN_DIR...``: the live monitor, or the runs list for a folder of runs."""
    from ..live import SourceError, check_spec

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
    if no_terminal("the monitor"):
        return 2
    rules = health_rules(args, args.source)
    if rules is None:
        return 2
    try:
        watches = runs_watches(args.source, depth=args.depth, connection=args.connection, wait=args.wait)
    except SourceError as e:
        print(f"mstop: {e}", file=sys.stderr)
        return 2
    try:
        options = MonitorOptions(poll=args.poll, peak_tflops=args.peak_tflops, connection=args.connection,
                                 rules=rules, on_alert=args.on_alert, baseline=args.baseline, logs_dir=args.logs,
                                 bell=args.bell, digest=args.digest)
    except ValueError as e:  # --on-alert that no shell could split (an open quote)
        print(f"mstop: --on-alert: {e}", file=sys.stderr)
        return 2
    routing = alert_rules(args)
    if routing is False:
        return 2
    options = MonitorOptions.given(options, routing=routing, openmetrics=args.openmetrics, listen=args.listen,
                                   export_every=args.export_every)
    if watches is not None:
        from .runs import RunsApp

        app = RunsApp(watches, options, label=" ".join(args.source))
        app.run()
        return app.return_code or 0
    from . import MonitorApp

    app = MonitorApp(args.source, options)
    app.run()
    return app.return_code or 0  # Textual printed the traceback of a crash: it is never a success


def demo(args: argparse.Namespace) -> int:
    """``mstop demo``: train the tiny example in a temporary directory and watch it (or replay a recording)."""
    import importlib.util
    import shutil
    import tempfile

    from ..procs import stop_group

    if no_terminal("mstop demo"):
        return 2
    if args.replay:
        return _replay_demo(args)
    if importlib.util.find_spec("mindspore") is None:
        print("mstop demo trains a real MindSpore model: install it with  pip install -e ./writer -e '.[mindspore]'\n"
              "or watch a recorded run of it:  mstop demo --replay", file=sys.stderr)
        return 2
    example = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples",
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
        from . import MonitorApp

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


def _replay_demo(args: argparse.Namespace) -> int:
    import shutil
    import tempfile
    from pathlib import Path

    from ..live import start_replay
    from . import MonitorApp

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
