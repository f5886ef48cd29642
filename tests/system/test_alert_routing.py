"""Issue 61, item 3, with real parts: ``mstop export --alert-rules`` routing a run's alerts to an HTTP relay (a
real server on 127.0.0.1), 1,000 dead ranks of 1,024 told in one notification, a silence kept beside the run,
the history read back by ``summary --json``; a relay that never answers delays no export (measured). The
router and the sinks fed in this process: tests/unit/test_routing.py."""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time

from tests.helpers.common import ROOT, wait_for
from tests.helpers.runs import start, steps, write_events, write_rank


class Relay(http.server.ThreadingHTTPServer):
    """An on-site relay: keeps each POSTed body."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                n = int(self.headers.get("Content-Length") or 0)
                relay.bodies.append(json.loads(self.rfile.read(n)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *a) -> None:  # noqa: ANN002
                pass

        relay = self
        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/mstop"


def dead_ranks(run, n: int = 1024, alive: int = 24) -> None:
    """``n`` ranks stepping together every 10 s for five minutes, the first ``alive`` to now, the others
    silent since step 5 (their last rows and heartbeats 250 s old)."""
    t0 = time.time() - 301
    for r in range(n):
        last = 30 if r < alive else 5
        write_rank(run, r, steps(1, last, t0=t0, dt=10.0, loss=1.0, step_time=10.0))
        write_events(run, r, [start("s1", t=t0 - 5, world_size=n, heartbeat_interval=5.0),
                              {"time": t0 + 10 * last, "kind": "heartbeat", "session": "s1"}])
        for f in (run / f"rank{r}.csv", run / f"rank{r}.events.jsonl"):  # written when its rows say
            os.utime(f, (t0 + 10 * last, t0 + 10 * last))


def export(run, folder, rules, *extra: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mstop", "export", str(run), "--openmetrics", str(folder),
                           "--alert-rules", str(rules), *extra], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_a_thousand_dead_ranks_are_one_notification_to_the_relay_a_silence_holds_and_summary_has_the_history(
        tmp_path):
    run = tmp_path / "run"
    dead_ranks(run)
    relay = Relay()
    rules = tmp_path / "rules.toml"
    rules.write_text(f'[sinks]\nhttp = "{relay.url}"\nfile = "{tmp_path / "alerts.jsonl"}"\n\n'
                     '[[route]]\nmatch = "critical"\nsinks = ["http", "file"]\n')
    got = export(run, tmp_path / "prom", rules, "--once")
    assert got.returncode == 0, got.stderr
    dead = [b for b in relay.bodies if b["kind"] == "dead_rank"]
    assert len(dead) == 1 and dead[0]["state"] == "fired" and dead[0]["ranks"] == list(range(24, 1024)), \
        [(b["kind"], len(b["ranks"])) for b in relay.bodies]
    filed = [json.loads(x) for x in (tmp_path / "alerts.jsonl").read_text().splitlines()]
    assert filed == relay.bodies  # both sinks got the same notifications
    summary = json.loads(subprocess.run([sys.executable, "-m", "mstop", "summary", str(run), "--json"], cwd=ROOT,
                                        capture_output=True, text=True, timeout=120).stdout)
    assert summary["alert_history"] == relay.bodies

    silenced = subprocess.run([sys.executable, "-m", "mstop", "silence", "add", "dead_rank", "--for", "1h",
                               "--reason", "nodes being replaced", str(run)], cwd=ROOT, capture_output=True,
                              text=True, timeout=60)
    assert silenced.returncode == 0, silenced.stderr
    relay.bodies.clear()
    for r in range(24):  # the live ranks beat on (on a loaded machine the steps above took tens of seconds)
        write_events(run, r, [{"time": time.time(), "kind": "heartbeat", "session": "s1"}])
    assert export(run, tmp_path / "prom", rules, "--once").returncode == 0
    assert not [b for b in relay.bodies if b["kind"] == "dead_rank"], relay.bodies
    history = json.loads(subprocess.run([sys.executable, "-m", "mstop", "summary", str(run), "--json"], cwd=ROOT,
                                        capture_output=True, text=True, timeout=120).stdout)["alert_history"]
    assert history[-len(relay.bodies) - 1:] and any(h["state"] == "silenced" and h["kind"] == "dead_rank"
                                                    for h in history), history


def test_a_relay_that_never_answers_delays_no_export(tmp_path):
    """The relay accepts the connection and never answers (a hung on-site service): the exports go on at their
    pace (measured: the file is written again every 0.5 s), and the failure is said once the timeout passes."""
    run = tmp_path / "run"
    dead_ranks(run, n=8, alive=2)
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(16)  # accepted by the kernel, never read nor answered
    rules = tmp_path / "rules.toml"
    rules.write_text(f'[sinks]\nhttp = "http://127.0.0.1:{hung.getsockname()[1]}/x"\nhttp_timeout = "3s"\n'
                     'http_retries = 0\n\n[[route]]\nmatch = "*"\nsinks = ["http"]\n')
    folder = tmp_path / "prom"
    p = subprocess.Popen([sys.executable, "-m", "mstop", "export", str(run), "--openmetrics", str(folder),
                          "--alert-rules", str(rules), "--every", "0.5"], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        prom = folder / "mstop_run.prom"
        assert wait_for(prom.exists, 60)
        seen = []
        end = time.monotonic() + 4
        while time.monotonic() < end:
            seen.append(prom.stat().st_mtime_ns)
            time.sleep(0.05)
        writes = len(set(seen))
        assert writes >= 5, writes  # 4 s at 0.5 s while the relay holds its sink
    finally:
        p.terminate()
        _, err = p.communicate(timeout=30)
        hung.close()
    assert "alert sink http failed" in err and "timed out" in err, err
