"""Issue 60, item 2: the wait-for graph. Each rank's log names the peer its collective timed out waiting for
(CANN's EI0002); the rank every wait leads to is the one the job hangs on. Published lines and their sources:
tests/data/hccl-logs/SOURCES.md."""

from __future__ import annotations

import itertools
import json
import shutil
import time

from hypothesis import example, given
from hypothesis import strategies as st

from mstop.engine.diagnosis import diagnose, wait_sink
from mstop.formats.waits import Wait, waited_peer
from mstop.sources import read_once
from tests.helpers.cli import mstop
from tests.helpers.common import ROOT
from tests.helpers.runs import written_at

DATA = ROOT / "tests" / "data" / "hccl-logs"

#: CANN's EI0002 line as published (vllm-project/vllm-ascend#3413), its numbers and group the test's
EI0002 = ("EI0002: [PID: 2969] 2025-10-11-15:09:34.713.335 The wait execution of the Notify register times out. "
          "Reason: The Notify register has not received the Notify record from remote rank: [{peer}]. base "
          "information: [streamID:[109], taskID[38], taskType[Notify Wait], tag[AllReduce_{group}], AlgType(level "
          "0-1-2):[ring-NHR-NHR].]. task information: [notify id:[0x0000000000000213], stage:[0], remote rank:"
          "[{peer}]]. group information: [group:[{group}], user define information[Unspecified], rankSize[{size}], "
          "rankId[{me} {peer}]]")


def test_eight_ranks_logs_lead_to_the_rank_that_stopped(tmp_path):
    """A ring's AllReduce timed out on seven of eight ranks, each naming its predecessor; rank 5 named nobody:
    the waits lead, through each other, to rank 5. Said by the diagnosis, summary's first line and its JSON."""
    logs = shutil.copytree(DATA, tmp_path / "logs")
    written_at(logs, time.mktime(time.strptime("2025-10-11 15:09:30", "%Y-%m-%d %H:%M:%S")))  # before the timeouts
    (v,) = [v for v in diagnose(read_once(str(logs)).snapshot()) if v.kind == "hang"]
    assert v.ranks == [5] and v.words == ("ranks 0-4, 6-7 wait, directly or through each other, for rank 5; "
                                          "rank 5 waits for nobody")
    assert v.evidence["sink"] == 5 and v.evidence["waiting_ranks"] == 7
    assert {w["peer"]: w["ranks"] for w in v.evidence["waits_for"]} == {(r - 1) % 8: [r] for r in range(8) if r != 5}
    text = mstop("summary", logs)
    assert text.stdout.splitlines()[0].split(None, 1) == ["diagnosis", v.words]
    got = json.loads(mstop("summary", logs, "--json").stdout)["diagnosis"]
    assert (got[0]["kind"], got[0]["ranks"], got[0]["evidence"]["waits_for"]) == ("hang", [5], v.evidence["waits_for"])
    assert mstop("summary", logs, "--fail-on", "hang").returncode == 1
    root = next(d for d in got if d["kind"] == "root_cause")  # the rank they waited for wrote no error
    assert (root["ranks"], root["evidence"]["cascades"]) == ([5], {"collective_timeout": 7}), root
    assert root["words"] == "rank 5 wrote no error; 7 ranks then failed waiting for it (7 collective timeout)"
    assert json.loads(mstop("summary", logs, "--json").stdout)["culprit"]["rank"] == 5  # as the ending says


def test_the_root_is_the_first_error_that_is_no_cascade_and_the_timeouts_are_counted(tmp_path):
    """Rank 2 runs out of device memory; 30 s later ranks 0, 1 and 3 time out in their AllReduce (their logs
    naming rank 2): the root is rank 2's error, the other three its cascades."""
    from tests.helpers.runs import start, steps, write_events, write_rank

    run = tmp_path / "run"
    for r in range(4):
        said = ("RuntimeError: Allocate memory failed. EL0004: Failed to allocate memory" if r == 2 else
                "RuntimeError: Sync stream failed (EI0002: The wait execution of the Notify register times out)")
        write_events(run, r, [start("s1", t=999.0, world_size=4),
                              {"time": 1100.0 if r == 2 else 1130.0 + r, "kind": "abort", "session": "s1",
                               "step": 60, "error": said}])
        write_rank(run, r, steps(1, 60, t0=1000.0, dt=1.0, step_time=1.0, loss=1.0))
    (v,) = [v for v in diagnose(read_once(str(run)).snapshot()) if v.kind == "root_cause"]
    assert (v.ranks, v.evidence["error_kind"], v.evidence["cascades"], v.evidence["by"]) == (
        [2], "out_of_memory", {"collective_timeout": 3}, "time")
    assert v.words == ("rank 2: RuntimeError: Allocate memory failed. EL0004: Failed to allocate memory at step 60 "
                       "(out of memory); 3 ranks then timed out waiting for it")


