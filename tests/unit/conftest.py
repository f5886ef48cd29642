"""The unit tier runs in this process: every phase of a unit test (setup, call, teardown; a module fixture
that starts a job is caught too) runs under tests/helpers/in_process.py's guard, which fails a test that
starts a process or opens a network socket and says which test and what it started. Such a test belongs in
tests/system."""

from __future__ import annotations

import importlib

import pytest

from tests.helpers.in_process import in_process

# NumPy 1.26 runs ``lscpu`` once, when numpy.testing is first imported (to learn whether the CPU has SVE): that
# is NumPy's start-up, not a test's process, so it is imported here, before any test runs.
importlib.import_module("numpy.testing")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    with in_process(item.nodeid, "setup"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    with in_process(item.nodeid, "call"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item):
    with in_process(item.nodeid, "teardown"):
        return (yield)
