"""The screen tells the truth at a glance: nothing on it contradicts the rest, every number is live or
says its age, axes read as numbers people use, the keys can be found (issue 14)."""

from __future__ import annotations

import pytest

from mstop.app import MonitorApp
from mstop.app.widgets import AlertsPanel, Header
from tests.helpers.app_common import screen_lines, settle, text, toasts
from tests.helpers.runs import start, steps, write_events, write_rank
from tests.helpers.screen_truth_common import (
    _axis_labels,
    _run,
)


async def _header(path, now: float, size=(120, 40)) -> tuple[str, MonitorApp]:
    app = MonitorApp(str(path), follow=False, clock=lambda: now)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        return text(app.query_one(Header)), app


async def test_a_finished_run_opened_an_hour_later_shows_its_own_duration_and_no_eta(tmp_path):
    run = _run(tmp_path / "run", last=100, end=True, total=100)
    head, _ = await _header(run, now=1100.0 + 3600)
    assert "status FINISHED" in head
    assert "elapsed 1 m 41 s" in head  # its start (999) to its end (1100), not to now
    assert "ETA" not in head and "steps/s" not in head


async def test_a_stalled_run_has_no_pace_and_no_eta(tmp_path):
    run = _run(tmp_path / "run", last=200, beats=False)
    head, _ = await _header(run, now=1200.0 + 600)  # ten minutes without a row, no heartbeats promised
    assert "status STALLED" in head
    assert "ETA n/a (stalled)" in head and "n/a steps/s" in head
    live, _ = await _header(run, now=1201.0)
    assert "status RUNNING" in live and "ETA 13 m 20 s" in live and "1 steps/s" in live  # 800 steps x 1 s


