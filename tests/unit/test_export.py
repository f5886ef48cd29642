"""Issue 61, item 1 in this process: ``mstop export`` writes a run's figures in Prometheus' text format, the
numbers ``summary --json`` gives, read back by ``prometheus_client``'s own parser. node_exporter's textfile
collector, promtool and a live job's HTTP endpoint: tests/system/test_export_real.py."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from mstop.commands.export import FAMILIES, Export, file_name, rank_statuses, run_label  # noqa: E402
from tests.helpers.cli import mstop  # noqa: E402
from tests.helpers.prom import samples  # noqa: E402
from tests.helpers.runs import start, steps, write_events, write_rank, write_with_writer  # noqa: E402


def export_once(run, *extra: str) -> tuple[str, dict]:
    out = run.parent / "prom"
    got = mstop("export", run, "--openmetrics", out, "--once", *extra)
    assert got.returncode == 0, got.stderr
    (path,) = out.glob("*.prom")
    assert [p.name for p in out.iterdir()] == [path.name]  # no temporary file left beside it
    return path.read_text(), json.loads(mstop("summary", run, "--json").stdout)


def test_the_export_holds_summarys_figures(tmp_path):
    """Two ranks written by the real writer: every figure of the export equals summary --json's."""
    run = tmp_path / "run-a"
    rows = steps(1, 60, t0=1_800_000_000.0, dt=0.5, loss=lambda s: 3.0 / s, step_time=0.5, tokens=4096.0,
                 data_wait=0.05, samples=8.0)
    for r in range(2):
        write_with_writer(run, r, 2, rows)
        session = json.loads((run / f"rank{r}.events.jsonl").read_text().splitlines()[0])["session"]
        write_events(run, r, [{"time": rows[-1]["time"], "kind": "end", "step": 60, "rows": 60, "session": session}])
    text, fig = export_once(run)  # (a finished run: its figures do not move between the two reads)
    got = samples(text)
    for name, key in (("mstop_step", "step"), ("mstop_loss", "loss"), ("mstop_loss_ema", "loss_ema"),
                      ("mstop_tokens_per_second", "tokens_per_s"), ("mstop_samples_per_second", "samples_per_s"),
                      ("mstop_memory_headroom_ratio", "mem_headroom"), ("mstop_data_wait_ratio", "data_wait_frac")):
        assert got[(name, ())] == pytest.approx(fig[key], rel=1e-12), name
    assert got[("mstop_up", ())] == 1.0 and got[("mstop_ranks_seen", ())] == 2
    assert got[("mstop_goodput_ratio", ())] == pytest.approx(fig["goodput"]["goodput"])
    assert got[("mstop_goodput_lost_seconds", (("bucket", "stalled"),))] == pytest.approx(fig["goodput"]["stalled"])
    assert got[("mstop_rank_step", (("rank", "1"),))] == 60
    assert got[("mstop_status_info", (("status", fig["status"]),))] == 1.0
    assert sum(v for (n, _), v in got.items() if n == "mstop_ranks") == 2
    kinds = {dict(k)["kind"] for (n, k) in got if n == "mstop_diagnosis_info"}  # (healthy: rank "")
    assert kinds == {d["kind"] for d in fig["diagnosis"]}


def test_help_text_is_the_same_whatever_the_run_holds(tmp_path):
    """Prometheus refuses a family whose HELP changes between scrapes: each family's HELP and TYPE are its
    table's, in a run with rows and in one that cannot be read."""
    ex = Export("r", "h")
    ex.update(None, {})
    down = "".join(f"{line}\n" for line in _text(ex).splitlines() if line.startswith("# HELP"))
    assert down == f"# HELP mstop_up {FAMILIES['mstop_up'][1]}\n"
    assert samples(_text(ex)) == {("mstop_up", ()): 0.0}
    run = tmp_path / "run"
    write_with_writer(run, 0, 1, steps(1, 20, t0=1_800_000_000.0, loss=1.0, step_time=1.0))
    text, _ = export_once(run)
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_text = line[len("# HELP "):].partition(" ")
            base = name[: -len("_info")] if name.endswith("_info") and name not in FAMILIES else name
            assert FAMILIES[base][1] == help_text.replace("\\\\", "\\"), line


def _text(ex: Export) -> str:
    from prometheus_client import CollectorRegistry, generate_latest

    reg = CollectorRegistry(auto_describe=False)
    reg.register(ex)
    return generate_latest(reg).decode()


@given(st.text(min_size=1, max_size=40))
def test_any_run_name_is_a_label_read_back_as_written_and_a_plain_file_name(name):
    """Quotes, backslashes, line ends in a run's folder name: the label is escaped by the exposition and
    read back as the cleaned name; the file name keeps only letters, digits, ``_``, ``.``, ``-``."""
    label = run_label(f"/runs/{name.replace('/', '_')}")
    ex = Export(label, 'host"\\\n')
    ex.update(None, {})
    (fam,) = list(text_string_to_metric_families(_text(ex)))
    assert fam.samples[0].labels == {"run": label, "host": 'host"\\\n'}
    assert all(c.isalnum() and c.isascii() or c in "_.-" for c in file_name(label)[len("mstop_"):-len(".prom")])


