"""Issue 27, keys and text: Ctrl-C quits, a refused row reads as one, P refuses a run with no job, health
flags out of range are usage errors, a multi-line error is a line in the header and lines in the list."""

from __future__ import annotations

import pytest

from tests.helpers.app_common import settle
from tests.helpers.runs import start, steps, write_events, write_rank


async def test_p_on_a_finished_run_refuses_with_the_reason(tmp_path):
    """Item 15: no job reads a profile request of a finished run."""
    from mstop.app import MonitorApp

    write_events(tmp_path, 0, [start("s1", t=999.0, world_size=1),
                               {"time": 1031.0, "kind": "end", "session": "s1", "rows": 30}])
    write_rank(tmp_path, 0, steps(1, 30, t0=1000.0, dt=1.0, step_time=1.0, loss=1.0))
    app = MonitorApp(str(tmp_path), follow=False, clock=lambda: 1040.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("P")
        await pilot.pause()
        said = [n.message for n in app._notifications]
        assert any("the run is finished: there is no job to profile" in m for m in said), said
        assert type(app.screen).__name__ == "MonitorScreen"  # no dialog
    assert not (tmp_path / "profile.request").exists()


async def test_go_to_step_shows_every_figure_to_the_last_digit(tmp_path):
    """Item 23: `g` promised the last digit and printed tokens_per_s=6.1 k and 528 MiB."""
    from mstop.app import MonitorApp

    write_rank(tmp_path, 0, steps(1, 20, t0=1000.0, loss=lambda s: 1.0 / s, step_time=0.0401, tokens_per_s=6123.457,
                                  mem_used=553648128, tokens=4096))
    app = MonitorApp(str(tmp_path), follow=False, clock=lambda: 1030.0)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        await pilot.press("g", "1", "0", "enter")
        await pilot.pause()
        shown = str(app.screen.query_one("#step-values").content)
        assert "tokens_per_s=6123.457 tokens/s" in shown and "mem_used=553,648,128 B (528 MiB)" in shown, shown
        assert "step_time=0.0401 s (40.1 ms)" in shown and "loss=0.1 " in shown


@pytest.mark.parametrize("width", [80, 100, 120, 160])
async def test_what_each_width_keeps(tmp_path, width):
    """Item 13: a run with a writer failure, a lost row, a NaN alert, a checkpoint and no peak: at every width
    the status and the ALERTS badge are whole and every line fits; what goes first is the device, the
    compile time, a path's start; the writer's failure and the lost row stay from 100 columns; the MFU
    hint is never cut at its flag and the memory total is never the part cut off."""
    from mstop.app import MonitorApp
    from tests.helpers.app_common import screen_lines

    run = tmp_path / "run"
    write_events(run, 0, [
        start("s1", t=999.0, run_name="llama-7b-sweep-lr3e-4-warmup2000", total_steps=1000, world_size=1,
              device="Ascend910B3", flops_per_token=6e9, heartbeat_interval=30),
        {"time": 1050.0, "kind": "writer_error", "message": "OSError: [Errno 28] No space left on device"},
        {"time": 1060.0, "kind": "dropped", "rows": 1},
        {"time": 1100.0, "kind": "checkpoint", "step": 100, "path": "/cache/ckpt/llama/rank_0/step_100.ckpt"}])
    write_rank(run, 0, steps(1, 200, t0=1000.0, step_time=1.0, tokens=4096, data_wait=0.001,
                             loss=lambda s: float("nan") if s == 150 else 3.0 / s ** 0.2,
                             mem_peak=51.2 * 2**30, mem_total=59.6 * 2**30, mem_used=50.1 * 2**30))
    app = MonitorApp(str(run), follow=False, clock=lambda: 1201.0)
    async with app.run_test(size=(width, 40)) as pilot:
        await settle(pilot)
        head = [line.strip() for line in screen_lines(app)[:3]]
        header = "\n".join(head)
        assert all(len(line) <= width - 2 for line in head), header
        assert "status RUNNING" in head[0] and "ALERTS 1 (1 new: a)" in head[0], header
        assert head[1].startswith("step 200 / 1,000 [##........] 20 %"), header
        assert head[2].startswith("last row 1 s ago"), header
        assert "! writer failed: OSE" in head[0] or "! 1 row lost by the writer" in head[0], header
        if width >= 120:
            assert "! writer failed: OSError" in head[0] and "! 1 row lost by the writer" in head[0], header
        if width >= 160:
            assert "! writer failed: OSError: [Errno 28] No space" in head[0], header
            assert "elapsed 3 m 22 s" in head[1] and "checkpoint step 100" in head[2], header
        assert "_100.ckpt" in head[2] or width < 100, header
        assert text_of(app, "#mfu-text").replace("\n", " ").endswith("(--peak-tflops)")
        mem = text_of(app, "#mem-text")
        assert "peak 51.2" in mem and "total 59.6 GiB" in mem and "…" not in mem, mem


def text_of(app, selector: str) -> str:
    """A Static's text as drawn (its lines, as wide as the widget), not the content it was given."""
    w = app.query_one(selector)
    return "\n".join(strip.text.rstrip() for strip in w.render_lines(w.region.reset_offset))


