"""The ``mstop`` command as a user runs it."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers.common import ROOT


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

    mods = [m.name for m in pkgutil.walk_packages(mstop.__path__, "mstop.")
            if not (m.name == "mstop.app" or m.name.startswith("mstop.app.") or m.name == "mstop.__main__")]
    for room in ("sources", "engine", "view", "commands"):
        assert f"mstop.{room}" in mods
    assert "mstop.engine.figures" in mods and "mstop.sources.followers.follower" in mods and len(mods) >= 20
    code = "import sys\n" + "".join(f"import {m}\n" for m in mods) + (
        "print(sorted({k.split('.')[0] for k in sys.modules} & {'textual', 'rich', 'textual_plotext'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_writer_imports_only_the_standard_library():
    """mstop_writer runs inside the training job: its modules import the standard library only (the
    MindSpore callback also MindSpore, the MindFormers registration MindFormers: what such a job has).
    Checked twice: every import statement in writer/, and what importing every module except those two
    loads, with nothing but writer/ on the path."""
    import ast
    import subprocess
    import sys

    writer = ROOT / "writer" / "mstop_writer"
    files = sorted(writer.glob("*.py"))
    assert {f.name for f in files} >= {"__init__.py", "metrics.py", "callback.py", "schema.py"}
    for f in files:
        for node in ast.walk(ast.parse(f.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            for name in names:
                top = name.split(".")[0]
                # MindSpore where the job's framework is asked (the callback, device memory); MindFormers in its
                # registration only
                allowed = {"mindspore", "mindformers"} if f.name == "mindformers.py" else {"mindspore"}
                assert top in sys.stdlib_module_names or top in allowed, f"{f.name} imports {name}"
    mods = [f"mstop_writer.{f.stem}" for f in files if f.stem not in ("__init__", "callback", "mindformers")]
    code = ("import sys, types\n"
            f"pkg = types.ModuleType('mstop_writer'); pkg.__path__ = [{str(writer)!r}]\n"
            "import importlib.util as u\n"
            f"spec = u.spec_from_file_location('mstop_writer', {str(writer / '__init__.py')!r},"
            f" submodule_search_locations=[{str(writer)!r}])\n"
            "m = u.module_from_spec(spec); sys.modules['mstop_writer'] = m; spec.loader.exec_module(m)\n"
            + "".join(f"import {m}\n" for m in mods)
            + "print(sorted({k.split('.')[0] for k in sys.modules}\n"
              "             - set(sys.stdlib_module_names) - {'mstop_writer', '__main__'}))")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
