"""The code's own shape, as the README's "How it is built" promises it: short functions, and the
rooms in the order data flows through them."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from tests.helpers.common import ROOT

WRITER = ROOT / "writer" / "mstop_writer"

LONGEST = 60


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A source file parsed once for all the house's tests."""
    return ast.parse(path.read_text())


@functools.cache
def _nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of a source file, walked once for all the house's tests."""
    return tuple(ast.walk(_tree(path)))


@pytest.fixture(scope="module", autouse=True)
def _parsed_once():
    """The parsed files are kept while this module's tests run, and let go after: millions of nodes kept
    for the session made every later full garbage collection (pytest runs five at its end) seconds long."""
    yield
    _nodes.cache_clear()
    _tree.cache_clear()


def _functions(folder: str) -> list[tuple[int, str]]:
    out = []
    for f in sorted((ROOT / folder).rglob("*.py")):
        for node in _nodes(f):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((node.end_lineno - node.lineno + 1, f"{f.relative_to(ROOT)}:{node.lineno} {node.name}"))
    return out


def test_no_function_is_longer_than_sixty_lines():
    found = _functions("mstop") + _functions("writer/mstop_writer")
    assert len(found) > 300  # the walk found the code
    long = sorted((n, where) for n, where in found if n > LONGEST)
    assert not long, f"functions over {LONGEST} lines: {long}"


def test_the_frame_is_built_by_short_parts():
    """build_view and the functions building the frame's parts stay under 40 lines each."""
    found = [(n, w) for n, w in _functions("mstop/view") if "/view/parts.py" in w or " build_view" in w]
    assert len(found) >= 7
    assert all(n < 40 for n, _ in found), sorted(found)[-3:]


def test_the_rooms_follow_the_data_flow():
    """sources feed the engine, the view reads the engine, only the app draws: no room imports a later one."""
    # the formats read bytes; the engine knows no files; sources feed it
    order = ["formats", "engine", "sources", "view", "live", "commands", "app"]
    later = {room: set(order[i + 1:]) for i, room in enumerate(order)}
    for room in order[:-1]:
        for f in (ROOT / "mstop" / room).rglob("*.py"):
            for node in _nodes(f):
                if isinstance(node, ast.ImportFrom) and node.level >= 2 and node.module:
                    top = node.module.split(".")[0]
                    assert top not in later[room], f"{f.relative_to(ROOT)} imports ..{node.module}"


def test_each_package_map_names_exactly_its_modules():
    """A package docstring that maps its modules (``    name.py  what it holds``) names every module of the
    folder and no other: a map that has gone stale is worse than none (issue 29)."""
    import re

    checked = 0
    for init in sorted((ROOT / "mstop").rglob("__init__.py")):
        doc = ast.get_docstring(_tree(init), clean=False) or ""
        named = set(re.findall(r"^ {4}(\w+\.py) ", doc, re.M))
        if not named:
            continue
        checked += 1
        there = {p.name for p in init.parent.glob("*.py") if p.name != "__init__.py"}
        assert named == there, (str(init.relative_to(ROOT)), sorted(there - named), sorted(named - there))
    assert checked >= 3


def test_only_the_store_changes_the_store():
    """The store's door (issue 29): its docstring promises one lock and a version bump for every change, so
    no module outside it assigns to a store's attributes (``store.mtime = ...``): it calls a method."""
    offenders = []
    for path in sorted((ROOT / "mstop").rglob("*.py")):
        if path.name == "store.py":
            continue
        for node in _nodes(path):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                if isinstance(t, ast.Attribute) and (
                        (isinstance(t.value, ast.Name) and t.value.id == "store") or
                        (isinstance(t.value, ast.Attribute) and t.value.attr == "store")):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} store.{t.attr}")
    assert not offenders, offenders


