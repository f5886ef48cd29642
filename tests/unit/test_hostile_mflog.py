"""Issue 26, MindFormers logs: lines shaped by accident or on purpose (impossible dates, numbers that do not
parse, steps of thousands of digits, MindFormers' marker words inside other messages, step 0 of 0, UTF-16,
rotations faster than the polls, copytruncate). One bad line is one bad row; nothing is a traceback; what
cannot be read is said. Lines are CONSTRUCTED from MindFormers 2.0.0's format strings (tests/helpers/mflines.py)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from mstop.engine.store import Store
from mstop.formats.mflog import MfLogParser
from mstop.formats.msmonitors import MonitorLines
from mstop.sources.files import FileTail
from mstop.sources.mflog import LogStream, MfLogSource
from tests.helpers.mflines import Log


def write_lines(path: Path, lines: list[str]) -> None:
    with open(path, "a") as f:
        f.write("".join(ln + "\n" for ln in lines))


def rotate(folder: Path, backups: int = 5) -> None:
    """What RotatingFileHandler does: info.log.K dropped past ``backups``, the others renamed up one."""
    for k in range(backups, 0, -1):
        p = folder / f"info.log.{k}"
        if p.exists():
            if k == backups:
                p.unlink()
            else:
                p.rename(folder / f"info.log.{k + 1}")
    (folder / "info.log").rename(folder / "info.log.1")


def test_more_rotations_between_two_reads_than_backups_are_said(tmp_path):
    log = Log()
    for s in range(1, 61):
        log.step(1, 1, s, 60, 5.0, samples_per_s=100.0)
    folder = tmp_path / "output" / "log" / "rank_0"
    folder.mkdir(parents=True)
    store = Store()
    stream = LogStream(str(folder))
    write_lines(folder / "info.log", log.lines[:20])
    src = MfLogSource(str(tmp_path / "output"), store)
    src.read_all()
    assert store.rows == 10
    stream = src.streams[0]
    for k in range(7):  # seven rotations before the next read: the file being read is gone
        write_lines(folder / "info.log", log.lines[20 + 10 * k: 30 + 10 * k] if k < 4 else [])
        rotate(folder)
    write_lines(folder / "info.log", log.lines[60:])
    src.read_all()
    assert stream.lost == 1
    assert any("rank_0/info.log: lines lost between two reads" in n for n in store.notes)
    # issue 40 item 12: said and counted: the steps the lost lines held are dropped rows, in summary too
    from rich.console import Console

    from mstop.commands.summary import render_table, summarize
    from mstop.engine.figures import Options, dropped_rows

    assert store.rows == 40 and dropped_rows(store) == 20  # steps 11-30 lost, every step 1-60 accounted for
    assert any("steps 11-30 were in lines lost between two reads: 20 rows counted as dropped" in n
               for n in store.notes), store.notes
    console = Console(width=200, record=True, file=open(os.devnull, "w"))
    console.print(render_table(summarize(store, str(tmp_path), Options()), store))
    said = console.export_text()
    assert "rows read                40, 20 lost from the log (lines lost between two reads)" in said, said


def test_copytruncate_of_a_followed_log_loses_no_line(tmp_path):
    """logrotate's copytruncate: the lines written since the last read are read from the copy."""
    import shutil

    log = Log()
    for s in range(1, 41):
        log.step(1, 1, s, 40, 5.0 - s * 0.01, samples_per_s=100.0)
    folder = tmp_path / "output" / "log" / "rank_0"
    folder.mkdir(parents=True)
    write_lines(folder / "info.log", log.lines[:20])
    store = Store()
    src = MfLogSource(str(tmp_path / "output"), store)
    src.read_all()
    write_lines(folder / "info.log", log.lines[20:50])  # written after the read, before the copy
    shutil.copyfile(folder / "info.log", folder / "info.log.1")
    os.truncate(folder / "info.log", 0)
    write_lines(folder / "info.log", log.lines[50:])
    src.read_all()
    assert store.rows == 40 and store.ranks[0].col("step").tolist() == [float(s) for s in range(1, 41)]
    assert src.streams[0].lost == 0 and not store.notes


#: LossMonitor's line as published logs spell it (tests/data/mindspore-logs/SOURCES.md)
SPELLINGS = ("epoch: {e} step: {s}, loss is {loss}", "epoch:{e} step:{s}, loss is {loss}",
             "epoch:{e}, step: {s}, loss is {loss}")


@given(st.lists(st.tuples(st.sampled_from(["step", "step", "step", "epoch", "time", "restart", "other", "nan",
                                           "bracket", "back", "cutshort"]),
                          st.integers(1, 3)), min_size=1, max_size=30),
       st.integers(16384, 80000), st.booleans(), st.sampled_from(SPELLINGS), st.booleans())
