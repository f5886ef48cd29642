"""Property-based tests of the readers: arbitrary bytes and arbitrary JSON never break them.

For rank files: whatever the bytes (NUL, invalid UTF-8, quotes, lone CR, repeated headers, garbage
before the header, fields over the csv module's 128 KiB), fed in one read or in pieces split anywhere,
parsing never raises, both ways agree, and every line is either a row or one counted bad row; the
well-formed lines are exactly the rows. For events files: any JSON value on a line is an event or one
counted bad event, never an exception.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import mstop.formats.parse as parse
from mstop.formats.parse import CsvParser, ParseTuning, parse_events
from tests.helpers.parse_properties_common import CAREFUL, agree, oracle, read
from tests.helpers.rowgen import HEADER, good_row, junk, safe_junk


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(good_row(), safe_junk), max_size=60), st.lists(st.integers(0, 10**5), max_size=6))
def test_the_column_at_a_time_path_agrees_with_the_careful_path_to_the_bit(body, cuts):
    """Small plain reads (the runs list's tails) go a column at a time; any line it cannot vouch for sends
    the whole read to the careful path, so both give the same rows, bad counts and NaN cells."""
    data = b"".join(line + b"\n" for line in [HEADER, *body])
    steps_want, bad_want = oracle(data)
    plain = read(data, [c % (len(data) + 1) for c in cuts], ParseTuning(large_min_lines=10**9, plain_min_lines=1))
    careful = read(data, [], CAREFUL)
    for steps, _, bad, *_ in (plain, careful):
        assert steps == steps_want and bad == bad_want
    assert plain[1] == careful[1]  # time too: both are Python's float
    agree(plain, careful)


@given(st.lists(good_row(), min_size=1, max_size=30), st.integers(0, 29))
def test_a_repeated_header_in_a_long_file_is_one_bad_row(rows, at):
    lines = [HEADER, *(rows * 80)]  # 2,000+ lines: the one-read path takes pandas
    lines.insert(1 + at, HEADER)
    parser = CsvParser()
    got = parser.parse(b"\n".join(lines) + b"\n")
    assert got.bad == 1 and len(got) == len(rows) * 80
    assert set(got.session_names) == {r.rsplit(b",", 1)[1].decode() for r in rows}  # no phantom "session"


def test_events_that_crashed_the_viewer():
    lines = [
        "[" * 5000 + "]" * 5000,  # deep nesting: RecursionError in json
        '{"time": 1, "kind": "dropped", "rows": "many"}',
        '{"time": 1' + "0" * 400 + ', "kind": "heartbeat"}',  # a time that overflows a float
        '{"time": 1, "kind": "start", "run_name": 123}',
        '{"time": 1, "kind": "eval", "step": 3, "metrics": [1, 2]}',
        '{"time": 1e400, "kind": "heartbeat"}',
        '{"time": 2, "kind": "end", "rows": 5}',
    ]
    ev = parse_events("\n".join(lines).encode() + b"\n")
    assert ev.bad == 6 and [e["kind"] for e in ev.items] == ["end"]


LARGE = pytest.mark.parametrize("reader", [
    pytest.param("arrow", marks=pytest.mark.skipif(parse.arrow_csv() is None, reason="pyarrow cannot be imported")),
    "pandas"])


line_ends = st.sampled_from([b"\n", b"\r\n", b"\r"])


@st.composite
def rank_file(draw) -> bytes:
    before = draw(st.lists(st.binary(max_size=30).filter(lambda b: b"time" not in b), max_size=3))
    body = draw(st.lists(st.one_of(good_row(), junk), max_size=40))
    parts = [*before, HEADER, *body]
    out = b"".join(p.replace(b"\n", b" ").replace(b"\r", b" ") + draw(line_ends) for p in parts)
    if draw(st.booleans()):
        out += draw(st.binary(max_size=20)).replace(b"\n", b"").replace(b"\r", b"")  # a half line at the end
    return out


@LARGE
@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(rank_file(), st.lists(st.integers(min_value=0, max_value=10**6), max_size=8))
def test_any_bytes_in_one_read_or_in_pieces(reader, data, cuts):
    steps_want, bad_want = oracle(data)
    whole = read(data, [], ParseTuning(large_min_lines=1, large_reader=reader))  # the large path where it can
    pieces = read(data, [c % (len(data) + 1) for c in cuts], CAREFUL)  # in pieces: the careful path
    for steps, _, bad, *_ in (whole, pieces):
        assert steps == steps_want and bad == bad_want  # every line a row or one counted bad row
    agree(whole, pieces)
    if reader == "arrow":
        assert whole[1] == pieces[1]  # pyarrow's floats are Python's, time to the bit too


@LARGE
@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(good_row(), safe_junk), max_size=60), st.lists(st.integers(0, 10**5), max_size=6))
# found by this test: a first line one field too long, balanced by a short one (pandas took it as an index)
@example(body=[b"0.0," + b"0," * 17 + b",1", b"0.0" + b",0" * 17], cuts=[])
# found by this test: a cell pyarrow refuses (1_000) sent the chunk to pandas, whose float parser put time one
# unit in the last place off; pandas now reads such a chunk with Python's parser
@example(body=[b"0.0" + b",0" * 16 + b",1_000,", b"90.13551735877991" + b",0" * 17 + b","], cuts=[])
# found by this test: pyarrow refused 1_000 and pandas' round_trip parser read an integer column's empty cell
# as 0 (it made the column uint64); pandas now reads such a chunk as text, each cell by Python's float
@example(body=[b"0.0" + b",0" * 17 + b",", b"0.0" + b",0" * 17 + b",", b"", b"0.0" + b",0" * 17 + b",",
               b"0.0" + b",0" * 10 + b"," + b",0" * 6 + b",", b"", b"0.0" + b",0" * 17 + b",",
               b"0.0" + b",0" * 9 + b",1e400" + b",0" * 6 + b",1_000,"], cuts=[])
def test_bytes_that_pandas_reads_agree_with_the_careful_path(reader, body, cuts):
    data = b"".join(line + b"\n" for line in [HEADER, *body])
    steps_want, bad_want = oracle(data)
    whole = read(data, [], ParseTuning(large_min_lines=1, large_reader=reader))
    pieces = read(data, [c % (len(data) + 1) for c in cuts], CAREFUL)
    for steps, _, bad, *_ in (whole, pieces):
        assert steps == steps_want and bad == bad_want
    agree(whole, pieces)
    if reader == "arrow":
        assert whole[1] == pieces[1]


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20)),
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=10), inner, max_size=5)),
    max_leaves=30,
)


event_like = st.fixed_dictionaries(
    {"time": st.one_of(st.floats(), st.integers(), st.text(max_size=5)), "kind": st.sampled_from(
        ["start", "heartbeat", "checkpoint", "eval", "dropped", "end", "abort", "writer_error", "x"])},
    optional={k: json_values for k in ("step", "rows", "session", "run_name", "host", "metrics", "world_size",
                                       "total_steps", "path", "error", "peak_flops", "heartbeat_interval",
                                       "life_lock", "boot_id")})


@given(st.lists(st.one_of(json_values, event_like), max_size=20))
@example([{"time": 0.0, "kind": "heartbeat"}, {"time": 0.0, "kind": "heartbeat"}])  # found by the thorough profile
def test_any_json_on_event_lines(values):
    from mstop.engine.store import Store

    blob = b"".join(json.dumps(v).encode() + b"\n" for v in values)
    ev = parse_events(blob)
    assert len(ev.items) + ev.bad + ev.folded == len(values)  # every line: an event, bad, or a heartbeat folded
    store = Store()
    store.ingest_events(0, ev.items, ev.bad)  # and the store takes whatever passed
    for e in ev.items:
        assert isinstance(e["time"], float) and math.isfinite(e["time"])
        assert isinstance(e.get("life_lock", False), bool)  # a reader probes a lock only where it says true
