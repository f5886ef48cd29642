"""Issue 61, with the real parts: a real msrun job's export read by Debian's node_exporter through its textfile
collector and checked by promtool, equal to ``summary --json``; the file replaced whole while a reader polls
the folder; the HTTP endpoint scraped while ``mstop export`` follows a live job. The families read back in
this process: tests/unit/test_export.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.helpers.common import ROOT, wait_for
from tests.helpers.msrun import Msrun, free_port

prometheus_client = pytest.importorskip("prometheus_client")
from tests.helpers.prom import samples as values  # noqa: E402

NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
PROMTOOL = shutil.which("promtool")


def mstop(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mstop", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.skipif(not (NODE_EXPORTER and PROMTOOL), reason="needs Debian's prometheus-node-exporter and "
                    "prometheus (promtool): .ci/run installs them")
def test_a_real_jobs_export_is_read_by_node_exporter_passes_promtool_and_equals_summary(tmp_path):
    """A real 4-rank msrun job (CPU) run to its end: ``mstop export --once`` into a folder node_exporter's
    textfile collector reads; scraped: mstop's families there, ``node_textfile_scrape_error`` 0, the run's
    labels right, every figure equal to ``summary --json``'s; ``promtool check metrics`` passes."""
    job = Msrun(tmp_path, 60, "--steps-sleep=0.02")
    try:
        assert job.proc.wait(timeout=240) == 0
    finally:
        job.stop()
    folder = tmp_path / "textfile"
    got = mstop("export", str(job.run), "--openmetrics", str(folder), "--once")
    assert got.returncode == 0, got.stderr
    fig = json.loads(mstop("summary", str(job.run), "--json").stdout)
    (prom,) = folder.glob("*.prom")
    assert prom.name == "mstop_run.prom"
    lint = subprocess.run([PROMTOOL, "check", "metrics"], input=prom.read_text(), capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    port = free_port()
    node = subprocess.Popen([NODE_EXPORTER, "--collector.disable-defaults", "--collector.textfile",
                             f"--collector.textfile.directory={folder}", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        text = []
        assert wait_for(lambda: text.append(_get(f"http://127.0.0.1:{port}/metrics")) or text[-1], 10)
    finally:
        node.kill()
        node.wait()
    scraped = text[-1]
    got = values(scraped)
    assert got[("node_textfile_scrape_error", ())] == 0
    assert 'mstop_up{host="' in scraped and 'run="run"' in scraped
    for name, key in (("mstop_step", "step"), ("mstop_loss", "loss"), ("mstop_loss_ema", "loss_ema"),
                      ("mstop_tokens_per_second", "tokens_per_s"), ("mstop_memory_headroom_ratio", "mem_headroom")):
        if fig[key] is not None:
            assert got[(name, ())] == pytest.approx(fig[key], rel=1e-9), name
    assert got[("mstop_ranks", (("status", "ended"),))] == 4 and got[("mstop_ranks_seen", ())] == 4
    assert got[("mstop_goodput_ratio", ())] == pytest.approx(fig["goodput"]["goodput"])
    assert got[("mstop_status_info", (("status", "finished"),))] == 1


def _get(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.read().decode()
    except OSError:
        return ""


def test_a_live_jobs_export_is_replaced_whole_and_served_over_http(tmp_path):
    """``mstop export`` follows a live 4-rank job, exporting every 0.2 s to a folder and on a loopback port: a
    reader polling the folder never sees a partial file (every read parses, ends with its last family) and
    never a temporary file named ``.prom``; the endpoint's step rises as the job trains; when the follow
    ends the file goes."""
    job = Msrun(tmp_path, 300, "--steps-sleep=0.05")
    folder, port = tmp_path / "textfile", free_port()
    exporter = None
    try:
        assert wait_for(lambda: job.run.is_dir() and len(list(job.run.glob("rank*.csv"))) == 4, 180)
        exporter = subprocess.Popen([sys.executable, "-m", "mstop", "export", str(job.run), "--openmetrics",
                                     str(folder), "--every", "0.2", "--listen", f"127.0.0.1:{port}"], cwd=ROOT,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        reads, steps = 0, []
        end = time.monotonic() + 20
        while time.monotonic() < end:
            for p in folder.glob("*") if folder.is_dir() else []:
                assert p.name == "mstop_run.prom" or not p.name.endswith(".prom"), p.name
                try:
                    text = p.read_text() if p.name.endswith(".prom") else None
                except FileNotFoundError:
                    continue
                if text is not None:
                    assert text.endswith("\n") and "mstop_up" in text and "mstop_rank_status_info" in text, text[-200:]
                    values(text)  # parses whole
                    reads += 1
            served = _get(f"http://127.0.0.1:{port}/metrics")
            if "mstop_step" in served:
                steps.append(values(served)[("mstop_step", ())])
            time.sleep(0.05)
        assert reads > 20, reads
        assert len(steps) > 5 and steps[-1] > steps[0], steps
    finally:
        if exporter is not None:
            exporter.terminate()
            out, err = exporter.communicate(timeout=30)
            assert exporter.returncode in (0, 143, -15), err
        job.stop()
    assert not list(folder.glob("*.prom"))  # the follow ended: its figures are no longer current


async def test_the_monitor_serves_the_same_text_while_it_follows_a_live_run(tmp_path):
    """``mstop RUN --listen 127.0.0.1:PORT --openmetrics DIR``: while the monitor follows a run a writer keeps
    writing (a hand-written loop in a thread of this test), the endpoint and the file give the run's step as it
    rises; when the monitor quits, the file goes."""
    import threading

    from mstop.app import MonitorApp
    from mstop_writer import MetricsWriter
    from tests.helpers.app_common import settle

    run, folder, port = tmp_path / "live", tmp_path / "textfile", free_port()
    stop = threading.Event()

    def train() -> None:
        with MetricsWriter(run, rank=0, world_size=1) as w:
            step = 0
            while not stop.is_set():
                step += 1
                w.log(step, loss=1.0 / step, step_time=0.05, tokens=512)
                time.sleep(0.05)

    writer = threading.Thread(target=train, daemon=True)
    writer.start()
    assert wait_for(lambda: (run / "rank0.csv").exists(), 20)
    app = MonitorApp(str(run), openmetrics=str(folder), listen=f"127.0.0.1:{port}", export_every=0.5)
    steps = []
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            end = time.monotonic() + 30
            while time.monotonic() < end and len(set(steps)) < 3:
                await settle(pilot)
                served = _get(f"http://127.0.0.1:{port}/metrics")
                if "mstop_step" in served:
                    steps.append(values(served)[("mstop_step", ())])
                await pilot.pause(0.3)
            assert len(set(steps)) >= 3 and steps == sorted(steps), steps
            filed = values((folder / "mstop_live.prom").read_text())
            assert filed[("mstop_up", ())] == 1 and filed[("mstop_step", ())] >= steps[0]
    finally:
        stop.set()
        writer.join(10)
    assert not list(folder.glob("*.prom"))
    assert _get(f"http://127.0.0.1:{port}/metrics") == ""  # the endpoint closed with the monitor
