"""A folder of runs (issue 17): the runs screen as a user sees it, its keys, and summary over every run.

The runs are written by the real MetricsWriter (tests/helpers/runs.py: runs_folder), in known states at NOW_RUNS."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.text import Text

from mstop.app.monitor import MonitorScreen
from mstop.app.widgets import Chart, Header
from mstop.app.widgets.runs import RunsTable
from mstop.live.runs import FilterError, parse_filter
from mstop.sources.runs import find_runs
from tests.helpers.common import ROOT
from tests.helpers.runs import RUNS, write_run
from tests.helpers.runs_common import app_for, settle, table_rows, title


def test_runs_are_found_at_any_depth_up_to_three_and_never_inside_a_run(folder, tmp_path):
    found, problems = find_runs(str(folder))
    assert [os.path.relpath(p, folder) for p, _ in found] == sorted(RUNS) and problems == []
    deep = tmp_path / "a" / "b" / "c" / "d"  # four levels down: not listed
    write_run(deep, status="finished", note="deep", world=1, steps=3)
    write_run(tmp_path / "a" / "b" / "run3", status="finished", note="", world=1, steps=3)
    (tmp_path / "a" / "b" / "run3" / "profile" / "rank0").mkdir(parents=True)  # inside a run: not searched
    assert [os.path.relpath(p, tmp_path) for p, _ in find_runs(str(tmp_path))[0]] == ["a/b/run3"]


async def test_the_list_shows_every_run_with_its_figures_and_status_as_text(folder):
    app = app_for(folder)
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(pilot, lambda: len(table_rows(app)) == len(RUNS))
        rows = {r[1]: r for r in table_rows(app)}
        assert set(rows) == set(RUNS)
        for name, (status, note, _) in RUNS.items():
            assert rows[name][2] == status and rows[name][-1] == note
        assert rows["base"][3] == "120/480" and rows["lr-high"][9] == "1"  # the failed run's abort alert
        assert f"{len(RUNS)} runs" in title(app)


async def test_a_page_shown_has_its_columns_widths_at_once(folder):
    """A page of runs put in the table has each column as wide as its widest cell at once, not when the
    table is next idle: in a real terminal on a busy machine a page drawn before then showed every cell cut to
    its column's label (``bas``, ``stalle``, ``120/``) for as long as the list stayed open."""
    from mstop.app.widgets.runs import NAME_LEAST, RunsTable

    app = app_for(folder)
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(pilot, lambda: len(table_rows(app)) == len(RUNS))
        table = app.runs_screen.query_one(RunsTable)
        table.show(list(reversed(table.lines)), table.marks, table.now)  # a new page order: built again
        widths = [c.content_width for c in table.columns.values()]  # before any idle: no pause since show
        cells = [table.cells(r) for r in table.lines[table.offset: table.offset + table.page_size]]
        for j, column in enumerate(table.columns.values()):
            widest = max(Text(str(row[j])).cell_len if not isinstance(row[j], Text) else row[j].cell_len
                         for row in cells)
            least = min(widest, NAME_LEAST) if j == 1 else widest  # names may be cut to fit, never below that
            assert widths[j] >= least, (column.label.plain, widths[j], widest)


async def test_sort_by_key_and_by_clicking_a_header(folder):
    app = app_for(folder)
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(pilot, lambda: len(table_rows(app)) == len(RUNS))
        await pilot.press("s")  # the next column: status
        await settle(pilot, lambda: "sorted by status (up)" in title(app))
        assert [r[2] for r in table_rows(app)] == ["running", "running", "finished", "stalled", "failed"]
        await pilot.press("S")
        await settle(pilot, lambda: "sorted by status (down)" in title(app))
        assert [r[2] for r in table_rows(app)][0] == "failed"
        table = app.runs_screen.query_one(RunsTable)
        cols = list(table.columns.values())
        x = sum(c.get_render_width(table) for c in cols[:4]) + 2  # the header row: the loss column
        await pilot.click(RunsTable, offset=(x, 0))
        await settle(pilot, lambda: "sorted by loss" in title(app))
        losses = [float(r[4]) for r in table_rows(app)]
        assert losses == sorted(losses)


def test_the_filter_grammar():
    f = parse_filter("status = running  world_size>=64 note~Recompute big", {"world_size"})
    assert [(c.field, c.op, c.value) for c in f.conditions] == [("status", "=", "running"),
                                                                ("world_size", ">=", "64"), ("note", "~", "Recompute")]
    assert f.words == ["big"]
    for bad, says in (("nosuch=1", "no such field"), ("=3", "FIELD OP VALUE"), ("step>", "nothing to compare"),
                      ("mfu<high", "compares numbers")):
        with pytest.raises(FilterError, match=says):
            parse_filter(bad, {"world_size"})


