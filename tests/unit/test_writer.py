"""MetricsWriter on real files: the contract, the arithmetic and the faults (no MindSpore needed)."""

from __future__ import annotations

import math
import os
import shutil
import time

import pandas as pd
import pytest

import mstop_writer._files as files
from mstop_writer import COLUMNS, MetricsWriter
from mstop_writer.hardware import flops_per_token, lookup_peak
from tests.helpers.common import read_events, read_rows
from tests.helpers.writer_common import warnings_of


def test_columns_in_order_and_derived_figures(tmp_path):
    with MetricsWriter(tmp_path, rank=1, world_size=2, tokens_per_step=1000, samples_per_step=4,
                       flops_per_token=100.0, peak_flops=1e5, clock=lambda: 1700000000.5) as w:
        w.log(1, epoch=1, loss=2.5, lr=0.001, grad_norm=1.5, step_time=2.0, data_wait=0.5, queue_depth=3,
              overflow=False, loss_scale=1024.0)
        w.log(2, tokens=3000, step_time=0.5)
    header, rows = read_rows(tmp_path / "rank1.csv")
    assert header == list(COLUMNS)
    r = rows[0]
    assert r["time"] == "1700000000.5" and r["step"] == "1" and r["epoch"] == "1"
    assert float(r["tokens_per_s"]) == 500.0  # 1000 tokens / 2 s
    assert float(r["mfu"]) == pytest.approx(100.0 * 500.0 / (2 * 1e5))  # 0.25
    assert r["overflow"] == "0" and r["loss_scale"] == "1024.0" and r["queue_depth"] == "3"
    assert float(rows[1]["tokens_per_s"]) == 6000.0 and rows[1]["loss"] == "" and rows[1]["samples"] == "4"
    assert int(r["mem_used"]) > 0 and int(r["mem_total"]) >= int(r["mem_used"])
    assert r["session"] == rows[1]["session"] and len(r["session"]) == 12
    df = pd.read_csv(tmp_path / "rank1.csv")
    assert list(df.columns) == list(COLUMNS) and len(df) == 2


def test_flops_per_token_formula_and_peaks():
    fpt, how = flops_per_token(n_params=1_000_000, n_layers=2, n_heads=4, head_dim=16, seq_len=32)
    assert fpt == 6 * 1_000_000 + 12 * 2 * 4 * 16 * 32 and how == "6N+12LHQT"
    assert flops_per_token(n_params=10, n_layers=None, n_heads=4, head_dim=16, seq_len=32) == (
        60.0, "6N (attention not counted)")
    assert flops_per_token(n_params=None, n_layers=2, n_heads=4, head_dim=16, seq_len=32) == (None, None)
    assert lookup_peak("NVIDIA A100-SXM4-80GB").flops == 312e12
    assert lookup_peak("NVIDIA H100 PCIe").flops == 756e12
    assert lookup_peak("Tesla V100-SXM2-32GB").flops == 125e12
    assert lookup_peak("Ascend910B3").flops == 313e12
    assert lookup_peak("Ascend 910A").flops == 256e12
    assert lookup_peak("Ascend910B1") is None  # no public figure: no MFU rather than a wrong one
    assert lookup_peak("CPU") is None and lookup_peak(None) is None
    assert all(p.source for p in __import__("mstop_writer.hardware").hardware.PEAK_FLOPS.values())


def test_mfu_from_model_shape_and_device_table(tmp_path):
    with MetricsWriter(tmp_path, rank=0, world_size=8, n_params=7_000_000_000, n_layers=32, n_heads=32,
                       head_dim=128, seq_len=4096, device="Ascend910B3", tokens_per_step=8 * 4096, witness=False) as w:
        w.log(1, step_time=4.0)
    _, rows = read_rows(tmp_path / "rank0.csv")
    fpt = 6 * 7e9 + 12 * 32 * 32 * 128 * 4096
    assert float(rows[0]["mfu"]) == pytest.approx(fpt * (8 * 4096 / 4.0) / (8 * 313e12))
    start = read_events(tmp_path / "rank0.events.jsonl")[0]
    assert start["peak_flops"] == 313e12 and "910B" in start["peak_flops_source"] or "bin" in start[
        "peak_flops_source"]
    assert start["flops_per_token"] == fpt and start["flops_per_token_source"] == "6N+12LHQT"