def test_every_file_of_the_hang_is_in_its_sources_table():
    assert "vllm-ascend issue #3413" in (DATA / "SOURCES.md").read_text() and len(list(DATA.glob("worker_*.log"))) == 8


@given(st.integers(0, 10**7 - 1), st.sampled_from(["hccl_world_group", "group_name_1654", "3-6-9"]),
       st.integers(1, 10**6), st.integers(0, 10**6))
def test_a_timeout_line_gives_its_peer_and_group(peer, group, size, me):
    assert waited_peer(EI0002.format(peer=peer, group=group, size=size, me=me)) == Wait(peer, group, size)


@given(st.text(max_size=300))
@example("remote rank: [3] connected")  # a rank named in a line that is no timeout
@example(EI0002.format(peer="unknown", group="g", size=8, me=1))  # CANN could not tell the peer
def test_any_line_is_a_wait_or_nothing(line):
    got = waited_peer(line)
    assert got is None or (isinstance(got.peer, int) and 0 <= got.peer < 10**7)
    if not any(w in line.lower() for w in ("remote rank", "remoterank", "check root rank")):
        assert got is None


ROOT_LINE = ("RuntimeError: Communicator of group {group} inited: failed. Result: Init communicator for group {group} "
             "exception info: Failed to fetch the unique id of the collective lib from the meta server node. Maybe "
             "the root rank process of this group has exited or has not executed to QueryUniqueID step. Please "
             "check root rank: {root}'s log.")


@given(st.integers(0, 10**7 - 1), st.sampled_from(["hccl_world_group", "3-6-9", "dp_group"]))
def test_mindsporess_check_root_rank_line_is_a_wait_for_that_job_rank(root, group):
    """MindSpore names the group's root by its job rank (``group_ranks().at(0)``), whatever the group."""
    assert waited_peer(ROOT_LINE.format(group=group, root=root)) == Wait(root)


def test_ranks_that_could_not_form_their_communicator_lead_to_its_root_rank(tmp_path):
    """Ranks 1-3 raised, each naming root rank 0 (MindSpore's own line, tests/data/ms-root-rank/SOURCES.md):
    the hang names rank 0, the root cause is rank 0 with 3 cascades."""
    logs = shutil.copytree(ROOT / "tests" / "data" / "ms-root-rank", tmp_path / "logs")
    got = json.loads(mstop("summary", logs, "--json").stdout)["diagnosis"]
    hang = next(d for d in got if d["kind"] == "hang")
    assert (hang["ranks"], hang["words"]) == ([0], "ranks 1-3 wait for rank 0; rank 0 waits for nobody"), hang
    root = next(d for d in got if d["kind"] == "root_cause")
    assert root["ranks"] == [0] and root["evidence"]["cascades"] == {"collective_timeout": 3}, root


def test_a_peer_numbered_in_a_smaller_group_is_no_rank_of_the_job():
    """The remote rank is a number in the collective's group: the job's rank only in the world group."""
    w = waited_peer(EI0002.format(peer=24, group="group_name_1654", size=32, me=25))
    assert (w.peer_in(128), w.peer_in(32), Wait(3).peer_in(8), Wait(3, "hccl_world_group", 8).peer_in(64)) == (
        None, 24, 3, 3)


def _reaches(edges: dict[int, set[int]], a: int, b: int) -> bool:
    seen, todo = {a}, [a]
    while todo:
        for p in edges.get(todo.pop(), ()):
            if p == b:
                return True
            if p not in seen:
                seen.add(p)
                todo.append(p)
    return False