async def test_overlay_draws_the_marked_runs_by_step_with_their_names(folder):
    app = app_for(folder)
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot, lambda: len(table_rows(app)) == len(RUNS))
        await pilot.press("space", "down", "space", "space", "o")  # base, (not lr-high) no-delay, seed1
        await settle(pilot, lambda: isinstance(app.screen, MonitorScreen), tries=1000)
        await settle(pilot, lambda: "no-delay" in str(app.screen.query_one("#loss-chart", Chart).legend()))
        legend = str(app.screen.query_one("#loss-chart", Chart).legend())
        assert "2 no-delay" in legend and "3 recompute/seed1" in legend
        assert "base" in str(app.screen.query_one(Header).content)
        tp = str(app.screen.query_one("#tp-chart", Chart).legend())
        assert "no-delay" in tp


async def test_a_broken_run_is_listed_and_the_others_still_are(tmp_path):
    root = tmp_path / "runs"
    write_run(root / "good", status="finished", note="", world=1, steps=10)
    bad = root / "broken"
    bad.mkdir(parents=True)
    (bad / "rank0.csv").write_bytes(b"\x00\xff garbage\nnot,a,header\n")
    os.mkfifo(bad / "rank1.csv")  # a FIFO named like a rank file must never block the list
    app = app_for(root, clock=time.time)
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(pilot, lambda: len(table_rows(app)) == 2)
        rows = {r[1]: r for r in table_rows(app)}
        assert rows["good"][2] == "finished" and rows["broken"][2] in ("waiting", "starting", "unreadable")


def test_an_empty_folder_keeps_opening_the_monitor_and_a_run_folder_too(folder, tmp_path):
    from mstop.commands.arguments import runs_watches

    assert runs_watches([str(tmp_path)]) is None  # empty: the monitor waits for a job, as before
    assert runs_watches([str(folder / "base")]) is None  # a run: its monitor
    watches = runs_watches([str(folder), str(folder / "base")])
    assert watches is not None and len(watches) == 2
    assert Path(watches[1].only).name == "base"


@given(st.text(max_size=60))
def test_any_filter_text_parses_or_says_why_and_never_raises_on_a_row(text):
    from mstop.live.runs import RunRow

    row = RunRow(key="k", name="exp\x1b[31m", host="h", status="running", step=5, loss=1.5, note="a note",
                 config={"world_size": 8, "device": "Ascend"})
    try:
        f = parse_filter(text, {"world_size", "device"})
    except FilterError as e:
        assert str(e) and "\x1b" not in str(e)
        return
    assert "\x1b" not in f.text
    assert f.matches(row, 100.0) in (True, False)


async def test_a_run_named_with_control_codes_is_shown_escaped(tmp_path):
    root = tmp_path / "runs"
    write_run(root / "evil\x1b]2;pwned\x07", status="finished", note="", world=1, steps=5)
    app = app_for(root)
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(pilot, lambda: len(table_rows(app)) == 1)
        name = table_rows(app)[0][1]
        assert "\x1b" not in name and "\x07" not in name and "\\x1b]2;pwned" in name


def test_every_filter_example_of_the_readme_reads():
    """Issue 27 #9: the README's own examples were refused (`mfu<0.3 !~ablation`, `cnn !~sweep`, `!~sweep`)."""
    import re as _re

    from mstop.live.runs import RunRow

    readme = (ROOT / "docs" / "monitor.md").read_text()  # the runs list's reference (README.md until issue 37)
    section = readme.split("**Filter.**", 1)[1].split("**What the figures", 1)[0]
    examples = [e for e in _re.findall(r"`([^`]+)`", section.split("Examples:", 1)[1].split(".\n", 1)[0])]
    assert {"mfu<0.3 !~ablation", "cnn !~sweep", "!~sweep", "status=running world_size>=64"} <= set(examples)
    fields = {"world_size", "device", "run_name"}
    for e in examples:
        parse_filter(e, fields)
    ablation = RunRow(key="a", name="ablation/x", host="", status="running", mfu=0.2)
    cnn = RunRow(key="c", name="cnn-base", host="", status="running", mfu=0.2, note="resnet")
    sweep = RunRow(key="s", name="sweep/cnn-3", host="", status="running", mfu=0.2)
    f = parse_filter("mfu<0.3 !~ablation", fields)
    assert [r.key for r in (ablation, cnn, sweep) if f.matches(r, 0)] == ["c", "s"]
    f = parse_filter("cnn !~sweep", fields)
    assert [r.key for r in (ablation, cnn, sweep) if f.matches(r, 0)] == ["c"]
    assert [r.key for r in (ablation, cnn, sweep) if parse_filter("!~sweep", fields).matches(r, 0)] == ["a", "c"]
    named = RunRow(key="n", name="exp/7", host="", status="running", run_name="llama-lr-high")
    assert parse_filter("lr-high", fields).matches(named, 0)  # a word matches the run's name too


