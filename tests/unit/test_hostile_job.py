"""Issue 26, the job's side: whatever is planted at the names the writer reads or makes in its run directory
(``profile.request``, ``profile.plan``, the plan's temporary file, ``profile/``), a real training process
never blocks, finishes, writes every row, and changes nothing outside its run directory; the monitor's
``P`` never blocks nor writes through a link either."""

from __future__ import annotations

import os
import stat

import pytest

from mstop_writer.profiling import REQUEST_NAME
from tests.helpers.hostile_job_common import plant, tree  # noqa: F401


@pytest.mark.parametrize("kind", ["fifo", "link-out", "link-stdin"])
async def test_the_monitors_p_never_blocks_nor_writes_through_a_plant(tmp_path, kind):
    from mstop.app import MonitorApp
    from tests.helpers.app_common import settle
    from tests.helpers.runs import start, steps, write_events, write_rank

    run, outside = tmp_path / "run", tmp_path / "outside"
    outside.mkdir()
    (outside / "target").write_text("outside\n")
    write_events(run, 0, [start("s1", t=999.0, world_size=1)])
    write_rank(run, 0, steps(1, 20, t0=1000.0, dt=1.0, step_time=1.0, loss=1.0))
    plant(run / REQUEST_NAME, kind, outside)
    before = tree(outside)
    app = MonitorApp(str(run), follow=False, clock=lambda: 1030.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("P")
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        await pilot.press("q")
    assert tree(outside) == before
    assert stat.S_ISREG(os.lstat(run / REQUEST_NAME).st_mode) and (run / REQUEST_NAME).read_text() == "10\n"


