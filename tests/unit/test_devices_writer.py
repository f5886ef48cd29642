"""The writer's NPU sampling: npu-smi's outputs as published (tests/data/npu-smi/SOURCES.md) read right, and a
stand-in npu-smi on PATH (tests/helpers/npu_smi.py) that prints them, is slow, fails, hangs and hangs past being
killed, while training goes on. No Ascend device is here: this is all the device code's testing."""

from __future__ import annotations

import csv
import logging
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mstop_writer import MetricsWriter
from mstop_writer.devices import (
    apply_health,
    apply_usages,
    device_id_of,
    host_name,
    parse_details,
    parse_info,
)
from mstop_writer.schema import DEVICE_COLUMNS, devices_name
from tests.helpers.common import wait_for
from tests.helpers.devices_writer_common import _sampler, rows_of  # noqa: F401
from tests.helpers.npu_smi import DATA, StandIn

MB = 1 << 20

def text(name: str) -> str:
    return (DATA / name).read_text()


def test_910b3_table():
    chips = parse_info(text("info-910b3-x8-24.1.rc1.txt"))
    assert [c.npu for c in chips] == list(range(8)) and [c.device for c in chips] == list(range(8))
    c = chips[0]
    assert (c.name, c.health, c.power, c.temperature, c.aicore) == ("910B3", "OK", 101.8, 43.0, 0.0)
    assert (c.hbm_used, c.hbm_total) == (3318 * MB, 65536 * MB)
    assert (c.memory_used, c.memory_total) == (None, None)  # "0 / 0": no such memory on this chip
    assert c.bus_id == "0000:C1:00.0" and c.pids == []
    assert chips[7].hbm_used == 3315 * MB and chips[6].power == 103.8


def test_910b4_processes_and_a_pair_without_a_space():
    chips = parse_info(text("info-910b4-1-procs-25.2.2.txt"))
    assert [(c.npu, c.name, c.hbm_used, c.pids) for c in chips] == [
        (0, "910B4-1", 61825 * MB, [19334]), (1, "910B4-1", 61825 * MB, [19341])]


def test_910c_two_chips_per_npu_joined_by_phy_id():
    chips = parse_info(text("info-910c-x16-24.1.rc3.txt"))
    assert len(chips) == 16
    assert [(c.npu, c.chip, c.device) for c in chips[:4]] == [(0, 0, 0), (0, 1, 1), (1, 0, 2), (1, 1, 3)]
    assert chips[1].power is None and chips[0].power == 178.5  # the second chip's power is "-"
    assert chips[15].device == 15 and chips[15].hbm_used == 3188 * MB and chips[15].bus_id == "0000:83:00.0"


def test_atlas_200i_layout_without_hbm():
    (c,) = parse_info(text("info-atlas200ia2-25.2.0.txt"))
    assert (c.npu, c.chip, c.device, c.bus_id) == (0, 0, 0, None)
    assert (c.memory_used, c.memory_total, c.hbm_used, c.hbm_total) == (957 * MB, 10810 * MB, None, None)
    assert (c.power, c.temperature) == (10.4, 66.0)


def test_old_910_memory_beside_an_hbm_of_zero():
    chips = parse_info(text("info-910-x8-hbm-zero.txt"))
    assert [c.npu for c in chips] == [1, 2, 7]
    assert (chips[0].memory_used, chips[0].memory_total) == (2378 * MB, 15038 * MB)
    assert (chips[0].hbm_used, chips[0].hbm_total) == (0, 32768 * MB)