def test_unknown_device_warns_and_writes_no_mfu(tmp_path, caplog):
    with MetricsWriter(tmp_path, device="Mystery-9000", flops_per_token=10.0, tokens_per_step=10, witness=False) as w:
        w.log(1, step_time=1.0)
    assert any("unknown device 'Mystery-9000'" in m for m in warnings_of(caplog))
    _, rows = read_rows(tmp_path / "rank0.csv")
    assert rows[0]["mfu"] == "" and rows[0]["tokens_per_s"] == "10.0"


@pytest.mark.parametrize("options, message", [
    ({"tokens_per_step": -1}, "tokens_per_step must be zero or more"),
    ({"peak_flops": 0}, "peak_flops must be positive"),
    ({"n_layers": 2.5}, "n_layers must be a whole number"),
    ({"extra_columns": ["loss"]}, "is a base column"),
    ({"extra_columns": ["a,b"]}, "without commas"),
    ({"extra_columns": ["x", "x"]}, "duplicates"),
    ({"extra_columns": "acc"}, "list of names"),
    ({"rank": 3, "world_size": 2}, "rank 3 is not in a world of 2"),
    ({"step_offset": -5}, "step_offset"),
])
def test_wrong_options_raise_before_training(tmp_path, options, message):
    with pytest.raises(ValueError, match=message):
        MetricsWriter(tmp_path, **options)
    assert not (tmp_path / "rank0.csv").exists()


def test_non_finite_values_are_recorded(tmp_path):
    with MetricsWriter(tmp_path, witness=False) as w:
        for i, v in enumerate([float("nan"), float("inf"), float("-inf"), 1.0]):
            w.log(i + 1, loss=v, step_time=1.0)
        w.event("eval", step=4, metrics={"acc": float("nan")})
    _, rows = read_rows(tmp_path / "rank0.csv")
    assert [r["loss"] for r in rows] == ["nan", "inf", "-inf", "1.0"]
    df = pd.read_csv(tmp_path / "rank0.csv")
    assert math.isnan(df.loss[0]) and df.loss[1] == math.inf and df.loss[2] == -math.inf
    ev = [e for e in read_events(tmp_path / "rank0.events.jsonl") if e["kind"] == "eval"]
    assert ev[0]["metrics"] == {"acc": "nan"}  # strict JSON: non-finite numbers as strings


def test_extra_columns_declared_first_log_and_late_keys(tmp_path, caplog):
    with MetricsWriter(tmp_path, extra_columns=["val_acc"], witness=False) as w:
        w.log(1, moe_aux_loss=0.01, tag='has, comma and "quotes"')
        w.log(2, val_acc=0.9, late_key=1.0)
        w.log(3, late_key=2.0, tag="two\nlines")
    header, rows = read_rows(tmp_path / "rank0.csv")
    assert header == list(COLUMNS) + ["val_acc", "moe_aux_loss", "tag"]
    assert rows[0]["tag"] == 'has, comma and "quotes"' and rows[1]["val_acc"] == "0.9"
    assert rows[2]["tag"] == "two lines" and len((tmp_path / "rank0.csv").read_text().splitlines()) == 4
    assert [m for m in warnings_of(caplog) if "late_key" in m] == [
        "mstop_writer: column 'late_key' was not declared in extra_columns nor in the first log(): dropped "
        "(training continues; further such messages at debug level)"]
    assert pd.read_csv(tmp_path / "rank0.csv").tag[0] == 'has, comma and "quotes"'


def test_heartbeat_events_while_alive(tmp_path):
    w = MetricsWriter(tmp_path, heartbeat_interval=0.05, witness=False)
    w.log(7)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        beats = [e for e in read_events(tmp_path / "rank0.events.jsonl") if e["kind"] == "heartbeat"]
        if len(beats) >= 2:
            break
        time.sleep(0.02)
    w.close()
    assert len(beats) >= 2 and beats[-1]["step"] == 7 and beats[-1]["session"] == w.session


