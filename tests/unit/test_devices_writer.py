"""The writer's NPU sampling, in this process: npu-smi's outputs as published (tests/data/npu-smi/SOURCES.md)
read right, any line never raises, no npu-smi or sampling turned off is no sampler. A stand-in npu-smi run as a
process: tests/system/test_devices_smi_stand_ins.py."""

from __future__ import annotations

import csv
import logging
import os

from hypothesis import given
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
from tests.helpers.devices_writer_common import _sampler
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






def test_nothing_without_npu_smi(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    s, warned, events = _sampler(tmp_path)
    assert s is None and not warned and not events and not list(tmp_path.iterdir())


def test_writer_option_turns_sampling_off(tmp_path, monkeypatch, caplog):
    npu = StandIn(tmp_path / "bin")
    monkeypatch.setenv("PATH", npu.env(dict(os.environ))["PATH"])
    with caplog.at_level(logging.WARNING, logger="mstop_writer"), \
            MetricsWriter(tmp_path, device_interval=0, witness=False) as w:
        w.log(1, loss=1.0)
        assert w.devices is None
    assert not npu.calls and not (tmp_path / devices_name(host_name())).exists()






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


def test_950_tables_as_published():
    """Real Ascend 950PR tables (npu-smi 25.7.rc1.6; sources in tests/data/npu-smi/SOURCES.md): a chip's second
    line begins with empty cells, and ``NPU Util(%) Memory-Usage(MB)`` stand one space apart (read by where
    the row above begins its names); a busy NPU and its process; `No running processes` lines are no chips."""
    from mstop_writer.devices import read_info

    one = read_info(text("info-950pr-25.7.rc1.6.txt"))
    assert one.unread == []
    (c,) = one.chips
    assert (c.npu, c.chip, c.device, c.name, c.health, c.power, c.temperature, c.aicore) == (
        0, 0, 0, "Ascend950PR", "OK", 195.6, 56.0, 0.0)
    assert (c.hbm_used, c.hbm_total, c.bus_id, c.memory_used) == (5239 * MB, 131072 * MB, "0000:61:00.0", None)
    two = read_info(text("info-950pr-x2-alarm-procs.txt"))
    assert two.unread == []
    assert [(c.npu, c.health, c.aicore, c.hbm_used, c.pids) for c in two.chips] == [
        (0, "Alarm", 0.07, 5249 * MB, [123]), (3, "OK", 0.0, 5255 * MB, [])]


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




