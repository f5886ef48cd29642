"""The README cannot rot: its code runs, and CI runs its test command."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

import pytest

from tests.helpers.common import ROOT

README = (ROOT / "README.md").read_text()


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_ci_runs_the_readme_test_command():
    commands = blocks("sh")
    assert len(commands) == 2, "the README's first section has the demo command and the test command"
    test_command = commands[1].strip()
    assert "pytest" in test_command
    assert test_command in (ROOT / ".ci" / "run").read_text()


@pytest.mark.parametrize("code", [b for b in blocks("python") if "import" in b and "..." not in b])
def test_python_examples_run(code, tmp_path):
    if "mindspore" in code and importlib.util.find_spec("mindspore") is None:
        pytest.skip("mindspore not installed: pip install -e '.[mindspore]'")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dirs = [p for p in (tmp_path / "runs").iterdir()]
    assert len(run_dirs) == 1
    csv = (run_dirs[0] / "rank0.csv").read_text().splitlines()
    assert csv[0].startswith("time,step,epoch,loss") and len(csv) > 1
    events = (run_dirs[0] / "rank0.events.jsonl").read_text()
    assert '"kind":"start"' in events and '"kind":"end"' in events
