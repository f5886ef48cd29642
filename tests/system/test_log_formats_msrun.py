"""Issue 28: every MindSpore job read from its own logs, each format built from its version's format string
(MindFormers v0.6's, the PyNative trainer's, MindSpore 2.10's LossMonitor and TimeMonitor), any prefix or
none, msrun's worker logs, and a line that looks like a step in no known format said, never a silent zero."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from mstop.sources import read_once
from tests.helpers.common import HELPERS, ROOT
from tests.helpers.log_formats_common import LOSS_MONITOR, V06_FILE, _logger_line, _rank_log

TIME_MONITOR = "{} epoch time: {:5.3f} ms, per step time: {:5.3f} ms"

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
    from tests.helpers.msrun import free_port as _free_port

    msrun = shutil.which("msrun") or str(Path(sys.executable).parent / "msrun")
    logs = tmp_path / "logs"
    subprocess.run([msrun, "--worker_num=2", "--local_worker_num=2", "--master_addr=127.0.0.1",
                    f"--master_port={_free_port()}", f"--log_dir={logs}", "--join=True",
                    str(HELPERS / "msrun_plain_job.py"), "12", "2"],
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
    from mstop.engine.figures import run_meta

    assert run_meta(store.snapshot())["world_size"] == 2  # msrun's scheduler: "expected node number: 2"


@pytest.mark.slow
@pytest.mark.xdist_group("killed-plain-job")  # one worker makes the job both tests read
def test_a_real_msrun_worker_killed_is_dead_from_the_scheduler_log(killed_plain_job):
    """Item 2: rank 1 of a LossMonitor msrun job is SIGKILLed at step 30; msrun's scheduler times it out
    (``The node: N is timed out``; measured: N is rank 0, blocked in the AllReduce with the dead one, as
    often as rank 1, and sometimes both are named) and ends the job: mstop reads that as the job dead,
    where before it said ``stalled`` for ever (no heartbeats in a plain job's logs), and says which ranks
    the scheduler named and how far to trust it."""
    import json
    import re
    import subprocess
    import sys

    from mstop.engine.endings import ranks_text

    logs = killed_plain_job.logs
    assert killed_plain_job.returncode != 0
    # one node or more (measured: rank 0 alone, rank 1 alone, or both, from run to run)
    named = sorted({int(n) for n in re.findall(r"The node: (\d) is timed out",
                                               (logs / "scheduler.log").read_text(errors="replace"))})
    assert named
    out = subprocess.run([sys.executable, "-m", "mstop", "summary", "--json", str(logs)], capture_output=True,
                         text=True, timeout=60)
    js = json.loads(out.stdout)
    assert js["status"] == "dead" and js["step"] == 30, js
    (a,) = [a for a in js["alerts"] if a["kind"] == "job_dead"]
    assert f"msrun's scheduler timed out {ranks_text(named)} and ended the job" in a["message"], a
    assert "not always the one that died" in a["message"], a


@pytest.mark.slow
@pytest.mark.xdist_group("killed-plain-job")
def test_a_real_plain_job_killed_before_its_first_epoch_ended_has_its_goodput(killed_plain_job):
    """Issue 40 item 3: a real plain msrun job (LossMonitor, TimeMonitor) killed before its first epoch's
    end (no TimeMonitor line) read afterwards said ``goodput 0 % of 0 s``. MindSpore's own stamped lines
    give its start and where its steps began: 30 steps of at least 0.1 s each are 29 intervals of 0.1 s,
    and the time before them is start-up; the whole is the job's life."""
    import json
    import subprocess
    import sys

    job = killed_plain_job
    assert job.returncode != 0
    js = json.loads(subprocess.run([sys.executable, "-m", "mstop", "summary", "--json", str(job.logs)], cwd=ROOT,
                                   capture_output=True, text=True, timeout=120).stdout)
    g = js["goodput"]
    assert js["status"] == "dead" and js["step"] == 30, js
    assert 2.5 <= g["productive"] <= 30 * 0.1 + 5.0, g  # 30 steps of 0.1 s (29 between rows) and their work
    # the start-up is no step: its own bucket, and the goodput is the steps' share of the wall, however long
    # the start-up took (a busy machine's MindSpore takes 30 s to start two workers)
    assert g["compile"] > 0.5 and 0 < g["goodput"] < 0.9, g
    assert abs(g["goodput"] - g["productive"] / g["wall"]) < 1e-3 and g["goodput"] >= 2.5 / g["wall"], g
    assert g["wall"] <= job.ended - job.began + 1.0, g


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
    from mstop.live.runs import RunsModel
    from mstop.sources.runs import RunsWatch

    _rank_log(tmp_path / "a", 0, ["2026-12-01 07:09:49 | step 10 | loss 2.345 | lr 1e-4"])
    _rank_log(tmp_path / "b", 0, [_logger_line(V06_FILE, 1_796_108_985.0, "building %d", i) for i in range(5)])
    model = RunsModel([RunsWatch(str(tmp_path))], Options(), lambda: Health(Rules()))
    for _ in range(3):
        model.refresh()
    rows, _, _ = model.snapshot()
    hints = {row.name: row.hint for row in rows}
    assert any("looks like a step but matches no format mstop knows" in h for h in hints.values()), hints
    assert any("5 lines, no step lines yet" in h for h in hints.values()), hints


FIXTURES = str(ROOT / "tests" / "fixtures" / "msrun")

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
    from mstop.formats.mflog import SchedulerLog

    def states(name: str) -> list[tuple[int, str]]:
        with open(os.path.join(FIXTURES, name), "rb") as f:
            return [(w.rank, w.kind) for w in SchedulerLog().parse(f.read())]

    assert states("finished.scheduler.log") == [(1, "end"), (0, "end")]
    for name in ("finished.scheduler.log", "lost-rank1.scheduler.log"):  # the job's world: the workers it expects
        sched = SchedulerLog()
        with open(os.path.join(FIXTURES, name), "rb") as f:
            sched.parse(f.read())
        assert sched.expected == 2, name
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




@pytest.mark.slow
def test_a_plain_jobs_goodput_on_the_monitor_is_summarys_once_it_ended(tmp_path):
    """Issue 58 items 3 and 9: a real plain msrun job (LossMonitor, TimeMonitor) followed live: its unstamped
    lines are timed by their arrival, read afterwards TimeMonitor spaces them; the monitor said 59 % where
    ``summary`` said 75 % (71 and 76 here before), and its first epoch was said to read 0 % while it trained
    (here 16 % at the first read, rising). Never 0 % once 30 steps are in; once the job has ended the monitor's
    goodput is the files' read afterwards, as summary's: the two agree."""
    import json
    import subprocess
    import sys
    import time

    from mstop.live import MonitorOptions, MonitorSession
    from tests.helpers.common import wait_for
    from tests.helpers.msrun import plain_msrun

    job, logs = plain_msrun(tmp_path, "60", "2", "0", "0.05")
    assert wait_for(logs.is_dir, 60)
    s = MonitorSession([str(logs)], MonitorOptions())
    s.source.read_all()
    s.first_read_done()
    s.source.follow()
    try:
        first_epoch = []  # (step, goodput) while its first epoch runs (no TimeMonitor line yet)
        deadline = time.monotonic() + 300
        while job.poll() is None and time.monotonic() < deadline:
            h = s.frame(points=80, header_only=True).view.header
            if h.step is not None and 30 <= h.step <= 60:
                first_epoch.append((h.step, h.goodput))
            time.sleep(0.5)
        assert first_epoch and all(g is not None and g >= 0.005 for _, g in first_epoch), first_epoch  # not "0 %"
        assert job.wait(timeout=300) == 0
        js = json.loads(subprocess.run([sys.executable, "-m", "mstop", "summary", "--json", str(logs)], cwd=ROOT,
                                       capture_output=True, text=True, timeout=120).stdout)
        assert js["status"] == "finished" and js["step"] == 120, js["status"]

        def agrees() -> bool:
            h = s.frame(points=80, header_only=True).view.header
            return h.status == "finished" and h.goodput is not None and abs(h.goodput - js["goodput"]["goodput"]) < 5e-4

        assert wait_for(agrees, 30), (s.frame(points=80, header_only=True).view.header.goodput, js["goodput"])
    finally:
        s.source.stop()
        if job.poll() is None:
            job.kill()
