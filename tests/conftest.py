"""What every test shares: hypothesis's profiles, a guard against leaked threads, a small full disk. Helpers
live in tests/helpers/; each tier's own fixtures in its conftest.py.

Hypothesis runs by profile, never by a count pinned in a test: ``quick`` (the default: a developer's loop, a
few examples a property) and ``thorough`` (``--hypothesis-profile=thorough``, as .ci/run and the README's test
command select it). An example a property once found stays in its test as an ``@example``."""

from __future__ import annotations

import gc
import threading

import pytest
from hypothesis import HealthCheck, settings

from tests.helpers.app_common import make_run
from tests.helpers.common import FullDisk
from tests.helpers.runs import runs_folder

#: the examples each property draws, by profile; no deadline (a loaded machine is slow, not wrong), and no
#: complaint that generating is slow (the same)
settings.register_profile("quick", max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=200, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])


#: the cyclic collector's thresholds for a test run (Python's own: 700, 10, 10). Tests make and drop many short-lived
#: object graphs (Textual's widgets, hypothesis's examples, rows by the thousand): at Python's thresholds the
#: collector ran 11,000 times in ``pytest tests/unit``, 72 of them full passes of about 0.19 s each over whatever
#: a test held at the time, 16 s of a 66 s run (measured with gc.callbacks). Memory is still freed by reference
#: counting at once; only cycles wait a little longer.
GC_THRESHOLDS = (10_000, 10, 10)


def pytest_configure(config: pytest.Config) -> None:
    """``quick`` unless ``--hypothesis-profile`` chose another; the collector's thresholds for a test run."""
    if not config.getoption("hypothesis_profile", None):
        settings.load_profile("quick")
    gc.set_threshold(*GC_THRESHOLDS)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What stays for the whole run (modules, the collected tests) leaves the collector's passes (gc.freeze):
    a full pass then looks only at what the tests made since."""
    gc.collect()
    gc.freeze()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by its folder (``-m unit``, ``-m system``) as pyproject declares the markers."""
    for item in items:
        kind = item.path.parent.name
        if kind in ("unit", "system"):
            item.add_marker(getattr(pytest.mark, kind))


@pytest.fixture(autouse=True)
def no_leaked_threads():
    """Fail a test that leaves threads running (a writer not closed, a follower not stopped)."""
    before = set(threading.enumerate())
    yield
    leaked = [t for t in threading.enumerate() if t not in before and t.is_alive()
              and t.name.startswith("mstop")]
    for t in leaked:
        t.join(timeout=2)
    leaked = [t.name for t in leaked if t.is_alive()]
    assert not leaked, f"threads left running: {leaked}"


@pytest.fixture
def full_disk(tmp_path):
    """A 256 KiB tmpfs (CI runs as root), mounted by this process's own mount(2) call (no ``mount`` program: the
    unit tier starts none); skipped with the reason where mounting is not allowed."""
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    why = FullDisk.mount(mnt)
    if why:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {why}")
    try:
        yield FullDisk(mnt)
    finally:
        FullDisk.unmount(mnt)


@pytest.fixture
def two_rank_run(tmp_path):
    """A finished two-rank run of 40 steps with every column and a checkpoint (tests/helpers/app_common.py)."""
    return make_run(tmp_path / "run")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A folder of runs in known states at NOW_RUNS, written by the real MetricsWriter (one for a module)."""
    return runs_folder(tmp_path_factory.mktemp("runs") / "runs")


@pytest.fixture(params=["direct", "watchdog"])
def native(request, monkeypatch):
    """Native file events read by our own inotify reader, or through watchdog's observer (its busy
    threshold for the switch to scans then applies to both, so the switching is tested on each)."""
    import mstop.sources.local as local

    plain = local.FollowTuning()
    monkeypatch.setattr(local, "TUNING", local.FollowTuning(direct_events=request.param == "direct",
                                                            busy_events_direct=plain.busy_events))
    return request.param
