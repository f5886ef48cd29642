"""Issue 27, keys and text: Ctrl-C quits, a refused row reads as one, P refuses a run with no job, health
flags out of range are usage errors, a multi-line error is a line in the header and lines in the list."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid

import pytest

from mstop_writer import MetricsWriter
from tests.helpers.app_common import settle
from tests.helpers.common import ROOT
from tests.helpers.runs import start, steps, write_events, write_rank


def mstop(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mstop", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, **kw)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")
def test_ctrl_c_quits_the_monitor_in_a_terminal():
    """Item 12: Ctrl-C quits as q does (Textual's own asks 'Do you want to quit?')."""
    from tests.helpers.tmux import screen as _screen
    from tests.helpers.tmux import tmux as _tmux
    from tests.helpers.tmux import until as _until

    sock = f"mstop-test-{uuid.uuid4().hex[:8]}"
    _tmux(sock, f"{sys.executable} -m mstop tests/fixtures/snap-run; echo EXIT $?; sleep 30")
    try:
        _until(sock, ["llama-7b baseline", "q quit"])
        subprocess.run(["tmux", "-L", sock, "send-keys", "C-c"], check=True)
        screen = _until(sock, ["EXIT 0"], seconds=15)
        assert "Do you want to quit" not in screen
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)
    del _screen


async def test_one_refused_row_is_one_row_refused_not_a_writer_failure(tmp_path):
    """Item 14: log(step='abc') in a hand-written loop: the header says '1 row refused by the writer (step
    'abc')', not '! writer failed: ...', and summary says the same."""
    from mstop.app import MonitorApp
    from mstop.app.widgets import Header
    from tests.helpers.app_common import text

    t = time.time()
    with MetricsWriter(tmp_path, rank=0, world_size=1, heartbeat_interval=3600) as w:
        w.log(1, loss=1.0, step_time=0.1)
        w.log("abc", loss=1.0, step_time=0.1)
        for s in range(2, 11):
            w.log(s, loss=1.0, step_time=0.1)
    app = MonitorApp(str(tmp_path), follow=False, clock=lambda: t + 5)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        head = text(app.query_one(Header))
        assert "! 1 row refused by the writer (step 'abc')" in head and "writer failed" not in head, head
        assert "rows" not in head.split("refused")[0].split("!")[-1]
    table = mstop("summary", str(tmp_path), env={**os.environ, "COLUMNS": "200"}).stdout
    assert "1 row refused by the writer (row for step 'abc' not written" in table and "writer failed" not in table


def test_health_flags_and_settings_out_of_range_are_usage_errors(tmp_path):
    """Item 16: --data-wait 15 turned the rule off, --oom-critical 5 read as 500 %."""
    write_rank(tmp_path, 0, steps(1, 5, loss=1.0))
    for flag, value in (("--data-wait", "15"), ("--oom-critical", "5"), ("--data-wait", "0")):
        out = mstop("summary", str(tmp_path), flag, value)
        assert out.returncode == 2 and "must be a fraction over 0 and under 1" in out.stderr, out.stderr
    (tmp_path / "mstop.toml").write_text("[health]\ndata_wait = 15\n")
    out = mstop("summary", str(tmp_path))
    assert out.returncode == 2 and "data_wait must be a fraction over 0 and under 1" in out.stderr


MINDSPORE_ERROR = ("RuntimeError: The pointer[input] is null.\n\n"
                   "----------------------------------------------------\n"
                   "- Framework Unexpected Exception Raised:\n"
                   "----------------------------------------------------\n"
                   "This exception is caused by framework's unexpected error.\n\n"
                   "----------------------------------------------------\n"
                   "- C++ Call Stack: (For framework developers)\n"
                   "----------------------------------------------------\n"
                   "mindspore/ccsrc/pipeline/jit/ps/pipeline.cc:2075 RunGraph\n")

