"""Hypothesis strategies for rank-file rows: good rows, and junk a file may hold (the parser tests and the
equal-figures test draw from the same ones)."""

from __future__ import annotations

from hypothesis import strategies as st

from mstop_writer import COLUMNS

HEADER = ",".join(COLUMNS).encode()
WIDTH = len(COLUMNS)

numbers = st.one_of(
    st.integers(min_value=-(10**6), max_value=10**12).map(str),
    st.floats(allow_nan=True, allow_infinity=True, width=64).map(repr),
    st.sampled_from(["", "nan", "inf", "-inf", "1e400", "-0", " 5", "1_000"]),
)
sessions = st.text(alphabet="0123456789abcdef", min_size=0, max_size=12)


@st.composite
def good_row(draw) -> bytes:
    cells = [draw(st.floats(min_value=0, max_value=2e9).map(repr)), str(draw(st.integers(0, 10**9)))]
    cells += [draw(numbers) for _ in range(WIDTH - 3)]
    cells.append(draw(sessions))
    return ",".join(cells).encode()


junk = st.one_of(
    st.binary(max_size=60),  # NUL, invalid UTF-8, anything
    st.text(alphabet=',"x0123456789.\x00\x1b\u00e9 ', max_size=60).map(lambda t: t.encode("utf-8")),
    st.just(HEADER),  # a repeated header (two processes racing to create the file)
    st.just(b'1,2,"unbalanced'),
    st.just(b"x" * 140_000),  # a field larger than the csv module's default limit
    good_row().map(lambda r: r.replace(b",", b',"', 1)),  # a stray quote in a good-looking row
)
safe_junk = st.one_of(  # bytes that pandas reads (printable ASCII without quotes): its path must agree too
    st.text(alphabet=",x0123456789.-e nafi", max_size=80).map(str.encode),
    st.just(HEADER),
    good_row().map(lambda r: r + b",1"),  # one field too many
    good_row().map(lambda r: r.rsplit(b",", 1)[0]),  # one too few
)


