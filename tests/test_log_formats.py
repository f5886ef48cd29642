"""Issue 28: every MindSpore job read from its own logs, each format built from its version's format string
(MindFormers v0.6's, the PyNative trainer's, MindSpore 2.10's LossMonitor and TimeMonitor), any prefix or
none, msrun's worker logs, and a line that looks like a step in no known format said, never a silent zero."""

from __future__ import annotations

import logging
import os
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mstop.sources import read_once

# MindFormers v0.6.0 mindformers/core/callback/callback.py, print_output_info (with lr) and epoch_end, and
# mindformers/tools/logger.py's formats, as they are there
V06_STEP = ("Epoch:[%3d/%3d], step:[%5d/%5d], loss:[%5.3f/%5.3f], time:%5.3f ms, lr:%s, overflow cond: %s, "
            "loss_scale: %s")
V06_SINK = "Will be Training epochs:%d, sink_size:%d"
V06_FILE = "[%(levelname)s] %(asctime)s [%(pathname)s:%(lineno)d] %(funcName)s: %(message)s"
V06_STDOUT = "%(asctime)s - %(name)s - %(levelname)s - %(message)s"
# mindformers/pynative/callback/loss_callback.py (master), _print_log: the parts joined by ", " in "{ ... }"
# MindSpore 2.10 LossMonitor.step_end and TimeMonitor.epoch_end
LOSS_MONITOR = "epoch: %s step: %s, loss is %s"
TIME_MONITOR = "{} epoch time: {:5.3f} ms, per step time: {:5.3f} ms"


def _logger_line(fmt: str, t: float, msg: str, *args: object) -> str:
    rec = logging.LogRecord("mindformers", logging.INFO, "mindformers/core/callback/callback.py", 271, msg, args,
                            None, "print_output_info")
    rec.created, rec.msecs = t, (t - int(t)) * 1000
    return logging.Formatter(fmt).format(rec)


def _rank_log(root, rank: int, lines: list[str], name: str = "info.log"):
    d = root / "output" / "log" / f"rank_{rank}"
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text("".join(ln + "\n" for ln in lines))
    return root / "output"


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


def test_loss_monitor_and_time_monitor_of_a_plain_mindspore_job(tmp_path):
    """LossMonitor's step is within the epoch: the global step counts the epochs before (TimeMonitor's
    size); TimeMonitor's per-step time is each row's step time; a step going back is a restart."""
    lines = []
    for epoch in (1, 2):
        for s in range(1, 6):
            lines.append(LOSS_MONITOR % (epoch, s, 2.302585 - 0.01 * (5 * (epoch - 1) + s)))
        lines.append(TIME_MONITOR.format("Train", 123.45, 24.69))
    lines.append(LOSS_MONITOR % (1, 1, 2.5))  # the job started again
    d = tmp_path / "job"
    d.mkdir()
    (d / "worker_0.log").write_text("".join(ln + "\n" for ln in lines))
    store = read_once(str(d))
    r = store.ranks[0]
    assert r.col("step").tolist() == [float(s) for s in range(1, 11)] + [1.0]
    assert r.col("loss")[9] == pytest.approx(2.302585 - 0.1)
    assert r.col("step_time")[:10].tolist() == pytest.approx([0.02469] * 10)
    assert r.col("epoch").tolist()[:10] == [1.0] * 5 + [2.0] * 5
    assert len(r.segments) == 2  # the restart


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


def test_msrun_worker_logs_are_ranks_and_a_mindformers_output_finds_them(tmp_path):
    d = tmp_path / "output" / "msrun_log"
    d.mkdir(parents=True)
    for rank in range(4):
        (d / f"worker_{rank}.log").write_text("".join(
            LOSS_MONITOR % (1, s, 2.0 + rank) + "\n" for s in range(1, 4)))
    (d / "scheduler.log").write_text("scheduler started\n")
    for path in (d, tmp_path / "output"):
        store = read_once(str(path))
        assert sorted(store.ranks) == [0, 1, 2, 3]
        assert [store.ranks[r].col("loss")[0] for r in range(4)] == [2.0, 3.0, 4.0, 5.0]


