"""A MindFormers job watched from its own logs (issue 15, part 2): output/log/rank_<R>/info.log read as a run.

The kit's captured info.log is a real 60-step Trainer run; the variants it lacks (sink mode, no lr, MoE/MTP
losses, no throughput, restarts, errors, rotation) are lines CONSTRUCTED from MindFormers' format strings
(tests/helpers/mflines.py)."""

from __future__ import annotations

import os
import re
import shutil
import threading
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mstop.engine.figures import WINDOW, Options, mfu, status
from mstop.engine.store import Store
from mstop.formats.mflog import MfLogParser
from mstop.sources import Sources, read_once
from mstop.sources.mflog import LogStream, MfLogSource, log_root
from tests.helpers.common import wait_for
from tests.helpers.mflines import STDOUT_FORMAT, Log, step_looking
from tests.helpers.mflog_common import KIT, _finished_log, mf_output, needs_kit

STEP = re.compile(r"step:\[\s*(\d+)/\s*(\d+)\], loss:\[([\d.]+)/[\d.]+\], per_step_time: (\d+)ms, lr: ([\d.e-]+), "
                  r"overflow cond: (\w+), loss_scale: ([\d.]+), global_norm: \[([\d.e-]+)\], "
                  r"train_throughput_per_npu: ([\d.]+)T")

@needs_kit
def test_the_kits_real_log_gives_mindformers_numbers_row_by_row(tmp_path):
    out = mf_output(tmp_path, {0: KIT.read_text()})
    truth = [STEP.search(line) for line in KIT.read_text().splitlines() if "{ Epoch:[" in line]
    store = read_once(str(out))
    d = store.ranks[0]
    assert d.rows == len(truth) == 60 and store.bad_rows == 0
    assert d.col("step").tolist() == [float(m.group(1)) for m in truth]
    for col, g in (("loss", 3), ("lr", 5), ("loss_scale", 7), ("grad_norm", 8)):
        np.testing.assert_allclose(d.col(col), [float(m.group(g)) for m in truth], rtol=1e-6, err_msg=col)
    assert d.col("overflow").tolist() == [float(m.group(6) == "True") for m in truth]
    np.testing.assert_allclose(d.col("train_throughput_per_npu"), [float(m.group(9)) for m in truth])
    # step time: exact from samples/s/p (global batch 4 on 1 device), and it truncates to MindFormers' ms
    assert [int(v * 1000 + 1e-6) for v in d.col("step_time")] == [int(m.group(4)) for m in truth]
    assert d.col("samples").tolist() == [4.0] * 60
    assert status(store, Options()) == "finished"
    start = d.last_start
    assert start["source"] == "mindformers log" and start["total_steps"] == 60 and start["world_size"] == 1
    assert start["run_name"] == tmp_path.name
    # the header's account of a log: the source and what it cannot give, and MFU from the log's TFLOP/s
    assert mfu(store, Options()) is None
    lo = max(1, 60 - WINDOW)  # the recent window, without the compile step
    tflops = d.col("train_throughput_per_npu")[lo:].astype(float)
    times = d.col("step_time")[lo:].astype(float)
    expect = float((tflops * times).sum() / times.sum()) * 1e12 / 1e11
    assert mfu(store, Options(peak_flops=1e11)) == pytest.approx(expect, rel=1e-5)