def test_detail_outputs():
    usages = parse_details(text("usages-i-atlas200ia2.txt"))
    assert usages[0]["Ctrlcpu Usage Rate(%)"] == "1" and usages[0]["Memory Capacity(MB)"] == "10810"
    assert parse_details(text("usages-i-c-atlas200ia2.txt"))[0]["Aicpu Usage Rate(%)"] == "9"
    assert parse_details(text("health-i-atlas200ia2.txt")) == {0: {"NPU ID": "0", "Chip Count": "1", "Health": "OK"}}
    temp = parse_details(text("temp-i-atlas200ia2.txt"))
    assert temp[0]["Temperature (C)"] == "50" and "LM75A_TE (C)" not in temp[0]  # the MCU's sensors dropped
    chips = parse_info(text("info-atlas200ia2-25.2.0.txt"))
    apply_usages(chips, 0, parse_details(text("usages-i-c-atlas200ia2.txt")))
    assert (chips[0].aicpu, chips[0].ctrlcpu, chips[0].hbm_bandwidth, chips[0].source) == (
        0.09, 0.86, 0.01, "info+usages")
    chips = parse_info(text("info-910b3-alarm.txt"))
    apply_health(chips, 3, parse_details(text("health-alarm.txt")))
    assert (chips[3].health, chips[3].error_code, chips[3].temperature) == ("Alarm", "80E18402", 97.0)
    assert chips[0].error_code is None


def test_device_id_through_visible_devices():
    assert device_id_of({"DEVICE_ID": "1"}) == 1
    assert device_id_of({"DEVICE_ID": "1", "ASCEND_RT_VISIBLE_DEVICES": "4,5,6,7"}) == 5
    assert device_id_of({"DEVICE_ID": "9", "ASCEND_RT_VISIBLE_DEVICES": "4,5"}) is None
    assert device_id_of({}) is None and device_id_of({"DEVICE_ID": "x"}) is None


LINES = [ln for f in DATA.glob("info-*.txt") for ln in f.read_text().splitlines()]

@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(LINES), st.text(max_size=120)), max_size=40), st.data())
def test_parsers_never_raise_and_rows_stay_one_line(lines, data):
    """Any mix of real table lines and arbitrary text: chips or nothing, never an exception, and every row
    written is one CSV line of DEVICE_COLUMNS' width."""
    from mstop_writer._cells import cells as _cells

    cut = data.draw(st.integers(0, 3))
    blob = "\n".join(ln[: len(ln) - cut] if cut else ln for ln in lines)
    for c in parse_info(blob):
        cells = _cells(c.row(1.0, "h"))
        assert len(cells) == len(DEVICE_COLUMNS)
        line = ",".join(cells)
        assert "\n" not in line and "\r" not in line
        assert len(next(csv.reader([line]))) == len(DEVICE_COLUMNS)
    parse_details(blob)


def test_sampler_writes_rows_from_the_stand_in(tmp_path):
    npu = StandIn(tmp_path / "bin", info="info-910b4-1-procs-25.2.2.txt")
    s, warned, events = _sampler(tmp_path, command=str(npu.folder / "npu-smi"))
    try:
        assert wait_for(lambda: len(rows_of(tmp_path)) >= 4, 10)
    finally:
        s.stop()
    rows = rows_of(tmp_path)
    assert list(rows[0]) == list(DEVICE_COLUMNS)
    r = rows[0]
    assert (r["host"], r["npu"], r["device"], r["name"], r["health"]) == (host_name(), "0", "0", "910B4-1", "OK")
    assert int(r["hbm_used"]) == 61825 * MB and int(r["hbm_total"]) == 65536 * MB and r["pids"] == "19334"
    assert float(r["temperature"]) == 40.0 and float(r["power"]) == 78.2 and float(r["aicore"]) == 0.0
    assert {x["source"] for x in rows} == {"info+usages", "info"}  # one NPU's usages per sample, in turn
    assert "info" in npu.calls and "info -t usages -i 0" in npu.calls and "info -t usages -i 1" in npu.calls
    assert not warned and events[0]["state"] == "sampling"


