"""Issue 26, events with wrong types: a profile event (or a start event's ``profile_steps``) with any field
of any JSON type, ``±Infinity`` and 400-digit numbers included, is read or counted bad by every reader
(``summary``, ``compare``, ``report``, the monitor's frame), never a traceback."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mstop.commands import compare as cmp
from mstop.commands import report, summary
from mstop.engine.figures import Options
from mstop.sources import read_once
from mstop.view.build import build_view
from tests.helpers.hostile_events_common import CASES, HUGE, write
from tests.helpers.runs import start, steps, write_events, write_rank


async def test_the_monitor_shows_a_run_with_hostile_profile_events(tmp_path):
    from mstop.app import MonitorApp
    from tests.helpers.app_common import screen_lines, settle

    run = tmp_path / "run"
    write_events(run, 0, [start("s1", t=999.0, world_size=1), *(e for e in CASES.values() if e["kind"] != "start")])
    write_rank(run, 0, steps(1, 40, t0=1000.0, dt=1.0, step_time=1.0, tokens=100, loss=2.0))
    app = MonitorApp(str(run), follow=False, clock=lambda: 1041.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = "\n".join(screen_lines(app))
        assert "step 40" in screen and "5 bad events" in screen


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from([HUGE, -HUGE, 2**63, 10**20])
    | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


PARTS = ("compute", "comm_not_overlapped", "overlapped", "idle", "stage", "bubble")


shares = st.one_of(json_values, st.dictionaries(st.sampled_from(PARTS), json_values, max_size=6))


profile_event = st.fixed_dictionaries(
    {"time": st.just(1050.0), "kind": st.sampled_from(["profile", "profile_request"]), "session": st.just("s1")},
    optional={"step": json_values, "first_step": json_values, "last_step": json_values, "steps": json_values,
              "shares": shares, "top_ops": st.one_of(json_values, st.lists(st.fixed_dictionaries(
                  {}, optional={"name": json_values, "seconds": json_values}), max_size=3)),
              "steps_profiled": json_values, "path": json_values, "source": json_values, "error": json_values})


start_event = st.fixed_dictionaries({"time": st.just(999.0), "kind": st.just("start"), "session": st.just("s1"),
                                     "world_size": st.just(1)}, optional={"profile_steps": json_values})


def every_reader(run: Path) -> None:
    """What summary, compare, report and the monitor compute of ``run`` (no PNGs: matplotlib is slow)."""
    opts = Options(clock=lambda: 1100.0)
    store = read_once(str(run))
    s = summary.summarize(store, str(run), opts)
    json.dumps(s, allow_nan=False)
    summary.render_table(s, store, opts)
    runs = [cmp.Run("a", [cmp.Member(str(run), store)]), cmp.Run("b", [cmp.Member(str(run), store)])]
    c = cmp.compare(runs)
    for form in ("table", "markdown", "csv", "json"):
        out = cmp.render(c, form)
        if form == "json":
            json.dumps(out, allow_nan=False)
    profiles = [("a", report.figures.latest_profile(store))]
    report.profile_markdown(profiles, False)
    build_view(store, opts)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(profile_event, start_event), min_size=1, max_size=4))
def test_profile_events_of_any_json_type_never_crash_a_reader(events):
    with tempfile.TemporaryDirectory() as d:
        write(Path(d) / "run", events)
        every_reader(Path(d) / "run")
