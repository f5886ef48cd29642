"""The profiler window (issue 16, part 2): MindSpore's Profiler for a few steps, a profile event per rank,
profiled steps out of the figures, and a running job asked for a profile by a request file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from mstop.engine import figures
from mstop.sources import read_once
from mstop_writer.profiling import REQUEST_NAME
from tests.helpers.common import HELPERS, ROOT


def events(run, kind, rank=0):
    lines = (run / f"rank{rank}.events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["kind"] == kind]


def job(run, steps, *window, env=None):
    pytest.importorskip("mindspore", reason="a real job needs MindSpore: pip install -e '.[mindspore]'")
    return subprocess.Popen([sys.executable, str(HELPERS / "profile_job.py"), str(run), str(steps),
                             *map(str, window)], cwd=run.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=None if env is None else {**os.environ, **env})


def test_a_real_job_profiles_its_window_and_the_window_is_left_out_of_the_figures(tmp_path):
    run = tmp_path / "run"
    p = job(run, 40, 10, 14)
    out, _ = p.communicate(timeout=300)
    assert p.returncode == 0 and "DONE" in out, out[-3000:]
    (prof,) = events(run, "profile")
    assert (prof["first_step"], prof["last_step"], prof["source"]) == (10, 14, "trace_view.json")
    assert [s["step"] for s in prof["steps_profiled"]] == [10, 11, 12, 13, 14]
    for s in prof["steps_profiled"]:  # compute + communication not overlapped + idle = the step's wall time
        assert s["compute"] + s["comm_not_overlapped"] + s["idle"] == pytest.approx(s["wall"], rel=0.02)
    sh = prof["shares"]
    assert sh["compute"] + sh["comm_not_overlapped"] + sh["idle"] == pytest.approx(1.0, abs=0.02)
    assert 0 < sh["compute"] < 1 and prof["top_ops"] and "MatMul" in {o["name"] for o in prof["top_ops"]}
    store = read_once(str(run))
    d = store.ranks[0]
    steady_steps = set(d.col("step")[d.steady()].tolist())
    assert not steady_steps & {10.0, 11.0, 12.0, 13.0, 14.0} and {9.0, 15.0} <= steady_steps
    assert set(figures.step_rows(store, 5, 20)[0]) == {i for i in range(d.rows) if d.col("step")[i] in
                                                       {5, 6, 7, 8, 9, 15, 16, 17, 18, 19, 20}}
    summary = json.loads(subprocess.run([sys.executable, "-m", "mstop", "summary", str(run), "--json"], cwd=ROOT,
                                        capture_output=True, text=True, timeout=60).stdout)
    assert summary["profile"]["first_step"] == 10 and summary["profile"]["compute"] == pytest.approx(sh["compute"])
    comp = json.loads(subprocess.run([sys.executable, "-m", "mstop", "compare", str(run), str(run), "--format",
                                      "json"], cwd=ROOT, capture_output=True, text=True, timeout=60).stdout)
    assert comp["runs"][0]["figures"]["compute_share"]["value"] == pytest.approx(sh["compute"])
    assert comp["runs"][0]["figures"]["idle_share"]["value"] == pytest.approx(sh["idle"])


def test_a_request_file_profiles_the_next_steps_of_a_running_job(tmp_path):
    run = tmp_path / "run"
    p = job(run, 400)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not ((run / "rank0.csv").exists() and
                                                   len((run / "rank0.csv").read_text().splitlines()) > 5):
            time.sleep(0.05)
        (run / REQUEST_NAME).write_text("6\n")
        out, _ = p.communicate(timeout=300)
    finally:
        p.kill()
    assert p.returncode == 0, out[-3000:]
    (req,) = events(run, "profile_request")
    (prof,) = events(run, "profile")
    assert req["steps"] == 6 and (prof["first_step"], prof["last_step"]) == (req["first_step"], req["last_step"])
    assert prof["last_step"] - prof["first_step"] == 5 and not (run / REQUEST_NAME).exists()


def test_two_real_ranks_asked_by_one_request_profile_the_same_steps(tmp_path):
    """Two processes of one run (RANK_ID 0 and 1 of RANK_SIZE 2, as msrun sets them), kept within a few steps
    of each other as a data-parallel job's ranks are (on a loaded machine two free processes drifted seconds
    apart, and one could be past the plan when it saw it): rank 0 plans the request, both profile the planned
    steps, each writes its own profile event and folder, and the request is gone."""
    run = tmp_path / "run"
    (tmp_path / "lockstep").mkdir()
    procs = [job(run, 900, env={"RANK_ID": str(r), "RANK_SIZE": "2", "LOCKSTEP_DIR": str(tmp_path / "lockstep")})
             for r in (0, 1)]
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not all(
                (run / f"rank{r}.csv").exists() and len((run / f"rank{r}.csv").read_text().splitlines()) > 5
                for r in (0, 1)):
            time.sleep(0.05)
        (run / REQUEST_NAME).write_text("5\n")
        outs = [p.communicate(timeout=400)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0], [o[-2000:] for o in outs]
    reqs = [events(run, "profile_request", r) for r in (0, 1)]
    profs = [events(run, "profile", r) for r in (0, 1)]
    assert [len(x) for x in reqs + profs] == [1, 1, 1, 1]
    windows = {(e[0]["first_step"], e[0]["last_step"]) for e in reqs + profs}
    assert len(windows) == 1 and next(iter(windows))[1] - next(iter(windows))[0] == 4
    assert [p[0]["path"].endswith(f"rank{r}") and not p[0].get("error") for r, p in enumerate(profs)] == [True] * 2
    assert not (run / REQUEST_NAME).exists()
    store = read_once(str(run))
    assert all(store.ranks[r].profiled for r in (0, 1))


HAND_LOOP = """
import sys
import mindspore as ms
import numpy as np
from mindspore import nn, ops
from mstop_writer import MetricsWriter

