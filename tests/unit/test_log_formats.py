"""Issue 28: every MindSpore job read from its own logs, each format built from its version's format string
(MindFormers v0.6's, the PyNative trainer's, MindSpore 2.10's LossMonitor and TimeMonitor), any prefix or
none, msrun's worker logs, and a line that looks like a step in no known format said, never a silent zero."""

from __future__ import annotations

import os
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mstop.sources import read_once
from tests.helpers.cli import mstop
from tests.helpers.log_formats_common import LOSS_MONITOR, V06_FILE, _logger_line, _rank_log

V06_STEP = ("Epoch:[%3d/%3d], step:[%5d/%5d], loss:[%5.3f/%5.3f], time:%5.3f ms, lr:%s, overflow cond: %s, "
            "loss_scale: %s")

V06_SINK = "Will be Training epochs:%d, sink_size:%d"

V06_STDOUT = "%(asctime)s - %(name)s - %(levelname)s - %(message)s"

@pytest.mark.parametrize("fmt", [V06_FILE, V06_STDOUT])
def test_mindformers_v06_lines_and_its_sink_time_per_step(tmp_path, fmt):
    t0 = 1_796_108_985.0
    lines = [_logger_line(fmt, t0, V06_SINK, 1, 4)]
    for k, s in enumerate(range(4, 13, 4)):  # sink mode: one line a sink of 4 steps, time the whole sink's
        lines.append(_logger_line(fmt, t0 + 2.0 * (k + 1), V06_STEP, 1, 1, s, 12, 2.5 - 0.1 * k, 2.5, 2000.0,
                                  "[0.]", "False", "268435460.0"))
    store = read_once(str(_rank_log(tmp_path, 0, lines)))
    d = store.ranks[0]
    assert d.col("step").tolist() == [4.0, 8.0, 12.0]
    assert d.col("loss").tolist() == pytest.approx([2.5, 2.4, 2.3])
    assert d.col("step_time").tolist() == pytest.approx([0.5] * 3)  # 2,000 ms a sink of 4 steps
    assert d.col("loss_scale")[0] == pytest.approx(268435460.0, rel=1e-6) and d.col("lr")[0] == 0.0
    assert d.col("time")[1] - d.col("time")[0] == pytest.approx(2.0, abs=2e-3)
    assert store.bad_rows == 0


def test_the_pynative_trainer_and_the_loss_names_of_other_releases(tmp_path):
    t0 = 1_796_108_985.0
    lines = []
    for s in range(1, 4):
        parts = [f"step:[{s:5d}/{10:5d}]", f"loss: {11.813965 - s:.6f}", f"per_step_time: {13570}ms",
                 f"lr: {1e-5:.6e}"]
        lines.append(_logger_line(V06_FILE, t0 + s, "{ " + ", ".join(parts) + " }"))
    # the published r2.0 line, padded as printed there
    lines.append(_logger_line(V06_FILE, t0 + 4, "{ step:[    4/   10], loss:  11.813965, per_step_time:  13570ms, "
                                                "load_balancing_loss:   1.093977, lr: 1.000000e-05, grad_norm:  "
                                                "13.831877, throughput:   1.36T }"))
    lines.append(_logger_line(V06_FILE, t0 + 5, "{ Epoch:[  1/  1], step:[    5/   10], loss:[2.000000/2.1], "
                                                "lm loss: 1.9, aux_loss: 0.05, kl_loss: 0.01, extra_loss: 0.02, "
                                                "per_step_time: 100ms, lr: 1e-05, overflow cond: False, "
                                                "loss_scale: 1.0, global_norm: [1.5]"))
    store = read_once(str(_rank_log(tmp_path, 0, lines)))
    d = store.ranks[0]
    assert d.col("step").tolist() == [1.0, 2.0, 3.0, 4.0, 5.0] and store.bad_rows == 0
    assert d.col("loss")[3] == pytest.approx(11.813965) and d.col("grad_norm")[3] == pytest.approx(13.831877)
    assert d.col("step_time")[0] == pytest.approx(13.57, rel=1e-6) and d.col("lr")[0] == pytest.approx(1e-5)
    assert d.col("load_balancing_loss")[3] == pytest.approx(1.093977)
    assert d.col("train_throughput_per_npu")[3] == pytest.approx(1.36)
    assert d.col("aux_loss")[4] == pytest.approx(0.05) and d.col("extra_loss")[4] == pytest.approx(0.02)
    assert d.last_start["total_steps"] == 10


