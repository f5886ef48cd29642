"""Each health rule on generated runs: a positive and a negative case, and the exit codes of --fail-on."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mstop.engine import figures
from mstop.engine.figures import Options
from mstop.engine.health import Health, Rules, evaluate
from tests.helpers.health_common import (
    healthy,
    load,
)
from tests.helpers.runs import start, steps, write_events, write_rank


def kinds(run, now: float, rules: Rules | None = None) -> dict[str, list]:
    out: dict[str, list] = {}
    for a in evaluate(load(run), rules or Rules(), Options(clock=lambda: now)):
        out.setdefault(a.kind, []).append(a)
    return out


def test_healthy_noisy_run_raises_nothing(tmp_path):
    last = healthy(tmp_path)
    assert kinds(tmp_path, last + 5) == {}
    store = load(tmp_path)
    assert Health().incidents(store, Options(clock=lambda: last + 5)) == []


def test_nan_loss_names_the_first_rank_and_step(tmp_path):
    last = healthy(tmp_path, ranks=3)
    write_rank(tmp_path, 2, steps(401, 405, t0=last, loss=lambda s: "nan" if s == 403 else 1.0, step_time=1.0))
    write_rank(tmp_path, 1, steps(401, 405, t0=last, loss=lambda s: "inf" if s == 404 else 1.0, step_time=1.0))
    (a,) = kinds(tmp_path, last + 6)["nan_loss"]
    assert (a.rank, a.step) == (2, 403) and "on rank 2 (and on 1 more rank)" in a.message
    empty = tmp_path / "empty"
    healthy(empty)
    write_rank(empty, 0, steps(401, 402, t0=last, loss=None, step_time=1.0))  # empty cells: missing, not NaN
    assert "nan_loss" not in kinds(empty, last + 3)


def test_nan_loss_stays_active_after_the_run_recovers(tmp_path):
    last = healthy(tmp_path, ranks=1)
    write_rank(tmp_path, 0, steps(401, 401, t0=last, loss="nan", step_time=1.0))
    health = Health()
    assert [a.kind for a in health.alerts(load(tmp_path), Options(clock=lambda: last + 2))] == ["nan_loss"]
    store = load(tmp_path)
    store.ranks[0].nonfinite.clear()  # as if the evidence were gone: the alert must stay, hours later
    later = [a.kind for a in health.alerts(store, Options(clock=lambda: last + 10_000))]
    assert later == ["nan_loss", "stalled"]


@pytest.mark.parametrize("column, kind", [("loss", "loss_spike"), ("grad_norm", "grad_spike")])
def test_spikes(tmp_path, column, kind):
    last = healthy(tmp_path, ranks=1)
    write_rank(tmp_path, 0, steps(401, 405, t0=last, **{column: lambda s: 50.0 if s == 403 else 1.0},
                                  step_time=1.0))
    (a,) = kinds(tmp_path, last + 6)[kind]
    assert a.step == 403 and a.rank is None and "standard deviations above" in a.message
    early = tmp_path / "early"  # the same jump during warm-up is no alert
    write_rank(early, 0, steps(1, 50, **{column: lambda s: 50.0 if s == 40 else 1.0}, step_time=1.0))
    assert kind not in kinds(early, 1000.0 + 51)


def test_overflow_n_of_m(tmp_path):
    last = healthy(tmp_path, ranks=1)
    write_rank(tmp_path, 0, steps(401, 420, t0=last, overflow=lambda s: int(s % 4 == 0), loss=1.0,
                                  loss_scale=lambda s: 2.0 ** (10 - (s - 400) // 4), step_time=1.0))
    (a,) = kinds(tmp_path, last + 21)["overflow"]
    assert a.message.startswith("5 overflows in the last 20 steps; loss scale now 32")
    few = tmp_path / "few"
    last = healthy(few, ranks=1)
    write_rank(few, 0, steps(401, 420, t0=last, overflow=lambda s: int(s % 5 == 0), loss=1.0, step_time=1.0))
    assert "overflow" not in kinds(few, last + 21)  # 4 of 20


def test_oom_risk_per_rank_and_per_host(tmp_path):
    for r in range(3):
        write_events(tmp_path, r, [start("s1", memory_source="device", host="n0")])
        write_rank(tmp_path, r, steps(1, 30, mem_peak=(61.5e9, 62.5e9, 40e9)[r], mem_total=64e9, step_time=1.0))
    alerts = kinds(tmp_path, 1032.0)["oom_risk"]
    assert [a.rank for a in alerts] == [1, 0]  # worst first: 2.3 % before 3.9 %
    host = tmp_path / "host"
    for r in range(2):  # two ranks on one host: 31 GB each of 64 GB is 3 % headroom for the host
        write_events(host, r, [start("s1", memory_source="host", host="n1")])
        write_rank(host, r, steps(1, 30, mem_peak=31e9, mem_total=64e9, step_time=1.0))
    (a,) = kinds(host, 1032.0)["oom_risk"]
    assert a.rank is None and a.message.startswith("host n1: memory headroom 3.1%")


def test_data_starvation_worst_first(tmp_path):
    last = healthy(tmp_path, ranks=4, data_wait=0.02)
    for r, dw in ((1, 0.3), (3, 0.5)):
        write_rank(tmp_path, r, steps(401, 430, t0=last, data_wait=dw, step_time=1.0, loss=1.0))
    for r in (0, 2):
        write_rank(tmp_path, r, steps(401, 430, t0=last, data_wait=0.02, step_time=1.0, loss=1.0))
    health = Health()
    alerts = [a for a in health.alerts(load(tmp_path), Options(clock=lambda: last + 31)) if a.kind == "data_starvation"]
    assert [a.rank for a in alerts] == [3, 1]


def test_throughput_drop(tmp_path):
    last = healthy(tmp_path, ranks=1)
    write_rank(tmp_path, 0, steps(401, 430, t0=last, step_time=2.0, tokens=100, loss=1.0))
    (a,) = kinds(tmp_path, last + 61)["throughput_drop"]
    assert "50% of the run's median 100" in a.message
    ok = tmp_path / "ok"
    last = healthy(ok, ranks=1)
    write_rank(ok, 0, steps(401, 430, t0=last, step_time=1.2, tokens=100, loss=1.0))
    assert "throughput_drop" not in kinds(ok, last + 31)


def test_a_resumed_sessions_warm_up_is_no_throughput_drop(tmp_path):
    """Issue 58, item 3: a resume's first rows (its input pipeline and caches warming up) are slower; the
    window over them fired a false ``throughput_drop``, live and in the history. A drop later in the resumed
    session is still seen."""
    from mstop.engine.health import Health

    last = healthy(tmp_path, ranks=1)
    t = last + 120  # killed, then resumed from step 300: its first 40 steps at half the pace
    write_rank(tmp_path, 0, steps(301, 340, t0=t, dt=2.0, session="s2", step_time=2.0, tokens=100, loss=1.0))
    now = t + 80
    assert "throughput_drop" not in kinds(tmp_path, now + 1)
    store = load(tmp_path)
    opts = Options(clock=lambda: now + 1)
    health = Health()
    assert not [i for i in health.incidents(store, opts, health.alerts(store, opts)) if i.kind == "throughput_drop"]
    later = t + 80  # then steady at full pace for 200 steps, then a real drop
    write_rank(tmp_path, 0, steps(341, 540, t0=later, dt=1.0, session="s2", step_time=1.0, tokens=100, loss=1.0))
    write_rank(tmp_path, 0, steps(541, 600, t0=later + 200, dt=2.0, session="s2", step_time=2.0, tokens=100,
                                  loss=1.0))
    assert "throughput_drop" in kinds(tmp_path, later + 200 + 121)


def test_stalled_and_no_checkpoint(tmp_path):
    write_events(tmp_path, 0, [start("s1", t=900.0)] + [
        {"time": 1000.0 + 100 * k, "kind": "checkpoint", "step": 100 * k, "path": f"c{k}"} for k in range(1, 4)])
    write_rank(tmp_path, 0, steps(1, 400, t0=1000.0, dt=1.0, step_time=1.0, loss=1.0))
    assert {"stalled", "no_checkpoint"}.isdisjoint(kinds(tmp_path, 1405.0))
    got = kinds(tmp_path, 1400.0 + 700.0)  # 700 s without a row: stalled; last checkpoint 1300: > 600 s
    assert "stalled" in got and got["no_checkpoint"][0].message.startswith("no new checkpoint for 0.2 h")
    never = tmp_path / "never"
    last = healthy(never, ranks=1)
    assert "no_checkpoint" not in kinds(never, last + 5)  # never saved one, no threshold set
    got = kinds(never, last + 5, Rules(no_checkpoint_s=60))
    assert got["no_checkpoint"][0].message.startswith("no checkpoint for")


def test_hold_time_keeps_an_alert_after_its_condition(tmp_path):
    last = healthy(tmp_path, ranks=1)
    write_rank(tmp_path, 0, steps(401, 430, t0=last, data_wait=0.5, step_time=1.0, loss=1.0))
    health = Health(Rules(hold_s=60))
    assert any(a.kind == "data_starvation" for a in health.alerts(load(tmp_path), Options(clock=lambda: last + 31)))
    calm = tmp_path / "calm"
    healthy(calm, ranks=1)
    store = load(calm)
    assert any(a.kind == "data_starvation" for a in health.alerts(store, Options(clock=lambda: last + 60)))
    assert all(a.kind != "data_starvation" for a in health.alerts(store, Options(clock=lambda: last + 200)))


def test_config_file_and_flags(tmp_path):
    (tmp_path / "mstop.toml").write_text("[health]\ndata_wait = 0.5\nspike_k = 4\n")
    assert Rules.load([str(tmp_path)]).data_wait == 0.5
    assert Rules.load([str(tmp_path)], {"data_wait": 0.2}).data_wait == 0.2
    (tmp_path / "mstop.toml").write_text("[health]\ndata_wiat = 0.5\n")
    with pytest.raises(ValueError, match="unknown health settings"):
        Rules.load([str(tmp_path)])


def test_mixed_headers_and_late_ranks_raise_nothing_false(tmp_path):
    import csv as _csv

    healthy(tmp_path, ranks=2)
    # rank 2: a different header (no grad_norm, an extra column), late by 300 steps
    with open(tmp_path / "rank2.csv", "w", newline="") as f:
        w = _csv.writer(f)
        w.writerow(["time", "step", "loss", "step_time", "tokens", "session", "val_acc"])
        for s in range(300, 401):
            w.writerow([1000.0 + s, s, 3.0 * s ** -0.2, 1.0, 100, "x", 0.5])
    (tmp_path / "rank3.events.jsonl").write_text('{"time": 900, "kind": "start", "session": "never"}\n')
    store = load(tmp_path)
    assert sorted(store.rank_files) == [0, 1, 2]
    assert Health().alerts(store, Options(clock=lambda: 1405.0)) == []


def test_a_finished_job_only_keeps_what_its_history_shows(tmp_path):
    write_events(tmp_path, 0, [start("s1", t=900.0), {"time": 1500.0, "kind": "end", "session": "s1"}])
    write_rank(tmp_path, 0, steps(1, 300, t0=1000.0, dt=1.0, step_time=1.0, data_wait=0.5, tokens=100,
                                  loss=lambda s: "nan" if s == 250 else 1.0, mem_peak=63e9, mem_total=64e9))
    assert [a.kind for a in Health().alerts(load(tmp_path), Options(clock=lambda: 5000.0))] == ["nan_loss"]


@given(st.lists(st.one_of(st.floats(-1e6, 1e6), st.just(math.nan), st.just(math.inf),
                          # repeated values (a flat window), values far under the centre, subnormals: the sums'
                          # rounding must never hide a spike the window shows
                          st.sampled_from([0.1, 1.0, 2.25, 1e-300, 5e-324, -0.0]), st.floats(-1e-100, 1e-100)),
                min_size=0, max_size=400),
       st.integers(2, 40), st.floats(0.5, 8.0), st.integers(0, 60))
def test_the_history_spike_screen_finds_exactly_what_each_window_says(values, w, k, start):
    """The spike rule over a whole history (running sums screen, windows decide) fires on exactly the rows a
    window-by-window computation of the previous ``w`` finite values fires on."""
    x = np.array(values, dtype=np.float64)
    js, mean, z = figures.spike_rows(x, w, k, start)
    every = np.arange(max(start, w), len(x))  # the windows computed one by one, every row
    m, sd, n = figures.prev_window_stats(x, w, every)
    with np.errstate(invalid="ignore"):
        fires = np.isfinite(x[every]) & (n >= max(1, w // 2)) & (sd > 0) & (x[every] > m + k * sd)
    want = every[fires].tolist()
    assert js.tolist() == want
    assert np.all(z > k * (1 - 1e-9))


