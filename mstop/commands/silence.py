"""``mstop silence``: silences kept beside a run (mstop.live.routing): a kind that notifies no sink until then.

    mstop silence add KIND --for 2h [--reason TEXT] RUN_DIR
    mstop silence list RUN_DIR
    mstop silence remove KIND RUN_DIR
"""

from __future__ import annotations

import argparse
import sys
import time

from .. import fmt
from ..safe import clean


def known_kinds() -> tuple[str, ...]:
    """What a silence may name: an alert kind, a diagnosis verdict, a severity, or ``*``."""
    from ..engine.diagnosis import KINDS as VERDICTS
    from ..engine.rules import KINDS

    return (*KINDS, *(k for k in VERDICTS if k != "healthy"), "critical", "warning", "*")


def silence(args: argparse.Namespace) -> int:
    """The ``silence`` command's body: add, list or remove."""
    from ..live.routing import add_silence, duration, silences

    if args.action in ("add", "remove") and args.kind not in known_kinds():
        print(f"mstop silence: {args.kind!r} is no alert kind, verdict or severity; known: "
              f"{', '.join(known_kinds())}", file=sys.stderr)
        return 2
    try:
        if args.action == "add":
            seconds = duration(args.duration, "--for")
            s = add_silence(args.run_dir, args.kind, seconds, args.reason or "")
            print(f"{s.kind} silenced until {fmt.clock_ms(s.until)} ({fmt.span(seconds)})"
                  + (f": {clean(s.reason, 200)}" if s.reason else ""))
        elif args.action == "remove":
            add_silence(args.run_dir, args.kind, 0, args.reason or "removed")
            print(f"{args.kind}: silence ended")
        else:
            now = time.time()
            live = [s for s in silences(args.run_dir) if s.until > now]
            for s in sorted(live, key=lambda s: s.until):
                print(f"{s.kind}  until {fmt.clock_ms(s.until)} ({fmt.span(s.until - now)} left)  by "
                      f"{clean(s.by, 64) or '?'}" + (f"  {clean(s.reason, 200)}" if s.reason else ""))
            if not live:
                print("no silence holds")
    except ValueError as e:
        print(f"mstop silence: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"mstop silence: cannot write beside {clean(args.run_dir)}: {e.strerror or e}", file=sys.stderr)
        return 2
    return 0
