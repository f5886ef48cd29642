"""Issue 31, part 1: each rank's own log beside its figures (the L pane), and the last error in the header.

A real MindSpore job that fails with a Python traceback, its output in a file as ``> train.log 2>&1`` puts
it: the writer records the file in its start event, the header names the last error from it, ``L`` opens
the log at that error and ``n``/``N`` jump between error lines. msrun's worker logs for a job read from its
logs. The log parser's rules on MindSpore's, MindFormers' and Python's own error lines.
"""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from mstop.engine.logs import clean_lines, error_indexes, last_error
from mstop.sources.logs import LogTail


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_log_text_reaches_the_screen_without_control_codes(raw):
    lines = clean_lines(raw)
    assert all(not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in line) for line in lines)
    error_indexes(lines)
    last_error(lines)


def test_a_log_read_from_its_tail_then_as_it_grows(tmp_path):
    p = tmp_path / "worker_0.log"
    p.write_bytes(b"one\n\x1b[31mtwo\x1b[0m\nthr")
    t = LogTail(str(p))
    assert t.read() == ["one", "two"]
    with open(p, "ab") as f:
        f.write(b"ee\nfour\n")
    assert t.read() == ["three", "four"]
    p.write_bytes(b"new\n")  # truncated and written again
    assert t.read() == ["-- worker_0.log was truncated or replaced: read again --", "new"]
    os.mkfifo(tmp_path / "fifo")
    f = LogTail(str(tmp_path / "fifo"))
    assert f.read() == [] and "not a regular file" in (f.error or "")


