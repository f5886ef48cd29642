"""Write a folder of many runs quickly: ``runs/<group>/<name>``, each ranks × rows as gen_run writes them.

    python benchmarks/gen_runs.py DIR --runs 1000 --ranks 8 --rows 10000

One run's rank files are generated (benchmarks/gen_run.py: MetricsWriter's row format) and copied into
every run (``os.copy_file_range``: the same bytes, each run its own files); each run then gets its own
start event (run name, note, world size) and a last row of its own, so the list shows different runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gen_run import generate  # noqa: E402

from mstop_writer import COLUMNS  # noqa: E402


def generate_runs(root: str, runs: int, ranks: int, rows: int) -> list[str]:
    """Write ``runs`` runs below ``root``; return their paths."""
    template = tempfile.mkdtemp(prefix="mstop-template-")
    try:
        generate(template, ranks, rows)
        paths = []
        for i in range(runs):
            path = os.path.join(root, f"group{i // 100:02d}", f"exp{i:04d}")
            os.makedirs(path, exist_ok=True)
            for r in range(ranks):
                src = os.path.join(template, f"rank{r}.csv")
                with open(src, "rb") as a, open(os.path.join(path, f"rank{r}.csv"), "wb") as b:
                    try:
                        os.copy_file_range(a.fileno(), b.fileno(), os.fstat(a.fileno()).st_size)
                    except (AttributeError, OSError):
                        shutil.copyfileobj(a, b, 1 << 20)
                    t = 1.7e9 + rows * 0.5 + 1.0
                    b.write(f"{t!r},{rows + 1},1,{2.0 + i / runs!r},0.0003,1.25,0.5,0.01,,524288,128,"
                            f"1048576.0,0.41,52000000000,56000000000,65000000000,0,65536.0,bench\n".encode())
                with open(os.path.join(path, f"rank{r}.events.jsonl"), "w") as f:
                    f.write(json.dumps({"time": 1.7e9, "kind": "start", "session": "bench", "rank": r,
                                        "world_size": ranks, "host": f"node{i % 50}", "run_name": f"exp{i:04d}",
                                        "note": "recompute" if i % 3 == 0 else "baseline",
                                        "total_steps": rows * 2, "memory_source": "device",
                                        "flops_per_token": 6e9, "peak_flops": 313e12}) + "\n")
            paths.append(path)
        assert len(COLUMNS) == 19
        return paths
    finally:
        shutil.rmtree(template, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root")
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--rows", type=int, default=10_000)
    a = ap.parse_args()
    generate_runs(a.root, a.runs, a.ranks, a.rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
