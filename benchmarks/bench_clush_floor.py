"""ClusterShell's own cost of a line, the floor under a node set's host frame (issue 41).

    python benchmarks/bench_clush_floor.py [--commands 256] [--every 10] [--seconds 30] [--bytes 3000]

One ClusterShell Task in its own thread runs ``--commands`` local commands (no ssh), each printing one line
of ``--bytes`` random bytes in base64 every ``--every`` seconds (a host's frame in the follower's line mode
is one such line), with the settings mstop's fan-out uses (fanout above the commands, msgtrees off) and a
handler that only counts the lines. Printed: the lines read and this process's CPU over ``--seconds``, and
the CPU a line. What mstop does with a line comes on top of this.
"""

from __future__ import annotations

import argparse
import resource
import threading
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commands", type=int, default=256)
    ap.add_argument("--every", type=float, default=10.0)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--bytes", type=int, default=3000)
    a = ap.parse_args()
    from ClusterShell.Event import EventHandler
    from ClusterShell.Task import task_self

    count = [0]
    tasks = []

    class Count(EventHandler):
        def ev_read(self, worker, node, sname, msg) -> None:
            count[0] += 1

    def run() -> None:
        task = task_self()
        tasks.append(task)
        task.set_info("fanout", a.commands + 16)
        task.set_default("stdout_msgtree", False)
        task.set_default("stderr_msgtree", False)
        cmd = f"while :; do head -c {a.bytes} /dev/urandom | base64 -w0; echo; sleep {a.every}; done"
        task.shell(cmd, nodes=f"n[1-{a.commands}]", handler=Count(), remote=False)
        task.resume()

    th = threading.Thread(target=run, daemon=True)
    th.start()
    time.sleep(5)  # every command started (its fork is not counted)
    r0, c0, t0 = resource.getrusage(resource.RUSAGE_SELF), count[0], time.monotonic()
    time.sleep(a.seconds)
    r1, c1, t1 = resource.getrusage(resource.RUSAGE_SELF), count[0], time.monotonic()
    cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
    print(f"{a.commands} commands, a line of {a.bytes * 4 // 3:,} bytes every {a.every:g} s: {c1 - c0:,} lines, "
          f"{100 * cpu / (t1 - t0):.2f} % of a core, {1000 * cpu / max(1, c1 - c0):.3f} ms a line")
    for task in tasks:
        task.abort(kill=True)
    th.join(10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
