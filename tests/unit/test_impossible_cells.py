"""Cells no real step can have are refused at the door, with the reason (issue 40 item 2).

A data wait longer than its step became `data wait 31887.5 %`; a written MFU of 3,588.65 was drawn as
358,865 %. Here: the writer warns of them once (the file keeps what the job said), the readers make the one
cell missing and count it by reason, and every place that shows the figure (summary text and JSON, the
monitor's header, MFU panel and ranks view) says so, with no share above 100 %.
"""

from __future__ import annotations

import csv
import json
import logging
import re
import time

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from mstop.app import MonitorApp
from mstop.engine import door
from mstop.engine.store import Batch, Store
from mstop.formats.parse import N_EXACT, NUMERIC, Rows
from mstop_writer.schema import mfu_too_high, wait_too_long
from tests.helpers.app_common import screen_lines, settle, text
from tests.helpers.cli import Ran, mstop
from tests.helpers.runs import start, steps, write_events, write_rank, write_with_writer

T0 = time.time() - 20
FLOATS = NUMERIC[N_EXACT:]


def _summary(*args) -> Ran:
    return mstop("summary", *args)


def _impossible_run(path):
    """150 steps of 0.1 s; steps 100-109 wait 31.9 s (milliseconds passed as seconds), step 120 has a negative
    step time, steps 130-139 write an MFU of 3,588.65."""
    write_events(path, 0, [start("s1", T0, world_size=1)])
    rows = steps(1, 150, t0=T0, dt=0.1, step_time=0.1, tokens=4096, loss=lambda s: 2.0 - s / 1000,
                 data_wait=lambda s: 31.9 if 100 <= s < 110 else 0.001,
                 mfu=lambda s: 3588.65 if 130 <= s < 140 else 0.4)
    rows[119]["step_time"] = -0.1
    write_rank(path, 0, rows)
    return path


def test_summary_refuses_the_cells_and_says_why(tmp_path):
    run = _impossible_run(tmp_path / "run")
    js = json.loads(_summary(run, "--json").stdout)
    got = js["refused_cells"]
    assert {k: v["count"] for k, v in got.items()} == {door.LONGER_WAIT: 10, door.OVER_ONE: 10,
                                                       door.negative("step_time"): 1}
    assert got[door.LONGER_WAIT]["first"] == "rank 0 step 100: data_wait 31.9 s in a step_time of 0.1 s"
    assert js["rows"] == 150 and js["bad_rows"] == 0  # every row is kept: only the cell is refused
    assert js["data_wait_frac"] <= 1 and js["mfu"] is not None and js["mfu"] <= 1
    text_out = _summary(run).stdout
    line = next(x for x in text_out.splitlines() if x.startswith("cells refused"))
    assert "21 (data_wait longer than step_time: 10, first rank 0 step 100" in line and "2 more reasons" in line
    data_wait = next(x for x in text_out.splitlines() if x.startswith("data wait"))
    assert float(data_wait.split()[-2].replace(",", "")) <= 100


def test_an_mfu_above_one_from_the_start_event_is_no_figure(tmp_path):
    """MFU derived from tokens/s and a peak far too small: not a figure, and the reason says which."""
    run = tmp_path / "run"
    write_events(run, 0, [start("s1", T0, world_size=1, flops_per_token=6e9, peak_flops=1e9)])
    write_rank(run, 0, steps(1, 50, t0=T0, step_time=0.5, tokens=4096, loss=1.0))
    js = json.loads(_summary(run, "--json").stdout)
    assert js["mfu"] is None
    mfu = next(x for x in _summary(run).stdout.splitlines() if x.startswith("MFU"))
    assert mfu.split(None, 1)[1].startswith("n/a: ") and "is over 100 %" in mfu, mfu  # the panel's reason too


async def test_the_monitor_says_so_and_shows_no_share_above_100(tmp_path):
    run = _impossible_run(tmp_path / "run")
    app = MonitorApp(str(run), follow=False)
    async with app.run_test(size=(200, 40)) as pilot:
        await settle(pilot, lambda: "cells refused" in text(app.query_one("#header")))
        head = text(app.query_one("#header"))
        assert "! 21 cells refused (data_wait longer" in head, head  # the reason, cut to the header's room
        shown = "\n".join(screen_lines(app))
        assert "data wait" in shown
        for pct in (float(x.replace(",", "")) for x in re.findall(r"([\d,]+\.\d) %", shown)):
            assert pct <= 100, shown


async def test_the_mfu_panel_says_why_it_has_no_figure(tmp_path):
    run = tmp_path / "run"
    write_events(run, 0, [start("s1", T0, world_size=1, flops_per_token=6e9, peak_flops=1e9)])
    write_rank(run, 0, steps(1, 50, t0=T0, step_time=0.5, tokens=4096, loss=1.0))
    app = MonitorApp(str(run), follow=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, lambda: "MFU n/a" in text(app.query_one("#mfu-text")))
        said = " ".join(text(app.query_one("#mfu-text")).split())
        assert "4,915,200.0 % is over 100 %: the peak or the FLOPs per token is wrong" in said, said


