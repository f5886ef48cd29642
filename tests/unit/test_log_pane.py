"""Issue 31, part 1: each rank's own log beside its figures (the L pane), and the last error in the header.

A real MindSpore job that fails with a Python traceback, its output in a file as ``> train.log 2>&1`` puts
it: the writer records the file in its start event, the header names the last error from it, ``L`` opens
the log at that error and ``n``/``N`` jump between error lines. msrun's worker logs for a job read from its
logs. The log parser's rules on MindSpore's, MindFormers' and Python's own error lines.
"""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from mstop.formats.logs import clean_lines, error_indexes, last_error
from mstop.sources.logs import LogTail
from tests.helpers.app_common import settle


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




SYNC_FAILED = ("[ERROR] DEVICE(1234,ffff,python):2024-06-04-10:20:42.176.000 [mindspore/ccsrc/plugin/device/ascend/"
               "hal/device/ascend_stream_manager.cc:300] SyncStream] Call aclrtSynchronizeStreamWithTimeout failed, "
               "ret[507035]")
SEP = "-" * 52
CANN_BLOCK = [SYNC_FAILED, SEP, "- Ascend Error Message:", SEP, "EE9999: Inner Error!",
              "EE9999: [PID: 1234] 2024-06-04-10:20:42.170.000 The error from device(chipId:0, dieId:0), event wait "
              "timeout occurred during task execution, stream_id:2",
              "        TraceBack (most recent call last):",
              "        rtStreamSynchronizeWithTimeout execute failed, reason=[task timeout]",
              SEP, "- C++ Call Stack: (For framework developers)", SEP, "mindspore/ccsrc/x.cc:1 f"]


def test_cann_error_codes_are_errors_and_the_ascend_cause_stays_with_its_error_line():
    """Issue 40 item 8: CANN's ``E39999``/``EH9999``/``EE9999`` lines are error lines, and the last error of a
    log ending in a framework error with its Ascend cause is that error with the cause (the separators that
    head the cause no longer cut the message: the header showed ``…aclrtSynchronizeStreamWit``)."""
    lines = clean_lines("\n".join(["epoch: 1 step: 10, loss is 2.3", *CANN_BLOCK]))
    err = last_error(lines)
    assert err is not None and err.lines[0] == SYNC_FAILED
    assert err.lines[1:3] == ["EE9999: Inner Error!", CANN_BLOCK[5]]
    assert not any(x.startswith("----") or "C++ Call Stack" in x for x in err.lines)
    assert [lines[i][:6] for i in error_indexes(lines)] == ["[ERROR", "EE9999", "EE9999"]
    for code in ("E39999: Inner Error!", "EH9999: [PID: 7] hccl timeout", "EZ9999 something", "EI0002: x"):
        one = clean_lines(f"step 1\n{code}\n")
        assert error_indexes(one) == [1] and last_error(one).lines == [code]
    # a traceback's exception keeps the Ascend cause under it
    tb = clean_lines("\n".join(["Traceback (most recent call last):", '  File "t.py", line 1, in <module>',
                                "RuntimeError: Sync stream failed:Ascend_0", SEP, "- Ascend Error Message:", SEP,
                                "E39999: Inner Error!", SEP, "- C++ Call Stack: (For framework developers)"]))
    assert last_error(tb).lines == ["RuntimeError: Sync stream failed:Ascend_0", "E39999: Inner Error!"]


