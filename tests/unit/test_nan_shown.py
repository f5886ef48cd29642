"""A run whose latest loss is NaN says so wherever its loss is shown (issue 40 item 1).

The smoothed loss skips NaN/Inf (TensorBoard's EMA), so a run whose loss went NaN at step 60 of 150 kept
showing the smoothed value of its last finite losses (`loss (smoothed) 0.1776`) in the runs list and in
`summary FOLDER`; the header's grad norm kept step 59's; the loss chart ended at step 59 with no mark. Here:
the same run, read by `summary`, `summary FOLDER`, the runs list and the monitor.
"""

from __future__ import annotations

import json
import time

import pytest

from mstop.app import MonitorApp
from mstop.app.widgets import Chart
from tests.helpers.app_common import settle, text
from tests.helpers.cli import Ran, mstop
from tests.helpers.runs import start, steps, write_events, write_rank
from tests.helpers.runs_common import app_for, table_rows

T0 = time.time() - 200


def _nan_run(path, bad: str = "nan"):
    write_events(path, 0, [start("s1", T0), {"time": T0 + 151, "kind": "end", "session": "s1"}])
    rows = steps(1, 150, t0=T0, step_time=1.0, tokens=4096, lr=1e-4,
                 loss=lambda s: bad if s >= 60 else 2.0 - s / 100)
    for r in rows:
        r["grad_norm"] = bad if r["step"] >= 60 else 0.9567
    write_rank(path, 0, rows)
    return path


def _summary(*args) -> Ran:
    return mstop("summary", *args)


def test_summary_and_a_folder_of_runs_show_the_nan(tmp_path):
    _nan_run(tmp_path / "nan-run")
    _nan_run(tmp_path / "inf-run", "inf")
    one = _summary(tmp_path / "nan-run").stdout
    line = next(x for x in one.splitlines() if x.startswith("loss (smoothed)"))
    assert line.split()[2] == "nan" and "not a figure of now" in line, line
    folder = _summary(tmp_path).stdout.splitlines()
    rows = {x.split()[0].rsplit("/", 1)[-1]: x.split() for x in folder[1:]}
    assert rows["nan-run"][3] == "NaN" and rows["inf-run"][3] == "+Inf", folder
    js = json.loads(_summary(tmp_path / "nan-run", "--json").stdout)
    assert js["loss"] == "nan" and isinstance(js["loss_ema"], float)  # the JSON keeps both, by name


async def test_the_runs_list_shows_the_nan(tmp_path):
    _nan_run(tmp_path / "nan-run")
    app = app_for(tmp_path)
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(pilot, lambda: len(table_rows(app)) == 1)
        await settle(pilot, lambda: table_rows(app)[0][5] not in ("", "…"))
        row = table_rows(app)[0]
        assert "NaN" in row, row


async def test_the_header_and_charts_show_the_nan(tmp_path):
    run = _nan_run(tmp_path / "nan-run")
    app = MonitorApp(str(run), follow=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, lambda: "NaN" in text(app.query_one("#lr-chart", Chart)))
        lr = text(app.query_one("#lr-chart", Chart))
        assert "grad norm NaN" in lr  # not step 59's 0.9567
        loss = text(app.query_one("#loss-chart", Chart)).splitlines()
        assert "smoothed(0.9) 1.499 before it" in loss[1] and "NaN/Inf at step 60" in loss[1]
        axis = next(x for x in loss if "└" in x)
        assert axis.count("×") >= 20  # a mark on the x axis at each NaN step drawn
        assert "140" in loss[loss.index(axis) + 1]  # the axis runs to the last (NaN) step, as lr's does


def test_compare_and_report_say_the_nan_beside_the_loss(tmp_path):
    """Item 1: compare's (and report's) "loss at step N" is the mean of the finite losses: a run whose losses
    there went NaN says how many, beside the figure or instead of it."""
    nan = _nan_run(tmp_path / "nan-run")
    base = tmp_path / "base"
    write_events(base, 0, [start("s1", T0)])
    write_rank(base, 0, steps(1, 150, t0=T0, step_time=1.0, tokens=4096, loss=lambda s: 2.0 - s / 100))
    got = json.loads(mstop("compare", base, nan, "--format", "json", "--loss-at", "60").stdout)
    cell = got["runs"][1]["figures"]["loss_at"]
    assert cell["message"] == "11 NaN/Inf losses in steps 50:70" and cell["value"] == pytest.approx(
        sum(2.0 - s / 100 for s in range(50, 60)) / 10, rel=1e-5)
    table = mstop("compare", base, nan, "--format", "markdown", "--loss-at", "140").stdout
    assert "no loss" not in table and "21 NaN/Inf losses in steps 130:150" in table, table
