"""The monitor as a user sees it: rendered text of the header and panels, every key."""

from __future__ import annotations

import json
import re
import sys

from mstop import fmt
from mstop.app import MonitorApp
from mstop.app.screens import GoToStepScreen, HelpScreen
from mstop.app.widgets import Header, HeatStrip, RanksTable
from mstop.live import RedrawBudget
from mstop_writer import MetricsWriter
from tests.helpers.app_common import NOW, app_for, make_baseline, make_run, settle, text, toasts
from tests.helpers.runs import start, steps, write_events, write_rank


async def test_alerts_panel_badge_acknowledge_and_on_alert(tmp_path):
    from mstop.app.screens import AlertsScreen
    from mstop.app.widgets import AlertsPanel

    run = make_run(tmp_path / "run", ranks=1, loss=lambda s: "nan" if s == 25 else 1.0)
    got = tmp_path / "alerts.jsonl"
    cmd = f"{sys.executable} -c \"import sys; open(sys.argv[1], 'a').write(sys.stdin.read() + chr(10))\" {got}"
    app = MonitorApp(str(run), follow=False, clock=lambda: NOW, on_alert=cmd)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        head = text(app.query_one(Header))
        assert "ALERTS 1 (1 new: a)" in head and app.query_one(Header).has_class("new-alerts")
        assert "!! nan_loss loss nan at step 25 on rank 0" in text(app.query_one(AlertsPanel))
        await settle(pilot, lambda: got.exists() and got.read_text().strip())
        sent = [json.loads(line) for line in got.read_text().splitlines()]
        assert sent == [{"kind": "nan_loss", "rank": 0, "step": 25, "message": "loss nan at step 25 on rank 0"}]
        await pilot.press("a")
        assert isinstance(app.screen, AlertsScreen)
        await pilot.press("escape")
        app.monitor.redraw()
        assert "ALERTS 1" in text(app.query_one(Header)) and "new" not in text(app.query_one(Header))
        app.monitor.redraw()  # the same alert again: not sent twice
        await pilot.pause(0.3)
        assert len(got.read_text().splitlines()) == 1


def style_at(text, i: int):
    """The style a rich Text draws its character ``i`` in."""
    return next(span.style for span in text.spans if span.start <= i < span.end)


async def test_x_axis_log_and_window_keys(two_rank_run):
    app = app_for(two_rank_run)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert "x: step" in text(app.query_one("#lr-chart"))
        await pilot.press("x")
        assert "x: time since " in text(app.query_one("#lr-chart"))
        await pilot.press("x")
        assert "x: tokens seen" in text(app.query_one("#lr-chart"))
        await pilot.press("l")
        assert "(log)" in text(app.query_one("#loss-chart"))
        # drawn again without new data (a resize): once failed with "chart unavailable: math domain error"
        for size in ((110, 40), (120, 40)):
            await pilot.resize_terminal(*size)
            await settle(pilot)
            drawn = str(app.query_one("#loss-chart").render())
            assert "(log)" in drawn and "unavailable" not in drawn
        await pilot.press("w")
        assert "recent" in text(app.query_one("#loss-chart"))


async def test_help_and_go_to_step(two_rank_run):
    app = app_for(two_rank_run)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert "go to a step" in str(app.screen.query_one("Static").content)
        await pilot.press("escape")
        await pilot.press("g")
        assert isinstance(app.screen, GoToStepScreen)
        await pilot.press("1", "0", "enter")
        shown = str(app.screen.query_one("#step-values").content)
        assert "step 10" in shown and "rank 0: " in shown and "loss=" in shown and "grad_norm=1.5" in shown
        await pilot.press("escape")
        await pilot.press("q")
    assert app.return_code in (0, None)