def test_a_step_line_with_any_prefix_or_none(tmp_path):
    """tee'd, pasted, a job's own logger: the step is read wherever it stands; the time from a stamp before
    it, else from the file's time (and the screen says so)."""
    mf = "{ Epoch:[  1/  1], step:[%5d/   10], loss:[%5.6f/2.0], per_step_time: 20ms, lr: 1e-05, " \
         "overflow cond: False, loss_scale: 1.0, global_norm: [1.0]"
    lines = [f"2026-12-01T07:09:4{s}.100 myjob INFO " + mf % (s, 3.0 - s / 10) for s in range(1, 4)]
    lines += ["   " + mf % (s, 3.0 - s / 10) for s in range(4, 6)]  # pasted, no stamp
    out = _rank_log(tmp_path, 0, lines)
    when = time.time() - 100
    os.utime(out / "log" / "rank_0" / "info.log", (when, when))
    store = read_once(str(out))
    d = store.ranks[0]
    assert d.col("step").tolist() == [1.0, 2.0, 3.0, 4.0, 5.0] and store.bad_rows == 0
    assert d.col("time")[1] - d.col("time")[0] == pytest.approx(1.0, abs=2e-3)
    assert d.col("time")[4] == pytest.approx(when, abs=1.0)
    assert any("2 step lines without a timestamp: timed by when the file was written" in n for n in store.notes)


def test_a_line_that_looks_like_a_step_in_no_known_format_is_said(tmp_path):
    lines = [_logger_line(V06_FILE, 1_796_108_985.0, "some other trainer"),
             "2026-12-01 07:09:49 | step 10 | loss 2.345 | lr 1e-4",
             "2026-12-01 07:09:50 | step 11 | loss 2.340 | lr 1e-4"]
    store = read_once(str(_rank_log(tmp_path, 0, lines)))
    assert store.bad_rows == 2
    note = next(n for n in store.notes if "look like steps" in n)
    assert note.startswith("rank_0/info.log: 2 lines look like steps but match no format mstop knows")
    assert "the first: 2026-12-01 07:09:49 | step 10 | loss 2.345" in note


def test_a_log_with_no_step_yet_says_what_it_found(tmp_path):
    lines = [_logger_line(V06_FILE, 1_796_108_985.0, "building the network %d", i) for i in range(312)]
    store = read_once(str(_rank_log(tmp_path, 0, lines)))
    assert "rank_0/info.log: 312 lines, no step lines yet" in store.notes


def test_an_exception_line_after_the_last_step_fails_the_run(tmp_path):
    """Item 1: ``ValueError: ...`` after a session's last step marks it failed, with or without a traceback
    header before it (LossMonitor raises on a NaN loss: its job's log ends so)."""
    from mstop.engine.figures import Options, status

    for i, tail in enumerate((["ValueError: In epoch: 1 step: 4, loss is NAN or INF, training process cannot "
                               "continue, terminating training."],
                              ["Traceback (most recent call last):", '  File "train.py", line 9, in <module>',
                               "RuntimeError: out of memory"])):
        d = tmp_path / f"job{i}"
        d.mkdir()
        (d / "worker_0.log").write_text("".join(ln + "\n" for ln in [LOSS_MONITOR % (1, s, 2.0) for s in (1, 2, 3)]
                                                + tail))
        store = read_once(str(d))
        assert status(store, Options()) == "failed", tail
        assert tail[-1].split(":")[0] in str(store.ranks[0].aborts[-1]["error"])


def test_a_plain_msrun_job_has_the_world_its_scheduler_expected(tmp_path):
    """Issue 58 item 9: a plain msrun job's header read ``world n/a`` beside its 2 ranks: its logs name no world,
    msrun's scheduler does (``expected node number: 2``), before or after the workers' first steps were read."""
    from mstop.engine.figures import run_meta

    reg = ("[WARNING] DISTRIBUTED(9,7f,python):2026-12-06-14:08:08.{ms}.353 [meta_server_node.cc:254] "
           "ProcessRegister] The new node: {r}(role: MS_WORKER), rank id: {r}, device id: {r}, hostname: vm, ip: "
           "127.0.0.1 is registered successfully. Currently registered node number: {n}, expected node number: 2\n")
    for r in (0, 1):
        (tmp_path / f"worker_{r}.log").write_text("".join(LOSS_MONITOR % (1, s, 2.0) + "\n" for s in (1, 2, 3)))
    store = read_once(str(tmp_path))
    assert run_meta(store.snapshot()).get("world_size") is None  # no scheduler log: no world said
    (tmp_path / "scheduler.log").write_text("".join(reg.format(ms=500 + r, r=r, n=r + 1) for r in (0, 1)))
    store = read_once(str(tmp_path))
    assert run_meta(store.snapshot())["world_size"] == 2 and sorted(store.ranks) == [0, 1]