def test_the_view_is_a_frame_from_a_snapshot():
    """Issue 39 step 5: mstop/view builds a frame from a snapshot and nothing else. No module of it imports
    the sources, the live room above it, or what starts threads, processes or reads files (threading,
    subprocess, os, glob, pathlib, open()): what follows a job lives in mstop/live."""
    banned = {"threading", "subprocess", "os", "glob", "pathlib", "shutil", "socket", "concurrent"}
    offenders = []
    for f in sorted((ROOT / "mstop" / "view").rglob("*.py")):
        for node in _nodes(f):
            if isinstance(node, ast.Import):
                offenders += [f"{f.name}:{node.lineno} import {a.name}" for a in node.names
                              if a.name.split(".")[0] in banned]
            elif isinstance(node, ast.ImportFrom) and node.module:
                top = node.module.split(".")[0]
                if (node.level == 0 and top in banned) or (node.level >= 2 and top in ("sources", "live")):
                    offenders.append(f"{f.name}:{node.lineno} from {'.' * node.level}{node.module}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
                offenders.append(f"{f.name}:{node.lineno} open()")
    assert not offenders, offenders
    assert (ROOT / "mstop" / "live" / "session.py").exists() and not (ROOT / "mstop" / "view" / "session.py").exists()


def test_the_app_goes_through_the_views_door():
    """The app draws what the view hands it (issue 29): no module of mstop/app imports the engine or the
    sources itself; what it needs of them mstop.view and mstop.live name (their __all__, the session)."""
    offenders = []
    for f in sorted((ROOT / "mstop" / "app").rglob("*.py")):
        for node in _nodes(f):
            if isinstance(node, ast.ImportFrom) and node.level >= 2 and node.module and \
                    node.module.split(".")[0] in ("engine", "sources"):
                offenders.append(f"{f.relative_to(ROOT)}:{node.lineno} imports ..{node.module}")
    assert not offenders, offenders


def _writer_imports() -> dict[str, set[str]]:
    """Each writer module's imports of its siblings, lazy ones (inside functions) included."""
    graph: dict[str, set[str]] = {}
    for f in sorted(WRITER.glob("*.py")):
        me = f.stem
        graph[me] = set()
        for node in _nodes(f):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    graph[me].add(node.module.split(".")[0])
                else:  # ``from . import x``: the package face, or a sibling module by name
                    graph[me].update(a.name if (WRITER / f"{a.name}.py").exists() else "__init__"
                                     for a in node.names)
    return graph


def test_the_writer_has_no_circle_and_no_module_imports_its_face():
    """Issue 37: the writer's modules import one another one way (a lazy import counts), and none reaches
    back to ``mstop_writer/__init__`` (the face imports the modules, never the other way round)."""
    graph = _writer_imports()
    assert {"metrics", "devices", "schema", "_cells"} <= set(graph)
    inner = {m: deps for m, deps in graph.items() if m != "__init__"}
    assert not [m for m, deps in inner.items() if "__init__" in deps]

    def reach(start: str) -> set[str]:
        seen, todo = set(), list(graph.get(start, ()))
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo.extend(graph.get(m, ()))
        return seen

    circles = sorted(m for m in inner if m in reach(m))
    assert not circles, {m: sorted(graph[m]) for m in circles}


def test_the_command_line_is_parsers_and_dispatch():
    """Issue 37: cli.py holds the parsers and dispatches through ``set_defaults(func=...)``; the bodies are in
    commands/ (summary, compare, report) and app/launch.py (the screens), so it stays short and has no if-chain
    on the command's name."""
    cli = (ROOT / "mstop" / "cli.py").read_text()
    assert len(cli.splitlines()) <= 200
    assert cli.count(".set_defaults(func=") == 5
    assert "args.command ==" not in cli
    import importlib

    from mstop.cli import build_parser, monitor_parser
    for argv, parser in ((["summary", "r"], build_parser()), (["compare", "a", "b"], build_parser()),
                         (["report", "a", "--out", "o"], build_parser()), (["demo"], build_parser()),
                         (["r"], monitor_parser())):
        module, _, name = parser.parse_args(argv).func.partition(":")
        assert callable(getattr(importlib.import_module(module), name)), argv


def test_tests_touch_few_private_attributes_and_production_has_no_test_doors():
    """Issue 37: tests read public properties or monkeypatch, not private attributes (88 uses before; under
    20 now, each a test of the private thing itself), and no production module forwards attributes with
    ``__getattr__`` for them nor keeps switches tests flip (a frozen tuning object instead)."""
    import re

    uses = []
    for f in sorted((ROOT / "tests").rglob("*.py")):
        text = f.read_text()
        for node in _nodes(f):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                uses.append(f"{f.name}:{node.lineno} {node.attr}")
        uses += [f"{f.name} {m}" for m in re.findall(r"setattr\([^,]+, \"(_[a-z]\w*)\"", text)]
    assert len(uses) < 20, uses
    forwarding = [str(f.relative_to(ROOT)) for f in (ROOT / "mstop").rglob("*.py")
                  if "def __getattr__(self" in f.read_text()]
    assert not forwarding, forwarding
    from mstop.formats import parse
    from mstop.sources import local

    for module in (parse, local):  # the paths a parser takes and how a source follows: one frozen object each
        switches = [n for n, v in vars(module).items() if n.isupper() and isinstance(v, (bool, int, float, str))
                    and n.startswith(("LARGE_", "ARROW_", "PLAIN_", "DIRECT_", "SCAN_", "VERIFY_", "BUSY_"))]
        assert not switches, (module.__name__, switches)


def test_outside_the_engine_a_run_is_read_only_through_its_read_door():
    """Issue 39 step 1: view/, commands/, sources/ and app/ read a run through mstop.engine.reader.RunReader,
    never through the store's layout: no module outside engine/ names RankData, Block, ``.col(`` or
    ``store.ranks`` (the layout can then change without touching them)."""
    import re

    layout = re.compile(r"\bRankData\b|\bBlock\b|\.col\(|\bstore\.ranks\b|\.store\.ranks\b")
    found = []
    for f in sorted((ROOT / "mstop").rglob("*.py")):
        rel = f.relative_to(ROOT)
        if rel.parts[1] == "engine":
            continue
        for n, line in enumerate(f.read_text().splitlines(), 1):
            if layout.search(line.split("#", 1)[0]):
                found.append(f"{rel}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


def _module_imports(path) -> set[str]:
    """The engine modules ``path`` imports (``from . import x``, ``from .x import y``), lazily or not."""
    out = set()
    for node in _nodes(path):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out.update(a.name for a in node.names)
    return out


def test_each_health_rule_is_written_once_below_its_two_readers():
    """Issue 39 step 2, issue 57 step 2: a rule the rows answer (NaN, spikes, overflows, starvation, OOM,
    throughput) is one class of mstop.engine.ruletable: its measure, its condition, its words. The table drives
    both readers: health.py and incidents.py loop over it and name no rule (nor a rule's condition); one
    signature each for alerts and incidents. The types sit in rules.py, which imports neither reader;
    incidents.py imports no health.py, and no signature takes the rules as ``Any``."""
    import inspect

    from mstop.engine import ruletable
    from mstop.engine.rules import KINDS

    engine = ROOT / "mstop" / "engine"
    assert {"health", "incidents", "ruletable"}.isdisjoint(_module_imports(engine / "rules.py"))
    assert {"health", "incidents"}.isdisjoint(_module_imports(engine / "ruletable.py"))
    assert "health" not in _module_imports(engine / "incidents.py")
    kinds = [r.kind for r in ruletable.TABLE]
    assert len(set(kinds)) == len(kinds) and set(kinds) <= set(KINDS)
    for rule in ruletable.TABLE:
        assert isinstance(rule, ruletable.Rule), rule
        assert list(inspect.signature(rule.alerts).parameters) == ["ask"], rule
        assert list(inspect.signature(rule.incidents).parameters) == ["ask", "r", "d"], rule
    names = {n for n in dir(ruletable) if n.isupper() and isinstance(getattr(ruletable, n), ruletable.Rule)}
    for reader in ("health.py", "incidents.py"):
        text = (engine / reader).read_text()
        assert "for rule in table.TABLE" in text, reader
        assert not {n for n in names if f"table.{n}" in text}, reader  # no rule called by name
        # no condition of a table rule's written again: none of their settings read
        for setting in ("data_wait", "data_wait_floor_s", "data_wait_warmup", "oom_critical", "spike_window",
                        "spike_k", "overflow_n", "overflow_m", "throughput_fraction"):
            assert f"rules.{setting}" not in text.replace(f"rules.{setting}_", ""), (reader, setting)
    for f in sorted(engine.glob("*.py")):
        for node in _nodes(f):
            if isinstance(node, ast.FunctionDef):
                for a in node.args.args + node.args.kwonlyargs:
                    if a.arg == "rules" and a.annotation is not None:
                        assert ast.unparse(a.annotation) != "Any", f"{f.name}: {node.name}(rules: Any)"


def test_a_rule_added_to_the_table_fires_live_and_in_the_history_with_no_other_edit(monkeypatch, tmp_path):
    """The table is the driver: a rule of a test's own (a loss above 10) added to TABLE is an alert while the
    last rows hold it and an incident of the history where they did, marked active, with no other edit."""
    import numpy as np

    from mstop.engine import ruletable
    from mstop.engine.figures import Options
    from mstop.engine.health import Health
    from mstop.engine.rules import Alert, Incident
    from mstop.sources import read_once
    from tests.helpers.runs import steps, write_rank

    class HighLoss(ruletable.Rule):
        kind = "high_loss"
        per_rank = True

        def alerts(self, ask: ruletable.Ask) -> list[Alert]:
            return [Alert(self.kind, r, int(d.last("step")), f"rank {r}: loss {d.last('loss'):g}")
                    for r, d in sorted(ask.store.ranks.items()) if d.rows and d.last("loss") > 10]

        def incidents(self, ask: ruletable.Ask, r: int, d) -> list[Incident]:
            rows = np.arange(d.rows)
            loss = d.take("loss", rows).astype(np.float64)
            return ruletable.incidents_of(self.kind, r, d, rows, loss > 10, loss, lambda k: f"loss {loss[k]:g}")

    monkeypatch.setattr(ruletable, "TABLE", (*ruletable.TABLE, HighLoss()))
    rows = steps(1, 40, loss=1.0, step_time=0.5)
    for row in rows[30:]:
        row["loss"] = 50.0
    write_rank(tmp_path, 0, rows)
    store = read_once(str(tmp_path))
    opts = Options(clock=lambda: float(rows[-1]["time"]) + 1)
    health = Health()
    live = [a for a in health.alerts(store, opts) if a.kind == "high_loss"]
    assert [(a.rank, a.step) for a in live] == [(0, 40)], live
    past = [i for i in health.incidents(store, opts) if i.kind == "high_loss"]
    assert [(i.rank, i.first_step, i.last_step, i.active) for i in past] == [(0, 31, 40, True)], past


def test_the_engines_modules_import_each_other_without_a_circle():
    """Issue 39 step 5: no engine module reaches itself through the others' imports, lazy ones included (a
    function-level import around a circle hides it; clocks.py and figures.py had one)."""
    engine = ROOT / "mstop" / "engine"
    graph = {f.stem: _module_imports(f) for f in engine.glob("*.py")}
    done: set[str] = set()

    def visit(m: str, path: list[str]) -> None:
        assert m not in path, " -> ".join([*path[path.index(m):], m])
        if m in done:
            return
        for n in sorted(graph.get(m, ())):
            visit(n, [*path, m])
        done.add(m)

    for m in sorted(graph):
        visit(m, [])


def test_a_log_is_read_by_a_driver_and_a_list_of_formats():
    """Issue 57 step 5 (toolong's ``format_parser.py``): the parsers live in mstop/formats, which imports
    nothing of mstop but ``safe``. MfLogParser keeps its shared state and its formats and nothing else, and
    tries the formats of ``FORMATS`` in a loop (no format's pattern in the driver); each format is one class in
    a module of its own, imports neither the driver nor another format, and writes to the shared LogState
    through its public names only; no lambda forwards a name."""
    import re

    formats = ROOT / "mstop" / "formats"
    for f in formats.glob("*.py"):
        for node in _nodes(f):
            if isinstance(node, ast.ImportFrom) and node.level >= 2:
                assert node.module == "safe", f"{f.name} imports ..{node.module}"
        assert "property(lambda" not in f.read_text(), f.name
    tree = _tree(formats / "mflog.py")
    driver = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "MfLogParser")
    own = {t.attr for n in ast.walk(driver) if isinstance(n, (ast.Assign, ast.AnnAssign))
           for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
           if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}
    assert own == {"state", "formats"}, sorted(own)
    taken = {a.name for n in tree.body if isinstance(n, ast.ImportFrom) and n.module in ("mfsteps", "msmonitors")
             for a in n.names}
    assert taken == {"MindFormersSteps", "MonitorLines"}, taken  # the classes, never a pattern of theirs
    families = {"mfsteps": "MindFormersSteps", "msmonitors": "MonitorLines"}
    for module, name in families.items():
        body = _tree(formats / f"{module}.py").body
        classes = [n.name for n in body if isinstance(n, ast.ClassDef)]
        assert classes == [name], (module, classes)
        assert ({"mflog", *families} - {module}).isdisjoint(_module_imports(formats / f"{module}.py"))
    assert _module_imports(formats / "logstate.py") <= {"parse"}
    private = []
    for module in ("mflog", "mfsteps", "msmonitors"):
        for n in _nodes(formats / f"{module}.py"):
            if isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__") and \
                    re.fullmatch(r"(self\.)?(st|state)", ast.unparse(n.value)):
                private.append(f"{module}: {ast.unparse(n)}")
    assert not private, private  # the driver's and the formats' own names aside, LogState's public ones only
    sizes = [n.end_lineno - n.lineno for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    assert max(sizes) < 300, sizes  # the driver was one class of 792 lines


def test_a_format_added_to_the_list_reads_its_lines_with_no_other_edit(monkeypatch):
    """Adding a format is one class and one entry of FORMATS: a format of a made-up logger
    (``### step 7 loss 0.5 ###``) added to the list in this test gives its rows, timed by the line's stamp,
    beside MindFormers' own line in the same log."""
    import math
    import re

    from mstop.formats import mflog
    from mstop.formats.logstate import EXTRA, LogState
    from mstop.formats.parse import NUMERIC

    class Hashes:
        bulk_kinds: tuple[int, ...] = ()

        def __init__(self, st: LogState) -> None:
            self.st = st

        def step(self, t: float, msg: str) -> bool:
            m = re.search(r"### step (\d+) loss ([\d.]+) ###", msg)
            if m is None:
                return False
            self.st.step_lines += 1
            self.st.begin_row(1, 1, int(m.group(1)), 0, lambda: t)
            row = [math.nan] * len(NUMERIC)
            row[0], row[1], row[2], row[3] = t, float(m.group(1)), 1.0, float(m.group(2))
            self.st.hold_row(row, [math.nan] * len(EXTRA))
            return True

        fast = trailer = lambda self, *a: False  # noqa: E731
        info = bulk = lambda self, *a: False  # noqa: E731
        classify = given_out = lambda self, *a: None  # noqa: E731

    monkeypatch.setattr(mflog, "FORMATS", (*mflog.FORMATS, Hashes))
    p = mflog.MfLogParser(0)
    out = [p.parse(b"[INFO] 2026-12-01 07:09:48,553 [a.py:1] f: ### step 7 loss 0.5 ###\n"
                   b"[INFO] 2026-12-01 07:09:49,553 [a.py:1] f: ### step 8 loss 0.25 ###\n"), p.flush()]
    cols = [o.rows.columns for o in out if len(o.rows)]
    assert [x for c in cols for x in c["step"].tolist()] == [7.0, 8.0], cols
    assert [x for c in cols for x in c["loss"].tolist()] == [0.5, 0.25], cols
    times = [x for c in cols for x in c["time"].tolist()]
    assert abs(times[1] - times[0] - 1.0) < 1e-6, times  # by each line's own stamp
    assert p.state.formats == set() and p.state.step_lines == 2 and p.state.look_alike == 0
    assert type(p.formats[0]) is Hashes  # the last to read a step is tried first


def test_no_unit_file_imports_what_starts_a_process_or_opens_a_socket():
    """Issue 56: the unit tier is in-process. No file under tests/unit imports subprocess, socket,
    multiprocessing or the sshd helper (the guard in tests/unit/conftest.py, tests/helpers/in_process.py, fails
    a test that starts one anyway: tests/system/test_tiers.py)."""
    banned = {"subprocess", "socket", "multiprocessing"}
    found = []
    files = sorted((ROOT / "tests" / "unit").rglob("*.py"))
    assert len(files) > 40
    for f in files:
        for node in _nodes(f):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            found += [f"{f.relative_to(ROOT)}:{node.lineno} {n}" for n in names if n.split(".")[0] in banned
                      or (n.startswith("tests.helpers") and n.rsplit(".", 1)[-1] == "sshd")]
    assert not found, found


def test_the_frame_is_a_pure_read_of_the_sources():
    """Issue 57: a frame reads the store, it never steers the transport. ``MonitorSession.frame`` names no
    method of its sources (which ranks come as written is told when the shown rank changes, and by the
    sources themselves when a host's ranks grow: ``Sources.show``, ``RemoteSource.on_ranks``)."""
    tree = _tree(ROOT / "mstop" / "live" / "session.py")
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "MonitorSession")
    frame = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "frame")
    steering = [ast.unparse(n) for n in ast.walk(frame) if isinstance(n, ast.Attribute)
                and isinstance(n.value, ast.Attribute) and n.value.attr == "source"]
    assert not steering, steering
    assert not [n for n in ast.walk(frame) if isinstance(n, ast.Attribute) and n.attr == "want_raw"]


