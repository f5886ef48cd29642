"""The README and docs/ cannot rot: their code runs and gives sane figures, their mstop command lines are
accepted by the command line, their links lead somewhere, and CI runs the README's test command (issue 37)."""

from __future__ import annotations

import importlib.util
import json
import math
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.common import ROOT
from tests.helpers.pip import pip

README = (ROOT / "README.md").read_text()
PAGES = {p.relative_to(ROOT).as_posix(): p.read_text()
         for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]}


def blocks(lang: str, text: str = README) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def all_blocks(lang: str) -> list[tuple[str, str]]:
    return [(page, b) for page, text in PAGES.items() for b in blocks(lang, text)]


def test_ci_runs_the_readme_test_command():
    commands = blocks("sh")
    assert len(commands) == 2, "the README's first section has the demo command and the test command"
    demo, test_command = (c.strip() for c in commands)
    assert "pytest" in test_command and demo.endswith("mstop demo")
    assert test_command in (ROOT / ".ci" / "run").read_text()
    for command in commands:  # no index holds mstop-writer: the clone's writer is named beside the viewer
        assert "pip install -e ./writer -e '." in command


def test_the_readme_is_a_front_door_and_the_rest_is_in_docs():
    assert len(README.splitlines()) <= 300
    assert len(PAGES) >= 8 and "docs/files.md" in PAGES and "docs/install.md" in PAGES


@pytest.mark.parametrize("page", sorted(PAGES))
def test_every_link_and_picture_leads_to_a_file(page):
    here = (ROOT / page).parent
    missing = []
    for target in re.findall(r"\]\(([^)\s]+)\)", PAGES[page]):
        if target.startswith(("http://", "https://", "#", "mailto:")):
            continue
        if not (here / target.split("#", 1)[0]).exists():
            missing.append(target)
    assert not missing, f"{page}: {missing}"


def _mstop_lines() -> list[tuple[str, str]]:
    """Every line of a code block that runs mstop (``mstop ...``), its comment cut off."""
    out = []
    for page, text in PAGES.items():
        for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
            for line in block.splitlines():
                line = line.split("  #", 1)[0].strip()
                if line.startswith("mstop ") and "[" not in line and "|" not in line and "…" not in line:
                    out.append((page, line))
    return out


MSTOP_LINES = _mstop_lines()


def test_the_docs_hold_the_commands_people_copy():
    assert len(MSTOP_LINES) >= 15, MSTOP_LINES


@pytest.mark.parametrize(("page", "line"), MSTOP_LINES, ids=[f"{p}:{ln}" for p, ln in MSTOP_LINES])
def test_every_mstop_command_line_in_the_docs_is_accepted(page, line):
    """Each command line as written parses: its command and every option exist and take what is given (the
    paths in it are examples: they are not opened)."""
    from mstop.cli import parse_command_line

    parsed = parse_command_line(shlex.split(line)[1:])
    assert parsed is not None, f"{page}: {line}"


def _examples() -> list[tuple[str, str]]:
    return [(page, b) for page, b in all_blocks("python") if "import" in b and "..." not in b]


EXAMPLES = _examples()


def test_the_examples_are_found():
    assert {page for page, _ in EXAMPLES} >= {"README.md"} and len(EXAMPLES) >= 2


