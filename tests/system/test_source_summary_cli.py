"""Following a live run directory, and ``mstop summary`` end to end as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from mstop.commands.summary import KEYS
from tests.helpers.common import ROOT
from tests.helpers.runs import start, steps, write_events, write_rank


def summary(*args, cwd=ROOT, timeout=120):
    return subprocess.run([sys.executable, "-m", "mstop", "summary", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def test_sixty_four_ranks_and_hostile_names(tmp_path):
    for r in range(64):
        write_rank(tmp_path, r, steps(1, 30, loss=1.0, step_time=0.5, tokens=100))
    for name in ("rankfoo.csv", "rank007.csv", "rank1.csv.bak", "notes.txt", "rank-1.csv"):
        (tmp_path / name).write_text("time,step\n1,1\n")
    proc = summary(tmp_path, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["ranks"] == 64 and out["rows"] == 64 * 30 and out["step"] == 30 and out["bad_rows"] == 0
    assert out["tokens_per_s"] == 200.0


def test_summary_json_has_exactly_the_documented_keys(tmp_path):
    write_events(tmp_path, 0, [start("A", t=1000.0, flops_per_token=6.0, world_size=1, peak_flops=1000.0),
                               {"time": 1010.0, "kind": "checkpoint", "step": 10, "path": "ck/10.ckpt"},
                               {"time": 1200.0, "kind": "end", "session": "A"}])
    write_rank(tmp_path, 0, steps(1, 10, session="A", loss=lambda s: 10.0 / s, step_time=2.0, data_wait=0.5,
                                  tokens=100, mem_peak=2e9, mem_total=8e9))
    with open(tmp_path / "rank0.csv", "a") as f:
        f.write("garbage line\n1,2,3\n")
    proc = summary(tmp_path, "--json", "--smoothing", "0")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert tuple(out) == KEYS
    (dx,) = out.pop("diagnosis")  # issue 59: its verdicts are tested in test_diagnosis*.py: here, its shape
    assert (dx["kind"], dx["ranks"], dx["evidence"]["window"], dx["since"]) == (
        "healthy", [], {"first_step": 2, "last_step": 10}, {"step": 2, "time": None}), dx  # 25 % input wait, but
    assert dx["words"].startswith("healthy: nothing slows the job")  # only in its pipeline's first 10 rows
    g = out.pop("goodput")  # its buckets are tested in tests/test_goodput.py: here, that they add up
    assert sum(g[k] for k in ("productive", "input_wait", "compile", "recomputed", "checkpoint", "stalled",
                              "down", "finished_early")) == pytest.approx(g["wall"], abs=0.01)
    assert out == {
        "run_dir": str(tmp_path), "ranks": 1, "step": 10, "rows": 10, "bad_rows": 2, "resets": 0,
        "segments": 1, "repeated_steps": 0, "loss": 1.0, "loss_ema": 1.0, "tokens_per_s": 50.0,
        "mfu": pytest.approx(6.0 * 50.0 / 1000.0), "mem_headroom": 0.75, "data_wait_frac": 0.25,
        "status": "finished", "last_checkpoint": {"step": 10, "time": 1010.0, "path": "ck/10.ckpt"},
        "alerts": [],  # finished cleanly: no longer starving (see tests/test_health.py)
        "stragglers": [], "dropped_rows": 0, "bad_events": 0, "writer_errors": [], "refused_files": {},
        # ... and its history has no incident: it waited 25 % on input, but only in its first 10 steps (the
        # pipeline fills after compilation: health rules data_wait_warmup)
        "incidents": [],
        "samples_per_s": None, "source": None,  # no samples column; a writer's run, not a MindFormers log
        "profile": None,  # no profile was taken
        "error_line": None, "log_path": None,  # finished; its output went to no file the writer could name
        "devices": None,  # no npu-smi here: no devices file
        "culprit": None,  # finished: nothing to lay at a rank
        "processes": {},  # written without exit witnesses (no proc or exit events)
        "goodput_definition": 4,  # each row classified once (39); never backwards (40); finished_early (58)
        "log_refused": None,  # no file named as its log was refused (issue 40)
        "refused_cells": {},  # no cell a real step cannot have (issue 40)
        "notes": [],  # nothing the files made mstop say (issue 58)
        "alert_history": [],  # no monitor or export routed its alerts (issue 61)
        # its file written now, its rows dated 1970: the writing host's clock reads 56 years behind
        "clocks": {"job_ahead_s": out["clocks"]["job_ahead_s"], "ahead_s": {"0": out["clocks"]["job_ahead_s"]},
                   "reference_rank": 0, "ranks_ahead_s": {},
                   "notes": ["rank 0's clock is over 10 years behind this machine (file times): ages use file times"]},
    }
    assert out["clocks"]["job_ahead_s"] < -50 * 365 * 86400


def test_summary_table_for_people_shows_markup_literally(tmp_path):
    write_rank(tmp_path, 0, steps(1, 3, loss=0.5))
    (tmp_path / "rank[bold red]x.csv").write_text("x")
    proc = summary(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "tokens/s" in proc.stdout and "0.5" in proc.stdout and "rows read" in proc.stdout
    assert "rank[bold red]x.csv" in proc.stdout  # listed as ignored, shown literally


def test_summary_missing_directory_exits_2(tmp_path):
    proc = summary(tmp_path / "nope", "--json")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "no such directory" in proc.stderr and "--wait" in proc.stderr


def test_summary_wait_waits_for_the_directory(tmp_path):
    run = tmp_path / "later"
    p = subprocess.Popen([sys.executable, "-m", "mstop", "summary", str(run), "--json", "--wait", "--poll", "0.05"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    assert p.poll() is None
    write_rank(run, 0, steps(1, 2, loss=1.0))
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err and json.loads(out)["rows"] == 2


def test_summary_usage_errors_exit_2(tmp_path):
    proc = summary(tmp_path, "--poll", "-1")
    assert proc.returncode == 2 and "must be positive" in proc.stderr


@pytest.mark.slow
def test_real_mindspore_run_summarised(tmp_path):
    pytest.importorskip("mindspore", reason="mindspore not installed: pip install -e '.[mindspore]'")
    run = tmp_path / "run"
    subprocess.run([sys.executable, "examples/train_tiny_lm.py", "--run-dir", str(run), "--ranks", "2", "--steps",
                    "20", "--dim", "16", "--layers", "1", "--seq-len", "8", "--batch", "2", "--ckpt-every", "10"],
                   cwd=ROOT, check=True, capture_output=True, timeout=600)
    out = json.loads(summary(run, "--json").stdout)
    last = (run / "rank0.csv").read_text().splitlines()[-1].split(",")
    assert out["status"] == "finished" and out["ranks"] == 2 and out["rows"] == 40 and out["step"] == 20
    assert out["loss"] == float(last[3]) and out["tokens_per_s"] > 0 and out["mfu"] is None
    assert 0 < out["mem_headroom"] < 1 and out["last_checkpoint"]["step"] == 20










