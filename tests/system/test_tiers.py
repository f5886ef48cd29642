"""The unit tier is in-process (issue 56): tests/unit/conftest.py, run by a real pytest on a few tests of our
own making, fails a test that starts a process or opens a network socket (in its body, its fixture, or where
the code under test swallows the error), names the test and what it started, and leaves a test that only
computes, or runs an asyncio loop, alone. The house test that no unit file imports what starts processes:
tests/unit/test_house.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from tests.helpers.common import ROOT

CASES = '''
import asyncio
import multiprocessing
import socket
import subprocess

import pytest


@pytest.fixture(scope="module")
def job():
    return subprocess.Popen(["sleep", "0"])


def test_starts_a_program():
    subprocess.run(["true"], check=True)


def test_swallows_what_the_guard_raised():
    try:
        subprocess.run(["true", "--quiet"], check=True)
    except Exception:
        pass  # the writer swallows its own errors: the test still fails


def test_connects_to_a_port():
    socket.create_connection(("127.0.0.1", 9), timeout=1)


def test_starts_a_multiprocessing_worker():
    p = multiprocessing.get_context("spawn").Process(target=print)
    p.start()
    p.join()


def test_a_module_fixture_starts_a_job(job):
    pass


def test_only_computes_and_runs_an_event_loop():
    assert asyncio.run(asyncio.sleep(0, result=42)) == 42
'''


def test_the_unit_guard_fails_each_process_or_socket_and_names_it(tmp_path):
    unit = tmp_path / "unit"
    unit.mkdir()
    shutil.copy(ROOT / "tests" / "unit" / "conftest.py", unit / "conftest.py")
    (unit / "test_cases.py").write_text(CASES)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "--tb=line", "-p", "no:cacheprovider",
                          "-p", "no:randomly", str(unit)], cwd=tmp_path, capture_output=True, text=True, env=env,
                         timeout=300)
    said = out.stdout + out.stderr
    assert out.returncode == 1, said
    assert "4 failed, 1 passed, 1 error" in said, said  # the fixture's is an error in setup
    assert "PASSED unit/test_cases.py::test_only_computes_and_runs_an_event_loop" in said, said
    for test, what in [("test_starts_a_program (call)", "subprocess ['true']"),
                       ("test_swallows_what_the_guard_raised (call)", "subprocess ['true', '--quiet']"),
                       ("test_connects_to_a_port (call)", "socket.connect ('127.0.0.1', 9)"),
                       ("test_starts_a_multiprocessing_worker (call)", "fork_exec"),
                       ("test_a_module_fixture_starts_a_job (setup)", "subprocess ['sleep', '0']")]:
        assert f"unit/test_cases.py::{test} is a unit test and tried {what}" in said, (test, said)
    assert "belongs in tests/system" in said
