"""CPU per file event: watchdog's observer, our own inotify reader (mstop.sources.inotify) and the same reader
on the ``inotify_simple`` library.

Run: python benchmarks/bench_inotify.py [--files 256] [--rate 4000] [--seconds 6] [--repeats 3]

A writer process appends a line to one of N files at a fixed total rate; this
process watches the directory with (a) watchdog's ``Observer`` and a handler
that counts modification events, (b) ``DirectoryWatch`` read by a thread
every 0.1 s as the local source reads it, and (c) the same loop with the events
read and parsed by ``inotify_simple.INotify`` (issue 37: use the library unless
it is measurably slower). Each prints the events seen and this process's CPU
(user + system) per event; each configuration in a fresh process, the three in
turn ``--repeats`` times, and the medians with their ratios at the end.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

WRITER = """
import os, sys, time
d, n, rate, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
fds = [os.open(os.path.join(d, f"rank{r}.csv"), os.O_WRONLY | os.O_APPEND) for r in range(n)]
t0, i = time.time(), 0
while time.time() - t0 < seconds:
    os.write(fds[i % n], b"x" * 100 + b"\\n")
    i += 1
    if i % 40 == 0:
        time.sleep(40 / rate)
"""


class SimpleWatch:
    """What DirectoryWatch does per read, on inotify_simple: the events read and parsed by the library (a
    namedtuple and a decoded name per event), then sorted into modified and changed names as ours are."""

    def __init__(self, path: str) -> None:
        from inotify_simple import INotify, flags

        self.ino = INotify(nonblocking=True)
        self.ino.add_watch(path, flags.MODIFY | flags.MOVED_FROM | flags.MOVED_TO | flags.CREATE | flags.DELETE
                           | flags.DELETE_SELF | flags.MOVE_SELF | flags.ONLYDIR)
        import select

        self.poll = select.poll()
        self.poll.register(self.ino.fileno(), select.POLLIN)

    def wait(self, ms: int) -> bool:
        return bool(self.poll.poll(ms))

    def read_count(self) -> int:
        modified, changed, n = set(), set(), 0
        for e in self.ino.read(timeout=0):
            n += 1
            (modified if e.mask & 0x002 else changed).add(e.name)
        return n


def measure(kind: str, files: int, rate: float, seconds: float) -> tuple[int, float]:
    """(events seen, CPU seconds of this process) while the writer runs."""
    tmp = tempfile.mkdtemp()
    for r in range(files):
        open(os.path.join(tmp, f"rank{r}.csv"), "w").close()
    count = [0]
    stop = threading.Event()
    if kind == "watchdog":
        from watchdog.events import FileModifiedEvent, FileSystemEventHandler
        from watchdog.observers import Observer

        class Counter(FileSystemEventHandler):
            def on_any_event(self, event) -> None:  # noqa: ANN001 - watchdog's signature
                count[0] += 1

        obs = Observer()
        obs.schedule(Counter(), tmp, recursive=False, event_filter=[FileModifiedEvent])
        obs.start()
    elif kind == "simple":
        watch = SimpleWatch(tmp)

        def reader() -> None:
            while not stop.is_set():
                if watch.wait(500):
                    time.sleep(0.1)
                    count[0] += watch.read_count()
        threading.Thread(target=reader, daemon=True).start()
    else:
        from mstop.sources.inotify import DirectoryWatch

        watch = DirectoryWatch(tmp)

        def reader() -> None:
            while not stop.is_set():
                if watch.wait(0.5):
                    time.sleep(0.1)
                    count[0] += watch.read().events
        threading.Thread(target=reader, daemon=True).start()
    time.sleep(0.3)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    subprocess.run([sys.executable, "-c", WRITER, tmp, str(files), str(rate), str(seconds)], check=True)
    time.sleep(1.0)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    stop.set()
    if kind == "watchdog":
        obs.stop()
        obs.join()
    return count[0], r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime


KINDS = ("watchdog", "direct", "simple")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=256)
    ap.add_argument("--rate", type=float, default=4000.0, help="appends per second, all files together")
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--repeats", type=int, default=3, help="each configuration this many times, in turn")
    ap.add_argument("--kind", choices=KINDS, help="(internal) one configuration")
    a = ap.parse_args()
    if a.kind:
        events, cpu = measure(a.kind, a.files, a.rate, a.seconds)
        print(f"{a.kind:8s}: {events:,} events, CPU {cpu:.2f} s = {cpu / max(events, 1) * 1e6:.1f} us an event")
        return 0
    print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}; {a.files} files, "
          f"{a.rate:g} appends/s for {a.seconds:g} s")
    import importlib.util

    kinds = KINDS if importlib.util.find_spec("inotify_simple") else KINDS[:2]
    if kinds != KINDS:
        print("inotify_simple is not installed (pip install -e ./writer -e '.[bench]'): measuring the other two")
    per: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(a.repeats):
        for kind in kinds:
            out = subprocess.run([sys.executable, __file__, "--kind", kind, "--files", str(a.files), "--rate",
                                  str(a.rate), "--seconds", str(a.seconds)], check=True, capture_output=True,
                                 text=True).stdout
            print(out, end="")
            per[kind].append(float(out.rsplit("= ", 1)[1].split()[0]))
    med = {k: statistics.median(v) for k, v in per.items()}
    simple = f"; inotify_simple / ours = {med['simple'] / med['direct']:.2f}" if "simple" in med else ""
    print("medians: " + ", ".join(f"{k} {v:.1f} us" for k, v in med.items()) + simple
          + f"; watchdog / ours = {med['watchdog'] / med['direct']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
