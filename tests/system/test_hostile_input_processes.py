"""Run directories shaped the way clusters and strangers shape them: nothing may crash, hang, fool mstop
or reach the terminal as a control code, and every row written is shown, counted bad or reported dropped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from mstop.engine.figures import status
from mstop.engine.health import Health
from mstop.engine.store import Store
from mstop.sources.local import LocalSource
from mstop_writer import COLUMNS
from tests.helpers.app_common import settle
from tests.helpers.common import ROOT, wait_for
from tests.helpers.hostile_input_common import fifo_run, hostile_run, load, no_control, spiky_run
from tests.helpers.runs import start, steps, write_events, write_rank


def mstop(*args, timeout=60, **kw):
    return subprocess.run([sys.executable, "-m", "mstop", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, **kw)


def test_escape_sequences_never_reach_any_output(tmp_path):
    a, b = tmp_path / "runs" / "base\x1b[2J", tmp_path / "runs" / "other"
    hostile_run(a)
    hostile_run(b)
    table = mstop("summary", str(a))
    assert table.returncode == 0
    no_control(table.stdout + table.stderr)
    js = mstop("summary", str(a), "--json")
    no_control(js.stdout)
    assert json.loads(js.stdout)["run_dir"].endswith("base\\x1b[2J")  # made visible, not dropped
    for fmt_ in ("table", "markdown", "csv", "json"):
        out = mstop("compare", str(a), str(b), "--format", fmt_)
        assert out.returncode == 0, out.stderr
        no_control(out.stdout + out.stderr)
    pytest.importorskip("matplotlib")
    rep = mstop("report", str(a), str(b), "--out", str(tmp_path / "rep"), timeout=180)
    assert rep.returncode == 0, rep.stderr
    no_control((tmp_path / "rep" / "report.md").read_text())
    missing = mstop("summary", str(tmp_path / "no\x1b[2Jsuch"))
    assert missing.returncode == 2
    no_control(missing.stderr)


def test_fifos_directories_and_dangling_links_are_skipped_with_a_reason(tmp_path):
    run = tmp_path / "run"
    fifo_run(run)
    out = mstop("summary", str(run), timeout=30)  # before: blocked forever in open()
    assert out.returncode == 0, out.stderr
    assert "rank3.csv: a FIFO, not a regular file" in out.stdout
    assert "rank4.csv: a directory, not a regular file" in out.stdout
    assert "rank5.events.jsonl: a dangling symbolic link" in out.stdout
    js = json.loads(mstop("summary", str(run), "--json", timeout=30).stdout)
    assert js["refused_files"] == {"rank3.csv": "a FIFO, not a regular file",
                                   "rank3.events.jsonl": "a FIFO, not a regular file",
                                   "rank4.csv": "a directory, not a regular file",
                                   "rank5.events.jsonl": "a dangling symbolic link"}
    assert js["ranks"] == 1 and js["rows"] == 20 and js["status"] == "finished"
    assert mstop("compare", str(run), str(run), timeout=30).returncode == 0


def summary_json(run) -> dict:
    out = mstop("summary", str(run), "--json", timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def body(n: int, t0: float = 1000.0, **values) -> list[str]:
    out = []
    for s in range(1, n + 1):
        cells = {"time": repr(t0 + s), "step": str(s), "loss": "1.0", "step_time": "1.0", "session": "s1", **values}
        out.append(",".join(cells.get(c, "") for c in COLUMNS))
    return out


HEADER = ",".join(COLUMNS)

@pytest.mark.parametrize("case", ["long_field", "stray_quote", "bare_cr", "lone_cr", "garbage_first",
                                  "garbage_only", "repeated_header", "no_session"])
def test_parsing_loses_nothing_and_never_crashes(tmp_path, case):
    run = tmp_path / "run"
    run.mkdir()
    lines = body(50)
    header, end = HEADER, "\n"
    want_rows, want_bad = 50, 0
    if case == "long_field":  # a text cell longer than the csv module's 128 KiB limit
        header = HEADER + ",text"
        lines = [ln + "," + ('"a,' + "x" * 200_000 + '"' if i == 3 else "y") for i, ln in enumerate(lines)]
    elif case == "stray_quote":  # one unbalanced quote: that row is bad, not every later one
        lines[4] = lines[4].replace("1.0", '"1.0', 1)
        lines.insert(5, "z" * 200_000 + '"')  # and a long line with a quote after it (it crashed csv)
        want_rows, want_bad = 49, 2
    elif case == "bare_cr":
        lines[10] = lines[10][:20] + "\r" + lines[10][20:]  # two bad pieces
        want_rows, want_bad = 49, 2
    elif case == "lone_cr":
        end = "\r"
    elif case == "garbage_first":
        header = "\x00\xff garbage\n,,,\n" + HEADER
        want_bad = 2
    elif case == "garbage_only":
        header, lines = "\x00garbage", ["more,garbage", "\x1b[2J"]
        want_rows, want_bad = 0, 3
    elif case == "repeated_header":  # two processes raced to create the file, in a long file
        lines = body(2500)
        lines.insert(1200, HEADER)
        want_rows, want_bad = 2500, 1
    elif case == "no_session":
        header = HEADER.replace(",session", "")
        lines = [ln.rsplit(",", 1)[0] for ln in lines]
    text = header + end + end.join(lines) + end
    (run / "rank0.csv").write_bytes(text.encode("utf-8", "surrogateescape").replace(b"\xc3\xbf", b"\xff"))
    last_t = 1000.0 + want_rows
    write_events(run, 0, [start("s1", 990.0), {"time": last_t + 1, "kind": "end", "session": "s1"}])
    js = summary_json(run)
    assert (js["rows"], js["bad_rows"]) == (want_rows, want_bad)
    if want_rows:
        assert js["status"] == "finished" and js["loss"] == 1.0 and js["segments"] == 1
    # following the same bytes as they are written, a few at a time, gives the same
    store = Store()
    src = LocalSource(str(tmp_path / "live"), store)
    (tmp_path / "live").mkdir()
    data = (run / "rank0.csv").read_bytes()
    for i in range(0, len(data), 7919):
        with open(tmp_path / "live" / "rank0.csv", "ab") as f:
            f.write(data[i:i + 7919])
        src.read_all()
    assert (store.rows, store.bad_rows) == (want_rows, want_bad)


def test_events_that_crashed_mstop_are_counted_bad(tmp_path):
    run = tmp_path / "run"
    write_rank(run, 0, steps(1, 30, t0=1000.0, loss=1.0, step_time=1.0, mem_peak=float("inf"), mem_total=8e9,
                             mem_used=1e9))
    lines = ["[" * 5000 + "]" * 5000, '{"time": 990, "kind": "start", "session": "s1"}',
             '{"time": 991, "kind": "dropped", "rows": "many"}', '{"time": 1' + "0" * 400 + ', "kind": "x"}',
             '{"time": 992, "kind": "start", "session": "s2", "run_name": 123}',
             '{"time": 993, "kind": "eval", "step": 3, "metrics": [1, 2]}',
             '{"time": 1031, "kind": "end", "session": "s1"}']
    (run / "rank0.events.jsonl").write_text("\n".join(lines) + "\n")
    js = summary_json(run)
    assert js["bad_events"] == 5 and js["status"] == "finished" and js["rows"] == 30
    assert js["mem_headroom"] is None  # an inf peak is no reading


async def test_the_screen_survives_infinite_memory_and_bad_events(tmp_path):
    from mstop.app import MonitorApp

    test_events_that_crashed_mstop_are_counted_bad(tmp_path)
    app = MonitorApp(str(tmp_path / "run"), clock=lambda: 1040.0, follow=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        for key in ("r", "r", "x", "l", "w", "a"):
            await pilot.press(key)
            await pilot.pause()
    assert app.return_code in (None, 0)


def test_huge_events_are_bounded_and_said_so(tmp_path):
    run = tmp_path / "run"
    write_rank(run, 0, steps(1, 10, t0=1000.0, loss=1.0, step_time=1.0))
    metrics = {f"m{i}": i for i in range(200_000)}
    write_events(run, 0, [start("s1", 990.0, run_name="n" * 20_000_000),
                          {"time": 1005.0, "kind": "eval", "step": 5, "metrics": metrics}])
    store, _ = load(run)
    d = store.ranks[0]
    assert len(d.last_start["run_name"]) <= 513 and len(d.evals[0]["metrics"]) == 64
    assert d.evals[0]["metrics_total"] == 200_000 and store.cut_events == 2
    out = mstop("summary", str(run))
    assert "events cut" in out.stdout


def test_a_crash_of_the_screen_exits_non_zero(tmp_path):
    """A failure inside the TUI is printed and the exit code says so (it used to be 0)."""
    run = tmp_path / "run"
    write_rank(run, 0, steps(1, 5, t0=1000.0, loss=1.0))
    code = ("import sys; from mstop import cli; from mstop.app import launch, monitor\n"
            "def boom(self): raise RuntimeError('boom in redraw')\n"
            "monitor.MonitorScreen.redraw = boom\n"
            "launch.no_terminal = lambda what: False\n"  # its stdout is a pipe here: draw anyway, to crash
            f"sys.exit(cli.main([{str(run)!r}]))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "TERM": "dumb"}, stdin=subprocess.DEVNULL)
    assert out.returncode != 0
    assert "boom in redraw" in out.stdout + out.stderr


WRITER_JOB = """
import sys, time
from mstop_writer import MetricsWriter
w = MetricsWriter(sys.argv[1], rank=int(sys.argv[2]), world_size=2, heartbeat_interval=0.3, tokens_per_step=10)
s = 0
while True:
    s += 1
    w.log(s, loss=1.0, step_time=0.05, data_wait=0.04)  # starving: data wait 80 % of the step
    time.sleep(0.05)
