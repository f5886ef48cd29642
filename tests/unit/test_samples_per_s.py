"""Runs without tokens are compared by samples/s (issue 40 item 6).

Batch 32 against batch 64 with no tokens column: `compare`, `report` and `--baseline` compared only step
time, though the larger batch does 1.8 x the samples a second. Here: each of them shows samples/s and its
change.
"""

from __future__ import annotations

import json
import time

import pytest

from mstop.app import MonitorApp
from tests.helpers.app_common import settle, text
from tests.helpers.cli import Ran, mstop
from tests.helpers.runs import start, steps, write_events, write_rank

T0 = time.time() - 400


def _run(path, batch: int, step_time: float):
    write_events(path, 0, [start("s1", T0, world_size=1, run_name=f"bs{batch}")])
    write_rank(path, 0, steps(1, 200, t0=T0, dt=step_time, step_time=step_time, samples=batch,
                              loss=lambda s: 3.0 - s / 100))
    return path


def _mstop(*args) -> Ran:
    return mstop(*args)


@pytest.fixture
def pair(tmp_path):
    return _run(tmp_path / "bs32", 32, 0.2), _run(tmp_path / "bs64", 64, 64 / (1.8 * 32 / 0.2))


def test_compare_gives_samples_per_s_and_its_change(pair):
    got = json.loads(_mstop("compare", *pair, "--format", "json").stdout)
    base, other = (r["figures"]["samples_per_s"] for r in got["runs"])
    assert base["value"] == pytest.approx(160.0) and other["value"] == pytest.approx(288.0)
    assert other["change_pct"] == pytest.approx(80.0)
    assert got["runs"][0]["figures"]["tokens_per_s"]["message"] == "n/a: no tokens column"
    table = _mstop("compare", *pair, "--format", "markdown").stdout
    head = next(x for x in table.splitlines() if x.startswith("| run"))
    cells = [c.strip() for c in head.strip("|").split("|")]
    assert cells[cells.index("tokens/s") + 1] == "samples/s"  # beside tokens/s
    row = next(x for x in table.splitlines() if x.startswith("| bs64"))
    assert "288 (+80.0 %)" in row, row
    csv_head = _mstop("compare", *pair, "--format", "csv").stdout.splitlines()[0].split(",")
    assert "samples_per_s" in csv_head and "samples_per_s_change_pct" in csv_head


def test_report_has_samples_per_s(pair, tmp_path):
    pytest.importorskip("matplotlib", reason="no matplotlib (pip install ./writer '.[report]')")
    out = tmp_path / "report"
    proc = _mstop("report", *pair, "--out", out)
    assert proc.returncode == 0, proc.stderr
    md = (out / "report.md").read_text()
    assert "samples/s" in md and "+80.0 %" in md
    assert (out / "samples_per_s.png").stat().st_size > 1000


async def test_the_baseline_is_compared_by_samples_per_s(pair):
    base, run = pair
    app = MonitorApp(str(run), follow=False, baseline=str(base))
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot, lambda: "vs baseline" in text(app.query_one("#tp-text")))
        said = text(app.query_one("#tp-text"))
        assert "samples/s 288 (+80.0 % vs baseline)" in said, said
        assert "and baseline" in text(app.query_one("#tp-chart"))
