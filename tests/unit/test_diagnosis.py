"""The diagnosis (issue 59): each verdict rule fed random ranks, and runs written by the writer read whole."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mstop.engine import diagnosis
from mstop.engine.diagnosis import Diagnosis, Peers, creep_fit, diagnose
from mstop.sources import read_once
from mstop_writer import MetricsWriter

ranks_n = st.integers(min_value=2, max_value=64)
step_s = st.floats(min_value=0.05, max_value=20.0)


def peers(n: int, step: float, wait: float = 0.0, cpu: float = 0.5, delay: float = 0.01) -> Peers:
    """A group of ``n`` alike ranks: the same step, input wait, CPU rate and run delay."""
    return Peers(list(range(n)), np.full(n, step), np.full(n, wait * step), np.full(n, cpu), np.full(n, delay),
                 (100, 119))


@given(ranks_n, step_s, st.data())
def test_alike_ranks_give_no_straggler_and_no_input_verdict(n, step, data):
    wait = data.draw(st.floats(min_value=0.0, max_value=0.08))  # under the data_starvation limit, 10 %
    g = peers(n, step, wait)
    assert diagnosis.input_verdicts(g) == []
    assert diagnosis.compute_verdicts(g) == [] and diagnosis.host_verdicts(g) == []


@given(ranks_n, step_s, st.integers(min_value=0, max_value=63), st.floats(min_value=0.15, max_value=0.9))
@example(2, 0.25, 0, 0.15625).via("the evidence rounded to 4 places: 0.0366 for 0.0365625")
def test_a_rank_waiting_on_input_while_the_others_wait_for_it_is_the_input_straggler(n, step, k, share):
    """In data parallel every rank's step is as long as the slowest's: the others spend the straggler's input
    wait inside their step (in the collective), so their in-step time is longer than its by about that."""
    k %= n
    g = peers(n, step, 0.01)
    g.wait[k] = share * step
    verdicts = diagnosis.input_verdicts(g)
    assert [(v.kind, v.ranks) for v in verdicts] == [("input_straggler", [k])]
    ev = verdicts[0].evidence
    assert ev["rank"] == k and ev["rank_wait_share"] == pytest.approx(share, abs=1e-3)
    assert ev["others_wait_s"] == pytest.approx(share * step - 0.01 * step, abs=1e-4)  # rounded to 4 places


@given(ranks_n, step_s, st.data())
def test_every_rank_waiting_on_input_is_input_bound_and_names_no_rank(n, step, data):
    shares = data.draw(st.lists(st.floats(min_value=0.11, max_value=0.9), min_size=n, max_size=n))
    g = peers(n, step)
    g.wait[:] = np.array(shares) * step
    (v,) = diagnosis.input_verdicts(g)
    assert v.kind == "input_bound" and v.ranks == []
    assert v.evidence["median_wait_share"] == pytest.approx(float(np.median(shares)), abs=1e-3)


@given(ranks_n, step_s, st.integers(min_value=0, max_value=63), st.floats(min_value=0.2, max_value=0.9))
@example(2, 0.0625, 0, 0.5).via("the evidence rounded to 4 places: 0.0187 for 0.01875")
def test_the_busiest_rank_is_the_compute_straggler_and_its_peers_wait_for_it(n, step, k, extra):
    k %= n
    g = peers(n, step, cpu=0.3)
    g.cpu[k] = 0.3 + extra + 0.3 * 0.5  # its CPU a second at least SKEW times the others', by more than MARGIN
    (v,) = diagnosis.compute_verdicts(g)
    assert v.kind == "compute_straggler" and v.ranks == [k]
    assert v.evidence["median_cpu_s_per_step"] == pytest.approx(0.3 * step, abs=1e-4)  # rounded to 4 places


def test_more_than_a_quarter_of_the_ranks_standing_out_is_no_one_rank_to_blame():
    g = peers(8, 1.0, cpu=0.3)
    g.cpu[:3] = 2.0
    assert diagnosis.compute_verdicts(g) == []


@given(ranks_n, step_s, st.data())
def test_a_rank_waiting_for_a_cpu_is_the_host_straggler(n, step, data):
    k = data.draw(st.integers(min_value=0, max_value=n - 1))
    g = peers(n, step, cpu=0.2, delay=0.01)
    g.delay[k] = data.draw(st.floats(min_value=0.17, max_value=0.9))
    (v,) = diagnosis.host_verdicts(g)
    assert v.kind == "host_straggler" and v.ranks == [k]


def test_ranks_sharing_a_loaded_host_unevenly_are_no_host_straggler():
    """CI: a healthy 4-rank job on a 2-core machine under the suite's load; rank 0 waited for a CPU 29 % of
    the time, its peers 18 % (the scheduler's turns, the next look rank 1): 1.6 x, but 11 points only."""
    g = peers(4, 0.1, cpu=0.3, delay=0.18)
    g.delay[0] = 0.29
    assert diagnosis.host_verdicts(g) == []
    g.delay[0] = 0.34  # 16 points above its peers: its host (its core) is busy with something else
    assert [v.ranks for v in diagnosis.host_verdicts(g)] == [[0]]


def test_a_busy_rank_waiting_for_a_cpu_by_its_own_demand_is_no_host_straggler():
    """A real rank computing 0.15 s more a step on a loaded 2-core machine ran 45 % of the time and waited
    for a CPU 16 %: its peers idle, waiting 2 %. It is the compute straggler, not its host's victim."""
    g = peers(4, 0.3, cpu=0.028, delay=0.02)
    g.cpu[2], g.delay[2] = 0.452, 0.156
    assert diagnosis.host_verdicts(g) == []
    assert [v.ranks for v in diagnosis.compute_verdicts(g)] == [[2]]


def test_a_busy_rank_on_a_heavily_loaded_host_is_the_compute_straggler_not_its_hosts_victim():
    """CI: rank 2 spinning 0.15 s of CPU a step on a 2-core machine under the suite's load ran 9.4 % of the time
    and waited for a CPU 82 %; its peers, idle in their AllReduce, ran 1 % and waited 4 %. It was named a
    host straggler (its wait was more than half its CPU) and no compute straggler (its extra CPU, 8.4 % of a
    step stretched by its waits, under the 10 % margin). Its peers wait for its compute and its CPU waits."""
    g = peers(4, 1.7, cpu=0.009, delay=0.038)
    g.cpu[2], g.delay[2] = 0.094, 0.816
    assert diagnosis.host_verdicts(g) == []
    (v,) = diagnosis.compute_verdicts(g)
    assert v.ranks == [2] and v.evidence["rank_cpu_s_per_step"] == pytest.approx(0.16, abs=0.001)
    assert v.evidence["rank_run_delay_share"] == 0.816 and "waited for a CPU 82 % of the time" in v.words


def test_idle_ranks_cpu_noise_under_load_is_no_compute_straggler():
    """Ranks idle in their collective run a little, unevenly (1.6 times of 1 %); one waited for a CPU longer
    by the scheduler's turns: nobody computes longer."""
    g = peers(4, 0.5, cpu=0.01, delay=0.18)
    g.cpu[1], g.delay[1] = 0.016, 0.3
    assert diagnosis.compute_verdicts(g) == []


def test_a_verdict_that_held_holds_under_relaxed_thresholds_and_clears_below_them():
    g = peers(4, 1.0, 0.0)
    g.wait[2] = 0.09  # under the 0.1 share a new verdict needs, over 0.8 of it
    assert diagnosis.input_verdicts(g) == []
    assert [v.kind for v in diagnosis.input_verdicts(g, diagnosis.RELAX)] == ["input_straggler"]
    g.wait[2] = 0.07
    assert diagnosis.input_verdicts(g, diagnosis.RELAX) == []


@given(st.floats(min_value=1e3, max_value=1e8), st.floats(min_value=1e8, max_value=1e10), st.integers(60, 3000),
       st.integers(0, 2**31 - 1))
def test_the_memory_fit_finds_the_slope_of_memory_creeping_up_with_noise(slope, base, n, seed):
    rng = np.random.default_rng(seed)
    step = np.arange(1, n + 1, dtype=np.float64)
    used = base + slope * step + rng.normal(0, slope * 0.5, n)
    got, r2 = creep_fit(step, used)
    assert got == pytest.approx(slope, rel=0.05) and r2 > 0.9


def write_run(tmp_path, ranks: int, steps: int, row, env=None, monkeypatch=None):
    """A run of ``ranks`` writers, ``row(rank, step)`` each row's fields (``env``: rank -> variables set
    while its writer starts)."""
    writers = []
    for r in range(ranks):
        for k, v in (env or {}).get(r, {}).items():
            monkeypatch.setenv(k, v)
        writers.append(MetricsWriter(tmp_path, rank=r, world_size=ranks, heartbeat_interval=60, witness=False,
                                     parallel_mode="data_parallel"))  # (MindSpore imported says stand_alone)
        for k in (env or {}).get(r, {}):
            monkeypatch.delenv(k)
    for s in range(1, steps + 1):
        for r, w in enumerate(writers):
            w.log(s, **row(r, s))
    for w in writers:
        w.close()
    return read_once(str(tmp_path)).snapshot()


def test_a_rank_started_with_another_collective_setting_is_the_mismatch(tmp_path, monkeypatch):
    env = {r: {"HCCL_BUFFSIZE": "200", "MS_ALLOC_CONF": "enable_vmm:true"} for r in range(4)}
    env[3]["HCCL_BUFFSIZE"] = "400"
    store = write_run(tmp_path, 4, 30, lambda r, s: {"loss": 1.0, "step_time": 0.1}, env, monkeypatch)
    (v,) = [v for v in diagnose(store) if v.kind == "mismatch"]
    assert v.ranks == [3] and "HCCL_BUFFSIZE=400 (the others 200)" in v.words
    assert v.evidence["settings"][0]["setting"] == "HCCL_BUFFSIZE"


def test_alike_ranks_are_healthy_and_say_what_could_not_be_told(tmp_path):
    store = write_run(tmp_path, 4, 40, lambda r, s: {"loss": 1.0, "step_time": 0.1, "data_wait": 0.001})
    (v,) = diagnose(store)
    assert v.kind == "healthy" and "no CPU times: the writer runs without its witness" in v.words
    assert json.loads(json.dumps(v.public()))["evidence"]["window"]["last_step"] == 40


def test_the_monitors_diagnosis_says_since_when_a_verdict_holds(tmp_path):
    store = write_run(tmp_path, 4, 40, lambda r, s: {"loss": 1.0, "step_time": 0.5,
                                                      "data_wait": 0.3 if r == 2 else 0.005})
    live = Diagnosis()
    (v,) = live.look(store)
    assert v.kind == "input_straggler" and v.ranks == [2] and v.since["step"] == 40
    assert live.look(store)[0].since == v.since


@pytest.mark.parametrize("comm, idle, verdict", [(0.35, 0.15, ["wait_heavy"]), (0.1, 0.05, ["healthy"])])
def test_every_profiled_rank_waiting_half_its_step_is_wait_heavy(tmp_path, comm, idle, verdict):
    """Four ranks' profiles (the profiler's step breakdown, as the writer's profile event gives it): when every
    one spends 40 % or more of its step in communication not overlapped and idle, wait_heavy, no rank named,
    the shares as its evidence; less, healthy (and a profile is no longer missing)."""
    from tests.helpers.runs import start, steps, write_events, write_rank

    run = tmp_path / "run"
    for r in range(4):
        share = {"compute": 1 - comm - idle, "comm_not_overlapped": comm + 0.01 * r, "overlapped": 0.02,
                 "idle": idle}
        write_events(run, r, [start("s1", t=999.0, world_size=4),
                              {"time": 1040.0, "kind": "profile", "session": "s1", "step": 34, "first_step": 30,
                               "last_step": 34, "source": "trace_view.json", "path": f"profile/rank{r}",
                               "shares": share, "top_ops": []}])
        write_rank(run, r, steps(1, 60, t0=1000.0, dt=1.0, step_time=1.0, data_wait=0.001, tokens=100, loss=1.0))
    got = diagnose(read_once(str(run)).snapshot())
    assert [v.kind for v in got] == verdict
    if verdict == ["wait_heavy"]:
        ev = got[0].evidence
        assert got[0].ranks == [] and ev["profiled_ranks"] == 4 and ev["least_wait_share"] == pytest.approx(0.5)
        assert ev["window"]["profiled_steps"] == [(30, 34)]
    else:
        assert "no profile" not in got[0].words


def _procs(pid: int, t0: float, cpu_per_s: float, delay_per_s: float, n: int = 6) -> list[dict]:
    """A witness's proc events every 5 s: CPU seconds and run delay growing at these rates."""
    return [{"time": t0 + 5 * k, "kind": "proc", "pid": pid, "state": "S", "cpu_s": round(cpu_per_s * 5 * k, 3),
             "rss": 1 << 30, "threads": 40, "run_delay_s": round(delay_per_s * 5 * k, 4), "changed": False}
            for k in range(n)]


@pytest.mark.parametrize("stages, named", [(1, [[3]]), (4, []), (2, [[3]])])
def test_ranks_are_compared_within_their_pipeline_stage(tmp_path, stages, named):
    """Rank 3 computes more than ranks 0-2. With no pipeline it is the compute straggler; as the last of four
    pipeline stages of a rank each (its start event's parallel settings) it is slower by design and has no
    peer to be compared with: none is named; in the last of two stages it is slower than its stage's other
    rank: named. The CPU rates come from the witness's proc events (their trail in the store)."""
    from tests.helpers.runs import start, steps, write_events, write_rank

    run = tmp_path / "run"
    cpu = {0: 0.2, 1: 0.2, 2: 0.2, 3: 0.9}
    for r in range(4):
        write_events(run, r, [start("s1", t=999.0, world_size=4, pid=100 + r,
                                    parallel={"pipeline_stages": stages, "parallel_mode": "semi_auto_parallel"}),
                              *_procs(100 + r, 1010.0, cpu[r], 0.01)])
        write_rank(run, r, steps(1, 40, t0=1000.0, dt=1.0, step_time=1.0, data_wait=0.001, tokens=100, loss=1.0))
    got = [v.ranks for v in diagnose(read_once(str(run)).snapshot()) if v.kind == "compute_straggler"]
    assert got == named


def test_a_new_verdict_is_told_once_to_on_alert_with_an_alerts_keys(tmp_path):
    """--on-alert is told each verdict once while it holds (healthy never), as JSON with an alert's keys
    (kind, rank, step, message) beside the verdict's own."""
    from mstop.live.alerting import Alerting

    store = write_run(tmp_path, 4, 40, lambda r, s: {"loss": 1.0, "step_time": 0.5,
                                                      "data_wait": 0.3 if r == 2 else 0.005})
    live, told = Diagnosis(), Alerting(["true"])
    fresh = told.verdicts(live.look(store))
    assert [v.told()["kind"] for v in fresh] == ["input_straggler"] and told.verdicts(live.look(store)) == []
    said = json.loads(json.dumps(fresh[0].told()))
    assert (said["rank"], said["step"], said["source"]) == (2, 40, "diagnosis") and said["message"] == fresh[0].words
    healthy = write_run(tmp_path / "h", 2, 30, lambda r, s: {"loss": 1.0, "step_time": 0.1})
    assert told.verdicts(Diagnosis().look(healthy)) == []


def test_a_busier_rank_of_ranks_run_stand_alone_holds_nobody_up(tmp_path):
    """The demo's two ranks are separate processes MindSpore runs stand-alone (no collective): one using more
    CPU a step keeps nobody waiting, so it is no compute straggler (the regenerated demo screenshot said one)."""
    from tests.helpers.runs import start, steps, write_events, write_rank

    run = tmp_path / "run"
    for r, cpu in ((0, 0.4), (1, 0.9)):
        write_events(run, r, [start("s1", t=999.0, world_size=2, pid=100 + r,
                                    parallel={"parallel_mode": "stand_alone", "pipeline_stages": 1}),
                              *_procs(100 + r, 1010.0, cpu, 0.01)])
        write_rank(run, r, steps(1, 40, t0=1000.0, dt=1.0, step_time=1.0, data_wait=0.001, tokens=100, loss=1.0))
    assert [v.kind for v in diagnose(read_once(str(run)).snapshot())] == ["healthy"]
    g = diagnosis.peer_groups(read_once(str(run)).snapshot())[0]
    g.wait[1] = 0.4  # nor an input straggler: the finished demo, under load, had one rank waiting 23 %
    assert not g.together and diagnosis.input_verdicts(g) == []


@given(st.integers(min_value=2, max_value=64), step_s, st.integers(min_value=0, max_value=63),
       st.floats(min_value=0.1, max_value=0.5), st.floats(min_value=0.3, max_value=0.6))
def test_a_rank_whose_device_is_busier_than_its_peers_is_the_compute_straggler(n, step, k, base, extra):
    """On an NPU the graph runs on the device: every rank's host process uses the same CPU, and the rank whose
    device is busy longer (npu-smi's AICore) keeps the others waiting in their collective."""
    k %= n
    g = peers(n, step)
    g.busy = np.full(n, base)
    g.busy[k] = min(1.0, base + extra)
    g.device = [f"h1 NPU {r}" for r in range(n)]
    (v,) = diagnosis.compute_verdicts(g)
    assert v.kind == "compute_straggler" and v.ranks == [k] and f"(h1 NPU {k})" in v.words
    ev = v.evidence
    assert (ev["device"], ev["rank_device_busy"], ev["median_device_busy"]) == (
        f"h1 NPU {k}", round(min(1.0, base + extra), 4), round(base, 4))
    assert ev["others_wait_s"] == pytest.approx((min(1.0, base + extra) - base) * step, abs=1e-4)


@given(st.integers(min_value=2, max_value=64), step_s, st.lists(st.floats(min_value=0.0, max_value=0.1), min_size=64,
                                                               max_size=64), st.floats(min_value=0.0, max_value=0.85))
def test_devices_busy_alike_name_no_straggler(n, step, jitter, base):
    g = peers(n, step)
    g.busy = base + np.array(jitter[:n])
    assert diagnosis.compute_verdicts(g) == []


def test_a_run_with_devices_file_names_the_rank_on_the_busy_device(tmp_path):
    """Four ranks alike on their hosts' CPUs, their devices sampled as the writer's device sampler writes them
    (``host_<name>.devices.csv``, each chip listing its rank's process): rank 2's device busy 95 %, the others
    40 %: rank 2 is the compute straggler, by its device, and the evidence names the device."""
    import csv

    from mstop_writer.schema import DEVICE_COLUMNS
    from tests.helpers.runs import start, steps, write_events, write_rank

    run = tmp_path / "run"
    for r in range(4):
        write_events(run, r, [start("s1", t=999.0, world_size=4, pid=100 + r, host="h1", device_id=r,
                                    parallel={"parallel_mode": "data_parallel", "pipeline_stages": 1}),
                              *_procs(100 + r, 1010.0, 0.3, 0.01)])
        write_rank(run, r, steps(1, 40, t0=1000.0, dt=1.0, step_time=1.0, data_wait=0.001, tokens=100, loss=1.0))
    with open(run / "host_h1.devices.csv", "w", newline="") as f:
        w = csv.DictWriter(f, DEVICE_COLUMNS)
        w.writeheader()
        for t in range(1000, 1041, 10):
            for r in range(4):
                w.writerow({"time": t, "host": "h1", "npu": r, "chip": 0, "device": r, "name": "910B3",
                            "health": "OK", "aicore": 0.95 if r == 2 else 0.4, "pids": str(100 + r)})
    got = [v for v in diagnose(read_once(str(run)).snapshot()) if v.kind == "compute_straggler"]
    assert [(v.ranks, v.evidence["device"], v.evidence["rank_device_busy"], v.evidence["median_device_busy"])
            for v in got] == [([2], "h1 NPU 2", 0.95, 0.4)], got


def _launched(run, fails: list[tuple[int, str] | None], reach: list[int], ranks: int = 2) -> None:
    """A run launched len(fails) times: launch k's rows reach step reach[k] on every rank, and fails[k] is the
    (rank, error) whose abort ended it (None: it ended cleanly). Aborts carry no session, as older writers
    wrote them: each belongs to the launch begun last before it."""
    from tests.helpers.runs import start, steps, write_events, write_rank

    t = 1000.0
    for k, (fail, last) in enumerate(zip(fails, reach)):
        for r in range(ranks):
            ev = [start(f"s{k}-{r}", t=t, world_size=ranks, parallel={"parallel_mode": "data_parallel"})]
            if fail is not None and fail[0] == r:
                ev.append({"time": t + last + 1, "kind": "abort", "step": last, "error": fail[1]})
            write_events(run, r, ev)
            write_rank(run, r, steps(1, last, session=f"s{k}-{r}", t0=t, step_time=1.0, loss=1.0))
        t += last + 100


@pytest.mark.parametrize("fails, reach, named", [
    ([(1, "RuntimeError: injected")] * 3, [30, 30, 30], (1, 3)),  # three alike: the loop, counted
    ([None, (1, "RuntimeError: injected"), (1, "RuntimeError: injected")], [60, 30, 30], (1, 2)),
    ([(1, "RuntimeError: injected")] * 2 + [(0, "RuntimeError: injected")], [30, 30, 30], None),  # another rank
    ([(1, "RuntimeError: x"), (1, "EL0004: out of device memory")], [30, 30], None),  # another kind of error
    ([(1, "RuntimeError: injected")] * 3, [30, 30, 45], None),  # the last one got further: no loop
    ([(1, "RuntimeError: injected")] * 2 + [None], [30, 30, 30], None),  # the last launch did not fail
])
def test_launches_failing_alike_without_progress_are_a_relaunch_loop(tmp_path, fails, reach, named):
    _launched(tmp_path / "run", fails, reach)
    got = [(v.ranks[0], v.evidence["launches"]) for v in diagnose(read_once(str(tmp_path / "run")).snapshot())
           if v.kind == "relaunch_loop"]
    assert got == ([] if named is None else [named])


@pytest.mark.parametrize("error, kind", [
    ("EI0002: The wait execution of the Notify register times out", "collective_timeout"),
    ("RuntimeError: Call HcclCommInitRootInfoConfig failed ... EI0006: Getting socket times out", "collective_timeout"),
    ("[ERROR] Worker process 130673 exit with exception.", "launcher_teardown"),
    ("RuntimeError: Allocate memory failed ... EL0004: Failed to allocate memory (out of device memory)",
     "out_of_memory"),
    ("ValueError: loss is nan at step 120", "nan_or_overflow"),
    ("EE9999: Inner Error! ... rtStreamSynchronize failed", "device_error"),
    ("RuntimeError: Exception thrown from dataset pipeline. GeneratorDataset's __getitem__ raised", "data_error"),
    ("KeyError: 'input_ids'", "exception"),
    ("Segmentation fault", "error"),
])
def test_an_error_is_told_by_its_words(error, kind):
    assert diagnosis.error_kind(error) == kind


SITE = "/venv/lib/python3.11/site-packages"
STDLIB = "/usr/lib/python3.11"


@pytest.mark.parametrize("threads, frame, kind", [
    # the main thread waits on its dataset's iterator; the user's map function in the dataset's thread blocks
    ([[f"wait ({STDLIB}/threading.py:320)", f"get ({STDLIB}/queue.py:171)",
       f"_get_next ({SITE}/mindspore/dataset/engine/iterators.py:150)", "<module> (/job/train.py:40)"],
      ["sleep_read (/job/data.py:12)", f"__call__ ({SITE}/mindspore/dataset/transforms/py_transforms.py:90)",
       f"run ({STDLIB}/threading.py:975)"]], "sleep_read (/job/data.py:12)", "input"),
    ([[f"_exec_pip ({SITE}/mindspore/common/api.py:2432)", "<module> (/job/train.py:40)"]],
     f"_exec_pip ({SITE}/mindspore/common/api.py:2432)", "collective"),
    ([[f"save_checkpoint ({SITE}/mindspore/train/serialization.py:300)", "<module> (/job/train.py:40)"]],
     f"save_checkpoint ({SITE}/mindspore/train/serialization.py:300)", "io"),
    ([[f"acquire ({STDLIB}/threading.py:100)", "update (/job/shared.py:8)", "<module> (/job/train.py:40)"]],
     "update (/job/shared.py:8)", "lock"),
    # a read that never returns (its open or read is C: the innermost Python frame is the user's function)
    ([["read_shard (/job/data.py:12)", "step_begin (/job/train.py:30)", "<module> (/job/train.py:40)"]],
     "read_shard (/job/data.py:12)", "io"),
    ([[f"_parse_ckpt_proto ({SITE}/mindspore/train/serialization.py:900)", "<module> (/job/train.py:40)"]],
     f"_parse_ckpt_proto ({SITE}/mindspore/train/serialization.py:900)", "io"),
    ([["thread_reader (/job/prep.py:30)", "<module> (/job/train.py:40)"]], "thread_reader (/job/prep.py:30)",
     "host_compute"),  # (a name with read inside a word is no read)
    ([["tokenize (/job/prep.py:30)", "<module> (/job/train.py:40)"]], "tokenize (/job/prep.py:30)", "host_compute"),
])
def test_the_frame_that_matters_in_a_dump_and_its_kind(threads, frame, kind):
    """Every thread read, Python's own library skipped: the frame a person looks for first, and its kind."""
    from mstop.engine.processes import stuck_at

    stack = {"stacks": [{"thread": f"0x{i}", "current": False, "frames": t} for i, t in enumerate(threads)]}
    assert stuck_at(stack) == (frame, kind)


def test_a_rank_its_witness_sees_stopped_is_the_hang_before_any_dump(tmp_path):
    """Rank 3's process stopped (its witness's proc event says T), no rank has dumped its stacks yet: the hang
    names rank 3 at once, as the stopped_rank alert does; the others are not named."""
    from tests.helpers.runs import start, steps, write_events, write_rank

    run = tmp_path / "run"
    for r in range(4):
        procs = _procs(100 + r, 1010.0, 0.3, 0.01)
        if r == 3:
            procs[-1] = {**procs[-1], "state": "T", "changed": True}
        write_events(run, r, [start("s1", t=999.0, world_size=4, pid=100 + r,
                                    parallel={"parallel_mode": "data_parallel"}), *procs])
        write_rank(run, r, steps(1, 30, t0=1000.0, dt=1.0, step_time=1.0, loss=1.0))
    (v,) = [v for v in diagnose(read_once(str(run)).snapshot()) if v.kind == "hang"]
    assert v.ranks == [3] and [h["state"] for h in v.evidence["held"]] == ["T"], v
    assert v.words.startswith("rank 3's process is stopped") and "the other ranks wait for it" in v.words



@pytest.mark.parametrize("d_at, rows_to, held", [
    ((1036.0,), 30, False),  # seen in D once (two looks a second apart, then its heartbeat is due): I/O
    ((1031.0, 1036.0), 30, True),  # in D at two reports 5 s apart and no row since: stuck in D
    ((1021.0, 1026.0), 30, False),  # in D as long, but its rows went on after: a rank reading its data
])
def test_a_rank_in_d_holds_the_others_only_when_it_lasts_and_its_steps_stop(tmp_path, d_at, rows_to, held):
    """A process is in uninterruptible sleep (D) for every disk read and page fault: a healthy rank on a
    loaded host was seen in D at two looks and named the hang (issue 60's CI). D holds the others up when
    its watcher still says D D_HOLD_S later and the rank wrote no row since it went in."""
    from tests.helpers.runs import start, steps, write_events, write_rank

    run = tmp_path / "run"
    for r in range(4):
        procs = _procs(100 + r, 1001.0, 0.3, 0.01, n=8)
        if r == 3:
            procs = [p for p in procs if p["time"] < d_at[0]]
            procs += [{**procs[-1], "time": t, "state": "D", "changed": k == 0} for k, t in enumerate(d_at)]
        write_events(run, r, [start("s1", t=999.0, world_size=4, pid=100 + r,
                                    parallel={"parallel_mode": "data_parallel"}), *procs])
        write_rank(run, r, steps(1, rows_to, t0=1000.0, dt=1.0, step_time=1.0, loss=1.0))
    store = read_once(str(run)).snapshot()
    hangs = [v.ranks for v in diagnose(store) if v.kind == "hang"]
    assert hangs == ([[3]] if held else []), hangs
    from mstop.engine.figures import Options
    from mstop.engine.health import evaluate
    from mstop.engine.rules import Rules
    stopped = [a.rank for a in evaluate(store, Rules(), Options(clock=lambda: 1037.0)) if a.kind == "stopped_rank"]
    assert stopped == ([3] if held else []), stopped

COLLECTIVE = [f"_exec_pip ({SITE}/mindspore/common/api.py:2432)", "train (/job/train.py:30)",
              "<module> (/job/train.py:40)"]
INPUT = [[f"wait ({STDLIB}/threading.py:320)", f"_get_next ({SITE}/mindspore/dataset/engine/iterators.py:150)",
          "<module> (/job/train.py:40)"], ["__getitem__ (/job/data.py:12)", f"run ({STDLIB}/threading.py:975)"]]
SAVE = [f"save_checkpoint ({SITE}/mindspore/train/serialization.py:300)", "<module> (/job/train.py:40)"]


def _stuck_run(tmp_path, places: dict[int, list[list[str]]], reason: str):
    """Four ranks stepping each second to t=1029, then each rank's dump (``reason``) at t=1036 with its
    threads' frames from ``places``."""
    from tests.helpers.runs import start, steps, write_events, write_rank

    run = tmp_path / "run"
    for r in range(4):
        dump = {"time": 1036.0, "kind": "stack", "rank": r, "pid": 100 + r, "source": "witness", "reason": reason,
                "step": 30, "since": 1029.0, "limit": 60.0,
                "stacks": [{"thread": f"0x{i}", "current": False, "frames": t} for i, t in enumerate(places[r])]}
        write_events(run, r, [start("s1", t=999.0, world_size=4, pid=100 + r,
                                    parallel={"parallel_mode": "data_parallel"}),
                              *_procs(100 + r, 1000.0, 0.3, 0.01, n=7), dump])
        write_rank(run, r, steps(1, 30, t0=1000.0, dt=1.0, step_time=1.0, loss=1.0))
    return [v for v in diagnose(read_once(str(run)).snapshot()) if v.kind == "hang"]


@pytest.mark.parametrize("reason", ["asked", "timeout"])
def test_a_first_look_names_the_rank_apart_as_the_timed_dump_does(tmp_path, reason):
    """Issue 60, item 1: rank 2's user's ``__getitem__`` blocks its input while ranks 0, 1, 3 wait in their
    graph's collective: the witnesses' first looks (``asked``, seconds into the silence) name rank 2 and the
    kind ``input`` as the dumps at the step's limit do."""
    places = {r: [COLLECTIVE] for r in range(4)}
    places[2] = INPUT
    (v,) = _stuck_run(tmp_path, places, reason)
    assert v.ranks == [2] and v.evidence["kind"] == "input", v
    assert v.evidence["frame"].startswith("__getitem__ (job/data.py:12)"), v
    assert v.evidence["stacks"][0] == {"ranks": [0, 1, 3], "frame": "_exec_pip (mindspore/common/api.py:2432)",
                                       "kind": "collective"}


@pytest.mark.parametrize("reason, hang", [("asked", False), ("timeout", True)])
def test_every_rank_at_one_place_is_a_hang_only_at_the_steps_limit(tmp_path, reason, hang):
    """Every rank writing its checkpoint a few steps' time: the first looks show one place and name no hang
    (every rank's checkpoint looks the same); the same at the step's limit is a hang that names no rank."""
    got = _stuck_run(tmp_path, {r: [SAVE] for r in range(4)}, reason)
    assert bool(got) == hang, got
    if hang:
        assert got[0].ranks == [] and "no rank stands apart" in got[0].words and got[0].evidence["kind"] == "io"


@pytest.mark.parametrize("error, dumped_after, hang", [
    ("RuntimeError: injected failure at step 30", True, False),  # waits for a peer already dead: its cascade
    ("RuntimeError: injected failure at step 30", False, True),  # the dump came first: the hang stands
    ("EI0002: The wait execution of the Notify register times out", True, True)])  # a timeout is no root death
def test_a_dump_taken_after_a_peers_own_death_is_its_cascade_not_a_hang(tmp_path, error, dumped_after, hang):
    """Rank 1 raises at step 30 and rank 0, still in its AllReduce, is dumped by its witness before msrun ends
    it (a loaded machine: seconds): rank 0 waits for the dead rank, which ``root_cause`` names; no
    ``hang`` comes before it (a real relaunch loop in CI was told a hang first). A dump taken before the death,
    or after a death that was itself a collective's timeout (a cascade), still tells a hang."""
    from tests.helpers.runs import start, steps, write_events, write_rank

    run = tmp_path / "run"
    died = 1033.0 if dumped_after else 1040.0
    for r in range(2):
        ev = [start("s1", t=999.0, world_size=2, pid=100 + r, parallel={"parallel_mode": "data_parallel"}),
              *_procs(100 + r, 1000.0, 0.3, 0.01, n=7)]
        if r == 0:
            ev.append({"time": 1036.0, "kind": "stack", "rank": 0, "pid": 100, "source": "witness", "reason": "timeout",
                       "step": 30, "since": 1029.0, "limit": 60.0,
                       "stacks": [{"thread": "0x0", "current": True, "frames": COLLECTIVE}]})
        else:
            ev.append({"time": died, "kind": "abort", "step": 29, "error": error})
        write_events(run, r, ev)
        write_rank(run, r, steps(1, 29, t0=1000.0, dt=1.0, step_time=1.0, loss=1.0))
    got = diagnose(read_once(str(run)).snapshot())
    assert ("hang" in [v.kind for v in got]) == hang, got
    if not hang:
        assert got[0].kind == "root_cause" and got[0].ranks == [1], got


def test_a_ranks_cpu_a_step_is_read_over_its_steps_not_its_compilation(tmp_path):
    """Every rank compiles 40 s at a core's pace, then steps each second: ranks 0-2 busy 0.1 s a step, rank 3
    0.4 s. Thirty seconds into the steps, the CPU a step is read from the first row on (compilation's CPU is
    no step's): rank 3 the compute straggler at 0.4 s a step. Over the last 60 s of samples, compilation's
    included, it read 0.7 against 0.55 s a step: nobody (a real job in CI, 0.078 s for 0.15)."""
    from tests.helpers.runs import start, steps, write_events, write_rank

    run = tmp_path / "run"
    for r in range(4):
        busy = 0.4 if r == 3 else 0.1
        procs = [{"time": 960.0 + 5 * k, "kind": "proc", "pid": 100 + r, "state": "R",
                  "cpu_s": round(min(5 * k, 40) + max(0, 5 * k - 40) * busy, 3), "rss": 1 << 30, "threads": 40,
                  "run_delay_s": 0.0, "changed": False} for k in range(15)]
        write_events(run, r, [start("s1", t=959.0, world_size=4, pid=100 + r,
                                    parallel={"parallel_mode": "data_parallel"}), *procs])
        write_rank(run, r, steps(1, 30, t0=1001.0, dt=1.0, step_time=1.0, loss=1.0))
    (v,) = [v for v in diagnose(read_once(str(run)).snapshot()) if v.kind == "compute_straggler"]
    assert v.ranks == [3] and v.evidence["rank_cpu_s_per_step"] == pytest.approx(0.4, abs=0.02), v
    assert v.evidence["median_cpu_s_per_step"] == pytest.approx(0.1, abs=0.02), v


def test_a_held_host_straggler_is_not_dropped_sooner_by_its_relaxed_thresholds():
    """A rank waiting for a CPU half the time, running 1.35 x its peers' CPU (its slow host's own overhead): a
    host straggler at the full thresholds, and held under the relaxed ones (the exclusion of a rank slow by its
    own demand stays at its full thresholds: relaxed, it dropped the verdict it was to keep)."""
    g = peers(4, 1.0, cpu=0.2, delay=0.02)
    g.cpu[1], g.delay[1] = 0.27, 0.5
    assert [v.ranks for v in diagnosis.host_verdicts(g)] == [[1]]
    assert [v.ranks for v in diagnosis.host_verdicts(g, diagnosis.RELAX)] == [[1]]