ms.set_device("CPU")
net = nn.Dense(64, 64)
opt = nn.SGD(net.trainable_params(), 0.01)
grad = ms.value_and_grad(lambda x: ops.mean(net(x) ** 2), None, opt.parameters)
w = MetricsWriter(sys.argv[1], profile_steps=(4, 6))
x = ms.Tensor(np.ones((32, 64), np.float32))
for step in range(1, 11):
    loss, g = grad(x)
    opt(g)
    w.log(step, loss=float(loss))
w.profile.wait()
w.close()
"""

def test_a_hand_written_loop_profiles_its_window(tmp_path):
    pytest.importorskip("mindspore", reason="a real job needs MindSpore: pip install -e '.[mindspore]'")
    (tmp_path / "loop.py").write_text(HAND_LOOP)
    out = subprocess.run([sys.executable, str(tmp_path / "loop.py"), str(tmp_path / "run")], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    (prof,) = events(tmp_path / "run", "profile")
    assert (prof["first_step"], prof["last_step"]) == (4, 6) and len(prof["steps_profiled"]) == 3
    assert prof["shares"]["compute"] > 0 and "error" not in prof


def test_a_pipeline_profiles_bubble_reaches_summary(tmp_path):
    """A profile event as the writer makes it from Ascend's step_trace_time.csv (CONSTRUCTED): its pipeline
    bubble share is in summary's profile and line."""
    from tests.helpers.runs import start, steps, write_events, write_rank

    run = tmp_path / "run"
    write_events(run, 0, [start("s1", t=999.0), {"time": 1050.0, "kind": "profile", "session": "s1", "step": 4,
                                                  "first_step": 3, "last_step": 4, "source": "step_trace_time.csv",
                                                  "shares": {"compute": 0.32, "comm_not_overlapped": 0.28,
                                                             "overlapped": 0.05, "idle": 0.4, "stage": 0.9,
                                                             "bubble": 0.08}}])
    write_rank(run, 0, steps(1, 10, t0=1000.0, step_time=1.0, loss=1.0))
    out = subprocess.run([sys.executable, "-m", "mstop", "summary", str(run), "--json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    p = json.loads(out.stdout)["profile"]
    assert (p["bubble"], p["stage"], p["source"]) == (0.08, 0.9, "step_trace_time.csv")
    text = subprocess.run([sys.executable, "-m", "mstop", "summary", str(run)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60).stdout
    assert "idle 40 % · bubble 8 % · steps 3-4, rank 0" in text


def _profiled_ranks(run, shares_by_rank):
    from tests.helpers.runs import start, steps, write_events, write_rank

    for r, (comm, idle) in shares_by_rank.items():
        write_events(run, r, [start("s1", t=999.0, world_size=len(shares_by_rank), host="n0")]
                     + ([{"time": 1050.0, "kind": "profile", "session": "s1", "step": 14, "first_step": 10,
                          "last_step": 14, "shares": {"compute": 1 - comm - idle, "comm_not_overlapped": comm,
                                                      "overlapped": 0.0, "idle": idle}}] if comm is not None else []))
        write_rank(run, r, steps(1, 60, t0=1000.0, dt=1.0, step_time=1.0, tokens=100, loss=1.0))


async def test_the_heat_strip_offers_profile_shares_only_when_several_ranks_have_one(tmp_path):
    """The slow card: little idle, long compute, while the others wait in communication."""
    from mstop.app import MonitorApp
    from mstop.app.widgets import HeatStrip
    from tests.helpers.app_common import settle

    async def titles(run) -> list[str]:
        app = MonitorApp(str(run), follow=False, clock=lambda: 1061.0)
        seen = []
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            await pilot.press("r")
            await settle(pilot)
            for _ in range(8):
                seen.append(app.query_one(HeatStrip).title(app.monitor.last_view))
                await pilot.press("m")
                await settle(pilot)
        return seen

    _profiled_ranks(tmp_path / "two", {0: (0.30, 0.40), 1: (0.05, 0.02), 2: (0.31, 0.41)})
    got = await titles(tmp_path / "two")
    assert any(t.startswith("comm share") for t in got) and any(t.startswith("idle share") for t in got)
    _profiled_ranks(tmp_path / "one", {0: (0.30, 0.40), 1: (None, None)})
    got = await titles(tmp_path / "one")
    assert not any(t.startswith(("comm share", "idle share")) for t in got) and len(set(got)) == 5