def test_constructed_variants_sink_mode_no_lr_moe_losses_no_throughput(tmp_path):
    log = Log()
    log.info(".........Starting Training Model..........")
    for s in range(1, 6):  # sink mode, MoE and MTP losses, no lr, no throughput
        log.step(1, 2, s, 5, 3.0 - 0.1 * s, sink=True, lr=None, flops=None,
                 separate={"lm_loss": 2.5 - 0.1 * s, "load_balancing_loss": 0.01 * s, "mtp_loss": 0.4})
    for s in range(1, 6):  # epoch 2: overflow on one step, loss scale "unavailable" on another
        log.step(2, 2, s, 5, 2.0, sink=True, lr=None, flops=None, overflow=(s == 3),
                 scale="unavailable" if s == 4 else 1024.0)
    store = read_once(str(mf_output(tmp_path, {0: log.text()})))
    d = store.ranks[0]
    assert d.col("step").tolist() == [float(s) for s in range(1, 11)] and store.bad_rows == 0
    np.testing.assert_allclose(d.col("loss")[:5], [2.9, 2.8, 2.7, 2.6, 2.5], rtol=1e-6)
    assert np.isnan(d.col("lr")).all() and np.isnan(d.col("train_throughput_per_npu")).all()
    np.testing.assert_allclose(d.col("lm_loss")[:5], [2.4, 2.3, 2.2, 2.1, 2.0], rtol=1e-6)
    np.testing.assert_allclose(d.col("load_balancing_loss")[:5], [0.01, 0.02, 0.03, 0.04, 0.05], rtol=1e-5)
    assert np.isnan(d.col("mtp_loss")[5:]).all() and d.col("mtp_loss")[0] == pytest.approx(0.4)
    assert d.col("overflow").tolist()[5:] == [0.0, 0.0, 1.0, 0.0, 0.0]
    assert np.isnan(d.col("loss_scale")[8]) and d.col("loss_scale")[9] == 1024.0
    assert d.col("epoch").tolist() == [1.0] * 5 + [2.0] * 5
    assert d.col("step_time")[1] == pytest.approx(0.12)  # per_step_time, without a progress line
    assert d.last_start["total_steps"] == 10


def test_stdout_format_and_nan_loss(tmp_path):
    log = Log(fmt=STDOUT_FORMAT)
    log.step(1, 1, 1, 3, 2.0)
    log.step(1, 1, 2, 3, float("nan"), norm=float("inf"))
    log.step(1, 1, 3, 3, 1.5)
    store = read_once(str(mf_output(tmp_path, {0: log.text()})))
    d = store.ranks[0]
    assert d.rows == 3 and np.isnan(d.col("loss")[1]) and np.isinf(d.col("grad_norm")[1])
    assert {(i, c) for i, c, _ in d.nonfinite} == {(1, "loss"), (1, "grad_norm")}
    assert d.col("time")[2] - d.col("time")[0] == pytest.approx(0.24, abs=2e-3)


def test_other_lines_are_skipped_and_broken_step_lines_are_counted_bad(tmp_path):
    log = Log()
    log.step(1, 1, 1, 4, 2.0, samples_per_s=10.0)
    log.record("The input config moe_config is empty.", level=30, func="_none_process")
    lines = log.lines + ["_data_parallel:1", "  {", '    "weight_decay": 0.01,', ""]
    log.lines = lines
    log.step(1, 1, 2, 4, 1.9)
    log.record("global_norm: [1.0] TrainingStateMonitor line, no step", func="print_output_info")
    log.record("Epoch:[%3d/%3d], step:[%5d/%5d] %s: %s", 1, 1, 2, 4, "local_norm", "[0.5 0.7]",
               func="_to_log")  # TrainingStateMonitor's own step lines (its format string): not MFLossMonitor's
    broken = log.record("{ Epoch:[  1/  1], step:[    3/    4], loss:[oops")  # a step line cut short: bad
    assert "Epoch" in broken
    log.step(1, 1, 4, 4, 1.8)
    store = read_once(str(mf_output(tmp_path, {0: log.text()})))
    assert store.ranks[0].col("step").tolist() == [1.0, 2.0, 4.0]
    assert store.bad_rows == 1


def test_an_error_that_training_goes_on_past_is_not_a_failure(tmp_path):
    log = _finished_log()
    log.record("checkpoint health check failed", level=40)
    for s in range(11, 14):
        log.step(1, 1, s, 20, 2.0)
    store = Store()
    out = mf_output(tmp_path, {0: log.text()})
    src = MfLogSource(str(out), store)
    src.read_all()  # the error is the last line only while reading: a row after it clears the failure
    assert status(store, Options(clock=lambda: store.ranks[0].col("time")[-1] + 1)) == "running"


