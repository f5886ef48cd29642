"""A MindFormers job watched from its own logs (issue 15, part 2): output/log/rank_<R>/info.log read as a run.

The kit's captured info.log is a real 60-step Trainer run; the variants it lacks (sink mode, no lr, MoE/MTP
losses, no throughput, restarts, errors, rotation) are lines CONSTRUCTED from MindFormers' format strings
(tests/helpers/mflines.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mstop.engine.figures import Options, status
from mstop.sources import read_once
from tests.helpers.common import ROOT
from tests.helpers.mflog_common import KIT, _finished_log, mf_output, needs_kit


def summary(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mstop", "summary", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


@needs_kit
@pytest.mark.parametrize("where", ["output", "output/log", "output/log/rank_0"])
def test_summary_json_on_a_mindformers_output_log_or_rank_folder(tmp_path, where):
    mf_output(tmp_path, {0: KIT.read_text()})
    proc = summary(tmp_path / where, "--json")
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)
    assert (s["rows"], s["step"], s["status"], s["bad_rows"]) == (60, 60, "finished", 0)
    assert s["loss"] == pytest.approx(5.545381, abs=1e-6)  # MFLossMonitor's last loss
    assert s["source"] == {"kind": "mindformers log", "cannot_give": ["memory", "data wait", "heartbeats"]}
    text = summary(tmp_path / where).stdout
    assert "mindformers log: no memory, data wait, heartbeats" in text and "samples/s" in text


def test_training_over_is_finished_and_an_error_after_the_last_step_is_failed(tmp_path):
    log = _finished_log()
    log.info(".........Training Over!.............")
    store = read_once(str(mf_output(tmp_path / "a", {0: log.text()})))
    assert status(store, Options()) == "finished"

    log = _finished_log()
    log.record("Something went wrong in the graph", level=40, func="run", path="mindformers/run.py")
    log.lines += ["Traceback (most recent call last):", '  File "run.py", line 3, in <module>',
                  "RuntimeError: Allocate memory failed"]
    out = mf_output(tmp_path / "b", {0: log.text()})
    store = read_once(str(out))
    assert status(store, Options()) == "failed"
    proc = summary(out)
    assert "failed" in proc.stdout and "Something went wrong in the graph" in proc.stdout
    assert "RuntimeError: Allocate memory failed" in proc.stdout

    log = _finished_log()  # a bare traceback (no ERROR line) is a failure too, with its exception shown
    log.lines += ["Traceback (most recent call last):", '  File "x.py", line 1', "KeyError: 'input_ids'"]
    store = read_once(str(mf_output(tmp_path / "c", {0: log.text()})))
    assert status(store, Options()) == "failed"
    assert "KeyError: 'input_ids'" in store.ranks[0].aborts[-1]["error"]


def test_a_log_with_control_codes_shows_none(tmp_path):
    log = _finished_log()
    log.record("bad \x1b[2J\x1b]0;pwned\x07 thing", level=40)
    out = mf_output(tmp_path, {0: log.text()})
    proc = summary(out)
    assert "\x1b" not in proc.stdout and "\\x1b[2J" in proc.stdout


@needs_kit
async def test_the_monitor_on_a_mindformers_log_says_what_it_is_and_agrees_with_summary(tmp_path):
    """What the screen shows for a log: the source and what it cannot give, samples/s (no tokens), MFU from
    MindFormers' TFLOP/s with --peak-tflops equal to summary's, memory and data wait said to be absent."""
    from mstop.app import MonitorApp
    from tests.helpers.app_common import screen_lines, settle

    out = mf_output(tmp_path / "job", {0: KIT.read_text()})
    s = json.loads(summary(out, "--json", "--peak-tflops", "0.1").stdout)
    last = read_once(str(out)).ranks[0].col("time")[-1]
    app = MonitorApp(str(out), follow=False, peak_tflops=0.1, clock=lambda: float(last) + 30)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = "\n".join(screen_lines(app))
    assert "mindformers log: no memory, data wait" in screen and "status FINISHED" in screen
    assert f"MFU {100 * s['mfu']:.1f} %" in screen and f"samples/s {s['samples_per_s']:.4g}" in screen
    assert "not in a mindformers log" in screen and "data wait: not in a mindformers log" in screen
    assert "step 60 / 60" in screen


