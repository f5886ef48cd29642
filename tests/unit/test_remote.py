"""Watching a run over SSH against a real OpenSSH server on 127.0.0.1."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from mstop.sources.followers.follower import __file__ as FOLLOWER_PATH
from mstop.sources.remote import Target, parse_target
from tests.helpers.runs import steps, write_rank


def test_follower_is_python36_syntax():
    source = Path(FOLLOWER_PATH).read_text()
    ast.parse(source, feature_version=(3, 6))


@pytest.mark.parametrize("text, expected", [
    ("node1:/scratch/run", Target("node1", "/scratch/run")),
    ("alice@login.example.org:runs/exp1", Target("alice@login.example.org", "runs/exp1")),
    ("./runs/a:b", None), ("/abs/x:y", None), ("runs/exp1", None),
])
def test_targets(text, expected):
    assert parse_target(text) == expected


@pytest.mark.parametrize("text", ["-oProxyCommand=touch /tmp/pwned:/x", "-F:/x", "a b:/x", "host;rm:/x", "h$(x):/p"])
def test_hostile_hosts_are_refused(text):
    with pytest.raises(ValueError, match="not a host name"):
        parse_target(text)


@pytest.mark.parametrize("name", ["rank0.csv", "rank7.events.jsonl", "rank1234567.csv", "rank01.csv", "rank-1.csv",
                                  "rank12345678.csv", "rank3.csv.bak", "xrank3.csv", "rank3.events.json", "rank.csv"])
def test_the_follower_knows_rank_files_as_the_schema_names_them(name):
    import re

    from mstop.sources.followers import follower
    from mstop_writer.schema import CSV_PATTERN, EVENTS_PATTERN

    schema = bool(re.fullmatch(CSV_PATTERN, name) or re.fullmatch(EVENTS_PATTERN, name))
    assert bool(follower.NAME.match(name)) == schema


@pytest.mark.parametrize("name", ["host_node-1.devices.csv", "host_a.b_c.devices.csv", "host_.devices.csv",
                                  "host_a/b.devices.csv", "host_x.devices.csv.1", "host_" + "n" * 65 + ".devices.csv"])
def test_the_follower_knows_devices_files_as_the_schema_names_them(name):
    import re

    from mstop.sources.followers import follower
    from mstop_writer.schema import DEVICES_PATTERN

    assert bool(follower.DEVICES.match(name)) == bool(re.fullmatch(DEVICES_PATTERN, name))


def test_the_runs_program_is_python36_syntax_and_knows_rank_files_as_the_schema(tmp_path):
    import re

    from mstop.sources.followers import runs_follower
    from mstop_writer.schema import CSV_PATTERN, EVENTS_PATTERN

    ast.parse(Path(runs_follower.__file__).read_text(), feature_version=(3, 6))
    for name in ("rank0.csv", "rank7.events.jsonl", "rank01.csv", "rank3.csv.bak", "rank12345678.csv"):
        schema = bool(re.fullmatch(CSV_PATTERN, name) or re.fullmatch(EVENTS_PATTERN, name))
        assert bool(runs_follower.NAME.match(name)) == schema


def test_the_follower_reads_a_file_rewritten_in_place_with_more_bytes_again(tmp_path):
    """Issue 26 #8 on the remote side: same inode, a larger size, other first bytes: read from the start."""
    from mstop.sources.followers import follower

    path = tmp_path / "rank0.csv"
    write_rank(tmp_path, 0, steps(1, 20, loss=1.0, session="old"))
    state = [0, None, b""]
    _, data, reset = follower.read_new(str(path), os.stat(path), state)
    assert not reset and data.count(b"\n") == 21
    write_rank(tmp_path, 0, steps(1, 40, loss=2.0, session="new"), mode="w")
    offset, data, reset = follower.read_new(str(path), os.stat(path), state)
    assert reset and offset == 0 and data == path.read_bytes()
    write_rank(tmp_path, 0, steps(41, 42, loss=2.0, session="new"))  # appended: continues
    offset, data, reset = follower.read_new(str(path), os.stat(path), state)
    assert not reset and data.count(b"\n") == 2




def test_a_hung_ranks_lock_is_looked_at_once_its_files_are_idle_however_far_apart_they_were_last_written(tmp_path):
    """CI: a rank PID 1 of its container hung after its rows, its heartbeats growing its events file for seconds
    more, then was killed. The follower took the time between its CSV's last write and its events file's for
    a gap between growths and waited twice that before looking at its lock, while the rank's silence already
    read it dead: ``summary`` over ssh said dead with no word of how it was found. A gap is measured between
    two growths of one file this follower saw."""
    import json
    import time

    from mstop.sources.followers import follower

    boot = follower.boot_id()
    if boot is None:
        pytest.skip("no boot id on this kernel")
    now = time.time()
    csv, events = tmp_path / "rank0.csv", tmp_path / "rank0.events.jsonl"
    csv.write_bytes(b"step,loss\n1,0.5\n")
    events.write_bytes(json.dumps({"kind": "start", "boot_id": boot, "life_lock": True}).encode() + b"\n")
    os.utime(csv, (now - 30, now - 30))  # its last row 30 s ago, its last heartbeat 4 s ago: nobody holds its lock
    os.utime(events, (now - 4, now - 4))
    lives = follower.Lives(boot)
    for f in (csv, events):
        lives.saw(str(tmp_path), f.name, 0, f.read_bytes(), f.stat().st_mtime)
    lives.look(str(tmp_path))
    assert lives.take() == [0]