@given(st.lists(st.one_of(st.binary(max_size=80), st.sampled_from([
    b"[ERROR] DISTRIBUTED(1,2,python):2026-12-02-11:26:04.081.379 [x.cc:548] UpdateTopoState] The node: 3 is "
    b"timed out. It may exit with exception, please check this node's log.",
    b"[WARNING] DISTRIBUTED(1,2,python):2026-12-02-11:35:09.856.804 [x.cc:323] ProcessUnregister] Node 1 has "
    b"unregistered.",
    b"[WARNING] D(1,2,python):2026-12-02-11:35:02.900.617 [x.cc:254] ProcessRegister] The new node: 3(role: "
    b"MS_WORKER), rank id: 7, device id: 0, hostname: vm, ip: 127.0.0.1 is registered successfully.",
    b"The new node: 2(role: MS_WORKER), rank id: 2, x. Currently registered node number: 1, expected node number: 8",
    b"The new node: 2(role: MS_WORKER), rank id: 2, expected node number: 99999999999",
    b"The node: 99999999999 is timed out", b"2026-13-45-99:99:99.000.000 Node 2 has unregistered.",
    b"\x1b]0;x\x07 The node: 2 is timed out \x1b[31m"])), max_size=20))
def test_the_scheduler_log_parser_never_crashes_and_its_words_are_clean(lines):
    """Any bytes: no exception; every state has a rank, a finite time and a line with no control code."""
    import math

    from mstop.formats.mflog import SchedulerLog

    sched = SchedulerLog()
    for w in sched.parse(b"\n".join(lines)):
        assert w.kind in ("end", "lost") and w.rank >= 0 and math.isfinite(w.time)
        assert not any(ord(c) < 32 or ord(c) == 127 for c in w.line), w.line
    assert sched.expected is None or 0 <= sched.expected < 10**7




@pytest.mark.parametrize("time_line, step_s", [
    ("epoch time: 849.60, per step time: 84.96", 0.08496),  # MindSpore 1.x: milliseconds, no unit
    ("Train epoch time: 849.600 ms, per step time: 84.960 ms", 0.08496),  # 2.x
    ("epoch time: 849.6 ms, per step time: 84.96 ms", 0.08496),
])
def test_time_monitor_lines_of_every_version_give_the_step_time(tmp_path, time_line, step_s):
    """Issue 40 item 5: MindSpore 1.x's TimeMonitor prints milliseconds with no ``ms``; the step time was read
    as missing. A plain job's worker log: LossMonitor's lines, then TimeMonitor's at the epoch's end."""
    lines = [LOSS_MONITOR % (1, s, 2.0 - s / 100) for s in range(1, 11)] + [time_line]
    lines += [LOSS_MONITOR % (2, s, 1.9 - s / 100) for s in range(1, 11)] + [time_line]
    (tmp_path / "worker_0.log").write_text("".join(ln + "\n" for ln in lines))
    store = read_once(str(tmp_path))
    d = store.ranks[0]
    assert d.col("step").tolist() == [float(s) for s in range(1, 21)] and store.bad_rows == 0
    assert d.col("step_time").tolist() == pytest.approx([step_s] * 20, rel=1e-6)


def test_a_step_time_in_seconds_is_not_read_as_milliseconds(tmp_path):
    """A line with another unit is not TimeMonitor's: the step time stays unknown rather than 1,000x off."""
    lines = [LOSS_MONITOR % (1, s, 2.0) for s in range(1, 4)] + ["epoch time: 3.0 s, per step time: 1.0 s"]
    (tmp_path / "worker_0.log").write_text("".join(ln + "\n" for ln in lines))
    d = read_once(str(tmp_path)).ranks[0]
    assert d.col("step").tolist() == [1.0, 2.0, 3.0] and all(x != x for x in d.col("step_time").tolist())


DEVICE_ERROR = ("[ERROR] DEVICE(1234,ffff,python):2026-12-01-07:10:30.176.000 [mindspore/ccsrc/plugin/device/ascend/"
                "hal/device/ascend_stream_manager.cc:300] SyncStream] Call aclrtSynchronizeStreamWithTimeout failed, "
                "ret[507035]")


