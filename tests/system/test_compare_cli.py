"""``mstop compare`` on generated runs with known figures: exact changes, noise, the equal-step trap, bad input."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest

from mstop.commands.compare import LOSS_HALF_WIDTH, WARMUP_STEPS
from tests.helpers.common import ROOT
from tests.helpers.runs import start, steps, write_events, write_rank


def make(run, *, step_time=0.1, n=300, first=1, ranks=2, loss=lambda s: 5.0 / s ** 0.3, data_wait=0.01,
         mem=True, t0=1000.0, session="s1", mode="a", **start_fields):
    for r in range(ranks):
        fields = {"run_name": run.name, "world_size": ranks, "flops_per_token": 6e6, "peak_flops": 1e12,
                  "argv": ["train.py", "--bs", "8"], "env": {"MS_ALLOC_CONF": "enable_vmm:True"},
                  "git_commit": "abc123"} | start_fields
        write_events(run, r, [start(session, t=t0 - 1, **fields)])
        st = step_time(r) if callable(step_time) else step_time
        write_rank(run, r, steps(first, n, session=session, t0=t0, dt=st, loss=loss, step_time=st,
                                 data_wait=data_wait, tokens=4096, mem_peak=30e9 if mem else None,
                                 mem_total=64e9 if mem else None), mode=mode)
    return run


def compare(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mstop", "compare", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def as_json(*args) -> dict:
    out = compare(*args, "--format", "json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def fig(result, i, key):
    return result["runs"][i]["figures"][key]


def test_exact_changes_against_the_baseline(tmp_path):
    base = make(tmp_path / "base", step_time=0.100, data_wait=0.010)
    fast = make(tmp_path / "fast", step_time=0.080, data_wait=0.010, argv=["train.py", "--bs", "16"],
                env={"MS_ALLOC_CONF": "enable_vmm:True", "MS_DEV_X": "1"}, git_commit="def456")
    res = as_json(base, fast)
    # default window: the steps both cover (1..300) minus the warm-up (max(20, 10 % of 300) = 30)
    assert res["steps"]["first"] == 31 and res["steps"]["last"] == 300
    assert "warm-up skipped: the first 30" in res["steps"]["how"]
    assert res["runs"][0]["baseline"] and res["runs"][0]["label"] == "base" and res["runs"][1]["label"] == "fast"
    assert fig(res, 0, "step_time")["value"] == pytest.approx(0.1)
    assert fig(res, 1, "step_time")["change_pct"] == pytest.approx(-20.0, abs=1e-4)
    assert fig(res, 0, "tokens_per_s")["value"] == pytest.approx(40960, rel=1e-6)
    assert fig(res, 1, "tokens_per_s")["change_pct"] == pytest.approx(25.0, abs=1e-4)
    # MFU = tokens/s x flops per token / (world x peak): 40960 x 6e6 / 2e12
    assert fig(res, 0, "mfu")["value"] == pytest.approx(0.12288, rel=1e-6)
    assert fig(res, 1, "mfu")["change_pct"] == pytest.approx(25.0, abs=1e-4)
    assert fig(res, 1, "data_wait_frac")["change_pct"] == pytest.approx(25.0, abs=1e-3)  # same wait, shorter steps
    assert fig(res, 1, "mem_headroom")["change_pct"] == pytest.approx(0.0)
    assert fig(res, 0, "mem_peak")["value"] == pytest.approx(30e9, rel=1e-6)
    assert fig(res, 1, "loss_at")["change_pct"] == pytest.approx(0.0)
    assert not fig(res, 1, "step_time")["within_noise"]  # one member each: no noise to judge by
    assert res["runs"][1]["changes"] == ["argv: --bs 8 -> --bs 16", "env MS_DEV_X: unset -> 1",
                                         "git_commit: abc123 -> def456"]
    table = compare(base, fast, "--loss-at", 200)
    assert table.returncode == 0
    text = table.stdout
    assert "(-20.0 %)" in text and "(+25.0 %)" in text and "loss at step 200" in text
    assert "argv: --bs 8 -> --bs 16" in text and "(baseline)" in text


def test_groups_of_repeats_and_noise(tmp_path):
    b1 = make(tmp_path / "base-1", step_time=0.100)
    b2 = make(tmp_path / "base-2", step_time=0.110)  # the baseline's repeats differ by 10 ms
    same = make(tmp_path / "same", step_time=0.104)  # 1 ms from the baseline's mean: noise
    fast = make(tmp_path / "fast", step_time=0.080)
    res = as_json(f"{b1},{b2}", same, fast)
    base = fig(res, 0, "step_time")
    assert res["runs"][0]["members"] == [str(b1), str(b2)] and res["runs"][0]["label"] == "base-1,base-2"
    assert base["value"] == pytest.approx(0.105) and base["spread"] == pytest.approx(0.010)
    assert fig(res, 1, "step_time")["within_noise"] is True
    assert fig(res, 2, "step_time")["within_noise"] is False
    assert fig(res, 2, "step_time")["change_pct"] == pytest.approx(100 * (0.080 - 0.105) / 0.105, abs=1e-3)
    text = compare(f"{b1},{b2}", same, fast).stdout
    assert "within noise" in text and "[2 repeats]" in text


def test_the_equal_step_trap(tmp_path):
    """Same loss at every step, twice the throughput: at equal steps the losses are equal; at equal wall
    time they are not (this run data sets the trap: the second assertion shows it)."""
    slow = make(tmp_path / "slow", step_time=0.10, n=400)
    fast = make(tmp_path / "fast", step_time=0.05, n=400)
    res = as_json(slow, fast)
    assert fig(res, 1, "loss_at")["change_pct"] == pytest.approx(0.0, abs=1e-9)
    assert fig(res, 1, "tokens_per_s")["change_pct"] == pytest.approx(100.0, abs=1e-3)
    # the trap: at wall time t0 + 15 s the slow run is at step 150, the fast one at step 300
    rows = {name: list(csv.DictReader(open(tmp_path / name / "rank0.csv"))) for name in ("slow", "fast")}
    at = {name: min(rs, key=lambda r: abs(float(r["time"]) - 1015.0)) for name, rs in rows.items()}
    assert float(at["slow"]["loss"]) != pytest.approx(float(at["fast"]["loss"]), rel=0.05)


def test_formats_agree(tmp_path):
    base = make(tmp_path / "base", step_time=0.1)
    other = make(tmp_path / "other", step_time=0.12)
    md = compare(base, other, "--format", "markdown").stdout
    lines = md.splitlines()
    header = next(i for i, x in enumerate(lines) if x.startswith("| run |"))
    assert lines[header] == ("| run | median step time | tokens/s | samples/s | MFU | min headroom | peak memory "
                             "| data wait | loss at step 300 | goodput | comm share | compute share | idle share |")
    assert lines[header + 2].startswith("| base (baseline) | 100.0 ms | 41.0 k |")
    assert lines[header + 3].startswith("| other | 120.0 ms (+20.0 %) |")
    rows = list(csv.DictReader(io.StringIO(compare(base, other, "--format", "csv").stdout)))
    assert [r["run"] for r in rows] == ["base", "other"] and rows[0]["baseline"] == "1"
    assert float(rows[1]["step_time_change_pct"]) == pytest.approx(20.0, abs=1e-3)
    assert rows[1]["first_step"] == "31" and rows[1]["last_step"] == "300"


def test_explicit_window_and_loss_window(tmp_path):
    base = make(tmp_path / "base", loss=lambda s: float(s))  # loss = step: the mean over N ± 10 is N
    other = make(tmp_path / "other", loss=lambda s: float(s) * 2)
    res = as_json(base, other, "--steps", "100:200", "--loss-at", 150)
    assert res["steps"]["first"] == 100 and res["steps"]["last"] == 200
    assert res["loss_at"] == {"step": 150, "first": 150 - LOSS_HALF_WIDTH, "last": 150 + LOSS_HALF_WIDTH}
    assert fig(res, 0, "loss_at")["value"] == pytest.approx(150.0)
    assert fig(res, 1, "loss_at")["change_pct"] == pytest.approx(100.0)


def test_bad_input_gets_messages_not_tracebacks(tmp_path):
    base = make(tmp_path / "base", n=300)
    short = make(tmp_path / "short", n=150)
    late = make(tmp_path / "late", first=500, n=600)
    nomem = make(tmp_path / "nomem", mem=False, flops_per_token=None)
    empty = tmp_path / "empty"
    write_rank(empty, 0, [])  # a header, no rows
    # no steps in common: said, exit 2
    out = compare(base, late)
    assert out.returncode == 2 and "no steps that every run covers" in out.stderr and "Traceback" not in out.stderr
    # a window past one run's end: its cells say so, the others have figures
    res = as_json(base, short, "--steps", "200:300")
    assert fig(res, 1, "step_time")["value"] is None
    assert fig(res, 1, "step_time")["message"] == "no data in 200:300"
    assert any("no data in 200:300" in n for n in res["runs"][1]["notes"])
    res = as_json(base, short, "--steps", "100:300")
    assert any("fewer steps than asked: ends at step 150" in n for n in res["runs"][1]["notes"])
    text = compare(base, late, "--steps", "400:500").stdout
    assert "no data in 400:500" in text
    # a run without memory columns or MFU inputs
    res = as_json(base, nomem)
    assert fig(res, 1, "mem_headroom")["message"] == "n/a: no memory columns"
    assert fig(res, 1, "mfu")["message"].startswith("n/a: no FLOPs per token")  # names what is missing
    # an empty run (files, no rows) beside a real one: the window comes from the runs that have rows
    res = as_json(base, empty)
    assert fig(res, 1, "tokens_per_s")["message"] == "empty run: no rows"
    # a missing directory and a bad --steps: usage errors, exit 2
    out = compare(base, tmp_path / "nope")
    assert out.returncode == 2 and "no such directory" in out.stderr
    out = compare(base, short, "--steps", "300:100")
    assert out.returncode == 2 and "expected A:B" in out.stderr


def test_a_restart_inside_the_window_is_noted(tmp_path):
    base = make(tmp_path / "base", n=300)
    resumed = make(tmp_path / "resumed", n=200)
    make(resumed, first=150, n=300, session="s2", t0=2000.0, mode="a")  # resumed from a step-150 checkpoint
    res = as_json(base, resumed)
    notes = res["runs"][1]["notes"]
    assert any("restart inside the window at step 150" in n for n in notes)
    assert fig(res, 1, "step_time")["change_pct"] == pytest.approx(0.0, abs=1e-6)  # repeated rows are not counted


def test_short_runs_skip_no_warmup(tmp_path):
    a = make(tmp_path / "a", n=WARMUP_STEPS)
    b = make(tmp_path / "b", n=WARMUP_STEPS)
    res = as_json(a, b)
    assert res["steps"]["first"] == 1 and "none skipped" in res["steps"]["how"]


def test_a_repeat_without_a_figure_is_counted_not_averaged_as_zero(tmp_path):
    a = make(tmp_path / "a", step_time=0.1)
    b = make(tmp_path / "b", step_time=0.1, mem=False)  # this repeat recorded no memory
    c = make(tmp_path / "c", step_time=0.1)
    res = as_json(f"{a},{b}", c)
    head = fig(res, 0, "mem_headroom")
    assert head["message"] == "1 of 2 repeats" and head["spread"] is None
    assert head["value"] == pytest.approx(fig(res, 1, "mem_headroom")["value"])
    assert fig(res, 0, "step_time")["spread"] == pytest.approx(0.0)


