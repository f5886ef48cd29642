"""What the system tier's tests share, made once for a session (a worker's session, under pytest-xdist):

- ``server``: one OpenSSH server on 127.0.0.1. Its client config (``server.config``) reaches it as
  ``testhost``, and as ``lo1``, ``lo2`` ... and ``gw1``, ``gw2`` ...: aliases of this machine, the hosts of a
  node set and its gateways. A test that must kill or stop a server starts one of its own.
- ``killed_plain_job``: a real plain msrun job (MindSpore's LossMonitor and TimeMonitor, no mstop code) whose
  rank 1 was SIGKILLed mid-epoch, read by the tests of what mstop says of it afterwards.

The tier runs on both cores (``-n 4 --dist loadgroup``, as .ci/run and the README run it): the tests are
handed out one by one, and a group of tests that read one job (``@pytest.mark.xdist_group``) to one worker.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import sshd


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """The tier's OpenSSH server (skipped with the reason where there is none)."""
    srv = sshd.start_or_skip(tmp_path_factory.mktemp("sshd"))
    srv.config.write_text(srv.config.read_text() + sshd.alias(srv, "lo* gw*"))
    yield srv
    sshd.stop(srv)


@dataclass(frozen=True)
class KilledJob:
    """A finished (killed) job: its log folder, and when it began and ended on this machine's clock."""

    logs: Path
    began: float
    ended: float
    returncode: int


@pytest.fixture(scope="session")
def killed_plain_job(tmp_path_factory) -> KilledJob:
    """A real 2-worker plain msrun job of 60 steps of at least 0.1 s whose rank 1 is SIGKILLed at step 30,
    before its first epoch ends (tests/helpers/msrun_plain_job.py): msrun's scheduler times a worker out and
    ends the job. Made once: two files' tests read it."""
    pytest.importorskip("mindspore", reason="a real job needs MindSpore: pip install -e '.[mindspore]'")
    from tests.helpers.msrun import plain_msrun

    began = time.time()
    job, logs = plain_msrun(tmp_path_factory.mktemp("killed-plain-job"), "60", "1", "30", "0.1")
    code = job.wait(timeout=300)
    return KilledJob(logs, began, time.time(), code)