def test_a_real_msrun_job_with_loss_monitor_and_no_mstop_code(tmp_path):
    """Item 3: a 2-worker data-parallel msrun job on CPU with LossMonitor and TimeMonitor only: mstop reads
    its worker logs as ranks, every loss equal to the job's own lines, and the TimeMonitor step time."""
    import re
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("mindspore", reason="a real job needs MindSpore: pip install -e '.[mindspore]'")
    from tests.conftest import ROOT
    from tests.test_what_happened import _free_port

    msrun = shutil.which("msrun") or str(Path(sys.executable).parent / "msrun")
    logs = tmp_path / "logs"
    subprocess.run([msrun, "--worker_num=2", "--local_worker_num=2", "--master_addr=127.0.0.1",
                    f"--master_port={_free_port()}", f"--log_dir={logs}", "--join=True",
                    str(ROOT / "tests" / "msrun_plain_job.py"), "12", "2"],
                   cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300, check=True,
                   env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    store = read_once(str(logs))
    assert sorted(store.ranks) == [0, 1]
    for rank in (0, 1):
        text = (logs / f"worker_{rank}.log").read_text(errors="replace")
        said = [float(m.group(1)) for m in re.finditer(r"epoch: \d+ step: \d+, loss is (\S+)", text)]
        per_step = [float(m.group(1)) for m in re.finditer(r"per step time: ([\d.]+) ms", text)]
        d = store.ranks[rank]
        assert len(said) == 24 and d.col("step").tolist() == [float(s) for s in range(1, 25)]
        np.testing.assert_allclose(d.col("loss"), said, rtol=1e-6)
        np.testing.assert_allclose(d.col("step_time"), np.repeat(per_step, 12) / 1000.0, rtol=1e-6)
        assert d.col("epoch").tolist() == [1.0] * 12 + [2.0] * 12
    assert store.bad_rows == 0
    from mstop.engine.figures import Options, status

    assert status(store, Options()) == "finished"  # every worker unregistered (scheduler.log): a clean end


@pytest.mark.slow
def test_a_real_msrun_worker_killed_is_dead_from_the_scheduler_log(tmp_path):
    """Item 2: rank 1 of a LossMonitor msrun job is SIGKILLed at step 10; msrun's scheduler times it out
    (``The node: N is timed out``; measured: N is rank 0, blocked in the AllReduce with the dead one, as
    often as rank 1, and sometimes both are named) and ends the job: mstop reads that as the job dead,
    where before it said ``stalled`` for ever (no heartbeats in a plain job's logs), and says which ranks
    the scheduler named and how far to trust it."""
    import json
    import re
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("mindspore", reason="a real job needs MindSpore: pip install -e '.[mindspore]'")
    from tests.conftest import ROOT
    from tests.test_what_happened import _free_port

    msrun = shutil.which("msrun") or str(Path(sys.executable).parent / "msrun")
    logs = tmp_path / "logs"
    done = subprocess.run([msrun, "--worker_num=2", "--local_worker_num=2", "--master_addr=127.0.0.1",
                           f"--master_port={_free_port()}", f"--log_dir={logs}", "--join=True",
                           str(ROOT / "tests" / "msrun_plain_job.py"), "40", "1", "10"],
                          cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300,
                          env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    assert done.returncode != 0
    # one node or more (measured: rank 0 alone, rank 1 alone, or both, from run to run)
    named = sorted({int(n) for n in re.findall(r"The node: (\d) is timed out",
                                               (logs / "scheduler.log").read_text(errors="replace"))})
    assert named
    out = subprocess.run([sys.executable, "-m", "mstop", "summary", "--json", str(logs)], capture_output=True,
                         text=True, timeout=60)
    js = json.loads(out.stdout)
    assert js["status"] == "dead" and js["step"] == 10, js
    (a,) = [a for a in js["alerts"] if a["kind"] == "job_dead"]
    from mstop.engine.endings import ranks_text

    assert f"msrun's scheduler timed out {ranks_text(named)} and ended the job" in a["message"], a
    assert "not always the one that died" in a["message"], a


def test_unstamped_rows_of_one_read_are_spaced_by_their_step_time(tmp_path):
    """LossMonitor's lines have no stamp: read afterwards, they are counted back from the file's time by
    TimeMonitor's per-step time (not all at one instant), the last at the file's time; the source says
    it is a MindSpore log."""
    lines = [LOSS_MONITOR % (1, s, 2.0 - s / 100) for s in range(1, 11)]
    lines.append(TIME_MONITOR.format("Train", 5000.0, 500.0))
    d = tmp_path / "job"
    d.mkdir()
    (d / "worker_0.log").write_text("".join(ln + "\n" for ln in lines))
    when = time.time() - 60
    os.utime(d / "worker_0.log", (when, when))
    store = read_once(str(d))
    times = store.ranks[0].col("time")
    assert times[-1] == pytest.approx(when, abs=1e-3)
    np.testing.assert_allclose(np.diff(times), 0.5, rtol=1e-9)
    assert store.ranks[0].last_start["source"] == "mindspore log"


def test_the_runs_list_says_why_a_log_gave_no_rows(tmp_path):
    """Item 4: in the runs list, a log with lines that look like steps in no known format, and one with no
    step yet, say so in the run's note column (never a bare 0 rows)."""
    from mstop.engine.figures import Options
    from mstop.engine.health import Health, Rules
    from mstop.sources.runs import RunsWatch
    from mstop.view.runs import RunsModel

    _rank_log(tmp_path / "a", 0, ["2026-12-01 07:09:49 | step 10 | loss 2.345 | lr 1e-4"])
    _rank_log(tmp_path / "b", 0, [_logger_line(V06_FILE, 1_796_108_985.0, "building %d", i) for i in range(5)])
    model = RunsModel([RunsWatch(str(tmp_path))], Options(), lambda: Health(Rules()))
    for _ in range(3):
        model.refresh()
    rows, _, _ = model.snapshot()
    hints = {row.name: row.hint for row in rows}
    assert any("looks like a step but matches no format mstop knows" in h for h in hints.values()), hints
    assert any("5 lines, no step lines yet" in h for h in hints.values()), hints


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


FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "msrun")


def _workers(folder, scheduler: str, steps: int = 10) -> None:
    """Two LossMonitor worker logs of ``steps`` steps beside a captured scheduler.log (fixtures/msrun)."""
    import shutil

    os.makedirs(folder, exist_ok=True)
    for r in range(2):
        with open(os.path.join(folder, f"worker_{r}.log"), "w") as f:
            f.write("".join(f"epoch: 1 step: {s}, loss is {1.5 - s / 100 + r}\n" for s in range(1, steps + 1)))
    shutil.copy(os.path.join(FIXTURES, scheduler), os.path.join(folder, "scheduler.log"))


def test_the_scheduler_logs_captured_here_read_as_the_workers_states():
    """Item 2 on real scheduler logs of this machine's msrun (fixtures/msrun): registrations map node to rank,
    ``Node N has unregistered`` is a clean end, ``The node: N is timed out`` a lost worker, at the line's
    time; nothing else in them (the cluster's start-up, its alive counts, the traceback) is a state."""
    from mstop.engine.mflog import SchedulerLog

    def states(name: str) -> list[tuple[int, str]]:
        with open(os.path.join(FIXTURES, name), "rb") as f:
            return [(w.rank, w.kind) for w in SchedulerLog().parse(f.read())]

    assert states("finished.scheduler.log") == [(1, "end"), (0, "end")]
    assert states("lost-rank1.scheduler.log") == [(1, "lost")]
    assert states("lost-names-survivor.scheduler.log") == [(0, "lost")]
    with open(os.path.join(FIXTURES, "lost-rank1.scheduler.log"), "rb") as f:
        (w,) = SchedulerLog(gmtoff=0).parse(f.read())
    assert w.line.startswith("The node: 1 is timed out. It may exit with exception")
    assert time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(w.time)) == "2026-12-02 11:26:04"