def test_the_writer_warns_once_and_writes_what_it_was_given(tmp_path, caplog):
    rows = steps(1, 20, t0=T0, step_time=0.1, loss=1.0, data_wait=lambda s: 5.0 if s > 10 else 0.01)
    with caplog.at_level(logging.WARNING, logger="mstop_writer"):
        write_with_writer(tmp_path, 0, 1, rows, tokens_per_step=4096, flops_per_token=6e9, peak_flops=1e9)
    said = [r.getMessage() for r in caplog.records if "readers refuse it" in r.getMessage()]
    assert len(said) == 2, said  # once per kind, not once per row
    assert any("data_wait 5 s is longer than its step_time 0.1 s" in m for m in said)
    assert any("MFU 2.458e+05" in m and "flops_per_token or peak_flops is wrong" in m for m in said)
    with open(tmp_path / "rank0.csv") as f:
        written = list(csv.DictReader(f))
    assert [float(r["data_wait"]) for r in written[10:]] == [5.0] * 10  # the file keeps what the job said
    js = json.loads(_summary(tmp_path, "--json").stdout)
    assert js["refused_cells"][door.LONGER_WAIT]["count"] == 10 and js["refused_cells"][door.OVER_ONE]["count"] == 20


# -- the door, as a property: whatever the cells and however the rows arrive ----------------------------------

_cell = st.one_of(st.just(float("nan")), st.floats(-5, 5, width=32), st.floats(0, 1e6, width=32),
                  st.sampled_from([0.0, -0.0, 1.0, 1.000001, 1.01, -1e-30, float("inf"), float("-inf")]))


def _batch(cells: list[list[float]], first_step: int) -> Rows:
    n = len(cells)
    exact = np.column_stack([np.arange(n, dtype=np.float64) + 1000.0, np.arange(first_step, first_step + n,
                                                                                 dtype=np.float64)])
    floats = np.array(cells, np.float32).reshape(n, len(FLOATS))
    return Rows(exact, floats, {}, np.zeros(n, np.int32), ["s1"])


def _oracle(cells: list[list[float]]) -> dict[str, int]:
    """What the door refuses, worked out cell by cell in plain Python."""
    at = {c: j for j, c in enumerate(FLOATS)}
    out: dict[str, int] = {}
    for row in cells:
        row = [float(np.float32(x)) for x in row]
        for c in door.NEVER_NEGATIVE:
            if row[at[c]] < 0:
                out[door.negative(c)] = out.get(door.negative(c), 0) + 1
        st_, dw = row[at["step_time"]], row[at["data_wait"]]
        if not st_ < 0 and wait_too_long(dw, st_):
            out[door.LONGER_WAIT] = out.get(door.LONGER_WAIT, 0) + 1
        if mfu_too_high(row[at["mfu"]]):
            out[door.OVER_ONE] = out.get(door.OVER_ONE, 0) + 1
    return out


@given(st.lists(st.lists(_cell, min_size=len(FLOATS), max_size=len(FLOATS)), min_size=1, max_size=30),
       st.integers(1, 5))
def test_the_door_refuses_the_same_cells_whichever_way_rows_arrive(cells, pieces):
    whole, rounds = Store(), Store()
    whole.append(Batch.of(0, _batch(cells, 1)))
    rounds.append(Batch.of(0, _batch(cells[:1], 1)))  # a held row first: later single rows take the round's path
    at = 1
    while at < len(cells):
        n = 1 if pieces > 1 else len(cells) - at
        rounds.append(Batch.round([(0, _batch(cells[at:at + n], at + 1))]))
        at += n
    want = _oracle(cells)
    for s in (whole, rounds):
        assert {k: n for k, (n, _) in s.refused_cells.items()} == want
        d = s.ranks[0]
        assert d.rows == len(cells)  # no row is lost: only cells
        with np.errstate(invalid="ignore"):
            for c in door.NEVER_NEGATIVE:
                assert not (d.col(c) < 0).any(), c
            assert not wait_too_long(d.col("data_wait"), d.col("step_time")).any()
            assert not mfu_too_high(d.col("mfu")).any()
    for c in FLOATS:  # the rows' other cells are kept as given, the same both ways
        np.testing.assert_array_equal(whole.ranks[0].col(c), rounds.ranks[0].col(c))


def test_rows_without_a_session_on_a_clock_behind_the_start_event_are_running(tmp_path):
    """Issue 40 item 12: a CSV without a session column whose rows are older than the start event (the
    rows' clock behind the start's) stayed ``starting``. Its file was written since the start: its rows are
    the started session's. The same rows in a file last written before the start are a restart not yet
    writing (``starting``)."""
    import os

    now = time.time()
    for name, mtime, want in (("behind", now, "running"), ("restart", now - 7200, "starting")):
        run = tmp_path / name
        write_events(run, 0, [start("s1", now - 3600, world_size=1)])
        rows = steps(1, 30, t0=now - 3 * 3600, step_time=1.0, loss=1.0)
        for r in rows:
            del r["session"]
        write_rank(run, 0, rows)
        os.utime(run / "rank0.csv", (mtime, mtime))
        js = json.loads(_summary(run, "--json").stdout)
        assert js["status"] in ((want, "stalled") if want == "running" else (want,)), (name, js["status"])
        assert js["status"] != "starting" or want == "starting"