def test_a_run_above_the_rank_limit_exports_the_ranks_named_and_says_how_many(tmp_path):
    """Eight ranks, the limit four: the per-rank families hold only the rank a verdict names (rank 5, dead:
    its rows stopped long before the others'), and mstop_ranks_exported says one."""
    run = tmp_path / "run"
    for r in range(8):
        write_events(run, r, [start("s1", t=999.0, world_size=8, pid=100 + r, heartbeat_interval=5.0)])
        last = 30 if r == 5 else 300
        write_rank(run, r, steps(1, last, t0=1000.0, dt=1.0, step_time=1.0, loss=1.0))
    text, fig = export_once(run, "--rank-limit", "4")
    got = samples(text)
    named = {a["rank"] for a in fig["alerts"] if a["rank"] is not None}
    assert 5 in named, fig["alerts"]
    ranks = {dict(k)["rank"] for (n, k) in got if n == "mstop_rank_status_info"}
    assert ranks == {str(r) for r in sorted(named)} and got[("mstop_ranks_exported", ())] == len(named)
    assert got[("mstop_ranks_seen", ())] == 8


def test_a_1024_rank_run_exports_only_the_ranks_its_verdicts_name(tmp_path):
    """1,024 ranks on 128 hosts (rank 300 stopped at step 20, rank 517's input drags): at the default limit of
    256 the per-rank families hold only the ranks an alert or verdict names, and the diagnosis a sample a
    rank."""
    from tests.helpers.runs import cluster_1024

    run = tmp_path / "moe"
    cluster_1024(run)
    text, fig = export_once(run)
    got = samples(text)
    named = {a["rank"] for a in fig["alerts"] if a["rank"] is not None} | {r for v in fig["diagnosis"]
                                                                          for r in v["ranks"]}
    assert {300, 517} <= named and got[("mstop_ranks_seen", ())] == 1024
    exported = {int(dict(k)["rank"]) for (n, k) in got if n == "mstop_rank_status_info"}
    assert exported == named and got[("mstop_ranks_exported", ())] == len(named)
    assert got[("mstop_rank_step", (("rank", "300"),))] == 20 and got[("mstop_rank_step", (("rank", "517"),))] == 60
    for v in fig["diagnosis"]:
        for r in v["ranks"] or [""]:
            assert got[("mstop_diagnosis_info", (("kind", v["kind"]), ("rank", str(r))))] == 1


def test_ranks_are_counted_by_the_status_the_summary_gives_them():
    fig = {"ranks": 4, "status": "running", "processes": {},
           "alerts": [{"kind": "stopped_rank", "rank": 1}, {"kind": "dead_rank", "rank": 3}],
           "diagnosis": [{"kind": "hang", "ranks": [2]}]}
    assert rank_statuses(fig) == {0: "running", 1: "stopped", 2: "hung", 3: "dead"}
    fig.update(status="dead", culprit={"rank": 3}, alerts=[], diagnosis=[])
    assert rank_statuses(fig) == {0: "ended", 1: "ended", 2: "ended", 3: "dead"}


def test_export_says_where_to_and_refuses_a_source_it_cannot_read(tmp_path):
    got = mstop("export", tmp_path)
    assert got.returncode == 2 and "--openmetrics DIR" in got.stderr
    got = mstop("export", tmp_path / "nowhere", "--openmetrics", tmp_path, "--once")
    assert got.returncode == 2 and "nowhere" in got.stderr


def test_a_folder_that_cannot_be_written_is_said_once_with_exit_2(tmp_path):
    run = tmp_path / "run"
    write_with_writer(run, 0, 1, steps(1, 5, t0=1_800_000_000.0, loss=1.0, step_time=1.0))
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    got = mstop("export", run, "--openmetrics", blocker / "prom", "--once")
    assert got.returncode == 2 and got.stderr.count("cannot write") == 1, got.stderr
    assert str(blocker / "prom") in got.stderr


def test_a_run_that_cannot_be_read_into_a_folder_that_cannot_be_written_says_both(tmp_path):
    """The export's two failures at once (the store cannot be read, the file cannot be written): each said."""
    from mstop.commands.export import Exporter

    class Unreadable:
        def snapshot(self):
            raise OSError("the run vanished")

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    ex = Exporter([str(tmp_path / "run")], "run", str(blocker / "prom"), None)
    error = ex.once(Unreadable(), None, None)
    assert "OSError: the run vanished" in error and f"cannot write {blocker / 'prom'}" in error, error
    assert not ex.written and ex.fig is None
