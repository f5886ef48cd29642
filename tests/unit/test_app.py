"""The monitor as a user sees it: rendered text of the header and panels, every key."""

from __future__ import annotations

import json

from mstop.app import MonitorApp
from mstop.app.widgets import Header, RanksTable
from mstop_writer import MetricsWriter
from tests.helpers.app_common import (
    NOW,
    app_for,
    grouped_by_host,
    make_baseline,
    make_run,
    screen_lines,
    settle,
    text,
)
from tests.helpers.cli import mstop
from tests.helpers.runs import start, steps, write_events, write_rank


async def test_header_and_panels_show_the_run(two_rank_run):
    app = app_for(two_rank_run)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        head = text(app.query_one(Header))
        assert "exp-1 · Ascend910B3 · world 2 · ranks seen 2" in head
        assert "status RUNNING" in head and "step 40 / 100" in head and "40 %" in head
        assert "last row 40 s ago" in head  # last row at 1000 + 40*24 = 1960
        # 124 cells of times at 118: the compile time goes, the goodput's detail and the path's start are cut
        assert "checkpoint step 30, 8 m 20 s ago: …step30.ckpt" in head and "compile 1.00" not in head
        assert "ETA 24 m 00 s" in head  # 60 steps x 24 s
        loss = text(app.query_one("#loss-chart"))
        assert "loss 1.323" in loss and "min 1.323" in loss and "smoothed(0.9)" in loss  # 4 / 40 ** 0.3
        assert "tokens/s 85" in str(app.query_one("#tp-text").content)
        mfu = str(app.query_one("#mfu-text").content)
        assert "MFU 41.0 % · peak 313 TFLOP/s" in mfu
        mem = str(app.query_one("#mem-text").content)
        assert "headroom 10.9 %" in mem and "rank 1" in mem and "used 46.6" in mem and "total 59.6 GiB" in mem
        chart = text(app.query_one("#mem-chart"))
        assert "headroom %, rank 1" in chart and "├─────" in chart  # a warning/critical line is drawn
        data = str(app.query_one("#data").content)
        assert "data wait 4.2 % of step time (worst: rank 1)" in data


async def test_rows_appended_while_running_are_shown(tmp_path):
    run = tmp_path / "live"
    run.mkdir()
    app = MonitorApp(str(run), poll=0.05)
    w = MetricsWriter(run, rank=0, world_size=1, run_name="live-run", tokens_per_step=100, heartbeat_interval=3600,
                      witness=False)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, lambda: "live-run" in text(app.query_one(Header)))
            for s in range(1, 8):
                w.log(s, loss=1.0 / s, step_time=0.1)
            await settle(pilot, lambda: "step 7" in text(app.query_one(Header)))
            assert "loss 0.1429" in text(app.query_one("#loss-chart"))
            app.monitor.action_pause()
            for s in range(8, 12):
                w.log(s, loss=1.0 / s, step_time=0.1)
            await settle(pilot, lambda: app.monitor.session.store.rows == 11)
            app.monitor.redraw()
            assert "step 7 " in text(app.query_one(Header))  # frozen while paused
            await pilot.press("p")
            await settle(pilot, lambda: "step 11" in text(app.query_one(Header)))
    finally:
        w.close()


async def test_smoothing_keys(two_rank_run):
    app = app_for(two_rank_run)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("s")
        assert "smoothed(0.8)" in text(app.query_one("#loss-chart"))
        await pilot.press("S", "S")
        assert "smoothed(0.95)" in text(app.query_one("#loss-chart"))


async def test_ranks_view_sorts(two_rank_run):
    app = app_for(two_rank_run)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("r")
        table = app.query_one(RanksTable)
        assert table.display and table.row_count == 2
        assert [str(c) for c in table.get_row_at(0)[:2]] == ["0", "node0"]
        table.sort_key, table.sort_reverse = "data_wait", True
        app.monitor.redraw()
        assert str(table.get_row_at(0)[0]) == "1"
        await pilot.press("r")
        assert not app.screen.has_class("show-ranks") and not app.query_one("#ranks-view").display


async def test_nan_and_markup_are_shown_literally(tmp_path):
    run = make_run(tmp_path / "run", ranks=1, name="[bold red]boom[/]",
                   loss=lambda s: "nan" if s == 25 else 1.0)
    app = app_for(run)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert "[bold red]boom[/]" in text(app.query_one(Header))
        assert "!! NaN/Inf at step 25" in text(app.query_one("#loss-chart"))


async def test_small_terminal_layout(two_rank_run):
    app = app_for(two_rank_run)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app.screen.has_class("narrow")
        assert not app.query_one("#lr-chart").display or app.query_one("#lr-chart").styles.display == "none"
        assert "headroom" in str(app.query_one("#mem-text").content)


