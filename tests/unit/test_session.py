"""The monitor's session without Textual (issue 29): mstop.live.session builds each frame and returns what is
new in it; it never calls back into a screen, so these tests need none."""

from __future__ import annotations

import ast
import os

from mstop.engine.store import Batch
from mstop.live import MonitorOptions
from mstop.live.session import MonitorSession
from tests.helpers.common import ROOT
from tests.helpers.runs import start, steps, write_events, write_rank


def _run(tmp_path, *, nan_at: int | None = None):
    t0 = 1_800_000_000.0
    for r in range(2):
        write_events(tmp_path, r, [start("s1", t0)])
        write_rank(tmp_path, r, steps(1, 40, t0=t0, step_time=1.0, tokens=4096,
                                      loss=lambda s, r=r: "nan" if s == nan_at and r == 1 else 2.0 - s / 100))
    return t0 + 41


def test_a_frame_is_built_with_no_screen_and_says_what_is_new(tmp_path):
    """A NaN loss is a fresh alert in the first frame that sees it, and in no later one (the screen rings once);
    the header's figures are the store's."""
    now = _run(tmp_path, nan_at=30)
    session = MonitorSession([str(tmp_path)], MonitorOptions(clock=lambda: now))
    session.source.read_all()
    session.first_read_done()
    first = session.frame(points=60)
    assert first.view.header.step == 40 and [a.kind for a in first.fresh] == ["nan_loss"]
    assert first.fresh[0].rank == 1 and "step 30" in first.fresh[0].message
    again = session.frame(points=60)
    assert again.fresh == [] and [a.kind for a in again.view.alerts] == ["nan_loss"]
    assert again.view.new_alerts == 1  # not seen yet: the a key marks them
    alerts, past = session.alerts_now()
    assert [a.kind for a in alerts] == ["nan_loss"] and session.frame(points=60).view.new_alerts == 0
    session.source.stop()


def test_while_reading_nothing_is_told_and_a_scan_is_asked_for_once(tmp_path):
    """A part of the files (the first read going on) tells no alert; afterwards the first frame asks the
    screen for a history scan, the next ones do not until the store changes and the interval passed; the
    scan itself runs on whoever calls it and says whether the chart's marks changed."""
    now = _run(tmp_path, nan_at=30)
    session = MonitorSession([str(tmp_path)], MonitorOptions(clock=lambda: now))
    session.source.read_all()
    session.reading = True
    f = session.frame(points=60)
    assert f.fresh == [] and f.scan is None and f.view.header.notes[0].startswith("reading what is written")
    session.first_read_done()
    f = session.frame(points=60)
    assert f.view.header.status != "reading" and f.scan is not None and session.frame(points=60).scan is None
    assert session.scan(f.scan) is True  # the NaN's incident: a new mark
    assert session.scan(f.scan) is False
    assert session.frame(points=60, ranks_view=True).scan is None  # the ranks view draws no loss chart
    session.source.stop()


def test_while_reading_the_header_says_so_and_ages_rows_by_their_own_time(tmp_path):
    """Seen at 10,000 ranks (issue 39): during the first read the header said ``status RUNNING`` and ``last row
    0 s ago`` (every row read had just "arrived") while the newest row was minutes old. While reading, the
    status is ``reading`` and the age is the rows' own; once read, the job's status is told again."""
    import time

    t0 = time.time() - 400  # 40 rows a second apart: the last row is about 360 s old
    for r in range(2):
        write_events(tmp_path, r, [start("s1", t0)])
        write_rank(tmp_path, r, steps(1, 40, t0=t0, step_time=1.0, tokens=4096))
    for f in tmp_path.iterdir():  # written when their rows say (no clock is off)
        os.utime(f, (t0 + 40, t0 + 40))
    session = MonitorSession([str(tmp_path)])  # the real clock: ages by arrival while following
    session.reading = True
    session.source.read_all()
    v = session.frame(points=60).view
    assert v.header.status == "reading" and v.header.step == 40
    assert 300 < v.header.since_last_row < 500, v.header.since_last_row
    assert len(v.ranks) == 0 and v.throughput.tokens_per_s is None  # a part of the files: the header alone
    session.first_read_done()
    v = session.frame(points=60).view
    assert v.header.status == "stalled" and 300 < v.header.since_last_row < 500
    assert len(v.ranks) == 2 and v.throughput.tokens_per_s == 4096.0
    session.source.stop()


