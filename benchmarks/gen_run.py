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
        # the columns a real job's rows vary in (a MindSpore job's CSV varies in 8 of its 16 float columns,
        # a MindFormers log in about as many): the store holds a column that never varies as one value, so a
        # run whose columns are all constant would measure less than real memory
        lr = 3e-4 * np.minimum(1.0, step / 100) * (0.55 + 0.45 * np.cos(np.pi * step / max(rows, 1)))
        gn = 1.25 + 0.1 * rng.standard_normal(rows)
        dw = np.abs(0.01 + 0.002 * rng.standard_normal(rows))
        mem = 52e9 + np.round(1e6 * rng.standard_normal(rows))
        epoch = 1 + step // 1000
        with open(os.path.join(run_dir, f"rank{r}.events.jsonl"), "w") as f:
            f.write(json.dumps({"time": 1.7e9, "kind": "start", "session": "bench", "rank": r, "world_size": ranks,
                                "host": f"node{r // 8}", "memory_source": "device", "flops_per_token": 6e9,
                                "peak_flops": 313e12}) + "\n")
        with open(os.path.join(run_dir, f"rank{r}.csv"), "w") as f:
            f.write(",".join(COLUMNS) + "\n")
            lines = []
            for i in range(rows):
                lines.append(f"{t[i]!r},{i + 1},{epoch[i]},{loss[i]!r},{lr[i]!r},{gn[i]!r},{st[i]!r},{dw[i]!r},,"
                             f"524288,128,{524288 / st[i]!r},{0.205 / st[i]!r},{mem[i]!r},{mem[i] + 4e9!r},"
                             "65000000000,0,65536.0,bench\n")
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
