"""Each health rule on generated runs: a positive and a negative case, and the exit codes of --fail-on."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
import time

from mstop.engine.figures import Options
from mstop.engine.health import KINDS, Health
from tests.helpers.common import ROOT
from tests.helpers.health_common import (
    healthy,
    load,
    noisy,
)
from tests.helpers.runs import steps, write_rank


def summary(*args):
    return subprocess.run([sys.executable, "-m", "mstop", "summary", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_fail_on_exit_codes(tmp_path):
    t0 = time.time() - 405  # the summary runs on the real clock: the run must be live, not stalled
    last = healthy(tmp_path, ranks=2, t0=t0)
    write_rank(tmp_path, 1, steps(401, 430, t0=last, data_wait=0.5, step_time=1.0, loss=1.0))
    write_rank(tmp_path, 0, steps(401, 430, t0=last, data_wait=0.01, step_time=1.0, loss=1.0))  # not lagging
    assert summary(tmp_path, "--json").returncode == 0
    assert summary(tmp_path, "--json", "--fail-on", "alert").returncode == 1
    assert summary(tmp_path, "--json", "--fail-on", "data_starvation,nan_loss").returncode == 1
    assert summary(tmp_path, "--json", "--fail-on", "nan_loss").returncode == 0
    assert summary(tmp_path, "--json", "--fail-on", "alert", "--data-wait", "0.9").returncode == 0
    bad = summary(tmp_path, "--fail-on", "nan")
    assert bad.returncode == 2 and "unknown kinds ['nan']" in bad.stderr
    out = json.loads(summary(tmp_path, "--json").stdout)
    assert [(a["kind"], a["rank"]) for a in out["alerts"]] == [("data_starvation", 1)]
    assert set(out["alerts"][0]) == {"kind", "rank", "step", "message"}
    assert KINDS[:12] == ("nan_loss", "loss_spike", "grad_spike", "overflow", "oom_risk", "data_starvation",
                          "throughput_drop", "stalled", "no_checkpoint", "straggler", "dead_rank", "lagging_rank")
    assert not math.isnan(out["loss"])


def test_a_wrong_setting_in_mstop_toml_is_a_clear_usage_error(tmp_path):
    healthy(tmp_path, ranks=1, n=10)
    (tmp_path / "mstop.toml").write_text("[health]\nspike_kk = 3\n")
    proc = summary(tmp_path, "--json")
    assert proc.returncode == 2 and "unknown health settings ['spike_kk']" in proc.stderr and proc.stdout == ""


def test_no_false_alert_on_a_healthy_noisy_run_of_1024_ranks(tmp_path):
    t0 = 1000.0
    for r in range(1024):
        rng = random.Random(r)
        write_rank(tmp_path, r, steps(1, 130, t0=t0, dt=1.0, loss=noisy(r),
                                      step_time=lambda s, g=rng: 1.0 + g.gauss(0, 0.02),
                                      data_wait=lambda s, g=rng: abs(g.gauss(0.02, 0.01)), tokens=4096,
                                      mem_peak=lambda s, g=rng: 50e9 + g.gauss(0, 1e8), mem_total=64e9))
    store = load(tmp_path)
    assert store.rows == 1024 * 130
    assert Health().alerts(store, Options(clock=lambda: t0 + 131)) == []
    assert Health().incidents(store, Options(clock=lambda: t0 + 131)) == []  # nor anything in its history