@given(st.dictionaries(st.integers(0, 12), st.sets(st.integers(0, 12), min_size=1, max_size=3), max_size=12))
@example({0: {1}, 1: {0}})  # a round: each waits for the other
@example({0: {5}, 1: {6}})  # two ranks that wait for nobody
@example({0: {1, 2}})  # one rank waiting for two: two to blame, not one
def test_the_sink_is_the_one_rank_every_wait_leads_to_or_none_is_said(edges):
    """The one rank named that waits for nobody, every waiting rank reaching it through the waits; else
    none, and why (a round, several ranks waiting for nobody, a round of its own beside the sink)."""
    edges = {r: ps - {r} for r, ps in edges.items() if ps - {r}}
    sink, why = wait_sink(edges)
    nodes = set(edges) | set(itertools.chain.from_iterable(edges.values()))
    ends = [n for n in nodes if n not in edges]  # ranks named that wait for nobody
    truth = ends if len(ends) == 1 and all(_reaches(edges, r, ends[0]) for r in edges) else []
    if sink is None:
        assert truth == [] and why
    else:
        assert truth == [sink] and why == ""


async def test_the_monitor_says_the_hang_first_and_t_shows_the_waits(tmp_path):
    """Issue 60 item 5: the monitor's first line says HANG; the footer offers t while the verdict needs it, and
    the stacks view begins with the hang and the root cause, the waits in the order they lead from rank 5."""
    from mstop.app import MonitorApp
    from mstop.app.screens import StacksScreen
    from tests.helpers.app_common import screen_lines, settle

    logs = shutil.copytree(DATA, tmp_path / "logs")
    written_at(logs, time.mktime(time.strptime("2025-10-11 15:09:30", "%Y-%m-%d %H:%M:%S")))
    app = MonitorApp(str(logs), follow=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, lambda: "HANG" in screen_lines(app)[0])
        lines = screen_lines(app)
        assert lines[0].split()[:6] == ["HANG", "ranks", "0-4,", "6-7", "wait,", "directly"], lines[0]
        await settle(pilot, lambda: " t stacks " in screen_lines(app)[-1] + " ")  # the footer offers t
        await pilot.press("t")
        await settle(pilot, lambda: isinstance(app.screen, StacksScreen))
        shown = "\n".join(screen_lines(app))
        order = [shown.find(x) for x in ("hang: ranks 0-4, 6-7 wait", "rank 6 waited for rank 5",
                                          "rank 7 waited for rank 6", "root cause: rank 5 wrote no error")]
        assert -1 not in order and order == sorted(order), (order, shown)


def _writer_run_with_logs(tmp_path):
    """Eight ranks written by the writer, their rows stopped at step 10 (in 2025), their start events naming
    their msrun worker logs (the HCCL ones): a writer's run that hung."""
    from tests.helpers.runs import steps, write_with_writer

    logs = shutil.copytree(DATA, tmp_path / "msrun_log")
    run = tmp_path / "run"
    for r in range(8):
        write_with_writer(run, r, 8, steps(1, 10, t0=1_760_000_000.0, loss=2.5, step_time=1.0))
        path = run / f"rank{r}.events.jsonl"
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        for e in lines:
            if e["kind"] == "start":
                e["logs"] = [str(logs / f"worker_{r}.log")]  # as the writer names the file its output goes to
        path.write_text("".join(json.dumps(e) + "\n" for e in lines))
    written_at(run, 1_760_000_011.0)  # the rank files written when their rows say: silent since
    return run


def test_a_writer_runs_ranks_own_logs_give_the_hang_its_waits(tmp_path):
    """A writer's run whose ranks' msrun worker logs, named in their start events, hold CANN's timeouts:
    summary reads each rank's own log for the peer it waited for, and the hang names rank 5 as for the job
    read from its logs; the monitor does the same on a thread of its own."""
    from mstop.app import MonitorApp
    from tests.helpers.app_common import screen_lines, settle

    run = _writer_run_with_logs(tmp_path)
    got = json.loads(mstop("summary", run, "--json").stdout)
    assert got["status"] in ("stalled", "dead"), got["status"]
    (hang,) = [d for d in got["diagnosis"] if d["kind"] == "hang"]
    assert hang["ranks"] == [5] and hang["words"].startswith("ranks 0-4, 6-7 wait, directly or through each other, "
                                                             "for rank 5"), hang
    app = MonitorApp(str(run), follow=False)
    async_test = __import__("asyncio").run

    async def look() -> list[str]:
        async with app.run_test(size=(140, 40)) as pilot:
            await settle(pilot, lambda: "HANG" in screen_lines(app)[0] or (app.monitor.redraw() and False))
            return screen_lines(app)

    lines = async_test(look())
    assert lines[0].split()[:4] == ["HANG", "ranks", "0-4,", "6-7"], lines[0]