@example([("time", 1), ("step", 3)], 16384, True, SPELLINGS[0], False)  # 16 KB pieces, just under 16 KB of lines
# epochs from 0: the arrays learn the count from 0 at its first line, and read the rest of the run as arrays
@example([("step", 1), ("step", 1), ("step", 3), ("restart", 1), ("step", 2)], 42698, True, SPELLINGS[1], True)
def test_loss_monitor_lines_read_as_arrays_give_what_one_by_one_gives(plan, cut, timed, spelling, from_zero):
    """Issue 28 #5: runs of LossMonitor's bare lines (msrun's worker logs) are read as arrays: rows, step
    times (TimeMonitor's), the spacing by them, sessions, bad rows and events equal reading line by line,
    whatever the mix of epochs, restarts and odd losses, in any pieces, with or without a file time; in every
    spelling published logs show (issue 58 item 6: tests/data/mindspore-logs), epochs counted from 1 or 0."""
    import mstop.formats.mflog as mflog

    lines, epoch, step = [], 1, 0
    for what, times in plan:
        if what == "step":
            for _ in range(times * 400):  # runs long enough to be read as arrays (pieces of 16 KB and more)
                step += 1
                lines.append(spelling.format(e=epoch - from_zero, s=step, loss=repr(2.0 - step * 1e-4)))
        elif what == "epoch":
            epoch, step = epoch + 1, 0
        elif what == "time":  # MindSpore 2.x's TimeMonitor line, or 1.x's (milliseconds with no unit)
            lines.append(f"Train epoch time: {max(step, 1) * 24.5:.3f} ms, per step time: 24.500 ms" if times != 2
                         else f"epoch time: {max(step, 1) * 24.5:.3f}, per step time: 24.500")
        elif what == "restart":
            epoch, step = 1, 0
        elif what == "other":  # MindSpore's own stamped lines: before the file's times, after, its Python form
            lines.append({1: "[INFO] DEVICE(1,2,python):2026-12-01-07:09:30.000.000 [x.cc:1] Fn] start-up",
                          2: "[WARNING] ME(1:2,python):2026-12-02-11:35:37.844.006 [x.cc:1] something",
                          3: "[WARNING] ME(7:1406,MainProcess):2026-12-01-07:09:40.714.000 [a.py:69] old"}[times])
        elif what == "nan":
            step += 1
            lines.append(spelling.format(e=epoch - from_zero, s=step, loss="nan"))
        elif what == "bracket":
            step += 1
            lines.append(spelling.format(e=epoch - from_zero, s=step, loss="[1.25]"))
        elif what == "back":
            step = max(0, step - 20 * times)
        elif what == "cutshort":
            lines.append(spelling.format(e=epoch - from_zero, s=step + 1, loss="").rstrip())
    blob = "".join(x + "\n" for x in lines).encode()

    def read(bulk_run: int):
        old = mflog.BULK_RUN
        mflog.BULK_RUN = bulk_run
        try:
            p, tail, outs = MfLogParser(0), FileTail("x"), []
            for k, i in enumerate(range(0, len(blob), cut)):
                outs.append(p.parse(tail.feed(blob[i:i + cut]).blob, arrived=1_796_108_985.0 + k if timed else None))
            outs.append(p.flush())
        finally:
            mflog.BULK_RUN = old
        rows = np.concatenate([np.hstack([o.rows.exact, o.rows.floats.astype(np.float64)]) for o in outs])
        sessions = [o.rows.session_names[c] for o in outs for c in o.rows.session_codes]
        events = [e for o in outs for e in o.events]
        return rows, sessions, events, sum(o.rows.bad for o in outs), p.state.untimed, p.state.step_lines

    blocks = []
    real = MonitorLines.lm_rows
    MonitorLines.lm_rows = lambda self, *a: (blocks.append(len(a[2])), real(self, *a))[1]  # type: ignore
    try:
        arrays = read(256)
    finally:
        MonitorLines.lm_rows = real  # type: ignore[method-assign]
    one = read(10**9)
    np.testing.assert_array_equal(arrays[0], one[0])
    assert arrays[1:] == one[1:]
    if timed and len(blob) >= 2 * cut and max((n for w, n in plan if w == "step"), default=0) >= 2:
        assert blocks, "no run was read as arrays"


GOOD = ("[INFO] 2026-12-01 07:09:{s:02d},553 [mindformers/core/callback/callback.py:747] print_output_info: "
        "{{ Epoch:[  1/  1], step:[{step:5d}/  100], loss:[{loss}/5.544593], per_step_time: 20ms, "
        "lr: 0.0002, overflow cond: False, loss_scale: 1.0, global_norm: [1.013255], "
        "train_throughput_per_npu: 0.004T")