async def test_an_overlay_of_a_repeat_group_draws_every_member_and_the_name_stays_on_scroll(folder):
    """Issue 27 #11: `=` made seed2 a repeat of seed1: the overlay drew seed1 alone."""
    app = app_for(folder)
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot, lambda: len(table_rows(app)) == len(RUNS))
        names = [r[1] for r in table_rows(app)]
        await pilot.press("space")  # base: the baseline (the cursor steps down, as htop's space does)
        for _ in range(names.index("recompute/seed1") - 1):
            await pilot.press("down")
        await pilot.press("space", "equals_sign", "o")  # seed1, then seed2 as its repeat
        await settle(pilot, lambda: isinstance(app.screen, MonitorScreen), tries=1000)
        await settle(pilot, lambda: "seed2" in str(app.screen.query_one("#loss-chart", Chart).legend()))
        legend = str(app.screen.query_one("#loss-chart", Chart).legend())
        assert "recompute/seed1" in legend and "recompute/seed2" in legend, legend
        await pilot.press("escape")
        await settle(pilot, lambda: not isinstance(app.screen, MonitorScreen))
        table = app.runs_screen.query_one(RunsTable)
        assert table.fixed_columns == 2




async def test_at_120_columns_every_column_up_to_duration_is_whole(tmp_path):
    """Issue 58, item 9: at 120 columns the list cut ``duration`` (``durati``, ``30 m 3``) where long names met
    a wide step (``25,000/100,000``): names are now cut down to 10 cells (their middle), and the loss column
    says plain ``loss`` when names are cut that hard."""
    from tests.helpers.app_common import screen_lines

    root = tmp_path / "runs"
    for name, (status, world, n, dt) in {"ablations/lr-x10-warmup-long": ("failed", 2, 244, 7.5),
                                         "ablations/recompute-selective-layers": ("running", 2, 120, 1.0),
                                         "base-1": ("finished", 1, 25_000, 0.2),
                                         "no-delay-fixed-loader": ("stalled", 4, 120, 1.0)}.items():
        write_run(root / name, status=status, note="", world=world, steps=n, step_time=dt)
    app = app_for(root)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, lambda: len(table_rows(app)) == 4 and "duration" in screen_lines(app)[1])
        lines = screen_lines(app)
        rows = table_rows(app)
    durations = [r[11] for r in rows]
    assert "duration" in lines[1], lines[1]
    for d, line in zip(durations, lines[2:6]):
        assert line.rstrip().endswith(d), (d, line)
    assert "25,000/100,000" in "\n".join(lines)


def test_a_writer_jobs_msrun_logs_beside_its_run_are_not_a_run_here_nor_over_ssh(tmp_path):
    """Issue 58 item 9 (the real msrun job: tests/system/test_what_happened_real_jobs.py): a log folder whose
    workers' pids its sibling writer run's start events name is that run's job's logs, both in this machine's
    list and in the remote host's (its runs program), and said; a log folder of other pids stays a run."""
    import json

    from mstop.sources.followers import runs_follower
    from mstop.sources.runs import find_runs

    run = tmp_path / "exp1"
    run.mkdir()
    for r, pid in ((0, 4776), (1, 4778)):
        (run / f"rank{r}.events.jsonl").write_text(json.dumps({"kind": "start", "time": 1.0, "pid": pid}) + "\n")
        (run / f"rank{r}.csv").write_text("time,step\n1.0,1\n")
    for folder, pid in (("exp1_logs", 4776), ("plain", 5123)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "worker_0.log").write_text(
            f"[WARNING] DISTRIBUTED({pid},7f43a9877b80,python):2026-12-06-17:00:57.986.916 [x.cc:485] Connect] x\n"
            "epoch: 1 step: 1, loss is 2.0\n")
    here, said = find_runs(str(tmp_path))
    there, said_there = runs_follower.find_runs(str(tmp_path), 3)
    assert [os.path.basename(p) for p, _ in here] == [p for p, _ in there] == ["exp1", "plain"]
    for problems in (said, said_there):
        (line,) = problems
        assert line.endswith("exp1_logs: the logs of exp1's processes (msrun --log_dir): shown with that run, "
                             "not as a run of its own"), line
