"""Property-based tests of the readers: arbitrary bytes and arbitrary JSON never break them.

For rank files: whatever the bytes (NUL, invalid UTF-8, quotes, lone CR, repeated headers, garbage
before the header, fields over the csv module's 128 KiB), fed in one read or in pieces split anywhere,
parsing never raises, both ways agree, and every line is either a row or one counted bad row; the
well-formed lines are exactly the rows. For events files: any JSON value on a line is an event or one
counted bad event, never an exception.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mstop.engine.parse import CsvParser, ParseTuning, parse_events
from tests.helpers.parse_properties_common import CAREFUL, agree, oracle, read  # noqa: F401
from tests.helpers.rowgen import HEADER, good_row, safe_junk


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
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


@settings(max_examples=50, deadline=None)
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