@pytest.mark.parametrize(("page", "code"), EXAMPLES, ids=[f"{p}-{i}" for i, (p, _) in enumerate(EXAMPLES)])
def test_python_examples_run_and_give_sane_figures(page, code, tmp_path):
    """Each example runs as written; its run's figures, as `mstop summary --json` gives them, are sane: a
    finite MFU below 100 %, a data wait shorter than the step, finite positive tokens/s."""
    if "mindspore" in code and importlib.util.find_spec("mindspore") is None:
        pytest.skip("mindspore not installed: pip install -e ./writer -e '.[mindspore]'")
    script = tmp_path / "example.py"  # graph-mode cells need their source in a file
    script.write_text(code)
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dirs = list((tmp_path / "runs").iterdir())
    assert len(run_dirs) == 1
    csv = (run_dirs[0] / "rank0.csv").read_text().splitlines()
    assert csv[0].startswith("time,step,epoch,loss") and len(csv) > 1
    events = (run_dirs[0] / "rank0.events.jsonl").read_text()
    assert '"kind":"start"' in events and '"kind":"end"' in events
    got = subprocess.run([sys.executable, "-m", "mstop", "summary", "--json", str(run_dirs[0])],
                         capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stderr
    s = json.loads(got.stdout)
    assert s["status"] == "finished" and s["bad_rows"] == 0 and not s["alerts"], s["alerts"]
    if s["mfu"] is not None:
        assert 0 < s["mfu"] < 1, s["mfu"]
    if s["data_wait_frac"] is not None:
        assert 0 <= s["data_wait_frac"] < 1, s["data_wait_frac"]
    assert isinstance(s["tokens_per_s"], float) and math.isfinite(s["tokens_per_s"]) and s["tokens_per_s"] > 0
    if "MetricsWriter(" in code and "peak_flops=312e12" in code:
        # the README's words about its own loop: about 160 k tokens/s, MFU about 44 %, data wait about 4 % (a
        # loaded machine sleeps longer, so the bounds are wide on the slow side)
        assert 40e3 < s["tokens_per_s"] < 170e3 and 0.1 < s["mfu"] < 0.47 and s["data_wait_frac"] < 0.1, s


def test_every_page_of_docs_is_linked_from_the_readme():
    linked = set(re.findall(r"\]\((docs/[^)#\s]+)", README))
    assert linked == {p for p in PAGES if p.startswith("docs/")}, linked


def test_no_page_names_a_test_file_that_is_not_there():
    """The docs cite tests as evidence (``tests/system/test_packaging.py``): each one cited exists."""
    texts = [*PAGES.values(), (ROOT / "benchmarks" / "README.md").read_text()]
    cited = {m for text in texts for m in re.findall(r"tests/[\w/]+\.py", text)}
    assert cited and not [c for c in cited if not (ROOT / c).exists()], sorted(c for c in cited
                                                                              if not (ROOT / c).exists())


def test_the_writers_own_readme_says_how_to_install_it():
    text = (ROOT / "writer" / "README.md").read_text()
    assert "pip install ./writer" in text
    assert Path(ROOT / "writer" / "pyproject.toml").exists()


def _pip_lines() -> list[str]:
    """Every ``pip install`` command the README and docs give, as written (a comment or a closing parenthesis
    after it cut off)."""
    texts = [*PAGES.values(), (ROOT / "writer" / "README.md").read_text()]
    found = set()
    for text in texts:
        for m in re.finditer(r"pip install [^`|\n]*", text):
            line = m.group(0).split("  #", 1)[0].split(" && ", 1)[0].rstrip(" )")
            found.add(line.strip())
    return sorted(found)


PIP_LINES = _pip_lines()


@pytest.mark.parametrize("line", PIP_LINES)
def test_every_install_line_resolves_as_written_with_no_index_holding_mstop(line, tmp_path):
    """Issue 37: each install line works exactly as written in a clone, though no package index holds mstop
    or mstop-writer: pip resolves it (``--dry-run``, ``--ignore-installed``: as into an empty environment) and
    would install the clone's distributions. ``pip install .`` alone is the docs' example of what fails (no
    index holds the writer it needs); ``--no-index --find-links wheels`` lines are run against wheels built
    here (the writer's alone needs none of the viewer's dependencies)."""
    args = shlex.split(line)[2:]
    if "--no-index" in args and args[-1] == "mstop":
        pytest.skip("the viewer from wheels alone needs every dependency's wheel: docs/install.md builds them with "
                    "pip wheel on a machine with network (the two wheels of this repository: test_packaging.py)")
    if "--find-links" in args:
        wheels = tmp_path / "wheels"
        built = pip("wheel", "--no-deps", "-q", "-w", str(wheels), str(ROOT / "writer"), timeout=600)
        assert built.returncode == 0, built.stderr[-2000:]
        args = [str(wheels) if a == "wheels" else a for a in args]
    report = tmp_path / "report.json"
    got = pip("install", "--dry-run", "--ignore-installed", "--report", str(report), *args, cwd=str(ROOT))
    if args == ["."]:
        assert got.returncode != 0 and "mstop-writer" in got.stderr, got.stderr[-2000:]
        return
    assert got.returncode == 0, got.stderr[-3000:]
    names = {i["metadata"]["name"] for i in json.loads(report.read_text())["install"]}
    assert "mstop-writer" in names
    viewer = any(a == "." or a.startswith(".[") for a in args)  # the clone's root, with or without extras
    assert ("mstop" in names) == viewer, (args, sorted(names))
    if args == ["./writer"] or "mstop-writer" in args:
        assert names == {"mstop-writer"}  # the writer alone: nothing else