@pytest.mark.parametrize("tail, said", [
    ([DEVICE_ERROR, "-" * 52, "- Ascend Error Message:", "-" * 52, "EE9999: Inner Error!"],
     "Call aclrtSynchronizeStreamWithTimeout failed, ret[507035] (EE9999: Inner Error!)"),
    (["[CRITICAL] ME(7,ffff,python):2026-12-01-07:10:31.000.000 [x.cc:1] Run] Device memory is exhausted"],
     "Device memory is exhausted"),
    (["E39999: Inner Error!"], "E39999: Inner Error!"),
])
def test_a_log_ending_in_framework_or_ascend_errors_is_failed(tmp_path, tail, said):
    """Issue 40 item 8: a log that ends in MindSpore's ``[ERROR] DEVICE`` lines (or an Ascend error code)
    read ``running``, then ``stalled``, with no word of the error; its run is failed, the error said, and
    ``summary --json`` gives the error line."""
    import json

    from mstop.engine.figures import Options, status

    lines = [_logger_line(V06_FILE, 1_796_108_985.0 + s, "{ Epoch:[  1/  1], step:[%5d/   40], loss: 2.3 }", s)
             for s in range(1, 11)]
    run = _rank_log(tmp_path, 0, [*lines, *tail])
    store = read_once(str(run))
    assert status(store, Options()) == "failed"
    assert said in str(store.ranks[0].aborts[-1]["error"])
    js = json.loads(mstop("summary", run, "--json").stdout)
    assert js["status"] == "failed" and js["error_line"] is not None and js["log_path"].endswith("info.log")


def test_errors_followed_by_steps_are_no_failure_but_summary_still_gives_the_last_error(tmp_path):
    """An error line the job lived past (more steps after it) fails nothing; ``summary --json`` still gives
    it as the log's last error, with the log's path, for a run that did not fail."""
    import json

    from mstop.engine.figures import Options, status

    step = "{ Epoch:[  1/  1], step:[%5d/   40], loss: 2.3 }"
    lines = ([_logger_line(V06_FILE, 1_796_108_985.0 + s, step, s) for s in range(1, 6)] + [DEVICE_ERROR]
             + [_logger_line(V06_FILE, 1_796_108_995.0 + s, step, s) for s in range(6, 11)])
    run = _rank_log(tmp_path, 0, lines)
    store = read_once(str(run))
    assert status(store, Options()) != "failed"
    js = json.loads(mstop("summary", run, "--json").stdout)
    assert js["status"] != "failed" and "aclrtSynchronizeStreamWithTimeout" in js["error_line"]
    assert js["log_path"].endswith("info.log")






@pytest.mark.parametrize("name", ["worker_0.log", "scheduler.log"])
def test_a_huge_hole_in_a_log_is_stepped_over_not_read(tmp_path, name):
    """Issue 40 item 12: a 20 GB hole named ``scheduler.log`` or ``worker_N.log`` was read whole (9-43 s).
    The hole is stepped over (one lseek); the line it is in is dropped and counted, every other line read."""
    import time as _time

    lines = [LOSS_MONITOR % (1, s, 2.0) for s in range(1, 6)]
    (tmp_path / "worker_0.log").write_text("".join(ln + "\n" for ln in lines))
    target = tmp_path / name
    target.touch()
    with open(target, "r+b") as f:  # not "ab": an append ignores the seek
        f.seek(0, os.SEEK_END)
        f.write(b"half a line")
        f.seek(20 << 30, os.SEEK_CUR)
        f.write(b" its end\n")
        if name == "worker_0.log":
            f.write("".join(LOSS_MONITOR % (1, s, 2.0) + "\n" for s in range(6, 9)).encode())
    began = _time.monotonic()
    store = read_once(str(tmp_path))
    assert _time.monotonic() - began < 5
    assert store.rows == (8 if name == "worker_0.log" else 5)
    if name == "worker_0.log":
        assert store.bad_rows == 1  # the line the hole is in




def test_a_plain_jobs_ranks_read_seconds_apart_are_not_lagging(tmp_path):
    """Issue 40 item 4: a plain job's ranks (LossMonitor's lines carry no time: each is timed by its file)
    read 5 s apart in a slow round: the later one 60 steps ahead at 85 ms a step was called ``lagging_rank``.
    Steps are compared at the same moment: the earlier file is owed the steps the pace makes in 5 s."""
    from mstop.engine.figures import Options
    from mstop.engine.health import Health

    now = time.time()
    for r, last, mtime in ((0, 100, now - 5.0), (1, 159, now)):
        lines = [LOSS_MONITOR % (1, s, 2.0) for s in range(1, last + 1)]
        lines += ["Train epoch time: 8500.000 ms, per step time: 85.000 ms"] if last >= 100 else []
        lines += [LOSS_MONITOR % (2, s, 2.0) for s in range(1, last - 100 + 1)]
        p = tmp_path / f"worker_{r}.log"
        p.write_text("".join(ln + "\n" for ln in lines))
        os.utime(p, (mtime, mtime))
    store = read_once(str(tmp_path))
    kinds = [a.kind for a in Health().alerts(store, Options())]
    assert "lagging_rank" not in kinds, kinds