number = st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr), st.integers().map(str),
                   st.sampled_from(["1.2.3", "9" * 400, "9" * 5000, "", "-", "e5", "1e999", "0x10", "١٢"]),
                   st.text(max_size=6))


stamp = st.builds(lambda y, mo, d, h, mi, s: f"{y}-{mo}-{d} {h}:{mi}:{s},553",
                  st.sampled_from(["2026", "0000", "9999"]), st.sampled_from(["12", "13", "00", "02"]),
                  st.sampled_from(["01", "30", "45", "00"]), st.sampled_from(["07", "24", "99"]),
                  st.sampled_from(["09", "60", "99"]), st.sampled_from(["48", "60", "61", "99"]))


step_line = st.builds(
    lambda ts, e, es, s, ss, loss, ms, lr, norm: (
        f"[INFO] {ts} [mindformers/core/callback/callback.py:747] print_output_info: "
        f"{{ Epoch:[{e:>3}/{es:>3}], step:[{s:>5}/{ss:>5}], loss:[{loss}/5.5], per_step_time: {ms}ms, "
        f"lr: {lr}, overflow cond: False, loss_scale: 1.0, global_norm: [{norm}], train_throughput_per_npu: 0.004T"),
    stamp, number, number, number, number, number, number, number, number)


other = st.one_of(
    st.text(max_size=60),
    st.builds(lambda ts, words: f"[INFO] {ts} [mindformers/trainer/base_trainer.py:1680] training_process: {words}",
              stamp, st.sampled_from([".........Starting Training Model..........", ".........Training Over!......",
                                      "config: {'note': 'Training Over!', 'msg': 'Starting Training Model'}",
                                      "  3.3% |█| 192.56489 samples/s/p  0:00:01 }"])),
    st.just("Traceback (most recent call last):"), st.just("ValueError: boom"),
    # MindSpore's own error lines and Ascend's codes (issue 40 item 8): errors, never rows
    st.sampled_from(["[ERROR] DEVICE(1234,ffff,python):2026-12-01-07:10:30.176.000 [a/b.cc:300] SyncStream] Call "
                     "aclrtSynchronizeStreamWithTimeout failed, ret[507035]",
                     "[CRITICAL] ME(7,1,python):2026-13-45-99:99:99.000.000 [x.cc:1] Run] step: 3, loss is 2.0",
                     "[ERROR] DEVICE(1,2,python):", "EE9999: Inner Error!", "E39999: [PID: 1] step 4 loss 1.0",
                     "EH9999", "-" * 52]))


encoding = st.sampled_from(["utf-8", "utf-16", "utf-16-le", "utf-16-be", "latin-1", "utf-8-sig"])


def steps_in(text: str) -> int:
    """Step lines as the parser must count them: every step-looking line, whatever its prefix (a row or a
    bad row)."""
    from tests.helpers.mflines import step_looking

    return step_looking(text)


@given(st.lists(st.one_of(step_line, other), max_size=25), encoding, st.integers(1, 97))
@example([GOOD.format(s=1, step=1, loss="1.2.3"), GOOD.format(s=2, step=2, loss="5.0")], "utf-8", 7)
# a UTF-16 line with a character whose byte is 0x0D (U+0D00): split there it was lost, neither row nor bad row
@example([GOOD.format(s=1, step=1, loss="0.0").replace("[1.013255]", "[\u0d00]")], "utf-16", 1)
@example([GOOD.format(s=1, step=1, loss="0.0").replace("[1.013255]", "[\u0a00]")], "utf-16-le", 5)
# a bare CR inside a UTF-16 step line: one line (one bad row), not two pieces as in UTF-8
@example([GOOD.format(s=1, step=1, loss="0.0").replace("Epoch:[", "Epoch:[\r")], "utf-16", 1)
# the same in UTF-16 without its BOM (PowerShell's >): known from its zero bytes before the lines are cut
@example([GOOD.format(s=1, step=1, loss="0.0"), GOOD.format(s=2, step=2, loss="0.0").replace("Epoch:[", "Epoch:[\r")],
         "utf-16-le", 1)