def test_a_restart_appends_a_new_segment_and_steps_repeated_after_resume_are_counted(tmp_path):
    log = _finished_log()
    log.record("Something failed", level=40)
    log.t += 60
    log.info("..........Init Config..........", func="_config_init")
    log.info(".........Starting Training Model..........")
    for s in range(8, 16):  # resumed from the step-7 checkpoint
        log.step(1, 1, s, 20, 1.5)
    store = read_once(str(mf_output(tmp_path, {0: log.text()})))
    d = store.ranks[0]
    assert len(d.segments) == 2 and d.repeated_steps() == 3
    assert d.segments[1].first_step == 8
    assert status(store, Options(clock=lambda: d.col("time")[-1] + 1)) == "running"  # the abort was before
    # the second session's start is its first line (the restart's init), not its first step
    assert d.last_start["time"] == pytest.approx(d.col("time")[9] + 60, abs=0.01)


def test_a_restart_without_a_marker_is_found_by_the_step_going_back(tmp_path):
    log = Log()
    for s in (1, 2, 3, 1, 2):
        log.step(1, 1, s, 3, 1.0)
    d = read_once(str(mf_output(tmp_path, {0: log.text()}))).ranks[0]
    assert [seg.first_step for seg in d.segments] == [1.0, 1.0]


def test_rotated_logs_are_read_oldest_first(tmp_path):
    log = Log()
    for s in range(1, 31):
        log.step(1, 1, s, 30, 1.0 + s)
    lines = log.lines
    folder = tmp_path / "output" / "log" / "rank_0"
    folder.mkdir(parents=True)
    for name, part in (("info.log.2", lines[:10]), ("info.log.1", lines[10:20]), ("info.log", lines[20:])):
        (folder / name).write_text("".join(x + "\n" for x in part))
    d = read_once(str(tmp_path / "output")).ranks[0]
    assert d.col("step").tolist() == [float(s) for s in range(1, 31)] and len(d.segments) == 1


