"""Two distributions from one repository (issue 37): ``mstop-writer`` (``writer/``, no dependencies at all) for
training images, and ``mstop`` (the viewer, depending on it). Built as pip builds them, checked from the wheels'
own file lists and metadata, and installed the way the README says, with pip's own report as the witness."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from tests.helpers.common import ROOT
from tests.helpers.pip import pip

WRITER = ROOT / "writer"


def _pip(*args: str, python: str = sys.executable, timeout: float = 600) -> subprocess.CompletedProcess:
    return pip(*args, python=python, timeout=timeout)


#: what a checkout holds that a fresh clone does not (a build's leftovers, environments, caches): a wheel built
#: in a checkout with an old ``build/`` took that folder's modules, deleted since, or failed on its files
NOT_CLONED = shutil.ignore_patterns(".git", ".venv", ".mf-venv", "build", "dist", "*.egg-info", "__pycache__",
                                    ".hypothesis", ".pytest_cache", ".ruff_cache")


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, Path]:
    """Both wheels, built as ``pip wheel --no-deps ./writer .`` builds them (each in its own build env), from
    a copy of the tree as a fresh clone has it."""
    out = tmp_path_factory.mktemp("wheels")
    tree = tmp_path_factory.mktemp("tree") / "mstop"
    shutil.copytree(ROOT, tree, ignore=NOT_CLONED)
    got = _pip("wheel", "--no-deps", "-q", "-w", str(out), str(tree / "writer"), str(tree))
    if got.returncode != 0 and "No matching distribution found for setuptools" in got.stderr:
        pytest.skip(f"pip cannot fetch setuptools for the build environment: {got.stderr.strip()[-300:]}")
    assert got.returncode == 0, got.stderr[-3000:]
    found = {p.name.split("-")[0]: p for p in out.glob("*.whl")}
    assert set(found) == {"mstop", "mstop_writer"}, sorted(found)
    return found


def _names(wheel: Path) -> set[str]:
    return set(zipfile.ZipFile(wheel).namelist())


def _metadata(wheel: Path):
    z = zipfile.ZipFile(wheel)
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    return Parser().parsestr(z.read(meta).decode())


def _tree(folder: Path, package: str) -> set[str]:
    """Every module below ``folder`` as a wheel names it (``package/sub/x.py``), caches left out."""
    return {f"{package}/{p.relative_to(folder).as_posix()}" for p in folder.rglob("*.py")
            if "__pycache__" not in p.parts}


def test_the_writer_wheel_holds_every_module_and_needs_nothing(wheels):
    names = _names(wheels["mstop_writer"])
    modules = _tree(WRITER / "mstop_writer", "mstop_writer")
    assert "mstop_writer/mindformers_register/mstop_mf.py" in modules  # REGISTER_PATH's folder, not a package
    assert modules <= names, sorted(modules - names)
    assert not [n for n in names if n.startswith(("mstop/", "tests/"))], "the writer's wheel holds only the writer"
    meta = _metadata(wheels["mstop_writer"])
    assert meta["Name"] == "mstop-writer"
    assert meta.get_all("Requires-Dist") is None, meta.get_all("Requires-Dist")


def test_the_viewer_wheel_holds_every_module_and_its_data_and_depends_on_the_writer(wheels):
    names = _names(wheels["mstop"])
    modules = _tree(ROOT / "mstop", "mstop")
    assert len(modules) > 60 and "mstop/app/widgets/chart.py" in modules
    assert modules <= names, sorted(modules - names)  # a new subpackage cannot go missing: found, not listed
    assert {"mstop/data/demo-run/rank0.csv", "mstop/app/monitor.tcss"} <= names
    assert not [n for n in names if n.startswith(("mstop_writer/", "tests/", "writer/"))]
    meta = _metadata(wheels["mstop"])
    from mstop_writer import __version__

    assert f"mstop-writer=={__version__}" in meta.get_all("Requires-Dist")
    assert meta["Version"] == __version__  # one version for the pair: the viewer pins the writer it reads


def test_the_writers_wheel_changes_nothing_else_in_a_training_environment(wheels, tmp_path):
    """A fresh venv holding ``numpy<2`` (as MindSpore 2.10's does): installing the writer's wheel installs that
    one distribution, and pip's own report and ``pip freeze`` show nothing else installed, upgraded or removed."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = str(venv / "bin" / "python")
    got = _pip("install", "-q", "numpy<2", python=py)
    if got.returncode != 0:
        pytest.skip(f"cannot install numpy<2 from the package index here: {got.stderr.strip()[-300:]}")
    before = _pip("freeze", "--all", python=py).stdout.splitlines()
    assert any(line.startswith("numpy==1.") for line in before)
    report = tmp_path / "report.json"
    got = _pip("install", "--report", str(report), str(wheels["mstop_writer"]), python=py)
    assert got.returncode == 0, got.stderr[-2000:]
    installed = [(i["metadata"]["name"], i["metadata"]["version"]) for i in json.loads(report.read_text())["install"]]
    assert installed == [("mstop-writer", _metadata(wheels["mstop_writer"])["Version"])]
    after = _pip("freeze", "--all", python=py).stdout.splitlines()
    added = sorted(set(after) - set(before))  # a wheel installed from a file is frozen as ``name @ file://...``
    assert len(added) == 1 and added[0].startswith("mstop-writer"), added
    assert set(before) <= set(after)  # nothing upgraded nor removed: NumPy 1.x stays
    used = subprocess.run([py, "-c", "import sys, mstop_writer; print(sorted(m.split('.')[0] for m in sys.modules"
                           " if m.split('.')[0] in ('numpy', 'pandas', 'pyarrow', 'textual')))"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert used.returncode == 0 and used.stdout.strip() == "[]", used.stderr


def test_the_readme_line_for_a_mindspore_image_adds_only_the_writer(tmp_path):
    """The README's training-image line, ``pip install ./writer``, asked of this test environment (which holds
    ``mindspore==2.10.0`` and ``numpy<2`` where the mindspore extra is installed): pip's dry-run report installs
    ``mstop-writer`` and nothing else."""
    pytest.importorskip("mindspore", reason="the mindspore extra is not installed: pip install -e '.[mindspore]'")
    report = tmp_path / "report.json"
    got = _pip("install", "--dry-run", "--ignore-installed", "--report", str(report), str(WRITER))
    assert got.returncode == 0, got.stderr[-2000:]
    assert [i["metadata"]["name"] for i in json.loads(report.read_text())["install"]] == ["mstop-writer"]