def _ms_line(level: str, when: float, msg: str) -> str:
    """MindSpore's own log line (glog's form) at unix time ``when``, in this machine's local time."""
    stamp = time.strftime("%Y-%m-%d-%H:%M:%S", time.localtime(when)) + f".{int(when % 1 * 1000):03d}.000"
    return f"[{level}] ME(4242,7f00aa,python):{stamp} [mindspore/ccsrc/x.cc:12] Fn] {msg}"


def test_a_plain_job_killed_before_its_first_epoch_read_afterwards_has_its_goodput(tmp_path):
    """Issue 40 item 3: a plain job killed before TimeMonitor's epoch line, read afterwards, said ``goodput
    0 % of 0 s``: its LossMonitor lines have no stamp, so all took the file's time. MindSpore's own lines
    (``[WARNING] ME(...):2026-...``) are stamps: the first begins the session, the last before the steps
    begins the time they are spread over, the file's time ends it."""
    import json


    began, steps_from, end = 1_796_100_000.0, 1_796_100_008.0, 1_796_100_020.0
    lines = [_ms_line("WARNING", began, "Connection 11 source: 127.0.0.1:50750"),
             _ms_line("INFO", began + 3.0, "Cluster is successfully initialized."),
             _ms_line("WARNING", steps_from, "'FusedSparseAdam' is deprecated")]
    lines += [LOSS_MONITOR % (1, s, 2.0 - s / 100) for s in range(1, 61)]
    d = tmp_path / "job"
    d.mkdir()
    (d / "worker_0.log").write_text("".join(ln + "\n" for ln in lines))
    os.utime(d / "worker_0.log", (end, end))
    js = json.loads(mstop("summary", "--json", d).stdout)
    g = js["goodput"]
    # the steps ran from the last stamp to the file's time; before them, from the first stamp: start-up. (No
    # word of its end: the run is silent since, and that silence is counted as stalled, not as steps.)
    assert g["productive"] == pytest.approx(end - steps_from, abs=0.5), g
    assert g["compile"] == pytest.approx(steps_from - began, abs=0.5), g
    assert js["step"] == 60


def test_a_mindspore_stamp_after_an_earlier_read_begins_the_next_reads_spread(tmp_path):
    """Followed live: a restarted process's start-up lines (stamped) come after the last read; its steps are
    spread from its last stamp, not from the last read (the minutes it took to start are no steps)."""
    from mstop.formats.mflog import MfLogParser

    p = MfLogParser(0)
    first = p.parse(("\n".join(LOSS_MONITOR % (1, s, 2.0) for s in range(1, 11)) + "\n").encode(), arrived=100.0)
    assert len(first.rows) >= 9
    restart = [_ms_line("WARNING", 200.0, "starting")] + [LOSS_MONITOR % (1, s, 2.0) for s in range(1, 11)]
    second = p.parse(("\n".join(restart) + "\n").encode(), arrived=210.0)
    got = second.rows.columns["time"][-9:]  # the restart's rows (the first read's last row was held till now)
    assert min(got) > 200.0 and max(got) <= 210.0, list(got)


def test_a_stamp_from_a_clock_never_set_times_nothing_and_untimed_rows_have_no_goodput(tmp_path):
    """Issue 40 item 12: rows dated 1970 gave ``goodput 0 % of over 10 years``. A MindSpore stamp of 1970 (a
    host whose clock was never set) before LossMonitor's unstamped rows (timed by the file, this machine's
    clock) is on another clock: it begins no session and spreads no row. Those rows then share one instant
    and no step time: no goodput can be told (``n/a``, never ``0 %``)."""
    import json


    d = tmp_path / "job"
    d.mkdir()
    lines = [_ms_line("WARNING", 100.0, "start-up")] + [LOSS_MONITOR % (1, s, 2.0) for s in range(1, 61)]
    (d / "worker_0.log").write_text("".join(ln + "\n" for ln in lines))
    out = mstop("summary", d).stdout
    assert "years" not in out and "1970" not in out, out
    goodput = next(ln for ln in out.splitlines() if ln.startswith("goodput"))
    assert goodput.split() == ["goodput", "n/a"], goodput
    js = json.loads(mstop("summary", "--json", d).stdout)
    assert js["goodput"]["goodput"] is None and js["goodput"]["wall"] < 3600, js["goodput"]
    assert js["step"] == 60