def test_any_line_in_any_encoding_in_any_pieces_is_a_row_a_bad_row_or_skipped(lines, enc, cut):
    text = "".join(ln + "\n" for ln in lines)
    try:
        blob = text.encode(enc)
    except UnicodeEncodeError:
        blob = text.encode("utf-8")
        enc = "utf-8"
    whole = MfLogParser(0)
    a, b = whole.parse(blob), whole.flush()
    rows = len(a.rows) + len(b.rows)
    aborts = [e for e in a.events + b.events if e["kind"] == "abort"]
    decoded = blob.decode(enc, "replace").lstrip("\ufeff")
    # a UTF-16 blob's lines end at newlines only (its 0x0D bytes are parts of characters): a CR inside a line
    # is one line there, one bad row, where a UTF-8 log's CR ends a piece
    want = steps_in(decoded.replace("\r", " ") if enc.startswith("utf-16") else decoded)
    if enc.startswith("utf-16") and any(0x0A in c.encode("utf-16-le") or 0x0D in c.encode("utf-16-le")
                                        for c in text if ord(c) > 127):
        # a character with a newline byte in UTF-16 (U+010A) splits its line where the bytes are split:
        # each piece that looks like a step is counted, so none is lost, but one may count twice
        assert rows + a.rows.bad + b.rows.bad >= want
    else:
        assert rows + a.rows.bad + b.rows.bad == want
    pieces, tail, n, events = MfLogParser(0), FileTail("x"), 0, []
    for i in range(0, len(blob), cut):
        got = pieces.parse(tail.feed(blob[i:i + cut]).blob)
        n, events = n + len(got.rows), events + got.events
    last = pieces.flush()
    n, events = n + len(last.rows), events + last.events
    assert n == rows
    assert [e for e in events if e["kind"] == "abort"] == aborts  # an error ends a session however it is read
    for e in aborts:
        assert not any(ord(c) < 32 for c in e["error"]) and math.isfinite(e["time"])


@given(st.lists(st.tuples(st.sampled_from(["step", "step", "step", "progress", "progress2", "restart", "other",
                                           "error", "over", "badstamp", "zero", "nan", "nostamp"]),
                          st.integers(1, 3)), min_size=1, max_size=40),
       st.integers(512, 20000), st.integers(0, 2**31))
def test_lines_read_as_arrays_give_what_one_by_one_gives(plan, cut, seed):
    """Issue 28 #5: runs of step and progress lines are read as arrays (pyarrow, RE2): rows, bad rows and
    events are exactly those of reading every line on its own, whatever the mix, in any pieces."""
    import random

    import mstop.formats.mflog as mflog
    from tests.helpers.mflines import Log

    rnd = random.Random(seed)
    log, step, total = Log(t0=1_796_108_985.0), 0, 4000
    for what, times in plan:
        for _ in range(times * 12):  # runs long enough to be read as arrays (BULK_RUN 16 below), or not
            if what in ("step", "progress", "progress2"):
                step += 1
                log.step(1, 1, step, total, 5.0 - step * 1e-4 + rnd.random() * 0.01,
                         samples_per_s=None if what == "step" else 40.0 + rnd.random(),
                         flops=None if rnd.random() < 0.3 else 0.5, lr=None if rnd.random() < 0.01 else 1e-4)
                if what == "progress2":
                    log.lines.append(log.lines[-1])  # a second progress line after one step
            elif what == "restart":
                step = max(0, step - 50)
                log.info(".........Starting Training Model..........")
                break
            elif what == "other":
                log.info("global_batch_size = batch_size * device_num = 8 = 4 * 2")
            elif what == "error":
                log.record("something failed", level=40)
                break
            elif what == "over":
                log.info(".........Training Over!..........")
                break
            elif what == "badstamp":
                log.lines.append(log.lines[-1].replace("2026-", "2026-13-", 1) if log.lines else "x")
                break
            elif what == "zero":
                log.record("{ Epoch:[  0/  0], step:[    0/    0], loss:[1.0/1.0], per_step_time: 9ms, lr: 1e-05, "
                           "overflow cond: False, loss_scale: 1.0, global_norm: [1.0]")
                break
            elif what == "nan":
                step += 1
                log.step(1, 1, step, total, float("nan"))
                break
            elif what == "nostamp":
                log.lines.append("{ Epoch:[  1/  1], step:[    1/    2], loss:[1.0/1.0]")
                break
    blob = log.text().encode()

    def read(bulk_run: int):
        old = mflog.BULK_RUN
        mflog.BULK_RUN = bulk_run
        try:
            p, tail, outs = MfLogParser(0), FileTail("x"), []
            for i in range(0, len(blob), cut):
                outs.append(p.parse(tail.feed(blob[i:i + cut]).blob))
            outs.append(p.flush())
        finally:
            mflog.BULK_RUN = old
        rows = np.concatenate([np.hstack([o.rows.exact, o.rows.floats.astype(np.float64)]) for o in outs])
        extra = {k: np.concatenate([o.rows.extra[k] for o in outs]) for k in outs[0].rows.extra}
        sessions = [o.rows.session_names[c] for o in outs for c in o.rows.session_codes]
        events = [e for o in outs for e in o.events]
        return rows, extra, sessions, events, sum(o.rows.bad for o in outs)

    arrays, one = read(16), read(10**9)  # (16, not 256: the same mix of runs in a tenth of the lines)
    np.testing.assert_array_equal(arrays[0], one[0])
    for k in one[1]:
        np.testing.assert_array_equal(arrays[1][k], one[1][k])
    assert arrays[2:] == one[2:]
