"""Equal figures, however the bytes arrive (issue 30's contract).

A random run (ranks, restarts that resume at an earlier step, NaN and Inf losses, gaps in time, hostile
lines between the rows) is read three ways: whole, each file's chunks parsed on their own (the reading
before read rounds were batched); whole, by ``read_once`` (what ``mstop summary`` does); and followed,
its bytes appended to every file in random pieces and read round by round by the local source (kept
descriptors; a round's chunks of many files parsed together, :class:`mstop.sources.rankfiles.Round`).
``summary --json`` and the monitor's frame (every part of it, charts included) must be equal to the last
digit.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mstop.commands.summary import summarize
from mstop.engine.figures import Options
from mstop.engine.spill import SpillBudget
from mstop.engine.store import Batch, Store
from mstop.formats.parse import NUMERIC
from mstop.sources import Sources, rankfiles, read_once
from mstop.view import build_view
from mstop_writer import COLUMNS
from tests.helpers.rowgen import HEADER, good_row, junk, safe_junk
from tests.helpers.runs import followed

T0 = 1.6e9  # long ago: the files' modification times (now) witness no clock


@st.composite
def rank_files(draw, rank: int) -> tuple[bytes, bytes]:
    """One rank's CSV and events bytes: one or two sessions (the second resumes at an earlier step)."""
    lines, events = [",".join(COLUMNS).encode()], []
    t, step = T0 + draw(st.floats(0, 5)), 0
    for k in range(draw(st.integers(1, 2))):
        session = f"r{rank}s{k}"
        if k:
            step = draw(st.integers(0, step))  # resumed from a checkpoint: these steps run again
        events.append({"time": t, "kind": "start", "session": session, "rank": rank, "world_size": 4,
                       "heartbeat_interval": 30.0})
        for _ in range(draw(st.integers(1, 25))):
            step += 1
            t += draw(st.sampled_from([1.0, 1.0, 1.5, 200.0]))  # now and then a gap
            loss = draw(st.sampled_from(["", "nan", "inf", "2.5", "1.25"]) | st.floats(0, 10).map(repr))
            row = {"time": repr(t), "step": str(step), "loss": loss, "step_time": "1.0", "data_wait": "0.01",
                   "tokens": "4096", "session": session}
            lines.append(",".join(row.get(c, "") for c in COLUMNS).encode())
            if draw(st.integers(0, 24)) == 0:
                lines.append(draw(junk).replace(b"\n", b" ").replace(b"\r", b" "))
        if draw(st.booleans()):
            events.append({"time": t + 0.5, "kind": "end", "session": session})
    csv = b"\n".join(lines) + b"\n"
    return csv, "".join(json.dumps(e) + "\n" for e in events).encode()


@st.composite
def runs(draw) -> dict[str, bytes]:
    out = {}
    for r in range(draw(st.integers(1, 4))):
        csv, ev = draw(rank_files(r))
        out[f"rank{r}.csv"], out[f"rank{r}.events.jsonl"] = csv, ev
    return out


def canonical(v: Any) -> Any:
    """A frame as plain values: NaN and infinities by their repr, arrays as lists."""
    if dataclasses.is_dataclass(v):
        return {f.name: canonical(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, np.ndarray):
        return canonical(v.tolist())
    if isinstance(v, dict):
        return {str(k): canonical(x) for k, x in v.items()}
    if isinstance(v, Sequence) and not isinstance(v, (str, bytes)):  # lists, and the ranks table's rows
        return [canonical(x) for x in v]
    if isinstance(v, (float, np.floating)):
        return repr(float(v)) if not math.isfinite(v) else float(v)
    return v


def figures_of(store: Store, clock: float) -> tuple[str, str]:
    opts = Options(clock=lambda: clock)
    s = summarize(store, "run", opts)
    frame = build_view(store, opts, points=60)
    return json.dumps(s, sort_keys=True, default=str), json.dumps(canonical(frame), sort_keys=True, default=str)


@settings(
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(runs(), st.lists(st.integers(1, 999), max_size=12), st.floats(0, 500))
def test_summary_and_frame_are_equal_read_whole_or_followed_in_pieces(tmp_path_factory, files, cuts, later):
    whole, pieces = tmp_path_factory.mktemp("whole"), tmp_path_factory.mktemp("pieces")
    for name, data in files.items():
        (whole / name).write_bytes(data)
    kept = rankfiles.BATCH_BYTES
    rankfiles.BATCH_BYTES = 0  # every chunk parsed on its own: the reading before rounds were batched
    try:
        a = read_once(str(whole))
    finally:
        rankfiles.BATCH_BYTES = kept
    b = followed(pieces, files, cuts)
    c = read_once(str(whole))  # the files of a run read in one batch
    d = Store(SPILLING)  # every rank's rows but its last one or two out of memory
    Sources([str(whole)], d).read_all()
    spilled = tmp_path_factory.mktemp("spilled")
    e = followed(spilled, files, cuts, SPILLING)
    assert (d.rows, e.rows) == (a.rows, a.rows)
    assert all(x.rows - x.base <= 2 for x in (*d.ranks.values(), *e.ranks.values()))  # the rest was spilled
    clock = max(d.last("time") for d in a.ranks.values() if d.rows) + later if a.rows else T0
    assert (a.rows, a.bad_rows) == (b.rows, b.bad_rows) == (c.rows, c.bad_rows)
    sa, fa = figures_of(a, clock)
    sb, fb = figures_of(b, clock)
    sc, fc = figures_of(c, clock)
    sd, fd = figures_of(d, clock)
    se, fe = figures_of(e, clock)
    assert sa.replace(str(whole), "RUN") == sb.replace(str(pieces), "RUN") == sc.replace(str(whole), "RUN") \
        == sd.replace(str(whole), "RUN") == se.replace(str(spilled), "RUN")
    assert fa.replace(str(whole), "RUN") == fb.replace(str(pieces), "RUN") == fc.replace(str(whole), "RUN") \
        == fd.replace(str(whole), "RUN") == fe.replace(str(spilled), "RUN")


#: every rank's rows but its last one or two out of memory, in chunks of 2 (step 6): read back from the spill file
SPILLING = SpillBudget(keep_rows=0, chunk_rows=2, min_held=1)


@given(st.integers(1, 6).flatmap(lambda r: st.integers(1, 30).flatmap(lambda c: st.lists(
    st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=32).map(float),
                       st.floats(-1e6, 1e6), st.just(math.nan)), min_size=c, max_size=c), min_size=r, max_size=r))))