"""

def test_every_rank_killed_is_dead_not_alive(tmp_path):
    run = tmp_path / "run"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER_JOB, str(run), str(r)], cwd=ROOT) for r in (0, 1)]
    try:
        assert wait_for(lambda: all((run / f"rank{r}.csv").exists() for r in (0, 1)), 30)
        time.sleep(1.0)
        store, opts = load(run)
        assert status(store, opts) == "running"
    finally:
        for p in procs:
            p.send_signal(signal.SIGKILL)
            p.wait()
    time.sleep(1.5)  # 3 heartbeat intervals of 0.3 s and more
    store, opts = load(run)
    assert status(store, opts) == "dead"
    kinds = [a.kind for a in Health().alerts(store, opts)]
    assert kinds == ["job_dead"]  # no data_starvation: a dead run is not starving
    js = summary_json(run)
    assert js["status"] == "dead" and [a["kind"] for a in js["alerts"]] == ["job_dead"]


def test_rows_from_the_future_still_go_stale(tmp_path):
    now = time.time()
    write_rank(tmp_path, 0, steps(1, 20, t0=now + 3600, loss=1.0, step_time=1.0))  # a host clock an hour ahead
    os.utime(tmp_path / "rank0.csv", (now - 600, now - 600))  # but the file was last written 10 minutes ago
    js = summary_json(tmp_path)
    assert js["status"] == "stalled"
    assert "ahead of this machine's clock" in mstop("summary", str(tmp_path)).stdout


async def test_a_failed_demo_job_is_reaped_and_its_log_pointed_at(tmp_path):
    from mstop.app import MonitorApp

    write_rank(tmp_path, 0, steps(1, 5, t0=1000.0, loss=1.0))
    log = tmp_path / "job.log"
    log.write_text("Traceback ...\nRuntimeError: out of memory\n")
    job = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])
    app = MonitorApp(str(tmp_path), clock=lambda: 1010.0, follow=False, job=job, job_log=str(log))
    async with app.run_test(size=(240, 40)) as pilot:  # wide enough for the whole path
        assert wait_for(lambda: job.poll() is not None, 20)
        app.monitor.tick()
        await pilot.pause()
        header = str(app.query_one("#header").render())
        assert f"the demo job exited with code 3: its output is in {log}" in header
        await pilot.resize_terminal(120, 40)  # narrower: the path is cut in its middle, its file name stays
        await pilot.pause()
        app.monitor.tick()
        await pilot.pause()
        header = str(app.query_one("#header").render())
        assert "the demo job exited with code 3: its output is in /tmp" in header and "/job.log" in header
    assert job.returncode == 3  # reaped: no <defunct> process while the screen stays open


def test_incidents_keep_the_history(tmp_path):
    spiky_run(tmp_path, time.time())
    js = summary_json(tmp_path)
    assert js["status"] == "running"
    kinds = [(i["kind"], i["rank"], i["first_step"], i["last_step"]) for i in js["incidents"]]
    # the live rule's 20-row window: 4 rows waiting 0.5 s among 16 of 0.01 s exceed 10 %: from step 103 until
    # the window holds fewer than 4 (step 166)
    assert ("data_starvation", 1, 103, 166) in kinds
    assert ("loss_spike", None, 300, 300) in kinds
    assert ("nan_loss", 0, 450, 450) in kinds
    spike = next(i for i in js["incidents"] if i["kind"] == "loss_spike")
    assert spike["worst"] == 30.0 and not spike["active"] and "loss 30 at step 300" in spike["message"]
    nan = next(i for i in js["incidents"] if i["kind"] == "nan_loss")
    assert nan["active"]  # a NaN alert stays active for the rest of the run
    assert [i["first_time"] for i in js["incidents"]] == sorted(i["first_time"] for i in js["incidents"])
    assert [a["kind"] for a in js["alerts"]] == ["nan_loss"]  # the spike and the starvation are over
    assert mstop("summary", str(tmp_path), "--fail-on", "incident").returncode == 1
    assert mstop("summary", str(tmp_path), "--fail-on", "data_starvation").returncode == 0  # not active now
    table = mstop("summary", str(tmp_path), env={**os.environ, "COLUMNS": "300"}).stdout
    assert "incident loss_spike" in table and "step 300:" in table


def test_a_healthy_run_has_no_incidents(tmp_path):
    from tests.helpers.health_common import healthy

    healthy(tmp_path, ranks=2, t0=time.time() - 405)
    js = summary_json(tmp_path)
    assert js["incidents"] == [] and mstop("summary", str(tmp_path), "--fail-on", "incident").returncode == 0


async def test_dropped_rows_are_shown_everywhere(tmp_path):
    from mstop.app import MonitorApp

    run = tmp_path / "run"
    write_rank(run, 0, steps(1, 30, t0=1000.0, loss=1.0, step_time=1.0))
    write_events(run, 0, [start("s1", 995.0), {"time": 1010.0, "kind": "dropped", "rows": 7, "events": 0,
                                               "session": "s1"},
                          {"time": 1031.0, "kind": "end", "session": "s1", "rows": 30}])
    assert summary_json(run)["dropped_rows"] == 7
    assert "7 lost by the writer" in mstop("summary", str(run), env={**os.environ, "COLUMNS": "200"}).stdout
    app = MonitorApp(str(run), clock=lambda: 1040.0, follow=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert "7 rows lost by the writer" in str(app.query_one("#header").render())
    pytest.importorskip("matplotlib")
    assert mstop("report", str(run), "--out", str(tmp_path / "rep"), timeout=180).returncode == 0
    assert "7 reported dropped by the writer" in (tmp_path / "rep" / "report.md").read_text()


def test_the_compilation_step_is_left_out_of_every_window(tmp_path):
    """A 20-step run whose first step compiled the graph for 5.5 s (MindFormers' tiny Llama on CPU): tokens/s
    reported 340 when that step sat in the window; the steady steps take 20 ms."""
    run = tmp_path / "run"
    for session, (first, last, t0) in enumerate(((1, 20, 1000.0), (21, 40, 2000.0))):
        write_rank(run, 0, steps(first, last, session=f"s{session}", t0=t0, dt=0.02, loss=1.0, tokens=128,
                                 step_time=lambda s, first=first: 5.5 if s == first else 0.02, data_wait=0.0))
    write_events(run, 0, [start("s0", 995.0), start("s1", 1995.0),
                          {"time": 2001.0, "kind": "end", "session": "s1"}])
    js = summary_json(run)
    assert js["tokens_per_s"] == pytest.approx(128 / 0.02)  # the restart's compile step (21) is left out too
    out = json.loads(mstop("compare", str(run), str(run), "--steps", "1:40", "--format", "json").stdout)
    assert out["runs"][0]["figures"]["step_time"]["value"] == pytest.approx(0.02)
    assert out["runs"][0]["figures"]["tokens_per_s"]["value"] == pytest.approx(128 / 0.02)