async def test_a_multi_line_error_is_one_line_in_the_header_and_lines_in_the_list(tmp_path):
    """Item 28: MindSpore's multi-line error filled 7 header lines of \\x0a escapes."""
    from mstop.app import MonitorApp
    from mstop.app.screens import AlertsScreen
    from mstop.app.widgets import Header
    from tests.helpers.app_common import text

    write_events(tmp_path, 0, [start("s1", t=999.0, world_size=1),
                               {"time": 1031.0, "kind": "abort", "session": "s1", "step": 30,
                                "error": MINDSPORE_ERROR}])
    write_rank(tmp_path, 0, steps(1, 30, t0=1000.0, dt=1.0, step_time=1.0, loss=1.0))
    app = MonitorApp(str(tmp_path), follow=False, clock=lambda: 1040.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        alerts = str(app.query_one("#alerts").content)
        assert "rank 0 aborted after step 30: RuntimeError: The pointer[input] is null." in alerts
        assert "\\x0a" not in alerts and "C++ Call Stack" not in alerts
        assert "status FAILED" in text(app.query_one(Header))
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, AlertsScreen)
        shown = str(app.screen.query_one("#alert-list").children[0].content)
        assert "- C++ Call Stack: (For framework developers)" in shown and "pipeline.cc:2075 RunGraph" in shown
        assert "\\x0a" not in shown


async def test_mfu_says_what_is_missing_and_warns_over_100_percent(tmp_path):
    """Item 19: a CNN given peak_flops but no tokens said 'MFU n/a' with no reason (compare: 'peak or
    FLOPs/token unknown' though the peak is known); MFU 180 % was shown with no warning."""
    from mstop.app import MonitorApp

    cnn = tmp_path / "cnn"
    write_events(cnn, 0, [start("s1", t=999.0, world_size=1, peak_flops=1e12)])
    write_rank(cnn, 0, steps(1, 40, t0=1000.0, dt=1.0, step_time=1.0, loss=1.0, samples=32))
    hot = tmp_path / "hot"
    write_events(hot, 0, [start("s1", t=999.0, world_size=1, peak_flops=1e12, flops_per_token=6e6)])
    write_rank(hot, 0, steps(1, 40, t0=1000.0, dt=1.0, step_time=1.0, loss=1.0, tokens=300000, mfu=1.8))
    for run, want in ((cnn, "MFU n/a: no tokens (tokens_per_step), no FLOPs per token (n_params or "
                            "flops_per_token)"),
                      (hot, "MFU n/a: 180.0 % is over 100 %: the peak or the FLOPs per token is wrong")):
        app = MonitorApp(str(run), follow=False, clock=lambda: 1041.0)
        async with app.run_test(size=(200, 50)) as pilot:
            await settle(pilot)
            shown = str(app.query_one("#mfu-text").content)
            assert want in shown, shown
    out = mstop("compare", str(cnn), str(cnn), "--format", "json")
    import json

    cell = json.loads(out.stdout)["runs"][0]["figures"]["mfu"]
    assert cell["message"] == "n/a: no tokens (tokens_per_step), no FLOPs per token (n_params or flops_per_token)"


def test_the_loss_window_of_compare_never_reads_backwards(tmp_path):
    """Item 23: 'loss at step 700: mean over steps 690:512' when a run ended at 512."""
    write_rank(tmp_path / "a", 0, steps(1, 800, loss=lambda s: 1.0 / s, step_time=0.5, tokens=100))
    write_rank(tmp_path / "b", 0, steps(1, 512, loss=lambda s: 1.0 / s, step_time=0.4, tokens=100))
    out = mstop("compare", str(tmp_path / "a"), str(tmp_path / "b"), "--steps", "600:700", "--format", "markdown")
    assert "loss at step 700: mean over steps 690:710" in out.stdout and "690:512" not in out.stdout
    assert "no loss in steps 690:710" in out.stdout


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")
def test_no_color_means_no_colour_codes_at_all():
    """Item 23: NO_COLOR=1 still drew 256-colour greys."""
    import re

    from tests.helpers.tmux import tmux as _tmux
    from tests.helpers.tmux import until as _until

    sock = f"mstop-test-{uuid.uuid4().hex[:8]}"
    _tmux(sock, f"{sys.executable} -m mstop tests/fixtures/snap-run; sleep 30", {"NO_COLOR": "1"})
    try:
        _until(sock, ["llama-7b baseline", "q quit"])
        time.sleep(0.5)
        raw = subprocess.run(["tmux", "-L", sock, "capture-pane", "-p", "-e"], capture_output=True,
                             text=True).stdout
        colours = re.findall(r"\x1b\[[0-9;]*(?:38|48);[25];[0-9;]*m|\x1b\[(?:3|4|9|10)[0-7]m", raw)
        assert not colours, sorted(set(colours))[:5]
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)