def test_following_through_rotations_half_lines_and_truncation_loses_nothing(tmp_path):
    """A RotatingFileHandler (MindFormers' own handler class) with a tiny size writes while a LogStream
    follows: every step arrives once, in order."""
    import logging.handlers

    folder = tmp_path / "rank_0"
    folder.mkdir()
    stream = LogStream(str(folder))
    parser = MfLogParser(0)
    got: list[float] = []

    def drain(final: bool = False) -> None:
        chunk = stream.read()
        got.extend(parser.parse(chunk.blob).rows.columns["step"].tolist())
        if final or not chunk.blob:
            got.extend(parser.flush().rows.columns["step"].tolist())

    handler = logging.handlers.RotatingFileHandler(folder / "info.log", maxBytes=3000, backupCount=50)
    log = Log()
    handler.setFormatter(logging.Formatter("%(message)s"))  # the lines come formatted already
    n = 300
    for s in range(1, n + 1):
        log.step(1, 1, s, n, 1.0)
        rec = logging.makeLogRecord({"msg": log.lines[-1], "levelno": 20})
        handler.stream.write(log.lines[-1][: len(log.lines[-1]) // 2])  # half a line, then the rest
        handler.stream.flush()
        if s % 7 == 0:
            drain()
        handler.stream.write(log.lines[-1][len(log.lines[-1]) // 2:] + "\n")
        handler.stream.flush()
        if handler.shouldRollover(rec):
            handler.doRollover()
        if s % 11 == 0:
            drain()
    handler.close()
    drain(final=True)
    assert len(list(folder.glob("info.log.*"))) > 10  # it did rotate, many times
    assert got == [float(s) for s in range(1, n + 1)] and stream.lost == 0


def test_follow_a_growing_log_live(tmp_path):
    out = tmp_path / "output"
    folder = out / "log" / "rank_0"
    folder.mkdir(parents=True)
    (folder / "info.log").write_text("")
    store = Store()
    sources = Sources([str(out)], store, poll=0.05)
    assert isinstance(sources.items[0], MfLogSource)
    sources.follow()
    log = Log()
    try:
        with open(folder / "info.log", "a") as f:
            for s in range(1, 21):
                log.step(1, 1, s, 20, 2.0, samples_per_s=40.0)
                f.write("".join(x + "\n" for x in log.lines[-2:]))
                f.flush()
                time.sleep(0.01)
        assert wait_for(lambda: store.rows == 20)
        d = store.ranks[0]
        assert d.col("samples_per_s_per_npu").tolist() == [40.0] * 20  # every row got its progress line
    finally:
        sources.stop()
    assert not [t for t in threading.enumerate() if t.name == "mstop-mflog"]


def test_log_root_finds_the_layouts_and_writer_files_win(tmp_path):
    out = mf_output(tmp_path, {0: "", 1: ""})
    assert log_root(str(out)) == (str(out / "log"), None)
    assert log_root(str(out / "log")) == (str(out / "log"), None)
    assert log_root(str(out / "log" / "rank_1")) == (str(out / "log"), 1)
    assert log_root(str(tmp_path)) is None
    (out / "rank0.csv").write_text("time,step\n")
    assert not isinstance(Sources([str(out)], Store()).items[0], MfLogSource)
    empty = tmp_path / "later" / "output"
    empty.mkdir(parents=True)  # no logs yet: a writer run until logs appear with no rank file beside them
    src = Sources([str(empty)], Store()).items[0]
    assert not isinstance(src, MfLogSource) and src.read_all() == 0
    mf_output(tmp_path / "later", {0: _finished_log().text()})
    assert src.read_all() == 10 and isinstance(src.active, MfLogSource)


LINE = st.one_of(
    st.text(max_size=80),
    st.builds(lambda a, b, c: f"[INFO] 2026-12-01 07:09:4{a % 10},{b % 1000:03d} [x.py:1] f: {c}",
              st.integers(0, 9), st.integers(0, 999),
              st.sampled_from(["{ Epoch:[  1/  1], step:[    2/   60], loss:[5.5/5.5], per_step_time: 20ms",
                               "{ Epoch:[", "  3.3% || 1.0 samples/s/p  0:00:01 }", ".........Training Over!...",
                               "global_batch_size = a * b = 4 = 2 * 2", "{ Epoch:[x/y], step:[1/1], loss: nan, "])),
)

@given(st.lists(LINE, max_size=30), st.integers(1, 50))
def test_any_lines_in_any_pieces_never_crash_and_agree_with_one_read(lines, cut):
    """Hypothesis: whatever the lines, the parser never raises, every step line is a row or one bad row, and
    reading the text in pieces gives what one read gives."""
    blob = "\n".join(lines).encode("utf-8", "surrogatepass") + b"\n"
    whole = MfLogParser(0)
    a, b = whole.parse(blob), whole.flush()
    rows_whole = len(a.rows) + len(b.rows)
    steps = step_looking(blob.decode("utf-8", "surrogateescape"))
    assert rows_whole + a.rows.bad + b.rows.bad == steps
    pieces = MfLogParser(0)
    from mstop.sources.files import FileTail

    tail, n = FileTail("x"), 0
    for i in range(0, len(blob), cut):
        n += len(pieces.parse(tail.feed(blob[i:i + cut]).blob).rows)
    n += len(pieces.flush().rows)
    assert n == rows_whole


def test_a_long_log_is_read_in_pieces_with_every_row(tmp_path):
    log = Log()
    for s in range(1, 3001):
        log.step(1, 1, s, 3000, 1.0, samples_per_s=5.0)
    out = mf_output(tmp_path, {0: log.text(), 1: log.text()})
    store = read_once(str(out))
    assert [store.ranks[r].rows for r in (0, 1)] == [3000, 3000]
    shutil.rmtree(out)
    assert os.path.exists(tmp_path)


@pytest.mark.parametrize("line, batch, devices", [
    # MindFormers' base_trainer.py wording, in each parallel mode (CONSTRUCTED from its format strings)
    ("global_batch_size = batch_size_per_card * device_num * gradient_accumulation_steps = 4 = 4 * 1 * 1", 4, 1),
    ("global_batch_size = per_batch_size * data_parallel = 8 * 2 = 16", 16, None),
    ("The current parallel mode is semi_auto_parallel, full batch is True,so global batch size will be changed: "
     "global_batch_size = batch_size * data_parallel * micro_batch_interleave_num * gradient_accumulation_steps "
     "= 32 = 4 * 8 * 1 * 1", 32, None),
    ("Pipeline parallel was opened: pipeline_stages = 2, full batch is True, gradient_accumulation_steps will not "
     "take effect in pipeline parallel, global batch size will be changed: global_batch_size = batch_size * "
     "data_parallel * micro_batch_num * micro_batch_interleave_num = 64 = 1 * 8 * 8 * 1).", 64, None),
])
def test_the_global_batch_is_read_in_every_parallel_mode(tmp_path, line, batch, devices):
    log = Log()
    log.info(line, func="_check_global_batch_size_for_auto_parallel")
    log.step(1, 1, 1, 2, 2.0, step_ms=100.0, samples_per_s=batch / (devices or 1) / 0.1004)
    d = read_once(str(mf_output(tmp_path, {0: log.text()}))).ranks[0]
    assert d.col("samples").tolist() == [float(batch)]
    # the exact step time needs the device count: without it, MindFormers' whole milliseconds
    assert d.col("step_time")[0] == pytest.approx(0.1004 if devices else 0.1, rel=1e-6)


def test_a_folder_waiting_for_logs_beside_a_writer_run_still_becomes_a_log_source(tmp_path):
    """Another source's ranks in the same store do not decide what an empty folder is."""
    from tests.helpers.runs import steps, write_rank

    write_rank(tmp_path / "writer", 0, steps(1, 5, loss=1.0, step_time=1.0))
    later = tmp_path / "later" / "output"
    later.mkdir(parents=True)
    store = Store()
    sources = Sources([str(tmp_path / "writer"), str(later)], store)
    assert sources.read_all() == 5
    folder = later / "log" / "rank_1"
    folder.mkdir(parents=True)
    (folder / "info.log").write_text(_finished_log().text())
    assert sources.read_all() == 10 and sorted(store.ranks) == [0, 1]


def test_a_rotated_file_that_ends_mid_line_does_not_swallow_the_next_files_first_line(tmp_path):
    """The last line of info.log.1 lacks its newline (a writer killed mid-write before the rollover): it ends
    there, and info.log's first step is a row of its own."""
    log = Log()
    for s in range(1, 5):
        log.step(1, 1, s, 4, 1.0)
    folder = tmp_path / "output" / "log" / "rank_0"
    folder.mkdir(parents=True)
    (folder / "info.log.1").write_text("\n".join(log.lines[:2]))  # no newline after step 2
    (folder / "info.log").write_text("".join(x + "\n" for x in log.lines[2:]))
    store = read_once(str(tmp_path / "output"))
    assert store.ranks[0].col("step").tolist() == [1.0, 2.0, 3.0, 4.0] and store.bad_rows == 0




def test_loss_is_without_a_step_at_no_time_is_no_bad_row():
    """Found by the property test above in a fresh-clone run: ``loss is`` with no step, in a log with no
    time at all, was counted as a bad step row."""
    p = MfLogParser(0)
    a, b = p.parse(b"loss is\n"), p.flush()
    assert len(a.rows) + len(b.rows) + a.rows.bad + b.rows.bad == 0
    a, b = p.parse(b"epoch: 1 step: 3, loss is 0.5\n"), p.flush()  # a step at no time: still one bad row
    assert len(a.rows) + len(b.rows) + a.rows.bad + b.rows.bad == 1
