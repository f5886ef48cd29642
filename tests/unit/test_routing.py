"""Issue 61, item 3: alerts that route and hold still. The router fed alerts over time (a ``for`` before firing,
clearing with hysteresis, grouping, reminders, silences), the rules file, and the sinks' queue that a hanging
sink never holds up. The monitor and ``mstop export`` with a rules file, and the HTTP sink against a real
server: tests/system/test_alert_routing.py."""

from __future__ import annotations

import json
import os
import select
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mstop.live.routing import Notification, Route, Router, Rules, Silence, Sinks, add_silence, duration, silences
from tests.helpers.cli import mstop


def states(notes: list[Notification]) -> list[tuple[str, str, list[int]]]:
    return [(n.state, n.kind, n.ranks) for n in notes]


def test_a_condition_fires_after_its_for_and_once_while_it_holds():
    r = Router(Rules((Route("data_starvation", for_s=30.0),)))
    held = [("data_starvation", None, "input waits 40 %")]
    assert r.update(0.0, held) == [] and r.update(29.0, held) == []
    assert states(r.update(30.0, held)) == [("fired", "data_starvation", [])]
    assert all(r.update(t, held) == [] for t in range(31, 500, 7))


def test_a_condition_gone_before_its_for_never_fires():
    r = Router(Rules((Route("*", for_s=30.0),)))
    for t in range(0, 300, 20):  # held 20 s, gone 20 s, over and over: never 30 s at once
        assert r.update(float(t), [("oom_risk", 1, "m")] if t % 40 == 0 else []) == []


@given(st.lists(st.booleans(), min_size=1, max_size=60))
def test_a_flapping_condition_notifies_once_and_clears_once_with_hysteresis(flaps):
    """Held or not every 10 s in any order, clear_after 60 s: one ``fired`` at its first appearance; it clears
    only after 60 s gone, and fires again only after that (never two fired without a clear between)."""
    r = Router(Rules((Route("loss_spike", clear_s=60.0),)))
    got = []
    for k, on in enumerate(flaps + [False] * 7):
        got += [n.state for n in r.update(10.0 * k, [("loss_spike", 0, "spike")] if on else [])]
    if any(flaps):
        assert got[0] == "fired" and got[-1] == "cleared"
    assert all(a != b for a, b in zip(got, got[1:]))  # fired, cleared, fired, cleared ...
    gaps = [i for i in range(len(flaps) - 5) if flaps[i] and not any(flaps[i + 1: i + 7])]
    assert got.count("cleared") <= len(gaps) + 1


def test_a_thousand_ranks_dying_are_one_notification_naming_them():
    r = Router(Rules((Route("dead_rank", repeat_s=600.0),)))
    (n,) = r.update(0.0, [("dead_rank", k, f"rank {k}: no heartbeat") for k in range(1024)])
    assert (n.state, n.kind, n.severity, n.ranks) == ("fired", "dead_rank", "critical", list(range(1024)))
    assert r.update(10.0, [("dead_rank", k, "m") for k in range(1030)]) == []  # six more: in the reminder
    (rem,) = r.update(600.0, [("dead_rank", k, "m") for k in range(1030)])
    assert rem.state == "repeat" and len(rem.ranks) == 1030


def test_ungrouped_routes_notify_each_rank():
    r = Router(Rules((Route("straggler", group=False),)))
    assert states(r.update(0.0, [("straggler", 3, "m"), ("straggler", 5, "m")])) == [
        ("fired", "straggler", [3]), ("fired", "straggler", [5])]


def test_a_silence_holds_its_kind_and_the_history_says_so():
    quiet = [Silence("critical", until=100.0, reason="node being replaced")]
    r = Router(Rules((Route("*", clear_s=0.0),)), lambda: quiet)
    (n,) = r.update(0.0, [("dead_rank", 7, "m")])
    assert (n.state, n.sinks) == ("silenced", ())  # into the history, to no sink
    assert r.update(50.0, [("dead_rank", 7, "m")]) == []
    (again,) = r.update(100.0, [("dead_rank", 7, "m")])  # the silence ended, the condition holds
    assert (again.state, again.sinks) == ("fired", ("bell", "command"))
    got = r.update(101.0, [("dead_rank", 7, "m"), ("loss_spike", 1, "m")])
    assert states(got) == [("fired", "loss_spike", [1])]  # a warning: no silence holds it


def test_kinds_no_route_takes_are_not_routed_and_the_closest_route_wins():
    rules = Rules((Route("critical", for_s=5.0), Route("dead_rank", for_s=0.0)))
    assert rules.route("dead_rank").for_s == 0.0 and rules.route("job_dead").for_s == 5.0
    assert rules.route("loss_spike") is None
    assert Router(rules).update(0.0, [("loss_spike", 1, "m")]) == []


RULES = """
[sinks]
file = "{file}"
http = "http://127.0.0.1:9/hook"
http_timeout = "2s"
command = "notify-send mstop"

[[route]]
match = "critical"
clear_after = "2m"
repeat = "1h"
sinks = ["file", "http", "bell"]

[[route]]
match = "*"
for = 60
group = false
sinks = ["file"]
"""