def test_a_worker_the_scheduler_timed_out_makes_the_job_dead_not_stalled(tmp_path):
    """Item 2: a LossMonitor job (no heartbeats) whose scheduler timed a worker out is ``dead``, and the alert
    says which rank the scheduler named and how far to trust it; with every worker unregistered, finished."""
    import json
    import subprocess
    import sys

    _workers(tmp_path / "lost", "lost-rank1.scheduler.log")
    _workers(tmp_path / "done", "finished.scheduler.log")
    out = subprocess.run([sys.executable, "-m", "mstop", "summary", str(tmp_path / "lost")], capture_output=True,
                         text=True, timeout=60)
    assert "status                   dead" in out.stdout, out.stdout
    assert "job_dead               msrun's scheduler timed out rank 1 and ended the job" in out.stdout
    js = json.loads(subprocess.run([sys.executable, "-m", "mstop", "summary", "--json", str(tmp_path / "done")],
                                   capture_output=True, text=True, timeout=60).stdout)
    assert js["status"] == "finished" and js["step"] == 10


@given(st.lists(st.one_of(st.binary(max_size=80), st.sampled_from([
    b"[ERROR] DISTRIBUTED(1,2,python):2026-12-02-11:26:04.081.379 [x.cc:548] UpdateTopoState] The node: 3 is "
    b"timed out. It may exit with exception, please check this node's log.",
    b"[WARNING] DISTRIBUTED(1,2,python):2026-12-02-11:35:09.856.804 [x.cc:323] ProcessUnregister] Node 1 has "
    b"unregistered.",
    b"[WARNING] D(1,2,python):2026-12-02-11:35:02.900.617 [x.cc:254] ProcessRegister] The new node: 3(role: "
    b"MS_WORKER), rank id: 7, device id: 0, hostname: vm, ip: 127.0.0.1 is registered successfully.",
    b"The node: 99999999999 is timed out", b"2026-13-45-99:99:99.000.000 Node 2 has unregistered.",
    b"\x1b]0;x\x07 The node: 2 is timed out \x1b[31m"])), max_size=20))
@settings(max_examples=200, deadline=None)
def test_the_scheduler_log_parser_never_crashes_and_its_words_are_clean(lines):
    """Any bytes: no exception; every state has a rank, a finite time and a line with no control code."""
    import math

    from mstop.engine.mflog import SchedulerLog

    for w in SchedulerLog().parse(b"\n".join(lines)):
        assert w.kind in ("end", "lost") and w.rank >= 0 and math.isfinite(w.time)
        assert not any(ord(c) < 32 or ord(c) == 127 for c in w.line), w.line