async def test_resume_boundary_and_repeated_steps_shown(tmp_path):
    run = tmp_path / "run"
    write_events(run, 0, [start("A", t=900.0), start("B", t=1300.0)])
    write_rank(run, 0, steps(1, 10, session="A", t0=1000.0, dt=10.0, loss=1.0, step_time=10.0))
    write_rank(run, 0, steps(6, 12, session="B", t0=1300.0, dt=10.0, loss=1.0, step_time=10.0))
    app = MonitorApp(str(run), follow=False, clock=lambda: 1375.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert "5 steps repeated after a resume (50 s)" in text(app.query_one(Header))
        assert "restarts at 6" in text(app.query_one("#loss-chart"))


async def test_bell_rings_once_per_new_alert(tmp_path):
    run = make_run(tmp_path / "run", ranks=1, loss=lambda s: "nan" if s == 25 else 1.0)
    app = MonitorApp(str(run), follow=False, clock=lambda: NOW, bell=True)
    rings = []
    app.bell = lambda: rings.append(1)  # count the bells the app asks the terminal for
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.monitor.redraw()
        app.monitor.redraw()
    assert rings == [1]


async def test_ranks_grouped_by_host_expand_with_enter(tmp_path):
    """Grouped by host (h), the quiet hosts fold into one line (as clush -b folds like output); the host
    with an alert keeps its own; Enter opens the fold, then a host's ranks."""
    run = tmp_path / "hosts"
    for r in range(40):
        write_events(run, r, [start("s1", t=900.0, host=f"node{r // 8}")])
        write_rank(run, r, steps(1, 30, t0=1000.0, dt=1.0, loss=1.0, tokens=10, step_time=1.0,
                                 data_wait=0.3 if r == 21 else 0.01))
    app = MonitorApp(str(run), follow=False, clock=lambda: 1031.0)
    async with app.run_test(size=(120, 40)) as pilot:
        table, rows = await grouped_by_host(app, pilot)
        assert [r[:2] for r in rows] == [["+ 4 hosts", "node[0-1,3-4] ok · 8 ranks each"], ["+ 8 ranks", "node2"]]
        assert rows[1][6] == "30.0 %"  # node2 holds rank 21: the host shows its worst rank
        await pilot.press("enter")  # the fold opened: a line a host
        assert [str(table.get_row_at(i)[1]) for i in range(table.row_count)] == [f"node{i}" for i in range(5)]
        await pilot.press("enter")
        assert table.row_count == 13 and str(table.get_row_at(0)[0]) == "- 8 ranks"
        assert str(table.get_row_at(1)[0]).strip() == "0" and "rows 1-13 of 13 hosts and ranks" in table.border_title
        await pilot.press("h")
        assert table.border_title.startswith("rows 1-") and " of 40 ranks " in table.border_title




async def test_baseline_that_ended_earlier_is_said(two_rank_run, tmp_path):
    base = make_baseline(tmp_path / "base", last=25)  # the run is at step 40
    app = app_for(two_rank_run, baseline=str(base))
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        assert "baseline ended at step 25: no difference past it" in text(app.query_one("#loss-base"))
        assert "vs baseline" not in text(app.query_one("#tp-text"))




async def test_a_closed_screen_leaves_nothing_it_drew_behind(two_rank_run):
    """Textual 8.2 keeps up to 1,024 widgets' style caches (every line they drew) in an lru_cache keyed by the
    widget's cache (Textualize/textual#6665): a monitor left open for weeks, ? pressed and closed again and
    again, held each closed screen's lines. Once closed, a screen's drawn lines are freed."""
    import gc
    import weakref

    from mstop.app.screens import HelpScreen

    app = app_for(two_rank_run)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot, lambda: isinstance(app.screen, HelpScreen))
        drawn = [weakref.ref(w._styles_cache) for w in app.screen.walk_children()]
        assert drawn
        await pilot.press("escape")
        await settle(pilot, lambda: not isinstance(app.screen, HelpScreen))
        gc.collect()
        assert [r for r in drawn if r() is not None] == []


async def test_routing_rules_ring_for_their_bell_sink_and_keep_a_history_beside_the_run(tmp_path):
    """Issue 61, item 3: with routing rules the NaN loss goes through the router (at once: no ``for``), to the
    file sink and the bell, once however many frames are drawn; the history is kept beside the run and
    ``summary --json`` reads it back."""
    from mstop.live.routing import Route, Rules

    run = make_run(tmp_path / "run", ranks=1, loss=lambda s: "nan" if s == 25 else 1.0)
    rules = Rules((Route("nan_loss", sinks=("file", "bell")),), file=str(tmp_path / "alerts.jsonl"))
    app = MonitorApp(str(run), follow=False, clock=lambda: NOW, routing=rules)
    rings = []
    app.bell = lambda: rings.append(1)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.monitor.redraw()
        app.monitor.redraw()
        await pilot.press("a")  # the alerts dialog lists what the rules notified, below the incidents
        await settle(pilot, lambda: "notified by the alert rules" in "\n".join(screen_lines(app)))
        shown = [ln for ln in screen_lines(app) if " fired " in ln]
        assert shown and "nan_loss" in shown[0] and "rank 0" in shown[0], shown
    assert rings == [1]
    (told,) = [json.loads(x) for x in (tmp_path / "alerts.jsonl").read_text().splitlines()]
    assert (told["state"], told["kind"], told["ranks"]) == ("fired", "nan_loss", [0])
    history = json.loads(mstop("summary", run, "--json").stdout)["alert_history"]
    assert history == [told]