def test_a_blank_line_before_the_ascend_cause_keeps_the_cause_with_its_error():
    """Issue 58, item 6: MindSpore 2.x prints a blank line between a ``RuntimeError`` and its ``- Ascend Error
    Message:`` block: the Ascend code and cause (EE9999, EI0006) stay in the last error."""
    tb = clean_lines("\n".join(["Traceback (most recent call last):", '  File "train.py", line 9, in <module>',
                                "RuntimeError: Call aclnnMatmul failed, detail:EZ1001: shapes differ", "",
                                SEP, "- Ascend Error Message:", SEP,
                                "EI0006: Getting socket times out. Reason: remote rank 3 did not connect",
                                "        Solution: check the network of rank 3", "",
                                "(Please search \"CANN Common Error Analysis\" at https://www.mindspore.cn for error "
                                "code description)", "", SEP, "- C++ Call Stack: (For framework developers)", SEP,
                                "mindspore/ccsrc/x.cc:1 f"]))
    err = last_error(tb)
    assert err.lines[0] == "RuntimeError: Call aclnnMatmul failed, detail:EZ1001: shapes differ"
    assert "EI0006: Getting socket times out. Reason: remote rank 3 did not connect" in err.lines, err.lines
    assert not any("C++ Call Stack" in x or x.startswith("----") for x in err.lines)


def test_lines_msrun_quotes_from_other_logs_are_not_this_logs_error():
    """msrun's launcher quotes other logs grep-style when a worker fails: those lines are another file's."""
    lines = clean_lines("\n".join([
        "[ERROR] ME(1:2,MainProcess):2026 [msrun.py:1] worker 1 exited with code 1",
        "scheduler.log-58-[WARNING] DISTRIBUTED(1,python):2026 [x.cc:1] node timed out",
        "worker_1.log:60:[ERROR] ME(9:9,MainProcess):2026 [y.py:2] RuntimeError: other rank's error",
        "worker_1.log-61-Traceback (most recent call last):"]))
    assert error_indexes(lines) == [0]
    assert last_error(lines).lines == [lines[0]]


@given(st.lists(st.sampled_from([*CANN_BLOCK, "E39999: Inner Error!", "EH9999 hccl", "x.log-3-[ERROR] q",
                                 "Traceback (most recent call last):", "ValueError: v", "", "step 3", SEP]),
                max_size=40))
def test_the_last_error_of_any_mix_of_cann_blocks_is_lines_of_the_log(picked):
    """Whatever the mix: the last error's lines are lines of the log, in order, its first an error line."""
    lines = clean_lines("\n".join(picked))
    err = last_error(lines)
    idx = error_indexes(lines)
    if err is None:
        assert not [i for i in idx if not lines[i].startswith("Traceback")]
        return
    assert err.lines[0] == lines[err.at] and (err.at in idx)
    pos = err.at
    for line in err.lines[1:]:
        pos = lines.index(line, pos + 1)  # each later in the log than the one before
    assert len(err.lines) <= 8


# -- issue 40 item 12: a log's bytes that once hid lines, grew without end or changed under the pane --------


def test_an_unterminated_escape_hides_no_later_line():
    """``ESC ]`` with no end swallowed every later line of the chunk (the pane and the error search)."""
    lines = clean_lines("step 1\n\x1b]0;a title with no end\nTraceback (most recent call last):\n"
                        '  File "t.py", line 1\nRuntimeError: device lost\n')
    assert lines[2:5] == ["Traceback (most recent call last):", '  File "t.py", line 1', "RuntimeError: device lost"]
    assert last_error(lines).lines[0] == "RuntimeError: device lost"


@given(st.lists(st.sampled_from(["\x1b]0;", "\x1b]8;;http://x\x07", "\x1b[", "\x1b", "\x9b", "\x1b\\", "a", "\r"]),
                max_size=6), st.lists(st.text("xyz ", min_size=1, max_size=8), min_size=1, max_size=6))
def test_escapes_never_take_a_line_away(codes, words):
    """Whatever escape bytes a line holds, every line after it is still a line of its own."""
    text = "".join(codes) + "\n" + "\n".join(f"L{i} {w}" for i, w in enumerate(words)) + "\n"
    lines = clean_lines(text)
    for i in range(len(words)):
        assert any(line.startswith(f"L{i} ") for line in lines), (text, lines)


