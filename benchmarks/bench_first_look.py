"""The first look at a hang (issue 60): seconds from a real job's hang to the verdict naming its rank.

    python benchmarks/bench_first_look.py [--repeats 3]

A real 4-rank data-parallel msrun job on CPU (tests/helpers/msrun_job.py) whose rank 1's input blocks at step
40 (the user's map function never returns), the writer at its default ``stack_after``. Timed from the ranks'
last rows (the newest mtime of their CSV files: the moment the job stopped stepping):

- the witnesses' first looks: the first ``stack`` event of reason ``asked``;
- the verdict: the first ``hang`` naming rank 1 by the stacks, the run read whole every 0.25 s (as
  ``summary`` reads it; the monitor reads the same events as they are written);
- the reference, in the same job: MindSpore's own collective timeout ending it (the first rank's ``exit``
  event: on CPU its AllReduce gives up after about 30 s), before which the timed dump (``stack_after``,
  60 s by default, the only dump before this issue) never came.

Medians of the repeats.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _events(run: Path, kind: str) -> list[dict]:
    out = []
    for path in run.glob("rank*.events.jsonl"):
        for line in path.read_text(errors="replace").splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if isinstance(e, dict) and e.get("kind") == kind:
                out.append(e)
    return out


def _last_row(run: Path) -> float:
    return max(p.stat().st_mtime for p in run.glob("rank*.csv"))


def once(tmp: Path, timeout: float = 150.0) -> dict[str, float]:
    """One job: the seconds from its last rows to the first look, to the verdict and to its end."""
    from mstop.engine.diagnosis import diagnose
    from mstop.sources import read_once
    from tests.helpers.msrun import Msrun

    job = Msrun(tmp, 4000, "--input-block=1:40", "--steps-sleep=0.02")
    got: dict[str, float] = {}
    try:
        end = time.monotonic() + timeout
        while time.monotonic() < end and "job_end" not in got:
            time.sleep(0.25)
            if not job.run.is_dir() or not list(job.run.glob("rank*.csv")):
                continue
            stacks = _events(job.run, "stack")
            if not stacks:
                continue
            last = _last_row(job.run)
            asked = [s["time"] for s in stacks if s.get("reason") == "asked"]
            if asked and "first_look" not in got:
                got["first_look"] = min(asked) - last
            if "verdict" not in got:
                hang = [v for v in diagnose(read_once(str(job.run)).snapshot())
                        if v.kind == "hang" and v.ranks == [1] and v.evidence.get("stacks")]
                if hang:
                    got["verdict"] = time.time() - last
            ends = [e["time"] for e in _events(job.run, "exit")]
            if ends:
                got["job_end"] = min(ends) - last
    finally:
        job.stop()
    return got


def bench_first_look(repeats: int) -> dict[str, float]:
    """Medians over ``repeats`` jobs: first_look, verdict, job_end (seconds from the hang)."""
    runs = []
    for k in range(repeats):
        tmp = Path(tempfile.mkdtemp(prefix="mstop-first-look-"))
        try:
            got = once(tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        print(f"  job {k + 1}: " + ", ".join(f"{n} {v:.1f} s" for n, v in got.items()), file=sys.stderr, flush=True)
        runs.append(got)
    keys = ("first_look", "verdict", "job_end")
    return {k: statistics.median([r[k] for r in runs]) if all(k in r for r in runs) else float("nan")
            for k in keys}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.environ.setdefault("PYTHONPATH", f"{ROOT / 'writer'}{os.pathsep}{ROOT}")
    print(json.dumps(bench_first_look(a.repeats)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