def test_row_medians_are_numpys_nanmedian_value_for_value(rows):
    """The window's per-rank medians (figures.row_medians) equal numpy.nanmedian(axis=1), NaN and Inf too."""
    import warnings

    from mstop.engine.figures import row_medians

    a = np.array(rows, dtype=np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.nanmedian(a, axis=1)
    assert np.array_equal(row_medians(a), want, equal_nan=True), (a, row_medians(a), want)


def _rows_of(rows) -> tuple:
    return (rows.exact.tobytes(), rows.floats.tobytes(), sorted((k, v.tobytes()) for k, v in rows.extra.items()),
            rows.sessions, [(i, c, repr(v)) for i, c, v in rows.nonfinite], rows.bad)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(good_row(), min_size=1, max_size=12), min_size=2, max_size=6),
       st.none() | st.tuples(st.integers(0, 5), st.integers(0, 12), safe_junk), st.sampled_from([1, 10**9]))
def test_many_files_parsed_in_one_call_are_each_parsed_alone(files, bad, arrow_at):
    """parse_many (a read round's files in one parse, by pyarrow or a column at a time) gives each file the
    rows the careful path gives it alone, to the bit; or None (a bad line among them), and each is then read
    alone."""
    import mstop.formats.parse as parse

    header = HEADER + b"\n"
    if bad is not None:  # one line that may be bad somewhere
        f, at, line = bad
        files[f % len(files)].insert(at, line)
    blobs = [b"".join(line + b"\n" for line in lines) for lines in files]
    alone = []
    careful = parse.ParseTuning(large_min_lines=10**9, plain_min_lines=10**9, arrow_min_lines=10**9)
    for blob in blobs:
        p = parse.CsvParser(careful)
        p.parse(header)
        alone.append(_rows_of(p.parse(blob)))
    p = parse.CsvParser(replace(careful, arrow_min_lines=arrow_at))
    p.parse(header)
    got = parse.parse_many(p, blobs)
    if bad is None:
        assert got is not None  # good rows only: one parse for all of them
    if got is not None:
        assert [_rows_of(r) for r in got] == alone


def _line(b: bytes) -> bytes:
    return b.replace(b"\n", b" ").replace(b"\r", b" ")


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.lists(st.one_of(junk, safe_junk), max_size=2), st.booleans(),
                          st.lists(st.one_of(good_row(), good_row(), safe_junk), max_size=10),
                          st.sampled_from([b"\n", b"\n", b"\r\n"])), min_size=1, max_size=5))
def test_a_first_read_of_many_files_equals_each_file_read_alone(files):
    """A first read of a run's rank files takes each file's header (and the lines before it) on its own and
    parses every file's rows together (mstop.sources.rankfiles.Round): each rank gets the rows, bad rows and
    literal NaN cells that the careful parse of its file alone gives, whatever lies before a header, whatever
    extra column a file has, whatever its line ends."""
    import tempfile

    import mstop.formats.parse as parse

    careful = parse.ParseTuning(large_min_lines=10**9, plain_min_lines=10**9, arrow_min_lines=10**9)
    with tempfile.TemporaryDirectory() as d:
        alone = []
        for r, (before, extra, rows, end) in enumerate(files):
            head = HEADER + (b",gpu_util" if extra else b"")
            body = [_line(x) for x in before] + [head] + [_line(x) + (b",0.5" if extra else b"") for x in rows]
            data = b"".join(x + end for x in body)
            (Path(d) / f"rank{r}.csv").write_bytes(data)
            alone.append(parse.CsvParser(careful).parse(data))
        store = read_once(d)
    ref = Store()  # each file's rows as its careful parse alone gives them, into the store rank by rank
    for r, a in enumerate(alone):
        ref.append(Batch.of(r, a))
    assert (store.bad_rows, store.refused_cells) == (ref.bad_rows, ref.refused_cells)
    for r, a in enumerate(alone):
        want, got = ref.ranks.get(r), store.ranks.get(r)
        if want is None or not want.rows:
            assert got is None or got.rows == 0
            continue
        for name in (*NUMERIC, *a.extra):
            np.testing.assert_array_equal(got.col(name), want.col(name), err_msg=f"rank {r} {name}")
        assert [s.session for s in got.segments] == [s.session for s in want.segments]
        assert [(i, c, repr(v)) for i, c, v in got.nonfinite] == [(i, c, repr(v)) for i, c, v in want.nonfinite]
