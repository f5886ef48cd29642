"""The programs sent over ssh (mstop/sources/followers/): each runs alone on another host, so each rule of
mstop's it needs is its own copy. Every copy equals the rule it copies; every constant a follower holds is
either such a copy or named here as its own."""

from __future__ import annotations

import ast
import re
import stat

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mstop.engine import folds
from mstop.sources import files, followers, lifelocks, mflog, procwatch, runs
from mstop.sources.followers import follower, runs_follower
from mstop.sources.rankfiles import rank_part
from mstop.sources.remote import FRAME_DEADLINE
from mstop_writer import witness
from mstop_writer.schema import CSV_PATTERN, DEVICES_PATTERN, EVENTS_PATTERN, file_kind

PROGRAMS = ("follower", "runs_follower", "log_follower", "pyspy_follower")


def _whole(pattern: str) -> str:
    """A rule's pattern as a follower writes it: anchored at both ends."""
    return f"^{pattern}$"


#: (program, constant) -> the value it must equal: the rule it copies
COPIES = {
    ("follower", "MF_DIR"): lambda: _whole(mflog.RANK_DIR.pattern),
    ("follower", "MF_ROTATED"): lambda: _whole(mflog.ROTATED.pattern),
    ("follower", "MF_STREAM"): lambda: _whole(f"(?:{mflog.STREAM.pattern}|{re.escape(mflog.SCHEDULER_LOG)})"),
    ("follower", "MF_WORKER"): lambda: _whole(mflog.WORKER_LOG.pattern),
    ("follower", "SIGNATURE"): lambda: files.SIGNATURE,
    ("follower", "SUMMED"): lambda: folds.SUMMED,
    ("follower", "PID"): lambda: procwatch.PID.pattern,
    ("follower", "FLOAT32_MAX"): lambda: float(np.finfo(np.float32).max),
    ("follower", "LIFE_SILENCE"): lambda: lifelocks.LIFE_SILENCE,
    ("follower", "LIFE_PROBES"): lambda: lifelocks.LIFE_PROBES,
    ("follower", "PF_EXITING"): lambda: witness.PF_EXITING,
    ("runs_follower", "MF_DIR"): lambda: _whole(mflog.RANK_DIR.pattern),
    ("runs_follower", "WORKER"): lambda: _whole(mflog.WORKER_LOG.pattern),
    ("runs_follower", "PID"): lambda: procwatch.PID.pattern,
    ("runs_follower", "WHOSE_FILES"): lambda: runs.WHOSE_FILES,
}

#: rules written differently from the schema's (anchored, grouped): equal as what they match, checked by name
BY_MATCH = {("follower", "NAME"), ("follower", "DEVICES"), ("follower", "ROTATED"), ("runs_follower", "NAME")}

#: each program's own knobs, copies of nothing (what each is for is said beside it in the program)
OWN = {
    # SOURCE (a connection's own address in a worker log) is the rule itself: mstop.sources.procwatch uses it
    "follower": {"CHUNK", "LINES", "HEARTBEAT", "QUIET", "DIGEST", "RAW", "LARGEST", "HOST", "SOURCE", "LIFE_EVERY",
                 "HEAD", "REPLACED"},
    "runs_follower": {"HEAD", "CHUNK"},
    "log_follower": {"SLACK_S"},
    "pyspy_follower": set(),
}


def _constants(name: str) -> set[str]:
    """The module-level UPPER_CASE names a program assigns."""
    tree = ast.parse(followers.program(name))
    return {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
            if isinstance(t, ast.Name) and t.id.isupper()}


@pytest.mark.parametrize("name", PROGRAMS)
def test_every_constant_of_a_follower_is_a_checked_copy_or_its_own(name):
    """A constant added to a follower is declared here: a copy (and checked below) or the program's own."""
    copies = {c for p, c in COPIES if p == name} | {c for p, c in BY_MATCH if p == name}
    assert _constants(name) == copies | OWN[name], sorted(_constants(name) ^ (copies | OWN[name]))