def test_rows_enter_the_store_by_one_door():
    """Issue 57 step 4: rows enter the store by ``Store.append(Batch)`` alone (a file's rows, a read round's,
    many files parsed together, and the files' times); the test that a part is one plain row, which joins the
    round's one assignment per column, is written once, in that door; nothing outside the engine takes the
    store's lock to feed it."""
    from mstop.engine.store import Store

    assert not [n for n in vars(Store) if n.startswith("ingest_") and n != "ingest_events" and
                n != "ingest_devices"], sorted(vars(Store))
    engine = ROOT / "mstop" / "engine"
    text = "".join(p.read_text() for p in sorted(engine.rglob("*.py")))
    assert text.count("d.segments[-1].session == rows.session_names") == 1  # the plain row's condition, once
    assert text.count("hi - lo == 1 and") == 1
    for path in sorted((ROOT / "mstop").rglob("*.py")):
        if engine in path.parents:
            continue
        for node in _nodes(path):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_append"):
                raise AssertionError(f"{path.relative_to(ROOT)}: {ast.unparse(node)}")


def test_a_reader_holds_a_snapshot_another_type_than_the_store(tmp_path):
    """Issue 57 step 1: ``Store.snapshot()`` is a Snapshot, not a Store: no lock, no method that changes it,
    no attribute set on it; RunReader hands out that snapshot, never the store. Outside the engine only the
    sources (the feeders) name Store, and nothing takes the store's lock; the engine's readers (figures,
    health, incidents, ...) take a Snapshot in their signatures."""
    import pytest

    from mstop.engine.reader import RunReader
    from mstop.engine.store import Snapshot, Store
    from mstop.sources import read_once
    from tests.helpers.runs import steps, write_rank

    write_rank(tmp_path, 0, steps(1, 5, loss=1.0))
    store = read_once(str(tmp_path))
    snap = store.snapshot()
    assert type(snap) is Snapshot and not isinstance(snap, Store) and snap.snapshot() is snap
    changing = {n for n in vars(Store) if not n.startswith("_")} - {n for n in dir(Snapshot)}
    assert {"append", "ingest_events", "reset_rank", "note", "claim"} <= changing
    assert not hasattr(snap, "lock") and not [n for n in changing if hasattr(snap, n)]
    with pytest.raises(AttributeError):
        snap.version = 0
    assert type(RunReader(store).snapshot) is Snapshot and not hasattr(RunReader, "store")
    for path in sorted((ROOT / "mstop").rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[1] in ("engine", "sources"):
            continue
        text = path.read_text()
        assert "Store(" not in text and not any(
            isinstance(n, ast.alias) and n.name == "Store" for n in _nodes(path)), rel
        assert ".lock:" not in text.replace("self.lock:", ""), rel
    for name in ("figures", "health", "incidents", "endings", "goodput", "rankstate"):
        sigs = [ast.unparse(a.annotation) for n in _nodes(ROOT / "mstop" / "engine" / f"{name}.py")
                if isinstance(n, ast.FunctionDef) for a in n.args.args if a.arg == "store" and a.annotation]
        assert sigs and set(sigs) == {"Snapshot"}, (name, set(sigs))