@pytest.mark.parametrize("mode, kind, says", [
    ("fail", "exit", "failed (exit 8): dcmi module initialize failed"),
    ("garbage", "unreadable", "no device table mstop can read (first line not understood: 'Permission denied"),
])
def test_a_failing_npu_smi_is_warned_once_and_told(tmp_path, mode, kind, says):
    npu = StandIn(tmp_path / "bin")
    npu.set(mode=mode)
    s, warned, events = _sampler(tmp_path, command=str(npu.folder / "npu-smi"), interval=0.1)
    try:
        assert wait_for(lambda: len(npu.calls) >= 3, 10)
        npu.set(mode="ok")
        assert wait_for(lambda: rows_of(tmp_path), 10)
    finally:
        s.stop()
    assert {k for k, _ in warned} == {f"devices:{kind}"} and says in warned[0][1]
    failed = [e for e in events if e["state"] == "failed"]
    assert len(failed) == 1 and failed[0]["reason"] == kind  # once per kind, however many calls failed
    assert events[-1]["message"] == "device sampling works again"


def test_nothing_without_npu_smi(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    s, warned, events = _sampler(tmp_path)
    assert s is None and not warned and not events and not list(tmp_path.iterdir())


def test_writer_option_turns_sampling_off(tmp_path, monkeypatch, caplog):
    npu = StandIn(tmp_path / "bin")
    monkeypatch.setenv("PATH", npu.env(dict(os.environ))["PATH"])
    with caplog.at_level(logging.WARNING, logger="mstop_writer"), MetricsWriter(tmp_path, device_interval=0) as w:
        w.log(1, loss=1.0)
        assert w.devices is None
    assert not npu.calls and not (tmp_path / devices_name(host_name())).exists()




@pytest.mark.parametrize("mode", ["flood", "endless"])
def test_npu_smi_printing_without_end_is_cut_in_the_sampler_and_training_goes_on(tmp_path, mode):
    """Issue 40 item 10: npu-smi printing 1 GB, or lines without end: the sampler reads at most a few MB of
    it, kills it, says so once, and the training process neither waits nor grows (its output was read whole
    into the job: 1 GB blocked log() for 2.5 s and took 3 GB; endless output grew the job until it was
    killed)."""
    import time

    from mstop_writer.devices import MAX_OUTPUT

    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    npu = StandIn(tmp_path / "bin")
    npu.set(mode=mode)
    before = rss()
    w = MetricsWriter(tmp_path / "run")
    s, warned, events = _sampler(tmp_path, command=str(npu.folder / "npu-smi"), interval=0.2)
    longest, grew = 0.0, 0
    try:
        t_end = time.monotonic() + 4.0
        step = 0
        while time.monotonic() < t_end:  # the training loop: a row every 10 ms
            step += 1
            t = time.perf_counter()
            w.log(step, loss=1.0)
            longest = max(longest, time.perf_counter() - t)
            grew = max(grew, rss() - before)
            time.sleep(0.01)
        assert wait_for(lambda: warned, 10)
    finally:
        s.stop()
        w.close()
    assert {k for k, _ in warned} == {"devices:too much output"}
    assert f"printed over {MAX_OUTPUT // MB} MB: killed" in warned[0][1]
    assert [e["reason"] for e in events if e["state"] == "failed"] == ["too much output"]
    assert grew < 64 * MB, f"the job grew by {grew / MB:.0f} MB"
    assert longest < 0.5, f"a log() call waited {longest:.2f} s"
    assert not rows_of(tmp_path)


# -- issue 40 item 7: every table layout gives rows or a sample of what was not understood ----------------


def test_950_tables_with_cells_of_their_own_and_continued_lines():
    """The Ascend 950 class's tables (made from the layouts described: `| NPU ID | Name |`, `NPU Util(%)`,
    lines continued by lines beginning with empty cells): two NPUs in Alarm at 100 % are seen."""
    chips = parse_info(text("info-950-continued-made.txt"))
    assert [(c.npu, c.health, c.aicore) for c in chips] == [
        (0, "OK", 0.90), (1, "Alarm", 1.0), (2, "Alarm", 1.0), (3, "OK", 0.87)]
    assert chips[1].hbm_used == 130048 * MB and chips[1].bus_id == "0000:02:00.0" and chips[0].pids == [41234]
    assert [c.device for c in chips] == [0, 1, 2, 3] and chips[1].name == "Ascend950DT"
    two = parse_info(text("info-950-two-line-made.txt"))
    assert [(c.npu, c.chip, c.device, c.health, c.aicore, c.power) for c in two] == [
        (0, 0, 0, "OK", 0.85, 351.2), (1, 0, 1, "Alarm", 1.0, 402.7)]
    assert two[1].name == "Ascend950PR (rev 2)" and two[1].memory_used is None  # "0 / 0": no such memory


def test_chips_under_one_npu_line():
    chips = parse_info(text("info-310p-chips-under-one-npu-made.txt"))
    assert [(c.npu, c.chip, c.device, c.aicore, c.memory_used) for c in chips] == [
        (2, 0, 0, 0.12, 1620 * MB), (2, 1, 1, 0.03, 1382 * MB)]
    assert chips[1].power == 86.0 and chips[1].bus_id == "0000:3C:00.0"  # the NPU line's, for both chips


def test_910c_usages_with_each_chip_id_after_its_values():
    """910C/A3's `-t usages -i` prints `Chip ID` after each chip's block: the second chip's values were
    dropped (and the first chip took them)."""
    chips = parse_info(text("info-910c-x16-24.1.rc3.txt"))
    apply_usages(chips, 0, parse_details(text("usages-i-910c-made.txt")))
    first, second = chips[0], chips[1]
    assert (first.aicpu, first.ctrlcpu, first.hbm_bandwidth) == (0.0, 0.03, 0.01)
    assert (second.aicpu, second.ctrlcpu, second.hbm_bandwidth) == (0.02, 0.04, 0.09)


def test_a_layout_not_known_is_quoted_and_the_rest_read():
    from mstop_writer.devices import read_info

    got = read_info(text("info-unknown-layout-made.txt"))
    assert [c.npu for c in got.chips] == [1]
    assert got.unread[0].startswith("| 0     Ascend910") and not any(ln.startswith("+") for ln in got.unread)


def test_the_sampler_samples_a_950_table_and_quotes_what_it_cannot_read(tmp_path):
    npu = StandIn(tmp_path / "bin", info="info-950-continued-made.txt")
    npu.set(health="health-alarm.txt")  # -t health of an Alarm NPU says Alarm too
    for d in "abc":
        (tmp_path / d).mkdir()
    s, warned, events = _sampler(tmp_path / "a", command=str(npu.folder / "npu-smi"))
    try:
        assert wait_for(lambda: len(rows_of(tmp_path / "a")) >= 8, 10)
    finally:
        s.stop()
    rows = rows_of(tmp_path / "a")
    assert {(r["npu"], r["health"], float(r["aicore"])) for r in rows[:4]} >= {("1", "Alarm", 1.0), ("2", "Alarm", 1.0)}
    npu.set(info="info-unknown-layout-made.txt")
    said = _warning(tmp_path / "b", npu, "devices:partly")
    assert "2 lines of its device table not understood (the first: '| 0     Ascend910" in said
    # a table with nothing readable: its first line that is no border is quoted
    (npu.folder / "only-border.txt").write_text("+-----+\n| what | is | this |\n+-----+\n")
    npu.set(info=str(npu.folder / "only-border.txt"))
    said = _warning(tmp_path / "c", npu, "devices:unreadable")
    assert "(first line not understood: '| what | is | this |')" in said, said


def _warning(run_dir, npu: StandIn, kind: str) -> str:
    """What a sampler of the stand-in warns of, of ``kind`` (waited for)."""
    s, warned, _ = _sampler(run_dir, command=str(npu.folder / "npu-smi"))
    try:
        assert wait_for(lambda: any(k == kind for k, _ in warned), 10)
    finally:
        s.stop()
    return next(m for k, m in warned if k == kind)