def test_the_baseline_is_read_and_used_or_refused_with_a_reason(tmp_path):
    now = _run(tmp_path / "a")
    _run(tmp_path / "b")
    session = MonitorSession([str(tmp_path / "a")], MonitorOptions(clock=lambda: now))
    session.source.read_all()
    session.first_read_done()
    assert session.use_baseline(str(tmp_path / "b"), session.read_baseline(str(tmp_path / "b"))) is None
    assert session.frame(points=60).view.baseline is not None
    why = session.use_baseline("nohost-x:/nowhere", "cannot connect")
    assert why == "cannot connect" and session.baseline_store is None
    session.source.stop()


def test_the_session_imports_no_screen_code():
    tree = ast.parse((ROOT / "mstop" / "live" / "session.py").read_text())
    names = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module} | \
        {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not any(m.split(".")[0] in ("textual", "rich", "app") for m in names), names


def test_a_frame_while_reading_says_how_far_the_read_came_and_freezes_no_rank(tmp_path):
    """The header while the first read goes on: the run's account of itself (its start event), the ranks and
    rows read, the step reached and the newest row's age by its own time; and no snapshot is taken (at 10,000
    ranks freezing every rank at every reading frame took a third of the read)."""
    t0 = 1_800_000_000.0
    for r in range(3):
        write_events(tmp_path, r, [start("s1", t0, run_name="exp7", world_size=3, total_steps=500)])
        write_rank(tmp_path, r, steps(1, 20 + r, t0=t0, step_time=1.0))
    session = MonitorSession([str(tmp_path)], MonitorOptions(clock=lambda: t0 + 100))
    session.source.read_all()
    session.reading = True
    taken = session.store.change_log
    h = session.frame(points=60).view.header
    assert (h.status, h.run_name, h.world_size, h.total_steps, h.ranks_seen, h.step) == \
        ("reading", "exp7", 3, 500, 3, 22)
    assert h.since_last_row == 100 - 22
    assert h.notes == [f"reading what is written so far: {20 + 21 + 22:,} rows (q quits)"]
    assert session.store.change_log is taken  # no snapshot
    session.reading = False
    assert session.frame(points=60).view.header.status != "reading" and session.store.change_log is not taken
    session.source.stop()


def test_a_frame_after_a_read_round_makes_no_record_of_the_ranks_that_only_got_rows(tmp_path, monkeypatch):
    """Issue 39 step 4's house test: after a read round (a row of every rank, as while following) a frame reads
    the ranks as columns (folds, the answers' arrays, the table), not rank records: the snapshot holds each
    rank that only got rows as what it took of it, and a frame of either view makes the record of no more
    ranks than it names (at 1,024 ranks a record a rank was most of a frame). The goodput ledger, read at
    every frame, brings such ranks up to date from their ledgers' states and the folds, in arrays
    (mstop.engine.goodput.Parts): it makes none."""
    import traceback

    from mstop.engine.store import frozen as store_mod
    from mstop.formats.parse import CsvParser, parse_many
    from mstop_writer import COLUMNS

    t0, ranks = 1_800_000_000.0, 300
    for r in range(ranks):
        write_events(tmp_path, r, [start("s1", t0, host=f"node{r // 8}")])
        write_rank(tmp_path, r, steps(1, 30, t0=t0, step_time=1.0, tokens=4096))
    session = MonitorSession([str(tmp_path)], MonitorOptions(clock=lambda: t0 + 40))
    session.source.read_all()
    session.first_read_done()
    session.frame(points=60, ranks_view=True)
    parser = CsvParser()
    parser.parse((",".join(COLUMNS) + "\n").encode())
    made: list[bool] = []  # a rank record made (at the snapshot or when read): by the goodput ledger or not
    real = store_mod._Grown.record

    def record(self):
        made.append(any(f.filename.endswith("goodput.py") for f in traceback.extract_stack()))
        return real(self)

    def frozen_after(self, prev):
        made.append(False)
        return real_frozen(self, prev)

    real_frozen = store_mod.RankData.frozen_after
    monkeypatch.setattr(store_mod._Grown, "record", record)
    monkeypatch.setattr(store_mod.RankData, "frozen_after", frozen_after)  # a rank frozen at the snapshot
    for step, ranks_view in ((31, True), (32, False), (33, True)):
        lines = [(",".join("" if (v := row.get(c)) is None else str(v) for c in COLUMNS) + "\n").encode()
                 for row in steps(step, step, t0=t0, step_time=1.0, tokens=4096)]
        session.store.append(Batch.round(list(enumerate(parse_many(parser, lines * ranks)))))
        view = session.frame(points=60, ranks_view=ranks_view).view
        assert view.header.step == step and view.header.ranks_seen == ranks
    assert made.count(False) <= 12, f"3 frames made {made.count(False)} rank records"
    assert made.count(True) == 0  # the ledger read at each of these frames
    session.source.stop()


