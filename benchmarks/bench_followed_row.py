"""CPU per followed row: a kept descriptor read, one line parsed, one row appended to the store.

Run: python benchmarks/bench_followed_row.py [--files 64] [--rounds 500] [--profile]

N rank files with kept descriptors (as following keeps them); each round appends one row to each file
and reads them as one round of the local source does when events name them. Prints the CPU time per row
(median of 5 blocks of rounds); ``--profile`` adds the functions that cost most.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time

from mstop.engine.store import Store
from mstop.sources.local import LocalSource
from mstop_writer import COLUMNS


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    fds = []
    for r in range(a.files):
        fd = os.open(os.path.join(tmp, f"rank{r}.csv"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.write(fd, (",".join(COLUMNS) + "\n").encode())
        fds.append(fd)
    src = LocalSource(tmp, Store())
    src.keep_open()  # as follow() does, without its thread: the rounds are driven here
    src.read_all()
    names = set(src.files)
    step = 0

    def round_() -> None:
        nonlocal step
        step += 1
        for fd in fds:
            os.write(fd, f"{time.time()!r},{step},1,{2.0 / step!r},0.0003,,0.1,0.001,,4096,8,,,1,1,2,,,s\n".encode())
        src.round(names)

    for _ in range(50):
        round_()
    blocks = []
    for _ in range(5):
        t0 = time.process_time()
        for _ in range(a.rounds // 5):
            round_()
        blocks.append((time.process_time() - t0) / (a.rounds // 5 * a.files))
    print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}; {a.files} files")
    print(f"CPU per followed row (read, parse, append): {statistics.median(blocks) * 1e6:.1f} us "
          f"(blocks: {', '.join(f'{b * 1e6:.1f}' for b in blocks)})")
    if a.profile:
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(200):
            round_()
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(15)
    src.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