async def test_custom_metrics_filter_and_chart(tmp_path):
    run = tmp_path / "run"
    t = [1000.0]
    with MetricsWriter(run, rank=0, world_size=1, run_name="moe", clock=lambda: t[0], heartbeat_interval=3600,
                       extra_columns=["moe_aux_loss", "val_acc"]) as w:
        for s in range(1, 30):
            t[0] += 1
            w.log(s, loss=1.0, moe_aux_loss=0.01 * s, val_acc=None, note="text, not a number")
    app = MonitorApp(str(run), follow=False, clock=lambda: 1040.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("slash")
        await pilot.press("m", "o", "e", "enter")
        lst = app.screen.query_one("SelectionList")
        assert lst.option_count == 1  # filtered: only moe_aux_loss (val_acc is empty, note is text)
        await pilot.press("space", "escape")
        assert app.monitor.session.custom == ("moe_aux_loss",) and app.screen.has_class("has-custom")
        assert "moe_aux_loss" in text(app.query_one("#custom-chart"))


async def test_ranks_view_pages_through_many_ranks(tmp_path):
    run = tmp_path / "many"
    for r in range(300):
        write_rank(run, r, steps(1, 3, t0=1000.0 + r, step_time=1.0 + r / 1000, data_wait=0.01, tokens=10))
    app = MonitorApp(str(run), follow=False, clock=lambda: 1100.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("r")
        table = app.query_one(RanksTable)
        assert table.row_count < 40 and table.border_title.startswith("rows 1-")
        assert "of 300 ranks" in table.border_title
        await pilot.press("end")
        assert str(table.get_row_at(table.row_count - 1)[0]) == "299"
        await pilot.press("home", "pagedown")
        first = int(str(table.get_row_at(0)[0]))
        assert first == table.offset > 0 and table.border_title.startswith(f"rows {first + 1}-")


async def test_clock_skew_between_hosts_is_noted_not_alerted(tmp_path):
    import time as _time

    run = tmp_path / "skew"
    now = _time.time()
    write_rank(run, 0, steps(1, 30, t0=now - 31, dt=1.0, loss=1.0, step_time=1.0))
    write_rank(run, 1, steps(1, 30, t0=now - 31 - 600, dt=1.0, loss=1.0, step_time=1.0))  # 10 min behind
    app = MonitorApp(str(run), poll=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        write_rank(run, 0, steps(31, 31, t0=_time.time() - 1, loss=1.0, step_time=1.0))
        row_time = _time.time() - 600.0
        write_rank(run, 1, steps(31, 31, t0=row_time - 1.0, loss=1.0, step_time=1.0))
        await settle(pilot, lambda: app.monitor.session.store.rows == 62 and "step 31" in text(app.query_one(Header)))
        app.monitor.redraw()
        head = text(app.query_one(Header))
        # the skew is the row's time against its file's: 600 s and the moments the write took (seconds on a
        # loaded machine), said to the second
        behind = (run / "rank1.csv").stat().st_mtime - row_time
        assert 599.9 < behind < 605, behind
        assert "status RUNNING" in head and f"rank 1's clock is {fmt.duration(behind)} behind this machine (file " \
                                           "times)" in head, (behind, head)
        alerts = app.monitor.session.health.alerts(app.monitor.session.store, app.monitor.session.opts)
        assert not [a for a in alerts if a.kind in ("stalled", "dead_rank")], alerts


async def test_heat_strip_and_rank_detail(tmp_path):
    run = tmp_path / "cluster"
    for r in range(40):
        write_events(run, r, [start("s1", t=900.0, host=f"node{r // 8}")])
        write_rank(run, r, steps(1, 30, t0=1000.0, dt=1.0, loss=1.0, tokens=10,
                                 step_time=3.0 if r == 7 else 1.0, data_wait=0.01))
    app = MonitorApp(str(run), follow=False, clock=lambda: 1031.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot, lambda: "by rank" in str(app.query_one("#heat-title").content))
        assert str(app.query_one("#heat-title").content).startswith("step time by rank (40; high is bad; m: metric")
        strip = app.query_one(HeatStrip)
        cells = str(strip.content).splitlines()[0]
        assert cells[7] == "█" and set(cells[:7] + cells[8:]) == {"▁"}  # the odd one out, without colour
        # and with colour: its cell is drawn in the outlier class, the others in the normal one
        assert style_at(strip.content, 7) == strip.get_component_rich_style("heat-strip--outlier", partial=True)
        normal = strip.get_component_rich_style("heat-strip--normal", partial=True)
        assert style_at(strip.content, 3) == normal != style_at(strip.content, 7)
        await pilot.press("m")
        assert str(app.query_one("#heat-title").content).startswith("data wait by rank")
        detail = app.query_one("#rank-detail")
        assert str(detail.content).startswith("rank 0 on node0\nstep 30")
        await pilot.press("down")
        await settle(pilot, lambda: str(detail.content).startswith("rank 1 on node0"))
        # a click on rank 33's cell (the strip has one column of padding) selects it everywhere
        await pilot.click(HeatStrip, offset=(1 + 33, 0))
        await settle(pilot, lambda: str(detail.content).startswith("rank 33 on node4"))
        table = app.query_one(RanksTable)
        assert str(table.get_row_at(table.cursor_row)[0]) == "33"
        chart = app.query_one("#rank-chart")
        print(str(chart.render()))
        await settle(pilot, lambda: "rank 33: step time and data wait (s, log)" in str(chart.render()))
        assert style_at(strip.content, 33).reverse and not style_at(strip.content, 32).reverse  # its cell


async def test_baseline_overlay_and_deltas_at_the_same_step(two_rank_run, tmp_path):
    base = make_baseline(tmp_path / "base")
    app = app_for(two_rank_run, baseline=str(base))
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        said = text(app.query_one("#loss-base"))
        assert re.search(r"^vs baseline base at step 40: smoothed loss -0\.(1|0999\d*) \(-\d+\.\d %\)$", said), said
        assert "baseline smoothed" in text(app.query_one("#loss-chart"))
        assert text(app.query_one("#tp-text")).startswith("tokens/s 85 (+25.0 % vs baseline)\nstep time 24.00 s")
        assert "MFU 41.0 % (+8.0 pp vs baseline)" in text(app.query_one("#mfu-text"))
        assert "(and baseline)" in text(app.query_one("#tp-chart"))
        # b: choose no baseline (empty), then a directory that does not exist (said, nothing else changes)
        await pilot.press("b")
        inp = app.screen.query_one("#baseline-input")
        assert inp.value == str(base)
        inp.value = ""
        await pilot.press("enter")
        await settle(pilot, lambda: not app.query_one("#loss-base").display)
        assert "baseline smoothed" not in text(app.query_one("#loss-chart"))
        assert "vs baseline" not in text(app.query_one("#tp-text"))
        await pilot.press("b")
        app.screen.query_one("#baseline-input").value = str(tmp_path / "missing")
        await pilot.press("enter")  # read on a worker thread: the screen goes on meanwhile
        await settle(pilot, lambda: any("baseline not loaded" in m for m in toasts(app)))
        assert app.monitor.session.baseline_store is None
        # and a real one chosen with b comes back on the charts
        await pilot.press("b")
        app.screen.query_one("#baseline-input").value = str(base)
        await pilot.press("enter")
        await settle(pilot, lambda: app.query_one("#loss-base").display)
        assert "(+25.0 % vs baseline)" in text(app.query_one("#tp-text"))


async def test_costly_frames_are_spaced_out_and_keys_still_draw_at_once(two_rank_run):
    """At 10,000 ranks a frame takes about a second: frames drawn on their own (new rows, the tick) then come
    at most a quarter of the time, so keys are answered between them; a key draws at once regardless, and
    once frames are cheap again they come once a second again. Time, and the frames' work, is the redraw
    budget's clocks, held here (the throttle's arithmetic alone: tests/unit/test_throttle.py)."""
    now = [1000.0]
    app = app_for(two_rank_run, redraw=RedrawBudget(clock=lambda: now[0], cost_clock=lambda: now[0]))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        scr = app.screen
        with scr.throttle.frame():  # a frame that worked 10 s by the budget's clocks: the next of its own in 40 s
            now[0] += 10.0
        before = scr.frames_drawn
        app.monitor.session.store.version += 1  # something new
        await pilot.pause(2.5)  # two ticks
        assert scr.frames_drawn == before
        await pilot.press("r")  # a key: drawn at once, not 40 s later
        await settle(pilot, lambda: scr.frames_drawn > before, tries=500)
        assert app.query_one(RanksTable).row_count == 2
        n = scr.frames_drawn  # the key's frame took no time of the budget's clock: frames are cheap again
        now[0] += 1.0
        app.monitor.session.store.version += 1
        await settle(pilot, lambda: scr.frames_drawn > n, tries=500)  # cheap frames: once a second again


