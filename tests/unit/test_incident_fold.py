"""Issue 57 step 3: the per-rank rules' incidents are folded (each scan reads the rows that arrived since the
last one, mstop.engine.ruletable.folded). Scanned after every read round of a run followed in random pieces,
they equal one scan of the whole run read at once: the same incidents, steps, times, worst values and words,
whatever the rows (stretches of starving input and of memory under the critical headroom, short and long gaps
between them, restarts that resume at an earlier step, a session of one row)."""

from __future__ import annotations

import json
from dataclasses import asdict

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mstop.engine.incidents import scan
from mstop.engine.rules import Rules
from mstop.engine.store import Store
from mstop.sources import read_once
from mstop.sources.local import LocalSource
from mstop_writer import COLUMNS
from tests.helpers.runs import followed

T0 = 1.6e9


@st.composite
def rank_files(draw, rank: int) -> tuple[bytes, bytes]:
    """One rank's rows: runs of rows that wait on input or not, memory near its total or not."""
    lines, events = [",".join(COLUMNS).encode()], []
    t, step = T0, 0
    for k in range(draw(st.integers(1, 3))):
        session = f"r{rank}s{k}"
        if k:
            step = draw(st.integers(0, step))  # resumed from a checkpoint: these steps run again
        events.append({"time": t, "kind": "start", "session": session, "rank": rank, "world_size": 2})
        for length, wait, peak in draw(st.lists(st.tuples(st.integers(1, 45), st.sampled_from([0.0, 0.01, 0.5, 0.9]),
                                                          st.sampled_from(["", "50.0", "97.0", "99.0", "nan"])),
                                                max_size=6)):
            for _ in range(length):
                step += 1
                t += 1.0
                row = {"time": repr(t), "step": str(step), "loss": "1.0", "step_time": "1.0",
                       "data_wait": repr(wait), "mem_peak": peak, "mem_total": "100.0" if peak else "",
                       "session": session}
                lines.append(",".join(row.get(c, "") for c in COLUMNS).encode())
    return b"\n".join(lines) + b"\n", "".join(json.dumps(e) + "\n" for e in events).encode()


@st.composite
def runs(draw) -> dict[str, bytes]:
    out = {}
    for r in range(draw(st.integers(1, 2))):
        out[f"rank{r}.csv"], out[f"rank{r}.events.jsonl"] = draw(rank_files(r))
    return out


def seen(incidents) -> list[str]:
    return [json.dumps(asdict(i), sort_keys=True, default=repr) for i in incidents]


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(runs(), st.lists(st.integers(1, 999), max_size=15))
@example({"rank0.csv": b"", "rank0.events.jsonl": b""}, [])
def test_incidents_folded_round_by_round_equal_one_scan_of_the_whole(tmp_path_factory, files, cuts):
    whole, pieces = tmp_path_factory.mktemp("whole"), tmp_path_factory.mktemp("pieces")
    for name, data in files.items():
        (whole / name).write_bytes(data)
    rules = Rules()
    scans: list = []
    followed(pieces, files, cuts, each=lambda store: scans.append(scan(store.snapshot(), rules)))  # each folds
    folded = scans[-1]
    assert seen(folded) == seen(scan(read_once(str(whole)).snapshot(), rules))


def test_a_sessions_first_row_that_becomes_its_compilation_step_is_read_again(tmp_path):
    """A session's one row is a steady row (nothing else to show) until its second comes: then it is the
    compilation step, which no rule reads. Its incident, found while it was alone, is gone."""
    header = ",".join(COLUMNS)

    def row(step: int) -> str:
        cells = {"time": repr(T0 + step), "step": str(step), "loss": "1.0", "step_time": "1.0", "mem_peak": "99.0",
                 "mem_total": "100.0", "session": "s"}
        return ",".join(cells.get(c, "") for c in COLUMNS)

    events = json.dumps({"time": T0, "kind": "start", "session": "s", "rank": 0, "world_size": 1}) + "\n"
    (tmp_path / "rank0.events.jsonl").write_text(events)
    (tmp_path / "rank0.csv").write_text(header + "\n" + row(1) + "\n")
    store = Store()
    src = LocalSource(str(tmp_path), store)
    src.keep_open()
    src.read_all()
    alone = scan(store.snapshot(), Rules())
    assert [(i.kind, i.first_step) for i in alone] == [("oom_risk", 1)]
    with open(tmp_path / "rank0.csv", "a") as f:
        f.write("".join(row(s) + "\n" for s in range(2, 6)))
    src.round(src.files)
    src.stop()
    folded = scan(store.snapshot(), Rules())
    assert [(i.kind, i.first_step, i.last_step) for i in folded] == [("oom_risk", 2, 5)]
    assert seen(folded) == seen(scan(read_once(str(tmp_path)).snapshot(), Rules()))
