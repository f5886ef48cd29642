"""Issue 26, MindFormers logs: lines shaped by accident or on purpose (impossible dates, numbers that do not
parse, steps of thousands of digits, MindFormers' marker words inside other messages, step 0 of 0, UTF-16,
rotations faster than the polls, copytruncate). One bad line is one bad row; nothing is a traceback; what
cannot be read is said. Lines are CONSTRUCTED from MindFormers 2.0.0's format strings (tests/helpers/mflines.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mstop.engine.store import Store
from mstop.sources.mflog import MfLogSource
from tests.helpers.common import ROOT, wait_for
from tests.helpers.mflines import Log


def mf_output(tmp_path: Path, text: str | bytes, rank: int = 0) -> Path:
    d = tmp_path / "output" / "log" / f"rank_{rank}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "info.log").write_bytes(text if isinstance(text, bytes) else text.encode())
    return tmp_path / "output"


def summary(path: Path, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "mstop", "summary", str(path), "--json", *args], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    return json.loads(out.stdout)


def table(path: Path) -> str:
    out = subprocess.run([sys.executable, "-m", "mstop", "summary", str(path)], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, env={**os.environ, "COLUMNS": "300"})
    assert out.returncode == 0, out.stderr
    return out.stdout


def thirty(**kw) -> Log:
    log = Log()
    log.info(".........Starting Training Model..........")
    for s in range(1, 31):
        log.step(1, 1, s, 30, 5.0 - s * 0.01, samples_per_s=100.0, **kw)
    return log


def replaced(log: Log, index: int, old: str, new: str) -> str:
    lines = list(log.lines)
    assert old in lines[index]
    lines[index] = lines[index].replace(old, new)
    return "".join(ln + "\n" for ln in lines)


def step_index(log: Log, step: int) -> int:
    return next(i for i, ln in enumerate(log.lines) if f"step:[{step:5d}/" in ln)


def test_a_timestamp_that_is_no_date_is_one_bad_row(tmp_path):
    log = thirty()
    i, j = step_index(log, 10), step_index(log, 20)
    date = log.lines[i][7:17]
    text = replaced(log, i, date, "2026-13-45")
    lines = text.splitlines()
    lines[j] = lines[j].replace(date, "2026-02-30")
    js = summary(mf_output(tmp_path, "\n".join(lines) + "\n"))
    assert (js["rows"], js["bad_rows"], js["step"]) == (28, 2, 30)


def test_a_number_that_does_not_parse_is_one_bad_row_cold_and_while_following(tmp_path):
    log = thirty()
    bad = replaced(log, step_index(log, 5), "loss:[", "loss:[1.2.3").replace("[1.2.3 ", "[1.2.3")
    js = summary(mf_output(tmp_path / "cold", bad))
    assert (js["rows"], js["bad_rows"], js["step"]) == (29, 1, 30)
    # followed: the bad line arrives first, then more steps; the rank keeps getting rows
    out = mf_output(tmp_path / "live", "".join(ln + "\n" for ln in log.lines[: step_index(log, 5)]))
    store = Store()
    src = MfLogSource(str(out), store, poll=0.05)
    src.follow()
    try:
        assert wait_for(lambda: store.rows == 4)
        with open(out / "log" / "rank_0" / "info.log", "a") as f:
            f.write(bad.splitlines()[step_index(log, 5)] + "\n")
            f.write("".join(ln + "\n" for ln in log.lines[step_index(log, 5) + 1:]))
        assert wait_for(lambda: store.rows == 29 and store.bad_rows == 1)
    finally:
        src.stop()


def test_steps_of_hundreds_and_thousands_of_digits_are_bad_rows(tmp_path):
    log = thirty()
    text = replaced(log, step_index(log, 7), "step:[    7/", "step:[" + "7" * 400 + "/")
    lines = text.splitlines()
    k = step_index(log, 8)
    lines[k] = lines[k].replace("step:[    8/", "step:[" + "8" * 5000 + "/")
    js = summary(mf_output(tmp_path, "\n".join(lines) + "\n"))
    assert (js["rows"], js["bad_rows"], js["segments"]) == (28, 2, 1)


def test_marker_words_inside_other_messages_start_and_end_nothing(tmp_path):
    """'Training Over!' and 'Starting Training Model' inside a config dump or a job's own message."""
    log = Log()
    log.info(".........Starting Training Model..........")
    for s in range(1, 16):
        log.step(1, 1, s, 30, 5.0, samples_per_s=100.0)
    log.info("the config: {'callbacks': 'stop when Training Over! is printed'}")
    log.info("user hook: Starting Training Model warm-up done")
    log.record("%s", "restart policy: Training Over! means done", level=30)
    for s in range(16, 31):
        log.step(1, 1, s, 30, 5.0, samples_per_s=100.0)
    js = summary(mf_output(tmp_path, log.text()))
    assert (js["rows"], js["segments"], js["repeated_steps"], js["status"]) == (30, 1, 0, "stalled")
    log.info(".........Training Over!.............")
    assert summary(mf_output(tmp_path, log.text()))["status"] == "finished"


def test_one_step_zero_of_zero_line_is_a_bad_row_not_a_restart(tmp_path):
    log = thirty()
    lines = list(log.lines)
    lines.insert(step_index(log, 15), lines[step_index(log, 15)].replace("Epoch:[  1/  1], step:[   15/   30]",
                                                                           "Epoch:[0/0], step:[0/0]"))
    js = summary(mf_output(tmp_path, "".join(ln + "\n" for ln in lines)))
    assert (js["rows"], js["bad_rows"], js["segments"], js["repeated_steps"]) == (30, 1, 1, 0)


def test_a_utf16_log_is_read_and_said(tmp_path):
    log = thirty()
    log.info(".........Training Over!.............")
    for enc in ("utf-16", "utf-16-be"):
        out = mf_output(tmp_path / enc, log.text().replace("\n", "\r\n").encode(enc))
        js = summary(out)
        assert (js["rows"], js["bad_rows"], js["status"]) == (30, 0, "finished")
        assert "rank_0/info.log is UTF-16" in table(out)
















