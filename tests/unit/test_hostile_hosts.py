"""Hosts that misbehave (issue 40 item 11): what the other end of ``host:/path`` sends is never trusted.

A stand-in ``ssh`` first on PATH plays the host: it swallows the follower program mstop sends and answers
as a broken, hostile or silent host would. ``mstop summary host:/path`` must end, within its deadlines, with
an exit code and words naming the host and what was wrong, never a traceback, a MemoryError or a hang.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.common import ROOT
from tests.helpers.fake_ssh import install, on_path


@pytest.fixture
def host(tmp_path):
    folder = install(tmp_path)

    def run(mode: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess, float]:
        (folder / "mode").write_text(mode)
        env = {**os.environ, "PATH": f"{folder}:{os.environ['PATH']}"}
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "mstop", "summary", "fakehost:/runs/a", "--json",
                               "--connect-timeout", "1"], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=timeout)
        return proc, time.monotonic() - t0
    return run


@pytest.mark.parametrize("mode, words", [
    ("endless", "a frame header over 16 MiB without its end"),
    ("probe-endless", "an answer over 256 MiB: cut off"),
    ("probe-list", "an answer that does not read (not a JSON object)"),
    ("probe-negative", "an answer that does not read (a length of -3 for 3 bytes)"),
    ("negative", "a frame announces -5 bytes"),
    ("huge", "a frame announces 1000000000000000 bytes"),
    ("list", "unexpected output from the remote side"),
    ("noclock", "its first frame has no clock"),
    ("stringclock", "its first frame has no clock (got 'noon')"),
    ("badfiles", "a frame's 'files' is not a list of [name, offset, length, reset, ...]"),
    ("toolong", "a frame's files add up to more bytes than it sent"),
    ("nevercaughtup", "never said it had caught up"),
])
def test_a_host_sending_what_no_follower_sends_is_named_with_what(host, mode, words):
    proc, took = host(mode)
    assert proc.returncode not in (0, 1) and "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr
    assert "fakehost" in proc.stderr and words in proc.stderr, proc.stderr
    assert took < 60


def test_a_silent_host_is_given_up_within_its_deadline(host):
    from mstop.sources.remote import FRAME_DEADLINE

    for mode, words in (("probe-silent", f"fakehost: no answer in {1 + FRAME_DEADLINE:g} s"),
                        ("silent", f"fakehost: no frame for {1 + FRAME_DEADLINE:g} s")):
        proc, took = host(mode)
        assert proc.returncode not in (0, 1) and "Traceback" not in proc.stderr
        assert words in proc.stderr, proc.stderr
        assert took < 1 + FRAME_DEADLINE + 15


@pytest.mark.parametrize("mode", ["spy-dicts", "spy-escape", "spy-many", "spy-list", "spy-why-dict"])
def test_a_hosts_py_spy_answer_is_typed_bounded_and_shown_without_control_codes(tmp_path, monkeypatch, mode):
    """The py-spy dump over ssh (``t``, ``d``): lines that are not strings, a reason with terminal escapes,
    9,000 lines, a JSON list, a reason that is no string. Each is shown as words naming the host, or as at
    most MAX_LINES clean lines: nothing of it reaches the terminal as a control code."""
    from mstop.sources import pyspy
    from mstop.sources.protocol import DEFAULT_CONNECTION

    on_path(tmp_path, monkeypatch, mode)
    lines, why = pyspy.dump_over_ssh("fakehost", {"pid": 4242, "host": "n1", "boot_id": "b", "pid_ns": "p"},
                                     DEFAULT_CONNECTION)
    said = "\n".join(lines or []) + why
    assert "\x1b" not in said and "\x07" not in said, said
    if mode == "spy-many":
        assert lines is not None and len(lines) == pyspy.MAX_LINES + 1 and "4,000 more lines" in lines[-1]
        assert lines[0] == "  main (job.py:1)\\x1b[31m"
    elif mode == "spy-escape":
        assert lines is None and why.startswith("fakehost: \\x1b]52;c;aGk=\\x07 gone"), why
    else:
        assert lines is None and why.startswith("fakehost: no dump: an answer mstop cannot read"), why



_json = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=6), inner,
                                                                                  max_size=5), max_leaves=20)


@given(st.one_of(_json, st.fixed_dictionaries({"n": _json, "files": _json}),
                 st.fixed_dictionaries({"n": st.integers(-5, 2**31), "files": st.lists(st.lists(_json, max_size=6),
                                                                                        max_size=4)})),
       st.booleans())
@settings(max_examples=400, deadline=None)
def test_any_frame_header_is_the_followers_shape_or_a_reason(header, ended):
    """Every field from the other side is type-checked: whatever JSON a host sends as a frame's header, the
    check answers None (the shape the follower sends: an object, a length in [0, 1 GiB], files entries of
    [str, int >= 0, int >= 0, bool, ...]) or a reason in words; it never raises."""
    import json

    from mstop.sources.remote import MAX_PAYLOAD, entry_ok, frame_problem

    line = json.dumps(header).encode() + (b"\n" if ended else b"")
    n = header.get("n", 0) if isinstance(header, dict) else 0
    n = n if type(n) is int and 0 <= n <= MAX_PAYLOAD else None
    why = frame_problem(line, header, n)
    files = header.get("files", []) if isinstance(header, dict) else None
    good = (ended and isinstance(header, dict) and n is not None and isinstance(files, list)
            and all(entry_ok(e) for e in files))
    assert (why is None) == good, (header, why)
    assert why is None or (isinstance(why, str) and why and "\x1b" not in why)
    for e in files if isinstance(files, list) else []:
        if entry_ok(e):
            assert isinstance(e[0], str) and type(e[1]) is int and e[1] >= 0 and type(e[2]) is int and e[2] >= 0