def test_exception_in_with_block_writes_abort_not_end(tmp_path):
    with pytest.raises(RuntimeError):
        with MetricsWriter(tmp_path, witness=False) as w:
            w.log(1)
            raise RuntimeError("boom")
    # the writer's own events (its exit witness may have said the process's state before the close stopped it)
    kinds = [e["kind"] for e in read_events(tmp_path / "rank0.events.jsonl") if e.get("source") != "witness"]
    assert kinds == ["start", "abort"]


def test_unwritable_run_dir_warns_once_and_never_raises(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    w = MetricsWriter(blocker / "run", witness=False)  # parent is a file: even root cannot create it
    for i in range(50):
        w.log(i + 1, loss=1.0)
    w.close()
    msgs = warnings_of(caplog)
    assert len(msgs) == 1 and "cannot open" in msgs[0] and "training continues" in msgs[0]
    assert w.rows_dropped == 50


def test_disk_full_then_recovers_with_a_dropped_event(full_disk, caplog, monkeypatch):
    monkeypatch.setattr(files, "RETRY_INTERVAL", 0.0)
    monkeypatch.setattr(files, "CHECK_INTERVAL", 0.0)
    run = full_disk.path
    w = MetricsWriter(run, witness=False)
    full_disk.fill()  # every write of the rank file fails with ENOSPC now
    for i in range(1, 4):
        w.log(i, loss=1.0)
    full_disk.free()  # space again
    for i in range(4, 6):
        w.log(i, loss=1.0)
    w.close()
    tmp_path = run
    header, rows = read_rows(tmp_path / "rank0.csv")
    assert header == list(COLUMNS) and [r["step"] for r in rows] == ["4", "5"]
    dropped = [e for e in read_events(tmp_path / "rank0.events.jsonl") if e["kind"] == "dropped"]
    assert [(d["rows"], d["events"]) for d in dropped] == [(3, 0)]
    msgs = warnings_of(caplog)
    assert len(msgs) == 1 and "No space left on device" in msgs[0]


def test_run_dir_removed_mid_run_is_written_again(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(files, "CHECK_INTERVAL", 0.0)
    run = tmp_path / "run"
    w = MetricsWriter(run, witness=False)
    w.log(1)
    shutil.rmtree(run)
    w.log(2)  # notices the file is gone: its row goes to the new file
    w.log(3)
    w.close()
    header, rows = read_rows(run / "rank0.csv")
    assert header == list(COLUMNS) and [r["step"] for r in rows] == ["2", "3"]
    kinds = [e["kind"] for e in read_events(run / "rank0.events.jsonl")]
    assert "end" in kinds
    assert len(warnings_of(caplog)) == 1 and "disappeared" in warnings_of(caplog)[0]


def test_a_file_renamed_away_by_a_rotation_loses_no_row(tmp_path, caplog, monkeypatch):
    """``mv rank0.csv rank0.csv.1`` (logrotate without copytruncate): the rows written into the moved file
    before the writer noticed are in rank0.csv.1, not lost: no ``dropped`` event counts them."""
    clock = [0.0]
    monkeypatch.setattr(files, "CHECK_INTERVAL", 10.0)
    w = MetricsWriter(tmp_path, witness=False, clock=lambda: clock[0])
    w.log(1)
    os.rename(tmp_path / "rank0.csv", tmp_path / "rank0.csv.1")
    w.log(2)  # into the moved file: the writer has not looked yet
    clock[0] = 20.0
    w.log(3)  # looks: a new rank0.csv
    w.close()
    _, old = read_rows(tmp_path / "rank0.csv.1")
    header, new = read_rows(tmp_path / "rank0.csv")
    assert [r["step"] for r in old] == ["1", "2"] and header == list(COLUMNS) and [r["step"] for r in new] == ["3"]
    dropped = [e for e in read_events(tmp_path / "rank0.events.jsonl") if e["kind"] == "dropped"]
    assert dropped == []
    assert any("renamed away" in m for m in warnings_of(caplog))


def test_cut_last_line_is_not_glued_to_the_next_row(tmp_path):
    (tmp_path / "rank0.csv").write_text(",".join(COLUMNS) + "\n1.0,1,1,0.5")  # a crash cut this row
    with MetricsWriter(tmp_path, witness=False) as w:
        w.log(2, loss=0.25)
    lines = (tmp_path / "rank0.csv").read_text().splitlines()
    assert lines[1] == "1.0,1,1,0.5" and lines[2].split(",")[1:4] == ["2", "", "0.25"]


def test_bad_values_in_log_never_raise(tmp_path, caplog):
    with MetricsWriter(tmp_path, witness=False) as w:
        w.log("seven", loss=1.0)  # type: ignore[arg-type]
        w.log(8, loss=object())
    _, rows = read_rows(tmp_path / "rank0.csv")
    assert [r["step"] for r in rows] == ["8"] and rows[0]["loss"].startswith("<object")
    assert any("row for step 'seven' not written" in m for m in warnings_of(caplog))
    # the refused row is counted as dropped, so readers know it existed
    events = read_events(tmp_path / "rank0.events.jsonl")
    assert [(e["rows"], e["rejected"]) for e in events if e["kind"] == "dropped"] == [(1, 1)]
    assert [e for e in events if e["kind"] == "end"][0]["rows"] == 1  # rows that reached the file


def test_a_misspelled_option_names_the_nearest_one(tmp_path):
    with pytest.raises(TypeError, match="'tokens_per_stp'.*did you mean 'tokens_per_step'"):
        MetricsWriter(tmp_path, tokens_per_stp=128, witness=False)
    assert not list(tmp_path.iterdir())  # refused before anything was written


def test_numbers_as_text_and_counts_as_integral_floats_are_taken(tmp_path):
    # PyYAML reads 1.0e12 as a string; 540.35e9 and 7e9 are floats
    with MetricsWriter(tmp_path, peak_flops="1.0e12", n_params=540.35e9, tokens_per_step="4096",
                       n_layers=2.0, seq_len="1024", witness=False) as w:
        w.log(1, step_time=1.0)
    start = read_events(tmp_path / "rank0.events.jsonl")[0]
    assert start["peak_flops"] == 1e12 and start["n_params"] == 540_350_000_000
    assert isinstance(start["n_params"], int) and start["tokens_per_step"] == 4096.0
    assert start["n_params_source"] == "given"


@pytest.mark.parametrize("option, value, message", [
    ("n_params", -5, "positive"), ("n_params", 7.5, "whole number"), ("peak_flops", float("nan"), "positive"),
    ("tokens_per_step", "lots", "must be a number"), ("n_layers", True, "must be a number"),
    ("heartbeat_interval", 0, "positive"),
])
def test_nonsense_options_are_value_errors(tmp_path, option, value, message):
    with pytest.raises(ValueError, match=message):
        MetricsWriter(tmp_path, **{option: value}, witness=False)


def test_one_warning_per_kind_of_problem(full_disk, caplog, monkeypatch):
    monkeypatch.setattr(files, "RETRY_INTERVAL", 0.0)
    w = MetricsWriter(full_disk.path, device="Mystery-X1", witness=False)  # an unknown device: a warning of its own
    full_disk.fill()
    for i in range(1, 50):
        w.log(i, loss=1.0)
    full_disk.free()
    w.log(50, loss=1.0)
    w.close()
    msgs = warnings_of(caplog)
    assert len(msgs) == 2, msgs
    assert "unknown device" in msgs[0] and "No space left on device" in msgs[1]
    dropped = [e for e in read_events(full_disk.path / "rank0.events.jsonl") if e["kind"] == "dropped"]
    assert sum(e["rows"] for e in dropped) == 49
    _, rows = read_rows(full_disk.path / "rank0.csv")
    assert [r["step"] for r in rows] == ["50"]  # rows written = rows in the file + rows reported dropped


def test_a_bad_extra_name_is_a_counted_drop_warned_once(tmp_path, caplog):
    with MetricsWriter(tmp_path, witness=False) as w:
        for i in range(1, 6):
            w.log(i, loss=1.0, **{"a,b": 1})
    msgs = warnings_of(caplog)
    assert len(msgs) == 1 and "'a,b'" in msgs[0]
    events = read_events(tmp_path / "rank0.events.jsonl")
    assert sum(e["rows"] for e in events if e["kind"] == "dropped") == 5
    assert [e for e in events if e["kind"] == "writer_error"][0]["message"].startswith("row for step 1")
    assert not (tmp_path / "rank0.csv").exists() or not read_rows(tmp_path / "rank0.csv")[1]


def _in_thread(fn, timeout: float = 10.0) -> None:
    """Run ``fn`` in a thread and fail if it does not return: a blocked writer would hang the job."""
    import threading

    done = threading.Event()
    errors = []

    def run():
        try:
            fn()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(timeout), "the writer blocked"
    assert not errors, errors


def _ten_rows_in_a_thread(run) -> MetricsWriter:
    """A job that logs ten rows into ``run`` and closes, in a thread that must end (the writer never blocks)."""
    box = {}

    def job():
        w = box["w"] = MetricsWriter(run, witness=False)
        for i in range(1, 11):
            w.log(i, loss=1.0)
        w.close()

    _in_thread(job)
    return box["w"]


@pytest.mark.parametrize("with_reader", [False, True])
def test_a_fifo_where_the_rank_files_belong_never_blocks(tmp_path, caplog, with_reader):
    import os

    os.mkfifo(tmp_path / "rank0.csv")
    os.mkfifo(tmp_path / "rank0.events.jsonl")
    fds = []
    if with_reader:  # someone holds the FIFOs open for reading: opening for write would succeed
        fds = [os.open(tmp_path / n, os.O_RDONLY | os.O_NONBLOCK) for n in ("rank0.csv", "rank0.events.jsonl")]
    try:
        w = _ten_rows_in_a_thread(tmp_path)
    finally:
        for fd in fds:
            os.close(fd)
    msgs = warnings_of(caplog)
    assert len(msgs) == 1 and "FIFO" in msgs[0] and "not a regular file" in msgs[0]
    assert w.rows_dropped == 10  # counted (no event can be written: the events file is a FIFO too)


def test_copytruncate_starts_the_file_again_with_its_header(tmp_path, caplog):
    import os

    w = MetricsWriter(tmp_path, witness=False)
    for i in range(1, 4):
        w.log(i, loss=1.0)
    os.truncate(tmp_path / "rank0.csv", 0)  # what logrotate's copytruncate does
    for i in range(4, 7):
        w.log(i, loss=1.0)
    w.close()
    header, rows = read_rows(tmp_path / "rank0.csv")
    assert header == list(COLUMNS) and [r["step"] for r in rows] == ["4", "5", "6"]
    assert any("truncated" in m for m in warnings_of(caplog))
    # and the viewer reads it as a healthy run
    from mstop.engine.figures import Options, status
    from mstop.engine.store import Store
    from mstop.sources.local import LocalSource

    store = Store()
    LocalSource(str(tmp_path), store).read_all()
    assert store.bad_rows == 0 and store.rows == 3 and status(store, Options()) == "finished"




def test_a_link_planted_where_the_rank_files_belong_is_never_followed(tmp_path, caplog):
    """Issue 40 item 9: a link at the events path (to a file the job can write) gets none of the job's events,
    and a dangling link at the rank file's path makes the job create nothing outside the run dir; the job
    goes on, its rows counted as dropped, and the writer says why once."""
    import os

    outside = tmp_path / "outside"
    outside.mkdir()
    run = tmp_path / "run"
    run.mkdir()
    target = outside / "theirs.jsonl"
    target.write_text("")
    os.symlink(target, run / "rank0.events.jsonl")
    os.symlink(outside / "created.csv", run / "rank0.csv")  # dangling: O_CREAT would make it
    w = _ten_rows_in_a_thread(run)
    assert target.read_text() == "" and not (outside / "created.csv").exists()
    assert sorted(p.name for p in outside.iterdir()) == ["theirs.jsonl"]
    msgs = warnings_of(caplog)
    assert msgs and all("symbolic link" in m and "not a regular file" in m for m in msgs)
    assert len(msgs) == 1  # once per kind: both files refused for the same reason
    assert w.rows_dropped == 10





