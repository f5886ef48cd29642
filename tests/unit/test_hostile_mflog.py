"""Issue 26, MindFormers logs: lines shaped by accident or on purpose (impossible dates, numbers that do not
parse, steps of thousands of digits, MindFormers' marker words inside other messages, step 0 of 0, UTF-16,
rotations faster than the polls, copytruncate). One bad line is one bad row; nothing is a traceback; what
cannot be read is said. Lines are CONSTRUCTED from MindFormers 2.0.0's format strings (tests/helpers/mflines.py)."""

from __future__ import annotations

import os
from pathlib import Path

from mstop.engine.store import Store
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