async def test_an_alert_line_says_since_when_and_leaves_when_its_condition_ends(tmp_path):
    """Data wait at 40 % from step 150, then 1.6 %: the line said 40 % with no age and stayed for 60 s."""
    run = _run(tmp_path / "run", last=200, data_wait=lambda s: 0.4 if s >= 150 else 0.016)
    app = MonitorApp(str(run), follow=False, clock=lambda: 1201.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        line = str(app.query_one(AlertsPanel).content)
        assert "!! data_starvation rank 0 waits on input 40%" in line
        assert "since step 200 (" in line  # first seen at the newest row when opened
        assert "input-bound" in str(app.query_one("#data").content)
        write_rank(run, 0, steps(201, 230, t0=1201.0, step_time=1.0, data_wait=0.016, tokens=1000, loss=1.0))
        app.monitor.session.source.read_all()
        app.monitor.session.opts.clock = lambda: 1232.0
        app.monitor.redraw()
        await settle(pilot)
        assert not app.query_one(AlertsPanel).display  # cleared at once, not held for a minute
        data = str(app.query_one("#data").content)
        assert "data wait 1.6 %" in data and "input-bound" not in data


async def test_the_footer_always_shows_help(tmp_path):
    run = _run(tmp_path / "run")
    for size in ((120, 40), (80, 24)):
        app = MonitorApp(str(run), follow=False, clock=lambda: 1201.0)
        async with app.run_test(size=size) as pilot:
            await settle(pilot, lambda app=app: "quit" in screen_lines(app)[-1])
            footer = screen_lines(app)[-1]
            assert "? help" in footer and "q quit" in footer, footer


async def test_small_terminal_collapses_alerts_to_one_line(tmp_path):
    run = _run(tmp_path / "run", last=200, data_wait=lambda s: 0.4)
    write_rank(run, 0, [{"time": 1201.0, "step": 201, "loss": "nan", "step_time": 1.0, "data_wait": 0.4,
                         "session": "s1"}])
    app = MonitorApp(str(run), follow=False, clock=lambda: 1202.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        panel = app.query_one(AlertsPanel)
        assert str(panel.content).startswith("!! 2 alerts: data_starvation, nan_loss (a: list)")
        assert panel.size.height == 1
        assert app.query_one("#loss-chart").size.height >= 8


async def test_step_axis_ticks_are_whole_steps(tmp_path):
    run = _run(tmp_path / "run", last=600)
    app = MonitorApp(str(run), follow=False, clock=lambda: 1601.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        drawn = text(app.query_one("#loss-chart"))
        assert "100" in drawn and "300" in drawn
        assert "150.8" not in drawn and "300.5" not in drawn


async def test_a_dead_run_has_no_eta_and_its_own_duration(tmp_path):
    """Heartbeats every 30 s, the last row at 1,200 and nothing since: dead after 3 heartbeats; elapsed runs
    from its start (999) to its last sign of life (1,200)."""
    run = _run(tmp_path / "run", last=200)
    write_events(run, 0, [{"time": 1200.0, "kind": "heartbeat"}])
    head, _ = await _header(run, now=1200.0 + 3600)
    assert "status DEAD" in head
    assert "elapsed 3 m 21 s" in head and "ETA" not in head and "steps/s" not in head


async def test_the_recent_window_narrows_the_loss_axis_whatever_the_marks(tmp_path):
    """w: a checkpoint at step 100 of 2,000 and a NaN at step 50 stretched the loss chart back over the run."""
    run = _run(tmp_path / "run", last=2000)
    write_rank(run, 0, [{"time": 3001.0, "step": 2001, "loss": 1.0, "step_time": 1.0}])
    write_events(run, 0, [{"time": 1100.0, "kind": "checkpoint", "step": 100, "path": "/ck/100"},
                          {"time": 2900.0, "kind": "checkpoint", "step": 1900, "path": "/ck/1900"}])
    import csv

    path = run / "rank0.csv"
    rows = list(csv.reader(path.open()))
    rows[50][rows[0].index("loss")] = "nan"  # step 50
    with path.open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    app = MonitorApp(str(run), follow=False, clock=lambda: 3002.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        v = app.monitor.last_view
        xs = [x for s in (v.loss.raw, v.loss.smooth) for x in s.x.tolist()]
        marks = [x for x, _ in v.loss.checkpoints] + v.loss.nan_steps + [x for x, _ in v.loss.incident_marks]
        assert min(xs) >= 1801 and all(1801 <= x <= 2001 for x in marks), (min(xs), marks)
        assert [x for x, _ in v.loss.checkpoints] == [1900.0]
        assert "recent" in text(app.query_one("#loss-chart"))


async def test_ranks_table_ages_agree_with_the_header(tmp_path):
    """Following live the header's age counts from the rows' arrival; the table counted from their time column."""
    run = _run(tmp_path / "run", last=100)
    write_events(run, 1, [start("s1", t=999.0, host="n1")])
    write_rank(run, 1, steps(1, 90, t0=1000.0, step_time=1.0, tokens=1000, loss=1.0))
    app = MonitorApp(str(run), follow=False, clock=lambda: 1100.0 + 45)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        head = text(app.query_one(Header))
        assert "last row 45 s ago" in head
        ages = {r.rank: r.age for r in app.monitor.last_view.ranks}
        assert ages[0] == 45.0 and ages[1] == 55.0  # the newest rank's age is the header's


async def test_units_in_the_go_to_step_dialog_and_the_mfu_peak(tmp_path):
    run = tmp_path / "run"
    write_events(run, 0, [start("s1", t=999.0, peak_flops=1e11, flops_per_token=6e6, world_size=1)])
    write_rank(run, 0, steps(1, 50, t0=1000.0, step_time=0.5, data_wait=0.000324707, tokens=1000, loss=1.0,
                             mem_peak=549704000, mem_total=8e9))
    app = MonitorApp(str(run), follow=False, clock=lambda: 1051.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert "peak 100 GFLOP/s" in str(app.query_one("#mfu-text").content)
        await pilot.press("g")
        for k in "25":
            await pilot.press(k)
        await pilot.press("enter")
        await settle(pilot)
        shown = str(app.screen.query_one("#step-values").content)
        # the exact value as written, then its unit's reading
        assert "mem_peak=549,704,000 B (524 MiB)" in shown and "data_wait=0.000324707 s (0.3 ms)" in shown
        assert "step_time=0.5 s (500.0 ms)" in shown
        assert "e+08" not in shown and "e-04" not in shown


def test_replayed_checkpoints_are_under_the_replay_directory(tmp_path):
    import json

    from mstop.sources.replay import RECORDING, replay

    replay(RECORDING, tmp_path / "r", speed=1e9)
    paths = [json.loads(x)["path"] for x in (tmp_path / "r" / "rank0.events.jsonl").read_text().splitlines()
             if json.loads(x)["kind"] == "checkpoint"]
    assert paths and all(p.startswith(str(tmp_path / "r" / "ckpt")) for p in paths), paths[:2]


async def test_host_memory_chart_shows_the_panels_figure(tmp_path):
    """Two ranks on one host, host RAM: the panel's headroom is the host's; its chart was rank 0's own."""
    run = tmp_path / "run"
    for r in range(2):
        write_events(run, r, [start("s1", t=999.0, host="n0", memory_source="host", world_size=2)])
        write_rank(run, r, steps(1, 100, t0=1000.0, step_time=1.0, tokens=1000, loss=1.0,
                                 mem_peak=20e9 + r * 1e9, mem_total=64e9))
    app = MonitorApp(str(run), follow=False, clock=lambda: 1101.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        v = app.monitor.last_view
        assert str(v.memory.worst) == "host n0"
        # float32 cells: equal to the last digit the screen shows (35.9 %)
        assert min(v.memory.series.y) == pytest.approx(v.memory.headroom, rel=1e-6)
        assert v.memory.headroom == pytest.approx(1 - 41e9 / 64e9, rel=1e-6)
        assert "headroom %, host n0" in text(app.query_one("#mem-chart"))


async def test_legends_stay_with_log_scale_and_marks_say_their_axis(tmp_path):
    run = _run(tmp_path / "run", last=300)
    write_events(run, 0, [{"time": 1100.0, "kind": "eval", "step": 100, "metrics": {"accuracy": 0.61,
                                                                                   "val_loss": 2.1}}])
    app = MonitorApp(str(run), follow=False, clock=lambda: 1301.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        chart = app.query_one("#loss-chart")
        legend = chart.legend().plain
        assert "•• raw" in legend and "▀▄ smoothed" in legend  # glyphs, not only colours (NO_COLOR)
        assert "eval accuracy (right axis)" in legend and "eval val_loss" in legend
        assert "eval val_loss (right axis)" not in legend  # a loss shares the loss axis
        await pilot.press("l")
        await settle(pilot)
        assert "(log)" in text(chart) and "▀▄ smoothed" in text(chart)  # the legend did not go with l


async def test_smoothing_keys_leave_one_toast(tmp_path):
    run = _run(tmp_path / "run")
    app = MonitorApp(str(run), follow=False, clock=lambda: 1201.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        for _ in range(4):
            await pilot.press("s")
        await settle(pilot)
        assert len(toasts(app)) == 1


async def test_a_mindformers_log_paces_by_its_lines_not_its_compute_time(tmp_path):
    """MindFormers' per_step_time is the network's compute (12 ms) while a step takes 0.5 s of wall time: the
    header's pace and ETA follow the wall (2 steps/s, 60 steps to go = 30 s), not 86 steps/s and ETA 0 s."""
    from tests.helpers.mflines import Log

    log = Log(t0=1_796_108_985.0)
    for s in range(1, 41):
        log.t += 0.488
        log.step(1, 1, s, 100, 5.0 - s * 0.01, step_ms=12.0)
    d = tmp_path / "output" / "log" / "rank_0"
    d.mkdir(parents=True)
    (d / "info.log").write_text(log.text())
    head, _ = await _header(tmp_path / "output", now=log.t + 0.2)
    assert "status RUNNING" in head, head
    assert "· 2 steps/s" in head and "ETA 30 s" in head, head


async def test_the_header_says_when_ranks_are_at_different_steps_and_the_charts_name_their_rank(tmp_path):
    """Rank 1 is 60 steps ahead of rank 0: the header's step is rank 1's and says where the ranks are; the
    loss, lr and throughput charts, drawn from rank 0, say so."""
    run = tmp_path / "run"
    for rank, last in ((0, 140), (1, 200)):
        write_events(run, rank, [start("s1", t=999.0, total_steps=1000, rank=rank, world_size=2)])
        write_rank(run, rank, steps(1, last, t0=1000.0 + (200 - last), dt=1.0, step_time=1.0, tokens=1000,
                                    loss=lambda s: 3.0 / s ** 0.2, lr=1e-4))
    app = MonitorApp(str(run), follow=False, clock=lambda: 1201.0)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        lines = screen_lines(app)
        screen = "\n".join(lines)
        assert "step 200 / 1,000" in screen and "(ranks at 140-200)" in screen, screen
        assert any(line.lstrip("│ ").startswith("loss ") and "(rank 0)" in line for line in lines), screen
        assert "x: step · rank 0" in screen and "tokens/s, rank 0" in screen, screen


async def test_a_log_loss_axis_reads_values_and_the_eval_axis_stays_linear(tmp_path):
    """l: the loss (2.3 to 4.4) on a log axis labels values people read (3, 4), not log10 exponents nor the
    ends and their geometric middle (4.36 / 3.18 / 2.32); an eval MAE of 0.15-0.26 on the right axis keeps
    its values (never -0.6 … -0.8)."""
    run = tmp_path / "run"
    write_events(run, 0, [start("s1", t=999.0, total_steps=1000)] + [
        {"time": 1000.0 + s, "kind": "eval", "step": s, "metrics": {"eval_mae": 0.26 - 0.011 * (s // 20)}}
        for s in range(20, 201, 20)])
    write_rank(run, 0, steps(1, 200, t0=1000.0, step_time=1.0, loss=lambda s: 4.36 * (2.32 / 4.36) ** (s / 200)))
    app = MonitorApp(str(run), follow=False, clock=lambda: 1201.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("l")
        await settle(pilot)
        chart = text(app.query_one("#loss-chart"))
        left, right = _axis_labels(chart, "left"), _axis_labels(chart, "right")
        assert "(log)" in chart and set(left) <= {"2", "3", "4", "5"} and len(left) >= 2, chart
        assert right and all(0.1 <= float(lab) <= 0.3 for lab in right), chart
        assert len({len(lab.split(".")[-1]) for lab in right}) == 1, right  # one format on the axis


async def test_each_eval_metric_has_its_glyph_and_a_checkpoint_hides_none(tmp_path):
    """eval_loss and eval_acc at steps 50-200, checkpoints at the same steps: two glyphs, both names whole in
    the legend, every eval point drawn and every checkpoint mark too (on the x axis, under no point)."""
    run = tmp_path / "run"
    write_events(run, 0, [start("s1", t=999.0, total_steps=1000)] + [
        ev for s in (50, 100, 150, 200) for ev in (
            {"time": 1000.0 + s, "kind": "checkpoint", "step": s, "path": f"/ck/{s}"},
            {"time": 1000.5 + s, "kind": "eval", "step": s,
             "metrics": {"eval_loss": 3.0 / s ** 0.2 + 0.05, "eval_acc": 0.5 + s / 1000}})])
    write_rank(run, 0, steps(1, 200, t0=1000.0, step_time=1.0, loss=lambda s: 3.0 / s ** 0.2))
    app = MonitorApp(str(run), follow=False, clock=lambda: 1201.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        chart = text(app.query_one("#loss-chart"))
        legend, plot = chart.splitlines()[0], "\n".join(chart.splitlines()[2:])
        assert "eval_loss" in legend and "eval_acc" in legend and "…" not in legend, legend
        assert "xx eval_loss" in legend.replace("xx eval eval_loss", "xx eval_loss")
        assert "oo eval eval_acc" in legend or "oo eval_acc" in legend, legend
        body = [line.split("┤", 1)[-1] for line in plot.splitlines() if "└" not in line]
        axis = next(line for line in plot.splitlines() if "└" in line)
        assert axis.count("C") == 4 and not any("C" in line for line in body), chart  # on the x axis
        assert sum(line.count("x") for line in body) == 4 and sum(line.count("o") for line in body) == 4, chart




async def test_a_line_flat_to_four_digits_is_labelled_in_four_digits(tmp_path):
    """Issue 40 (13): a loss between 95.6195 and 95.62 was labelled ``95.6195``, ``95.6200``: digits no one
    reads. The axis is at least a thousandth of its values wide, so its labels need at most four digits."""
    import re

    run = tmp_path / "run"
    write_events(run, 0, [start("s1", t=999.0, run_name="flat", total_steps=100, host="n0")])
    write_rank(run, 0, steps(1, 60, t0=1000.0, dt=1.0, step_time=1.0,
                             loss=lambda s: 95.6195 + 0.0005 * (s % 2), lr=1e-4))
    app = MonitorApp(str(run), follow=False, clock=lambda: 1061.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        labels = _axis_labels(text(app.query_one("#loss-chart")), "left")
    assert len(labels) >= 2, labels
    digits = [len(re.sub(r"[^0-9]", "", lab).lstrip("0")) for lab in labels]
    assert max(digits) <= 4, labels


async def test_the_eta_is_the_last_ranks_not_the_leaders(tmp_path):
    """Issue 58, item 9: ranks that drift apart (the demo's: no collective) showed the leading rank's ETA
    (``ETA 11 s`` with 390 steps left on rank 0): the job is done when its last rank is."""
    run = tmp_path / "run"
    for r, last in ((0, 10), (1, 390)):
        write_events(run, r, [start("s1", t=999.0, world_size=2, total_steps=400, parallel_mode="stand_alone")])
        write_rank(run, r, steps(1, last, t0=1000.0, dt=0.5 if r == 0 else 0.1, step_time=0.1, loss=1.0))
    now = max(1000.0 + 10 * 0.5, 1000.0 + 390 * 0.1) + 0.2
    head, _ = await _header(run, now=now)
    assert "status RUNNING" in head, head
    assert "ETA 3 m 15 s" in head, head  # rank 0: 390 steps to go at 0.5 s a step; rank 1's 10 take 1 s


async def test_a_run_dead_for_minutes_says_its_death_began_then_not_when_it_was_opened(tmp_path):
    """Issue 58, item 9: a run dead for 4 minutes showed ``since step 335 (3 s ago)`` beside ``last row 4 m 00 s
    ago``: the job_dead alert began at the job's last sign of life."""
    run = tmp_path / "run"
    for r, last in ((0, 335), (1, 300)):  # rank 1 stopped first: the alert names it, at the job's step 335
        write_events(run, r, [start("s1", t=999.0, total_steps=1000, world_size=2, heartbeat_interval=30)])
        write_rank(run, r, steps(1, last, t0=1000.0, dt=1.0, step_time=1.0, loss=1.0))
    now = 1000.0 + 335 + 240
    app = MonitorApp(str(run), follow=False, clock=lambda: now)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot, cond=lambda: "job_dead" in "\n".join(screen_lines(app)))
        screen = " ".join(screen_lines(app))
    assert "last row 4 m 00 s ago" in screen
    said = screen[screen.index("!! job_dead"):]
    assert "· since step 335 (4 m 00 s ago)" in said[:400], said[:400]


async def test_summary_says_why_there_is_no_mfu_as_the_monitor_does(tmp_path, capsys):
    """Issue 58, item 9: ``summary`` said ``MFU n/a`` without the reason the monitor's panel gives."""
    from mstop.cli import main

    run = tmp_path / "run"
    write_events(run, 0, [start("s1", t=999.0, world_size=1, tokens_per_step=1000)])
    write_rank(run, 0, steps(1, 50, t0=1000.0, dt=1.0, step_time=1.0, loss=1.0, tokens=1000))
    assert main(["summary", str(run)]) in (0, 1)
    (row,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("MFU")]
    why = "no FLOPs per token (n_params or flops_per_token), no peak (--peak-tflops)"
    assert row.split(None, 1)[1] == f"n/a: {why}", row
    app = MonitorApp(str(run), follow=False, clock=lambda: 1051.0)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        screen = " ".join(ln.strip(" │") for ln in screen_lines(app))
    assert "MFU n/a: no FLOPs per token" in screen, screen


async def test_the_metric_picker_marks_only_chosen_rows_without_colour(tmp_path, monkeypatch):
    """Issue 58, item 9: with NO_COLOR every row of the column picker looked ticked (Textual draws the same
    ``X`` in every box and tells chosen from not by colour). An unchosen row's box is empty."""
    from mstop.app.screens import MetricsScreen

    monkeypatch.setenv("NO_COLOR", "1")
    run = tmp_path / "run"
    write_events(run, 0, [start("s1", t=999.0, world_size=1)])
    write_rank(run, 0, steps(1, 20, t0=1000.0, dt=1.0, step_time=1.0, loss=1.0, lr=1e-3, grad_norm=1.0))
    app = MonitorApp(str(run), follow=False, clock=lambda: 1021.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("slash")
        await settle(pilot, cond=lambda: isinstance(app.screen, MetricsScreen))
        await pilot.press("enter", "down", "space")  # to the list (the filter has the keys first), the 2nd
        await settle(pilot, cond=lambda: "▐X▌" in "\n".join(screen_lines(app)))
        shown = screen_lines(app)
        rows = [ln for ln in shown if "▐" in ln and "▌" in ln]
    assert rows, "\n".join(shown)
    chosen = [ln for ln in rows if "▐X▌" in ln]
    assert len(rows) >= 3 and len(chosen) == 1, rows
    assert all("▐X▌" not in ln and ("▐▌" in ln or "▐ ▌" in ln) for ln in rows if ln not in chosen), rows


async def test_the_mfu_panel_says_its_whole_explanation_at_120_columns(tmp_path):
    """Issue 58, item 9: at 120 columns the MFU panel cut its own explanation mid-sentence (``no FLOPs per token
    (n_params or``): with no MFU there is no chart, and the words take the lines they need."""
    run = tmp_path / "run"
    write_events(run, 0, [start("s1", t=999.0, world_size=1)])
    write_rank(run, 0, steps(1, 20, t0=1000.0, dt=1.0, step_time=1.0, loss=1.0))
    app = MonitorApp(str(run), follow=False, clock=lambda: 1021.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, cond=lambda: "peak-tflops)" in " ".join(screen_lines(app)))
        panel = " ".join(ln.rstrip().rstrip("│").rsplit("│", 1)[-1] for ln in screen_lines(app))  # right column
    words = "MFU n/a: no tokens (tokens_per_step), no FLOPs per token (n_params or flops_per_token), no peak " \
            "(--peak-tflops)"
    assert " ".join(words.split()) in " ".join(panel.split()), panel


async def test_a_rank_with_a_process_and_no_row_yet_is_in_the_ranks_view(tmp_path):
    """Issue 58, item 5: a rank killed while it compiled (a process, no row yet) was missing from the ranks view;
    it is listed with its pid and how its process ended."""
    run = tmp_path / "run"
    for r in range(2):
        write_events(run, r, [start("s1", t=999.0, world_size=3, pid=4000 + r, heartbeat_interval=30)])
        write_rank(run, r, steps(1, 20, t0=1000.0, dt=1.0, step_time=1.0, loss=1.0))
    write_events(run, 2, [start("s1", t=999.0, world_size=3, pid=4002, heartbeat_interval=30),
                          {"time": 1005.0, "kind": "exit", "rank": 2, "pid": 4002, "how": "signal",
                           "signal": "SIGKILL", "code": -9}])
    app = MonitorApp(str(run), follow=False, clock=lambda: 1021.0)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot, cond=lambda: " 4002 " in "\n".join(screen_lines(app)))
        screen = screen_lines(app)
    (row,) = [ln for ln in screen if " 4002 " in ln]
    assert row.lstrip("│ ").startswith("2 ") and "ended SIGKILL" in row, row
    assert sorted(ln.lstrip("│ ")[:2] for ln in screen if ln.startswith("│ ") and " 1.00 s " in ln) == ["0 ", "1 "]


async def test_repeated_steps_are_one_count_in_the_header_and_in_summary(tmp_path, capsys):
    """Issue 58, item 3: ranks that reached different steps before a restart repeat different counts; the
    header said 51 (the job rank's) where ``summary`` said 52 (the most of any rank). One count, said whose."""
    from mstop.cli import main

    run = tmp_path / "run"
    for r, reached in ((0, 80), (1, 81)):
        write_events(run, r, [start("s1", t=999.0, world_size=2)])
        write_rank(run, r, steps(1, reached, t0=1000.0, dt=1.0, step_time=1.0, loss=1.0))
        write_events(run, r, [start("s2", t=1200.0, world_size=2)])  # resumed from step 50
        write_rank(run, r, steps(51, 120, session="s2", t0=1200.0, dt=1.0, step_time=1.0, loss=1.0))
    assert main(["summary", str(run)]) in (0, 1)
    (row,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("segments")]
    assert row.split(None, 1)[1] == "2, 31 repeated steps (rank 1, the most of any rank)", row
    app = MonitorApp(str(run), follow=False, clock=lambda: 1321.0)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        head = text(app.query_one(Header))
    assert "31 steps repeated after a resume (rank 1, the most of any rank, " in head, head
