"""What the screen says, as issue 40 item 13 found it: a header cut mid-word, P's ssh command without the
ssh options the monitor was given, the runs list's space that moves the cursor without saying so."""

from __future__ import annotations

import shlex

from rich.text import Text

from mstop.app.widgets.header import _cut
from mstop.live import MonitorOptions, MonitorSession
from mstop.sources.protocol import Connection


def test_ps_ssh_command_carries_the_monitors_ssh_options(tmp_path):
    """``mstop -F cfg host:/path`` reaches a host its config names: the command P shows must use it too."""
    cfg = tmp_path / "ssh config"
    session = MonitorSession(["node1:/scratch/run 1"], MonitorOptions(
        connection=Connection.of(str(cfg), ["ProxyJump=login1"])))
    words = shlex.split(session.profile_command())
    assert words[:6] == ["ssh", "-F", str(cfg), "-o", "ProxyJump=login1", "node1"]
    assert words[6] == "echo 10 > '/scratch/run 1/profile.request'"


def test_a_cut_ends_at_a_word_not_inside_one():
    said = "RuntimeError: the device stream timed out while waiting for the event"
    from mstop.app.widgets.header import WORD_CUT_FROM

    for n in range(WORD_CUT_FROM, len(said)):
        got = _cut(Text(said), n, False).plain
        assert got.endswith("…") and len(got) <= n
        kept = got[:-1].rstrip()
        assert said.startswith(kept) and (said[len(kept)] == " " or len(kept) < n - 13), (n, got)


def test_the_runs_lists_space_says_it_moves_to_the_next_run():
    from mstop.app.runs import RUNS_KEYS, RunsScreen

    assert "move to the next" in dict(RUNS_KEYS)["space"]
    assert next(b for b in RunsScreen.BINDINGS if getattr(b, "key", None) == "space").description == "mark ↓"


async def _runs_list_at_120(folder) -> tuple[list[str], str]:
    """The runs list of ``folder``'s two runs at 120 columns, once both are read: its lines and its header."""
    from tests.helpers.app_common import screen_lines, settle
    from tests.helpers.runs_common import app_for, table_rows

    app = app_for(folder)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot, lambda: len(table_rows(app)) == 2 and table_rows(app)[0][-5].endswith("ago"))
        lines = screen_lines(app)
    return lines, next(x for x in lines if " status " in x and "started" in x)


async def test_the_runs_list_at_120_columns_keeps_alerts_and_started_whole(tmp_path):
    """At 120 columns a long run name pushed ``alerts`` and ``started`` past the edge (``47 s ag``): the
    name is cut in its middle instead, every column up to the duration on screen."""
    from tests.helpers.runs import write_run

    long = "qwen2-7b-pretrain-lr3e-4-bs64-seq4096-recompute-full-node32"
    write_run(tmp_path / long, status="failed", note="", world=1)
    write_run(tmp_path / "base", status="finished", note="", world=1)
    lines, head = await _runs_list_at_120(tmp_path)
    assert "alerts" in head and "started" in head and "duration" in head, head
    row = next(x for x in lines if "qwen2-7b" in x)
    assert row.split()[0].startswith("qwen2-7b") and "…" in row.split()[0] and row.split()[0].endswith("32")
    assert row.rstrip().endswith("ago  2 m 00 s"), row  # the name's start and end, then every column whole


async def test_the_runs_list_at_120_columns_keeps_the_duration_beside_past_incidents(tmp_path):
    """With ``0 +2 past`` in the alerts column the duration was still past the edge at 120 columns (the name
    at its least): where names are cut the loss column takes its short label, and every column up to the
    duration is whole."""
    from mstop_writer import MetricsWriter
    from tests.helpers.runs import write_run

    long = "qwen2-7b-pretrain-lr3e-4-bs64-seq4096-recompute-full-node32"
    now = [1_800_000_000.0]
    w = MetricsWriter(tmp_path / long, rank=0, world_size=1, run_name=long, tokens_per_step=4096,
                      total_steps=600, heartbeat_interval=3600, memory_interval=3600, clock=lambda: now[0])
    for s in range(1, 501):  # two spells of input starvation, both over: two past incidents
        now[0] += 1.0
        starved = 50 <= s < 150 or 250 <= s < 350
        w.log(s, loss=4.0 * s ** -0.3, lr=1e-3, step_time=1.0, data_wait=0.9 if starved else 0.01)
    w.close(clean=True)
    write_run(tmp_path / "base", status="finished", note="", world=1)
    lines, head = await _runs_list_at_120(tmp_path)
    assert "loss (EMA)" in head and head.rstrip().endswith("duration"), head
    row = next(x for x in lines if "qwen2-7b" in x)
    assert "0 +2 past" in row and row.rstrip().endswith("ago  8 m 20 s"), row


async def test_the_alerts_dialog_follows_the_run_while_open(tmp_path):
    """Item 13: the ``a`` dialog was a snapshot of the moment it opened and disagreed with the header's badge
    behind it. Open on a healthy run, a NaN loss arrives: the dialog lists it, as the header counts it."""
    import time as _time

    from mstop.app import MonitorApp
    from mstop.app.screens import AlertsScreen
    from mstop.app.widgets import Header
    from tests.helpers.app_common import settle, text
    from tests.helpers.runs import start, steps, write_events, write_rank

    run = tmp_path / "run"
    now = _time.time()
    write_events(run, 0, [start("s1", now - 40, world_size=1)])
    write_rank(run, 0, steps(1, 30, t0=now - 31, dt=1.0, loss=1.0, step_time=1.0))
    app = MonitorApp(str(run), poll=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("a")
        await settle(pilot, lambda: isinstance(app.screen, AlertsScreen))
        dialog = app.screen
        assert "0 active alerts" in str(dialog.query_one("#alert-text").content)
        write_rank(run, 0, steps(31, 32, t0=_time.time() - 2, loss="nan", step_time=1.0))
        await settle(pilot, lambda: "nan_loss" in str(dialog.query_one("#alert-text").content))
        said = str(dialog.query_one("#alert-text").content)
        assert said.startswith("1 active alert") or "active alerts" in said
        assert "ALERTS" in text(app.monitor.query_one(Header))
