"""What the command line's commands share: argument types and groups, the connection settings made once from
the arguments, the health rules, ``--fail-on``, and printing a table.

No textual here (the app's own launchers in :mod:`mstop.app.launch` use these too)."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import Any

from ..sources.protocol import DEFAULT_CONNECTION, Connection


def positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return v


def seconds_or_none(text: str) -> float:
    """Seconds, 0 allowed (none), at most a day: a finite number."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= v <= 86400:
        raise argparse.ArgumentTypeError(f"must be 0 to 86400 seconds: {text!r}")
    return v


def count(low: int, high: int):
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


def fraction(text: str) -> float:
    """A share, over 0 and under 1 (``--data-wait 15`` is a usage error, not a rule turned off)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"must be a fraction over 0 and under 1 (0.1 for 10 %): {text!r}")
    return v


def smoothing(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= v < 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1): {text!r}")
    return v


def add_depth(p: argparse.ArgumentParser) -> None:
    p.add_argument("--depth", type=count(1, 32), default=3, metavar="N",
                   help="for a folder of runs: look for runs down to N levels below it (default: 3)")


def add_ssh(p: argparse.ArgumentParser) -> None:
    p.add_argument("-F", "--ssh-config", metavar="FILE", help="ssh configuration file (ssh -F)")
    p.add_argument("-o", "--ssh-option", action="append", default=[], metavar="OPTION",
                   help="an ssh option, as ssh -o takes it (repeatable), e.g. -o ProxyJump=login1")
    p.add_argument("--connect-timeout", type=positive_float, default=10.0, metavar="SEC",
                   help="seconds to wait for an ssh connection (default: 10)")
    p.add_argument("--topology", metavar="FILE",
                   help="a ClusterShell topology file: a node set's hosts reached through its gateways (default: "
                        "the site's /etc/clustershell/topology.conf when there is one)")


def add_hosts(p: argparse.ArgumentParser) -> None:
    """The monitor's --hosts (what it reads on the ranks' own hosts: their logs and stacks, the L and t views)
    and --digest (how a remote host sends its ranks' rows)."""
    p.add_argument("--digest", type=seconds_or_none, metavar="SEC",
                   help="each remote host merges its ranks' rows over SEC seconds and sends one row a rank (sums "
                        "of step time and tokens, the last loss), the shown rank's rows as written; 0: every row "
                        "(default: 2 for a node set's hosts, 0 otherwise; summary and compare read every row)")
    p.add_argument("--hosts", choices=["auto"],
                   help="auto: for a run read here (a shared filesystem), reach each rank's own host, as its start "
                        "event names it, over ssh for what only that host has (the rank's log, its stacks)")


def add_peak(p: argparse.ArgumentParser) -> None:
    p.add_argument("--peak-tflops", type=positive_float, metavar="X",
                   help="peak dense TFLOP/s of one device, overriding what the run recorded (for MFU)")


def add_window(p: argparse.ArgumentParser) -> None:
    """The comparison's window (mstop compare and mstop report)."""
    p.add_argument("--steps", metavar="A:B", help="the window of steps, inclusive (default: the steps every run "
                                                  "covers, minus a warm-up: see docs/monitor.md)")
    p.add_argument("--loss-at", type=int, metavar="N", help="the step of the loss column (default: the window's last)")


def add_health(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("health rules (defaults in docs/health.md; also mstop.toml in the run directory)")
    g.add_argument("--spike-k", type=positive_float, metavar="K", help="spike: K standard deviations (default: 6)")
    g.add_argument("--oom-critical", type=fraction, metavar="FRAC",
                   help="memory headroom alert under FRAC, 0 to 1 (default: 0.05)")
    g.add_argument("--data-wait", type=fraction, metavar="FRAC",
                   help="data-wait share alert above FRAC, 0 to 1 (default: 0.10)")
    g.add_argument("--no-checkpoint", type=positive_float, metavar="SEC",
                   help="alert when no checkpoint for SEC seconds (default: 3 x the usual interval)")


def add_export(sub: Any) -> None:
    """``mstop export``'s parser (mstop.commands.export)."""
    e = sub.add_parser("export", help="follow a run and write its figures for Prometheus (node_exporter's "
                                      "textfile collector, or an HTTP endpoint)",
                       description="Follow a run and export its figures and verdicts in the Prometheus text "
                                   "format: DIR/mstop_<run>.prom every --every seconds, for node_exporter's "
                                   "textfile collector, and/or an HTTP endpoint. Families in docs/export.md.")
    e.set_defaults(func="mstop.commands.export:export")
    e.add_argument("source", metavar="SOURCE", nargs="+",
                   help="run directory, or [user@]host:/path over ssh (several: merged by rank id)")
    e.add_argument("--openmetrics", metavar="DIR", help="write DIR/mstop_<run>.prom (atomically: a temporary "
                                                        "file in DIR, then a rename)")
    e.add_argument("--listen", metavar="[HOST:]PORT", help="serve the same text over HTTP (default host: "
                                                           "127.0.0.1, loopback only)")
    e.add_argument("--every", type=positive_float, default=15.0, metavar="SEC",
                   help="seconds between two exports (default: 15)")
    e.add_argument("--once", action="store_true", help="read the run once, export once, exit")
    e.add_argument("--keep", action="store_true", help="leave the file when the follow ends (default: removed, "
                                                       "its figures being no longer current)")
    e.add_argument("--rank-limit", type=count(0, 10**7), default=256, metavar="N",
                   help="per-rank families for every rank up to N ranks; above, only ranks a verdict or an "
                        "alert names (default: 256)")
    add_peak(e)
    add_ssh(e)
    add_health(e)
    add_alert_rules(e)


def add_silence(sub: Any) -> None:
    """``mstop silence``'s parser (mstop.commands.silence)."""
    s = sub.add_parser("silence", help="silence an alert kind of a run for a while (kept beside the run)",
                       description="Silences kept beside a run (mstop.silences.jsonl): a silenced kind goes to the "
                                   "alert history, not to a sink, until the silence ends (docs/export.md).")
    s.set_defaults(func="mstop.commands.silence:silence")
    acts = s.add_subparsers(dest="action", metavar="ACTION", required=True)
    a = acts.add_parser("add", help="silence KIND for a while")
    a.add_argument("kind", metavar="KIND", help="an alert kind, a diagnosis verdict, critical, warning or *")
    a.add_argument("--for", dest="duration", required=True, metavar="DURATION", help="90s, 15m, 2h, 1d")
    a.add_argument("--reason", metavar="TEXT", help="why (listed with the silence)")
    a.add_argument("run_dir", metavar="RUN_DIR")
    r = acts.add_parser("remove", help="end KIND's silence now")
    r.add_argument("kind", metavar="KIND")
    r.add_argument("--reason", metavar="TEXT")
    r.add_argument("run_dir", metavar="RUN_DIR")
    ls = acts.add_parser("list", help="the silences that hold, with their reasons")
    ls.add_argument("run_dir", metavar="RUN_DIR")


def add_alert_rules(p: argparse.ArgumentParser, monitor: bool = False) -> None:
    """--alert-rules; for the monitor also mstop export's --openmetrics, --listen and --every (as --export-every)."""
    p.add_argument("--alert-rules", metavar="FILE",
                   help="route alerts by this TOML file: for, clear_after, group, repeat, sinks (bell, command, "
                        "file, http); silences from mstop silence (docs/export.md)")
    if monitor:
        p.add_argument("--openmetrics", metavar="DIR", help="also write the run's figures to DIR/mstop_<run>.prom "
                                                            "for node_exporter's textfile collector (as mstop export)")
        p.add_argument("--listen", metavar="[HOST:]PORT", help="also serve them over HTTP (default host 127.0.0.1)")
        p.add_argument("--export-every", type=positive_float, default=15.0, metavar="SEC",
                       help="with --openmetrics or --listen: seconds between two exports (default: 15)")


def alert_rules(args: argparse.Namespace) -> Any:
    """The routing rules --alert-rules names (mstop.live.routing.Rules; --on-alert is their command sink
    unless the file names one); None when not given; False after saying why the file is refused."""
    if not getattr(args, "alert_rules", None):
        return None
    from ..live.routing import Rules

    try:
        return Rules.load(args.alert_rules, shlex.split(args.on_alert) if getattr(args, "on_alert", None) else None)
    except ValueError as e:
        print(f"mstop: --alert-rules: {e}", file=sys.stderr)
        return False


def peak_flops(args: argparse.Namespace) -> float | None:
    return args.peak_tflops * 1e12 if getattr(args, "peak_tflops", None) else None


def rules(args: argparse.Namespace, run_dirs: list[str]):
    """The health rules from config files and flags; None (after saying why) when a setting is wrong."""
    from ..engine.health import Rules

    try:
        return Rules.load(run_dirs, {"spike_k": args.spike_k, "oom_critical": args.oom_critical,
                                     "data_wait": args.data_wait, "no_checkpoint_s": args.no_checkpoint})
    except (ValueError, TypeError) as e:
        print(f"mstop: {e}", file=sys.stderr)
        return None


def fail_kinds(args: argparse.Namespace) -> set[str] | None:
    """--fail-on's alert kinds and diagnosis verdicts (empty: none, or 'incident'); None after saying a kind
    is unknown. ``alert`` is every alert kind (a verdict is named by its kind: it is no alert)."""
    from ..engine.diagnosis import KINDS as VERDICTS
    from ..engine.health import KINDS

    if not args.fail_on or args.fail_on == "incident":
        return set()
    known = (*KINDS, *(k for k in VERDICTS if k != "healthy"))
    kinds = set(KINDS) if args.fail_on == "alert" else set(args.fail_on.split(","))
    unknown = kinds - set(known)
    if unknown:
        print(f"mstop: --fail-on: unknown kinds {sorted(unknown)}; known: alert, incident, {', '.join(known)}",
              file=sys.stderr)
        return None
    return kinds


def fails(summary: dict[str, Any], kinds: set[str], args: argparse.Namespace) -> bool:
    """Whether --fail-on makes this summary a failure."""
    if kinds and any(a["kind"] in kinds for a in summary["alerts"] + summary.get("diagnosis", [])):
        return True
    return args.fail_on == "incident" and bool(summary["incidents"])


def clean_text(text: str) -> str:
    from ..safe import clean

    return clean(text, 4096)


def exists(spec: str) -> bool:
    from ..sources import SourceError, check_spec

    try:
        check_spec(spec)
        return True
    except SourceError:
        return False


def print_rich(renderable: Any) -> None:
    """Print a rich table: to a terminal at its width; into a pipe or file as wide as the table needs
    (:func:`~mstop.commands.plain_text`)."""
    from rich.console import Console

    from . import plain_text

    if sys.stdout.isatty():
        Console().print(renderable)
        return
    sys.stdout.write(plain_text(renderable))


def _set_kind(spec: str, connection: Connection) -> str:
    """What a node set's path is ("run" or "runs"), as the first of its hosts that answers says (three are
    asked at most): a host that is down must not stop the others being watched; none answers: a run (its
    sources then say which hosts fail, and keep trying them)."""
    from ..sources import SourceError
    from ..sources.nodesets import expand
    from ..sources.remote import parse_target
    from ..sources.remote_runs import probe

    for one in expand(spec)[:3]:
        target = parse_target(one)
        try:
            return probe(target, connection=connection) if target is not None else "run"
        except SourceError:
            continue
    return "run"


def runs_watches(specs: list[str], *, depth: int = 3, connection: Connection = DEFAULT_CONNECTION,
                 wait: bool = False) -> list | None:
    """The sources as folders of runs (:mod:`mstop.sources.runs`) when they are that: a local folder that
    is not a run itself and has runs below it, or a remote one the host says the same of (one ssh
    connection asks); None when every source is a run (the monitor). SourceError when ssh fails, or for a
    remote directory not there whose parent is not there either (unless ``wait``)."""
    from ..sources import check_spec
    from ..sources.nodesets import is_node_set
    from ..sources.remote_runs import NodeSetRunsWatch, RemoteRunsWatch, probe
    from ..sources.runs import RunsWatch, find_runs, kind_of

    targets = [check_spec(spec, exists=False) for spec in specs]  # checked already: None for a local one
    kinds = []
    for spec, target in zip(specs, targets):
        if target is None:
            kinds.append("runs" if kind_of(spec) is None and find_runs(spec, depth)[0] else "run")
        elif is_node_set(spec):
            kinds.append(_set_kind(spec, connection))
        else:
            kinds.append(probe(target, connection=connection, wait=wait))
    if "runs" not in kinds:
        return None
    out: list = []
    for spec, target, kind in zip(specs, targets, kinds):
        if target is None:
            out.append(RunsWatch(spec, max_depth=depth) if kind == "runs" else RunsWatch.single(spec))
        elif is_node_set(spec):  # every host's runs, each run once over the set
            out.append(NodeSetRunsWatch(spec, single=kind == "run", connection=connection, max_depth=depth))
        else:
            out.append(RemoteRunsWatch(target, single=kind == "run", connection=connection, max_depth=depth))
    return out


# -- options typed wrong ------------------------------------------------------------------------------------

def options_of(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Each option string of ``parser`` (``--json``, ``-F``) and its action, with those of its own actions'
    parsers (``mstop silence add --for``)."""
    out = {o: a for a in parser._actions for o in a.option_strings}  # noqa: SLF001 - argparse keeps them there
    for a in parser._actions:  # noqa: SLF001
        if isinstance(a, argparse._SubParsersAction) and parser.prog != "mstop":  # noqa: SLF001 (not the top's)
            for p in a.choices.values():
                out.update(options_of(p))
    return out


def _unknown_option(argv: list[str], known: dict[str, argparse.Action]) -> str | None:
    """The first word of ``argv`` that looks like an option and is none of ``known`` (nor a unique prefix of
    a long one, as argparse allows); values of the options that take one are skipped."""
    skip = False
    for word in argv:
        if skip:
            skip = False
            continue
        if word == "--":
            return None
        if not word.startswith("-") or word == "-" or word[1:2].isdigit():
            continue
        name = word.split("=", 1)[0]
        if not name.startswith("--") and name[:2] in known:  # -F FILE, -oOPTION
            name = word[:2]
        matches = [name] if name in known else [o for o in known if o.startswith("--") and o.startswith(name)
                                                 and name.startswith("--")]
        if not matches:
            return name
        takes = known[matches[0]].nargs != 0
        skip = takes and "=" not in word and len(matches) == 1 and word == name
    return None


def refuse_unknown_option(argv: list[str], parser: argparse.ArgumentParser, prog: str,
                           also: dict[str, argparse.Action] | None = None) -> None:
    """Exit 2 on an option ``parser`` does not know, saying which and the near name: argparse reported a
    subcommand's as the top level's usage, and a typo'd top-level option as a missing RUN_DIR."""
    import difflib

    known = {**options_of(parser), **(also or {})}
    bad = _unknown_option(argv, known)
    if bad is None:
        return
    near = difflib.get_close_matches(bad, list(known), n=1, cutoff=0.6)
    hint = f": did you mean {near[0]}?" if near else ""
    print(f"{prog}: unknown option {bad}{hint} ({prog} --help)", file=sys.stderr)
    raise SystemExit(2)


def subparser(top: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The parser of ``mstop COMMAND``."""
    for a in top._actions:  # noqa: SLF001
        if isinstance(a, argparse._SubParsersAction):  # noqa: SLF001
            return a.choices[command]
    raise KeyError(command)


def typo_of(word: str, commands: tuple[str, ...]) -> str | None:
    """The command ``word`` was meant to be (``summry`` -> ``summary``), when it is no path that exists."""
    import difflib

    if os.path.exists(word) or "/" in word or ":" in word or word.startswith("-"):
        return None
    close = difflib.get_close_matches(word, commands, n=1, cutoff=0.7)
    return close[0] if close else None
