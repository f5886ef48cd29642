"""MstopCallback in MindFormers jobs (issue 15): registered by one import, or by REGISTER_PATH and one yaml
entry. The MindFormers tests run where mindformers imports (a second environment: see the README's
MindFormers section and .ci/run) and are skipped with the reason elsewhere."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

HAS_MF = importlib.util.find_spec("mindformers") is not None
needs_mf = pytest.mark.skipif(not HAS_MF, reason="mindformers is not installed here (the kit in "
                                                 "../shared/mindformers/README.md installs it; .ci/run does too)")


def run(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})


def test_register_path_names_a_folder_with_the_module_auto_register_loads():
    out = subprocess.run([sys.executable, "-m", "mstop_writer.mindformers", "--register-path"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    folder = Path(out.stdout.strip())
    module = folder / "mstop_mf.py"
    assert folder.is_dir() and module.is_file()
    assert "from mstop_writer.callback import MstopCallback" in module.read_text()
    usage = subprocess.run([sys.executable, "-m", "mstop_writer.mindformers"], cwd=ROOT, capture_output=True,
                           text=True, timeout=60)
    assert usage.returncode == 2 and "auto_register: mstop_mf.MstopCallback" in usage.stderr


@pytest.mark.skipif(HAS_MF, reason="mindformers is installed here: the message for its absence cannot be seen")
def test_without_mindformers_the_import_says_what_is_missing():
    out = run("import mstop_writer.mindformers")
    assert out.returncode != 0
    assert "mstop_writer.mindformers needs MindFormers" in out.stderr and "pip install mindformers" in out.stderr


@needs_mf
def test_one_import_registers_the_callback_for_a_yaml_entry(tmp_path):
    out = run("import sys\n"
              "import mstop_writer.mindformers\n"
              "from mindformers.core.callback.build_callback import build_callback\n"
              "from mstop_writer import MstopCallback\n"
              f"cb = build_callback({{'type': 'MstopCallback', 'run_dir': {str(tmp_path)!r}, 'rank': 0,"
              " 'world_size': 1})\n"
              "print(type(cb).__name__, isinstance(cb, MstopCallback))\n")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-2:] == ["MstopCallback", "True"]


@needs_mf
def test_register_path_and_auto_register_need_no_import(tmp_path):
    folder = subprocess.run([sys.executable, "-m", "mstop_writer.mindformers", "--register-path"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60).stdout.strip()
    out = run("from mindformers.core.callback.build_callback import build_callback\n"
              f"cb = build_callback({{'type': 'MstopCallback', 'auto_register': 'mstop_mf.MstopCallback',"
              f" 'run_dir': {str(tmp_path)!r}, 'rank': 0, 'world_size': 1}})\n"
              "print(type(cb).__module__, type(cb).__name__)\n", REGISTER_PATH=folder)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-2:] == ["mstop_writer.callback", "MstopCallback"]