def test_a_line_without_end_is_not_joined_again_at_every_read(tmp_path):
    """A log that gains an endless line: the part kept between reads stays bounded (its start), and the
    lines after it come when it ends."""
    from mstop.sources.logs import PARTIAL_MAX

    p = tmp_path / "worker_0.log"
    p.write_bytes(b"one\n")
    t = LogTail(str(p))
    assert t.read() == ["one"]
    for _ in range(8):
        with open(p, "ab") as f:
            f.write(b"x" * (900 << 10))
        assert t.read() == [] and t.pending <= PARTIAL_MAX
    with open(p, "ab") as f:
        f.write(b"\ntwo\n")
    got = t.read()
    assert got[-1] == "two" and got[0].startswith("xxxx")


def test_a_hole_or_a_burst_is_skipped_to_the_logs_end(tmp_path):
    """A log that gains a huge hole (or more than a tail since the last read): its last MiB is read, said,
    not 1 MiB a read for ever."""
    p = tmp_path / "worker_0.log"
    p.write_bytes(b"one\n")
    t = LogTail(str(p))
    t.read()
    with open(p, "r+b") as f:
        f.seek(20 << 30)  # a 20 GiB hole
        f.write(b"\nafter the hole\n")
    got = t.read()
    assert got[0].startswith("-- 21,47") and "bytes of worker_0.log skipped" in got[0]
    assert got[-1] == "after the hole" and t.offset == p.stat().st_size
    assert t.read() == []


def test_a_log_rewritten_in_place_longer_is_read_again(tmp_path):
    """Same file, same inode, more bytes, other content: its old lines are not kept as if still there."""
    p = tmp_path / "worker_0.log"
    p.write_bytes(b"old one\nold two\n")
    t = LogTail(str(p))
    assert t.read() == ["old one", "old two"]
    with open(p, "r+b") as f:  # rewritten in place (same inode), longer
        f.write(b"new one\nnew two\nnew three\n")
    got = t.read()
    assert got[0] == "-- worker_0.log was rewritten in place: read again --"
    assert t.lines == ["-- worker_0.log was rewritten in place: read again --", "new one", "new two", "new three"]


@given(st.one_of(st.lists(st.integers()), st.text(), st.integers(), st.none(),
                 st.dictionaries(st.sampled_from(["path", "ident", "offset", "n", "reset", "skipped", "x"]),
                                 st.one_of(st.integers(-5, 1 << 40), st.text(max_size=5), st.booleans(), st.none(),
                                           st.lists(st.integers(-1, 9), max_size=3)), max_size=7)),
       st.integers(0, 1 << 21))
def test_a_log_followers_answer_of_any_shape_is_a_said_error_or_a_checked_answer(head, sent):
    """Item 11: the log follower's answer over ssh (an answer without ``n`` exited the monitor): every field is
    type-checked; anything else is a ValueError the pane says, never a traceback."""
    from mstop.sources.logs import TAIL_BYTES, checked_answer

    try:
        got = checked_answer(head, sent)
    except ValueError as e:
        assert str(e).startswith("its answer")
        return
    if "error" in got:
        return
    assert isinstance(got["path"], str) and type(got["n"]) is int and 0 <= got["n"] <= min(sent, TAIL_BYTES)
    assert type(got["offset"]) is int and got["offset"] >= 0 and len(got["ident"]) == 2


MINDSPORE = ("[ERROR] ME(3151:281473336705040,MainProcess):2024-06-04-10:20:42.176.000 "
             "[mindspore/train/model.py:1091] Run failed")


MINDFORMERS = ("2024-06-04 10:20:42,176 - mindformers[mindformers/core/callback/callback.py:515] - ERROR - "
               "loss is NaN at step 120")


NOT_ERRORS = ["epoch: 1 step: 10, loss is 2.30", "{'loss': 1.5, 'error_rate': 0.1}",
              "[WARNING] ME(1:2,MainProcess):2024 [a.py:1] the error tolerance is 1e-5",
              "2024-06-04 10:20:42,176 - mindformers[x.py:1] - INFO - no errors so far"]