@pytest.mark.parametrize(("program", "constant"), sorted(COPIES))
def test_each_copy_a_follower_holds_equals_the_rule_it_copies(program, constant):
    module = {"follower": follower, "runs_follower": runs_follower}[program]
    got = getattr(module, constant)
    got = got.pattern if isinstance(got, re.Pattern) else got
    if isinstance(got, bytes):
        got = got.decode()
    want = COPIES[program, constant]()
    assert got == (want.decode() if isinstance(want, bytes) else want), (program, constant)


_names = st.one_of(
    st.from_regex(r"rank[0-9]{1,9}\.(csv|events\.jsonl)(\.bak|\.[0-9]{1,5})?", fullmatch=True),
    st.from_regex(r"host_[A-Za-z0-9._/-]{0,70}\.devices\.csv(\.1)?", fullmatch=True),
    st.text(max_size=30))


@given(_names)
@example("rank01.csv")
@example("rank0.csv.01")
@example("rank0.csv.10000")
@example("rank0.csv.٣")
@example("rank12345678.csv")
@example("host_" + "n" * 65 + ".devices.csv")
def test_the_followers_know_a_file_by_name_as_the_schema_does(name):
    """Whatever a name is, a follower takes it for a rank file (or a devices file) exactly when the writer's
    schema names such files so."""
    rank = bool(re.fullmatch(CSV_PATTERN, name) or re.fullmatch(EVENTS_PATTERN, name))
    assert bool(follower.NAME.match(name)) == bool(runs_follower.NAME.match(name)) == rank, name
    assert bool(follower.DEVICES.match(name)) == bool(re.fullmatch(DEVICES_PATTERN, name)), name
    part = rank_part(name)
    assert bool(follower.ROTATED.match(name)) == (part is not None and part[2] > 0), name  # an older part
    if part is not None and part[2]:
        assert follower.read_order(name) < follower.read_order(name.rsplit(".", 1)[0])  # its rows first


@pytest.mark.parametrize("mode", [stat.S_IFIFO, stat.S_IFCHR, stat.S_IFBLK, stat.S_IFSOCK, stat.S_IFDIR,
                                  stat.S_IFLNK, 0])
def test_the_follower_says_a_special_file_in_the_schemas_words(mode):
    assert follower.not_regular(mode) == f"{file_kind(mode)}, not a regular file"


def test_a_follower_beats_and_speaks_within_the_viewers_deadline():
    """The viewer calls a host silent after FRAME_DEADLINE seconds with no frame: a follower's heartbeat and
    the longest its digest mode stays quiet are both shorter."""
    assert follower.HEARTBEAT < follower.QUIET < FRAME_DEADLINE


@pytest.mark.parametrize("name", PROGRAMS)
def test_each_follower_runs_alone_on_python36(name):
    """Each program parses as Python 3.6 and imports the standard library only (never mstop, numpy, ...)."""
    import sys

    tree = ast.parse(followers.program(name), feature_version=(3, 6))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported and imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)


def test_the_followers_copies_of_the_life_lock_rules_answer_as_the_viewers(tmp_path):
    """The follower's own lock_free and boot_id (it runs alone on its host) answer as the viewer's
    (mstop.sources.files.lock_free, mstop.sources.lifelocks.boot_id) for a file locked, let go, absent."""
    import fcntl
    import os

    path = tmp_path / "rank0.events.jsonl"
    path.write_text("{}\n")
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # a writer's life lock (mstop_writer._files.LifeLock)
        assert follower.lock_free(str(path)) is files.lock_free(str(path)) is False
        fcntl.flock(fd, fcntl.LOCK_UN)
        assert follower.lock_free(str(path)) is files.lock_free(str(path)) is True
    finally:
        os.close(fd)
    gone = str(tmp_path / "rank1.events.jsonl")
    assert follower.lock_free(gone) is files.lock_free(gone) is None
    assert follower.boot_id() == lifelocks.boot_id()
