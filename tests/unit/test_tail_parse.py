"""FileTail and the parsers on real files: splits, bad bytes, truncation, replacement."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mstop.formats.parse as parse
import mstop.sources.files as tail
from mstop.formats.parse import CsvParser, ParseTuning, parse_events
from mstop.sources.files import FileTail
from mstop_writer import COLUMNS

HEADER = ",".join(COLUMNS)


def row(step: int, loss: str = "", session: str = "s1", t: float | None = None) -> str:
    cells = [""] * len(COLUMNS)
    cells[0] = repr(1000.0 + step if t is None else t)
    cells[1] = str(step)
    cells[3] = loss
    cells[6] = "0.5"
    cells[-1] = session
    return ",".join(cells)


GOOD = [row(i, loss=str(1.0 / i), session="0123") for i in range(1, 30)]  # a session id that looks numeric
MESSY = (
    "\ufeff" + HEADER + "\r\n"
    + row(1, "2.5") + "\r\n"
    + "not,a,row\n"
    + row(2, "nan") + "\n"
    + "\x00\x00garbage\x00\n"
    + row(3, "abc") + "\n"  # non-numeric loss: a missing value, the row is kept
    + row(4, "-inf") + "\n"
    + ",".join(["x"] * len(COLUMNS)) + "\n"  # time and step not numbers: bad
    + row(5, "1e-3") + ",\n"  # an extra field: bad
    + "\n"  # an empty line: bad
    + "\xff\xfe bad utf8 " + "\n"
    + row(6, '"1.5"') + "\n"
).encode("utf-8", "surrogateescape").replace(b"\xc3\xbf\xc3\xbe", b"\xff\xfe")


def parse_in_pieces(data: bytes, cuts: list[int], path) -> tuple[list, int, list, list]:
    """Append ``data`` to a file in pieces, reading after each; return steps, bad count, sessions, nonfinite."""
    f = FileTail(str(path))
    p = CsvParser()
    steps, sessions, nonfinite, bad = [], [], [], 0
    path.write_bytes(b"")
    pos = 0
    for cut in sorted(set(cuts)) + [len(data)]:
        with open(path, "ab") as fh:
            fh.write(data[pos:cut])
        pos = max(pos, cut)
        chunk = f.read()
        rows = p.parse(chunk.blob)
        bad += rows.bad + chunk.overlong
        base = len(steps)
        steps += rows.columns["step"].tolist()
        sessions += rows.sessions
        nonfinite += [(base + i, c, str(v)) for i, c, v in rows.nonfinite]
    return steps, bad, sessions, nonfinite


@given(st.lists(st.integers(min_value=0, max_value=len(MESSY)), max_size=12))
def test_rows_do_not_depend_on_how_bytes_were_split(tmp_path_factory, cuts):
    path = tmp_path_factory.mktemp("split") / "rank0.csv"
    whole = parse_in_pieces(MESSY, [], path)
    assert parse_in_pieces(MESSY, cuts, path) == whole
    steps, bad, _, nonfinite = whole
    assert steps == [1.0, 2.0, 3.0, 4.0, 6.0]
    assert bad == 6  # "not,a,row", NUL garbage, x-row, extra field, empty line, bad UTF-8
    assert nonfinite == [(1, "loss", "nan"), (3, "loss", "-inf")]


@pytest.mark.parametrize("reader", ["arrow", "pandas", "arrow-refused"])
def test_pandas_path_equals_csv_path(monkeypatch, reader):
    """Both large-read parsers give the careful path's rows; "arrow-refused": a cell pyarrow cannot read
    as a number (Python's float reads ``1_0`` as 10) sends the chunk to pandas, which reads it cell by cell."""
    if reader.startswith("arrow") and parse.arrow_csv() is None:
        pytest.skip("pyarrow cannot be imported here")
    odd = [row(9, "1_0").encode()] if reader == "arrow-refused" else []
    lines = [HEADER.encode()] + [r.encode() for r in GOOD] * 100 + [b"1,2", row(7, "inf").encode(),
                                                                     row(8, "nan").encode(), b"x" * 10] + odd
    results = []
    for threshold in (10**9, 1):
        r = CsvParser(ParseTuning(large_min_lines=threshold, large_reader=reader.split("-")[0])).parse(
            b"\n".join(lines) + b"\n")
        results.append(r)
    a, b = results
    assert a.bad == b.bad == 2 and a.sessions == b.sessions and len(a) == 29 * 100 + 2 + len(odd)
    assert a.sessions[0] == "0123"
    def shown(r):
        return [(i, c, str(v)) for i, c, v in r.nonfinite]

    assert shown(a) == shown(b) == [(2900, "loss", "inf"), (2901, "loss", "nan")]
    for name in a.columns:
        if name == "time":  # float64 in the store: pandas may differ by one unit in the last place
            np.testing.assert_allclose(a.columns[name], b.columns[name], rtol=1e-15, atol=0)
        elif name == "step":
            np.testing.assert_array_equal(a.columns[name], b.columns[name])
        else:  # float32 in the store
            np.testing.assert_array_equal(a.columns[name].astype(np.float32), b.columns[name].astype(np.float32))


def test_half_line_waits_for_its_newline(tmp_path):
    path = tmp_path / "rank0.csv"
    path.write_text(HEADER + "\n" + row(1) + "\n" + row(2)[:10])
    f = FileTail(str(path))
    assert len(f.read().lines) == 2 and f.pending == 10
    with open(path, "a") as fh:
        fh.write(row(2)[10:] + "\n")
    assert [ln.decode() for ln in f.read().lines] == [row(2)]


def test_megabyte_line_is_dropped_without_holding_it(tmp_path, monkeypatch):
    monkeypatch.setattr(tail, "MAX_LINE", 1000)
    path = tmp_path / "rank0.csv"
    path.write_text(HEADER + "\n" + "9" * 1500)
    f = FileTail(str(path))
    c = f.read()
    assert len(c.lines) == 1 and c.overlong == 1 and f.pending == 0
    with open(path, "a") as fh:
        fh.write("9" * 1500 + "\n" + row(1) + "\n")
    c = f.read()
    assert [ln.decode() for ln in c.lines] == [row(1)] and c.overlong == 0


@pytest.mark.parametrize("keep", [False, True], ids=["opened-each-read", "kept-open"])
def test_truncation_reads_again_from_start(tmp_path, keep):
    path = tmp_path / "rank0.csv"
    path.write_text(HEADER + "\n" + "\n".join(GOOD[:10]) + "\n")
    f = FileTail(str(path), keep=keep)
    assert len(f.read().lines) == 11
    path.write_text(HEADER + "\n" + row(1, session="new") + "\n")  # truncated and rewritten
    c = f.read()
    assert c.reset and f.resets == 1 and len(c.lines) == 2


@pytest.mark.parametrize("quick", [False, True], ids=["full-read", "quick-read"])
@pytest.mark.parametrize("keep", [False, True], ids=["opened-each-read", "kept-open"])
def test_a_file_rewritten_in_place_with_more_bytes_is_read_again(tmp_path, keep, quick):
    """open(p, "w") and more bytes than before between two reads (issue 26 #8): the size never went down,
    the inode is the same; the first bytes tell it from an appended file."""
    path = tmp_path / "rank0.csv"
    path.write_text(HEADER + "\n" + "\n".join(row(s, session="old") for s in range(1, 21)) + "\n")
    f = FileTail(str(path), keep=keep)
    assert len(f.read().lines) == 21
    new = [row(s, session="new") for s in range(1, 41)]
    with open(path, "w") as fh:
        fh.write(HEADER + "\n" + "\n".join(new) + "\n")
    c = f.read(quick=quick)
    assert c.reset and f.resets == 1 and [ln.decode() for ln in c.lines] == [HEADER, *new]


@pytest.mark.parametrize("keep", [False, True], ids=["opened-each-read", "kept-open"])
def test_rsync_style_replacement_continues_from_the_offset(tmp_path, keep):
    path = tmp_path / "rank0.csv"
    path.write_text(HEADER + "\n" + "\n".join(GOOD[:10]) + "\n")
    f = FileTail(str(path), keep=keep)
    f.read()
    tmp = tmp_path / ".rank0.csv.XyZ"
    tmp.write_text(HEADER + "\n" + "\n".join(GOOD[:12]) + "\n")
    os.replace(tmp, path)  # new inode, same first bytes, longer
    c = f.read()
    assert not c.reset and [ln.decode() for ln in c.lines] == GOOD[10:12]


@pytest.mark.parametrize("keep", [False, True], ids=["opened-each-read", "kept-open"])
def test_replacement_with_other_content_is_a_reset(tmp_path, keep):
    path = tmp_path / "rank0.csv"
    path.write_text(HEADER + "\n" + "\n".join(GOOD[:10]) + "\n")
    f = FileTail(str(path), keep=keep)
    f.read()
    tmp = tmp_path / "other"
    tmp.write_text(HEADER + "\n" + row(1, "9.0", session="other") + "\n" * 400)
    os.replace(tmp, path)
    c = f.read()
    assert c.reset and c.lines[1].decode() == row(1, "9.0", session="other")


def test_a_kept_descriptor_is_read_without_metadata_operations(tmp_path, monkeypatch):
    """Following, a file's descriptor stays open: a quick read is a pread and nothing else (no open, no
    stat: each is a metadata server's round trip on a network filesystem); a full read is one stat of the
    path while it names the same file; close gives the descriptor back."""
    path = tmp_path / "rank0.csv"
    path.write_text(HEADER + "\n" + "\n".join(GOOD[:5]) + "\n")
    f = FileTail(str(path), keep=True)
    assert len(f.read().lines) == 6 and f.kept
    calls = []
    with monkeypatch.context() as m:
        for name in ("open", "stat", "fstat", "lstat"):
            real = getattr(os, name)
            m.setattr(tail.os, name, lambda *a, _real=real, _name=name, **k: calls.append(_name) or _real(*a, **k))
        with open(path, "a") as fh:
            fh.write("\n".join(GOOD[5:8]) + "\n")
        c = f.read(quick=True)
        assert [ln.decode() for ln in c.lines] == GOOD[5:8] and c.mtime is not None and calls == []
        assert f.read(quick=True).blob == b"" and calls == []
        with open(path, "a") as fh:
            fh.write(GOOD[8] + "\n")
        assert [ln.decode() for ln in f.read().lines] == [GOOD[8]] and calls == ["stat"]
    fd = f._fd
    f.close()
    assert not f.kept
    with pytest.raises(OSError):
        os.fstat(fd)


def test_descriptors_past_the_limit_are_opened_for_each_read(tmp_path, monkeypatch):
    """Past keep_limit() descriptors, files are opened for each read as before: nothing is missed."""
    monkeypatch.setattr(tail, "_keep_limit", tail._kept + 2)
    tails = []
    for r in range(5):
        path = tmp_path / f"rank{r}.csv"
        path.write_text(HEADER + "\n" + GOOD[0] + "\n")
        tails.append(FileTail(str(path), keep=True))
    assert [len(t.read().lines) for t in tails] == [2] * 5
    assert [t.kept for t in tails] == [True, True, False, False, False]
    for t in tails:
        with open(t.path, "a") as fh:
            fh.write(GOOD[1] + "\n")
        assert [ln.decode() for ln in t.read(quick=True).lines] == [GOOD[1]]  # not kept: a full read
    tails[0].close()
    tails[2].read()  # a slot is free again
    assert tails[2].kept
    for t in tails:
        t.close()


def test_events_with_broken_lines():
    lines = [b'{"time": 1, "kind": "start", "session": "a"}', b'{"time": 2, "kind": "heart', b"[1, 2]",
             b'{"kind": "end"}', b"", b'{"time": 3, "kind": "end", "note": "<b>x</b>"}\r']
    ev = parse_events(b"\n".join(lines) + b"\n")
    assert [e["kind"] for e in ev.items] == ["start", "end"] and ev.bad == 3


def test_pandas_path_with_a_long_line_balancing_a_short_one(monkeypatch):
    body = [r.encode() for r in GOOD]
    body[3] = body[3] + b",extra"  # one field too many ...
    body[7] = body[7].rsplit(b",", 1)[0]  # ... and one too few: the comma total looks right
    rows = CsvParser(ParseTuning(large_min_lines=1)).parse(b"\n".join([HEADER.encode()] + body) + b"\n")
    assert rows.bad == 2 and len(rows) == len(GOOD) - 2
