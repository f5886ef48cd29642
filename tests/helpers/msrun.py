"""Real msrun jobs for system tests: a free port for the master, and a 4-worker data-parallel job of
msrun_job.py (CPU) in a process group of its own."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.common import HELPERS, read_events, wait_for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Msrun:
    """A real 4-worker data-parallel msrun job of tests/helpers/msrun_job.py (CPU), in its own process group."""

    def __init__(self, tmp: Path, steps: int, *extra: str, workers: int = 4) -> None:
        pytest.importorskip("mindspore", reason="a real job needs MindSpore: pip install -e '.[mindspore]'")
        import shutil

        msrun = shutil.which("msrun") or str(Path(sys.executable).parent / "msrun")
        self.run, self.logs = tmp / "run", tmp / "logs"
        self.proc = subprocess.Popen([msrun, f"--worker_num={workers}", f"--local_worker_num={workers}",
                                      "--master_addr=127.0.0.1", f"--master_port={free_port()}",
                                      f"--log_dir={self.logs}", "--join=True", str(HELPERS / "msrun_job.py"),
                                      str(self.run), str(steps), *extra],
                                     cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True,
                                     env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})

    def at_step(self, rank: int, step: int, timeout: float = 180) -> None:
        log = self.logs / f"worker_{rank}.log"
        assert wait_for(lambda: log.exists() and f"STEP {step}\n" in log.read_text(errors="replace"), timeout), \
            f"worker {rank} did not reach step {step}"

    def pid(self, rank: int) -> int:
        path = self.run / f"rank{rank}.events.jsonl"
        assert wait_for(lambda: path.exists() and any(e["kind"] == "start" for e in read_events(path)), 180)
        return [e for e in read_events(path) if e["kind"] == "start"][-1]["pid"]

    def stop(self) -> None:
        """Kill the job: its workers (msrun starts each in a process group of its own: their pids are in
        their start events) and msrun's group."""
        for path in sorted(self.run.glob("rank*.events.jsonl")) if self.run.is_dir() else []:
            for e in read_events(path):
                if e["kind"] == "start":
                    try:
                        os.kill(e["pid"], signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)


def plain_msrun(tmp: Path, *args: str, workers: int = 2) -> tuple[subprocess.Popen, Path]:
    """A real msrun job of tests/helpers/msrun_plain_job.py (no mstop code: MindSpore's LossMonitor only) with
    ``args`` (STEPS EPOCHS [KILL_AT [PAUSE]]), in its own session; (the msrun process, its log directory)."""
    import shutil

    pytest.importorskip("mindspore", reason="a real job needs MindSpore: pip install -e '.[mindspore]'")
    msrun = shutil.which("msrun") or str(Path(sys.executable).parent / "msrun")
    logs = tmp / "logs"
    job = subprocess.Popen([msrun, f"--worker_num={workers}", f"--local_worker_num={workers}",
                            "--master_addr=127.0.0.1", f"--master_port={free_port()}", f"--log_dir={logs}",
                            "--join=True", str(HELPERS / "msrun_plain_job.py"), *args],
                           cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                           env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    return job, logs