def test_error_lines_of_mindspore_mindformers_and_python():
    lines = clean_lines("\n".join([
        "epoch: 1 step: 1, loss is 2.30", MINDSPORE, MINDFORMERS, *NOT_ERRORS,
        "Traceback (most recent call last):", '  File "train.py", line 9, in <module>',
        "    model.train(1, data)",
        "RuntimeError: The pointer[device_address] is null.",
        "----------------------------------------------------",
        "- C++ Call Stack: (For framework developers)",
        "----------------------------------------------------",
        "mindspore/ccsrc/runtime/graph_scheduler/actor.cc:120 Run", ""]))
    assert [lines[i] for i in error_indexes(lines)] == [
        MINDSPORE, MINDFORMERS, "Traceback (most recent call last):",
        "RuntimeError: The pointer[device_address] is null."]
    err = last_error(lines)
    assert err is not None and err.lines == ["RuntimeError: The pointer[device_address] is null."]


def test_the_last_error_without_a_traceback_and_a_multi_line_message():
    lines = clean_lines(f"{MINDFORMERS}\nstep 2\n{MINDSPORE}\nthe device is lost\nretry with a smaller batch\n\n")
    err = last_error(lines)
    assert err is not None and err.lines == [MINDSPORE, "the device is lost", "retry with a smaller batch"]
    assert err.text.count("\n") == 2  # lines, never escaped
    assert last_error(clean_lines("\n".join(NOT_ERRORS))) is None


def test_error_lines_are_found_in_a_log_longer_than_its_tail_and_past_the_lines_kept(tmp_path, monkeypatch):
    """A log over TAIL_BYTES is read from inside a line (that piece left out), and one of more than MAX_LINES
    lines keeps the newest: the error lines' indexes still point at the error lines."""
    from mstop.live.logpane import LogPane
    from mstop.sources import logs

    p = tmp_path / "train.log"
    p.write_text("x" * 100 + "\n" + "".join(f"step {i}\n" for i in range(200)) + MINDSPORE + "\nstep 200\n")
    monkeypatch.setattr(logs, "TAIL_BYTES", 1000)
    pane = LogPane(0, str(p))
    pane.read()
    assert pane.lines[0].startswith("step ") and [pane.lines[i] for i in pane.errors] == [MINDSPORE]
    monkeypatch.setattr(logs, "MAX_LINES", 50)
    with open(p, "a") as f:
        f.write("".join(f"more {i}\n" for i in range(30)) + MINDFORMERS + "\n")
    pane.read()
    assert len(pane.lines) == 50 and [pane.lines[i] for i in pane.errors] == [MINDSPORE, MINDFORMERS]
    with open(p, "a") as f:
        f.write("".join(f"again {i}\n" for i in range(60)))
    pane.read()
    assert pane.errors == [] and pane.lines[-1] == "again 59"


async def test_msrun_worker_logs_of_a_job_read_from_its_logs(tmp_path):
    """A job read from msrun's worker logs: L shows the selected rank's worker_<R>.log."""
    from mstop.app import MonitorApp
    from mstop.app.screens import LogScreen

    for r in range(2):
        lines = [f"epoch: 1 step: {s}, loss is {2.0 - s / 100:.2f}" for s in range(1, 30)]
        if r == 1:
            lines += ["Traceback (most recent call last):", '  File "train.py", line 40, in <module>',
                      "RuntimeError: Allocate memory failed on device 1"]
        (tmp_path / f"worker_{r}.log").write_text("\n".join(lines) + "\n")
    app = MonitorApp(str(tmp_path), follow=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
        await pilot.press("down")  # the ranks table's cursor on rank 1
        await settle(pilot, lambda: app.monitor.selected_rank == 1)
        await pilot.press("L")
        await settle(pilot, lambda: isinstance(app.screen, LogScreen))
        pane = app.screen.pane
        assert pane.path == str(tmp_path / "worker_1.log")
        assert pane.last_error().lines == ["RuntimeError: Allocate memory failed on device 1"]
        assert pane.lines[0] == "epoch: 1 step: 1, loss is 1.99"
