"""The ``mstop`` command as a user runs it."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def mstop(*args):
    return subprocess.run([sys.executable, "-m", "mstop", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def test_monitor_of_a_missing_directory_exits_2():
    proc = mstop("runs/does-not-exist")
    assert proc.returncode == 2 and "runs/does-not-exist: no such directory" in proc.stderr


def test_monitor_usage_errors_exit_2():
    proc = mstop("tests/fixtures/snap-run", "--poll", "0")
    assert proc.returncode == 2 and "must be positive" in proc.stderr


def test_version_and_help():
    assert mstop("--version").stdout.startswith("mstop 0.")
    out = mstop("--help").stdout
    assert "summary" in out and "demo" in out


def test_monitor_with_a_missing_or_hostile_baseline_exits_2():
    proc = mstop("tests/fixtures/snap-run", "--baseline", "runs/nope")
    assert proc.returncode == 2 and "--baseline runs/nope: no such directory" in proc.stderr
    proc = mstop("tests/fixtures/snap-run", "--baseline=-oProxyCommand=x:/p")
    assert proc.returncode == 2 and "not a host name" in proc.stderr


def test_help_lists_compare_and_report():
    out = mstop("--help").stdout
    assert "compare" in out and "report" in out


def test_nothing_below_the_app_loads_textual_or_rich():
    """The engine, sources, views and commands are importable (and testable) without the screen's libraries:
    importing every module outside mstop/app/ loads neither textual nor rich."""
    import pkgutil
    import subprocess
    import sys

    import mstop

    mods = [f"mstop.{m.name}" for m in pkgutil.iter_modules(mstop.__path__) if m.name not in ("app", "__main__")]
    assert "mstop.figures" in mods and "mstop.incidents" in mods
    code = "import sys\n" + "".join(f"import {m}\n" for m in mods) + (
        "print(sorted({k.split('.')[0] for k in sys.modules} & {'textual', 'rich', 'textual_plotext'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
