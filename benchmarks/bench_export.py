"""The export's cost (issue 61): CPU seconds per ``mstop export`` of a run of 1,024 and of 10,000 ranks.

    python benchmarks/bench_export.py [--rows 300] [--repeats 5]

The run is read once (as a following export has it in memory); each export is then timed in this process
(CPU: ``time.process_time``): the summary the figures come from, the ranks' own figures, the families and
the file written atomically. The reference, in the same loop: the summary alone (what ``summary --json``
computes of the run in memory). Medians of the repeats; the share of a core at the default 15 s interval.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def bench_export(ranks: int, rows: int, repeats: int, data: str) -> dict[str, float]:
    from run_all import many_ranks

    from mstop.commands.export import Export, _write, rank_figures
    from mstop.commands.summary import summarize
    from mstop.engine import figures
    from mstop.engine.figures import Options
    from mstop.engine.health import Health
    from mstop.sources import read_once

    run = many_ranks(data, ranks, rows)
    store = read_once(run)
    opts, health = Options(), Health()
    out = tempfile.mkdtemp(prefix="mstop-export-")
    ex = Export("bench", "host")
    exports, refs = [], []
    for _ in range(repeats):
        t = time.process_time()
        snap = store.snapshot()
        fig = summarize(snap, run, opts, health)
        ex.update(fig, rank_figures(snap), figures.seconds_since_last_row(snap, opts))
        _write(os.path.join(out, "mstop_bench.prom"), ex)
        exports.append(time.process_time() - t)
        t = time.process_time()
        summarize(store.snapshot(), run, opts, health)
        refs.append(time.process_time() - t)
    size = os.path.getsize(os.path.join(out, "mstop_bench.prom"))
    e, r = statistics.median(exports), statistics.median(refs)
    return {"ranks": ranks, "export_s": e, "summary_s": r, "ratio": e / r, "core_share_at_15s": e / 15.0,
            "file_bytes": size}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "mstop-bench"))
    a = ap.parse_args()
    os.makedirs(a.data, exist_ok=True)
    for ranks in (1024, 10000):
        print(json.dumps(bench_export(ranks, a.rows, a.repeats, a.data)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