def test_the_rules_file_is_read_and_a_wrong_one_is_said_with_its_key(tmp_path):
    path = tmp_path / "rules.toml"
    path.write_text(RULES.format(file=tmp_path / "a.jsonl"))
    rules = Rules.load(str(path))
    assert rules.route("dead_rank") == Route("critical", 0.0, 120.0, True, 3600.0, ("file", "http", "bell"))
    assert rules.route("loss_spike") == Route("*", 60.0, 60.0, False, 0.0, ("file",))
    assert (rules.command, rules.url, rules.http_timeout) == (("notify-send", "mstop"), "http://127.0.0.1:9/hook", 2.0)
    for bad, said in (('[[route]]\nsinks = ["pager"]\n', "sinks are bell, command, file, http"),
                      ('[[route]]\nfor = "soon"\n', "for: 'soon' is no duration"),
                      ("[sink]\n", "unknown keys ['sink']"), ("[[route]\n", "rules.toml")):
        path.write_text(bad)
        with pytest.raises(ValueError, match=said.replace("[", r"\[").replace("]", r"\]")):
            Rules.load(str(path))


@given(st.one_of(st.floats(), st.integers(), st.text(max_size=12), st.booleans(), st.none()))
def test_a_duration_is_seconds_or_a_value_error(v):
    try:
        s = duration(v, "for")
    except ValueError as e:
        assert str(e).startswith("for: ")
    else:
        assert 0 <= s < 1e9


def test_a_sink_that_hangs_never_holds_up_the_monitor_and_the_history_is_kept(tmp_path):
    """The file sink's path is a FIFO no one reads: its open hangs. Sending to it takes no time (measured:
    under 10 ms for 200 notifications); when a reader comes, every notification is there, in order."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    sinks = Sinks(Rules(file=str(fifo)), history=str(tmp_path / "history.jsonl"))
    notes = [Notification("fired", "dead_rank", [k], "m", float(k), "critical", ("file",)) for k in range(200)]
    t = time.perf_counter()
    sinks.send(notes)
    took = time.perf_counter() - t
    assert took < 0.01, took
    time.sleep(0.2)
    assert len((tmp_path / "history.jsonl").read_text().splitlines()) == 1  # the sink hangs on the first
    fd = os.open(fifo, os.O_RDWR)  # a reader that stays (a reader opening once per line raced the sink's opens:
    buf = b""  # lines lost between two, and once a 20 s wait in the unit tier)
    deadline = time.monotonic() + 20
    try:
        while buf.count(b"\n") < 200 and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.5)[0]:
                buf += os.read(fd, 1 << 16)
    finally:
        os.close(fd)
    sinks.close(wait=10)
    assert [json.loads(x)["ranks"] for x in buf.splitlines()] == [[k] for k in range(200)]
    hist = [json.loads(x) for x in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert [h["ranks"] for h in hist] == [[k] for k in range(200)]
    assert sinks.errors() == []


def test_a_failing_sink_is_said_and_the_others_still_get_it(tmp_path):
    sinks = Sinks(Rules(file=str(tmp_path / "no" / "such" / "dir" / "a.jsonl")), history=str(tmp_path / "h.jsonl"))
    sinks.send([Notification("fired", "hang", [3], "m", 1.0, "critical", ("file",))])
    sinks.close(wait=5)
    (err,) = sinks.errors()
    assert err.startswith("alert sink file failed: ") and "No such file" in err
    assert json.loads((tmp_path / "h.jsonl").read_text())["kind"] == "hang"


def test_silences_are_kept_beside_the_run_listed_and_ended(tmp_path):
    add_silence(str(tmp_path), "dead_rank", 7200, "node 12 in repair", now=1000.0)
    add_silence(str(tmp_path), "loss_spike", 60, now=1000.0)
    (dead, spike) = sorted(silences(str(tmp_path)), key=lambda s: s.kind)
    assert (dead.kind, dead.until, dead.reason) == ("dead_rank", 8200.0, "node 12 in repair")
    add_silence(str(tmp_path), "dead_rank", 0, "done", now=2000.0)
    assert {s.kind: s.until for s in silences(str(tmp_path))} == {"dead_rank": 2000.0, "loss_spike": 1060.0}


def test_mstop_silence_adds_lists_and_removes(tmp_path):
    got = mstop("silence", "add", "dead_rank", "--for", "2h", "--reason", "node 12 in repair", tmp_path)
    assert got.returncode == 0 and "dead_rank silenced until" in got.stdout, got.stderr
    listed = mstop("silence", "list", tmp_path)
    assert listed.returncode == 0 and "dead_rank" in listed.stdout and "node 12 in repair" in listed.stdout
    assert mstop("silence", "remove", "dead_rank", tmp_path).returncode == 0
    assert "no silence" in mstop("silence", "list", tmp_path).stdout
    bad = mstop("silence", "add", "dead_rank", "--for", "soon", tmp_path)
    assert bad.returncode == 2 and "soon" in bad.stderr
    bad = mstop("silence", "add", "no_such_kind", "--for", "1h", tmp_path)
    assert bad.returncode == 2 and "no_such_kind" in bad.stderr
