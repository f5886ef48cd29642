"""Write a synthetic run directory quickly (rows formatted as MetricsWriter formats them).

    python benchmarks/gen_run.py DIR --ranks 8 --rows 200000
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from mstop_writer import COLUMNS


def generate(run_dir: str, ranks: int, rows: int, seed: int = 0) -> None:
    os.makedirs(run_dir, exist_ok=True)
    rng = np.random.default_rng(seed)
    for r in range(ranks):
        step = np.arange(1, rows + 1)
        st = 0.5 + 0.01 * rng.standard_normal(rows)
        t = 1.7e9 + np.cumsum(st)
        loss = 4.0 * step ** -0.3 + 0.05 * rng.standard_normal(rows)
        with open(os.path.join(run_dir, f"rank{r}.events.jsonl"), "w") as f:
            f.write(json.dumps({"time": 1.7e9, "kind": "start", "session": "bench", "rank": r, "world_size": ranks,
                                "host": f"node{r // 8}", "memory_source": "device", "flops_per_token": 6e9,
                                "peak_flops": 313e12}) + "\n")
        with open(os.path.join(run_dir, f"rank{r}.csv"), "w") as f:
            f.write(",".join(COLUMNS) + "\n")
            lines = []
            for i in range(rows):
                lines.append(f"{t[i]!r},{i + 1},1,{loss[i]!r},0.0003,1.25,{st[i]!r},0.01,,524288,128,"
                             f"{524288 / st[i]!r},0.41,52000000000,56000000000,65000000000,0,65536.0,bench\n")
                if len(lines) >= 10000:
                    f.write("".join(lines))
                    lines.clear()
            f.write("".join(lines))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--rows", type=int, default=200_000)
    a = ap.parse_args()
    generate(a.run_dir, a.ranks, a.rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