def test_summary_of_a_relative_folder_names_its_runs_relative(tmp_path):
    """Item 23: `summary runs/` printed absolute paths for a relative argument."""
    import json

    shutil.copytree(ROOT / "tests" / "fixtures" / "snap-runs", tmp_path / "runs")
    out = subprocess.run([sys.executable, "-m", "mstop", "summary", "runs", "--json"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    dirs = sorted(r["run_dir"] for r in json.loads(out.stdout)["runs"])
    assert dirs[0] == os.path.join("runs", "base") and all(not os.path.isabs(d) for d in dirs), dirs


@pytest.mark.parametrize("width", [80, 100, 120, 160])
async def test_what_each_width_keeps(tmp_path, width):
    """Item 13: a run with a writer failure, a lost row, a NaN alert, a checkpoint and no peak: at every width
    the status and the ALERTS badge are whole and every line fits; what goes first is the device, the
    compile time, a path's start; the writer's failure and the lost row stay from 100 columns; the MFU
    hint is never cut at its flag and the memory total is never the part cut off."""
    from mstop.app import MonitorApp
    from tests.helpers.app_common import screen_lines

    run = tmp_path / "run"
    write_events(run, 0, [
        start("s1", t=999.0, run_name="llama-7b-sweep-lr3e-4-warmup2000", total_steps=1000, world_size=1,
              device="Ascend910B3", flops_per_token=6e9, heartbeat_interval=30),
        {"time": 1050.0, "kind": "writer_error", "message": "OSError: [Errno 28] No space left on device"},
        {"time": 1060.0, "kind": "dropped", "rows": 1},
        {"time": 1100.0, "kind": "checkpoint", "step": 100, "path": "/cache/ckpt/llama/rank_0/step_100.ckpt"}])
    write_rank(run, 0, steps(1, 200, t0=1000.0, step_time=1.0, tokens=4096, data_wait=0.001,
                             loss=lambda s: float("nan") if s == 150 else 3.0 / s ** 0.2,
                             mem_peak=51.2 * 2**30, mem_total=59.6 * 2**30, mem_used=50.1 * 2**30))
    app = MonitorApp(str(run), follow=False, clock=lambda: 1201.0)
    async with app.run_test(size=(width, 40)) as pilot:
        await settle(pilot)
        diagnosis, *head = [line.strip() for line in screen_lines(app)[:4]]
        header = "\n".join(head)
        assert all(len(line) <= width - 2 for line in [diagnosis, *head]), header
        assert diagnosis.startswith("HEALTHY  nothing slows the job"), diagnosis  # issue 59: the first line
        assert "status RUNNING" in head[0] and "ALERTS 1 (1 new: a)" in head[0], header
        assert head[1].startswith("step 200 / 1,000 [##........] 20 %"), header
        assert head[2].startswith("last row 1 s ago"), header
        assert "! writer failed: OSE" in head[0] or "! 1 row lost by the writer" in head[0], header
        if width >= 120:
            assert "! writer failed: OSError" in head[0] and "! 1 row lost by the writer" in head[0], header
        if width >= 160:
            assert "! writer failed: OSError: [Errno 28] No space" in head[0], header
            assert "elapsed 3 m 22 s" in head[1] and "checkpoint step 100" in head[2], header
        assert "_100.ckpt" in head[2] or width < 100, header
        assert text_of(app, "#mfu-text").replace("\n", " ").endswith("(--peak-tflops)")
        mem = text_of(app, "#mem-text")
        assert "peak 51.2" in mem and "total 59.6 GiB" in mem and "…" not in mem, mem


def text_of(app, selector: str) -> str:
    """A Static's text as drawn (its lines, as wide as the widget), not the content it was given."""
    w = app.query_one(selector)
    return "\n".join(strip.text.rstrip() for strip in w.render_lines(w.region.reset_offset))


