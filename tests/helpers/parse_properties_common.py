"""Builders the tests of parse properties share (unit/test_parse_properties.py): plain functions and data, no
fixtures."""

from __future__ import annotations

import csv
import math

import numpy as np

from mstop.formats.parse import CsvParser, ParseTuning
from mstop.sources.files import FileTail


def oracle(data: bytes) -> tuple[list[float], int]:
    """What the bytes hold, by the contract's plain definition: lines end with LF, CRLF or CR; the last
    piece without an end waits; the first line naming time and step is the header; after it each line
    is a row when it is UTF-8 without NUL, has the header's number of cells (csv, one line alone) and
    finite time and step; every other line is bad."""
    text = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")[:-1]
    steps, bad, header = [], 0, None
    for raw in text:
        if header is None:
            try:
                cells = next(csv.reader([raw.decode("utf-8", "replace").lstrip("\ufeff")]), [])
            except csv.Error:
                cells = []
            if "time" in cells and "step" in cells and b"\x00" not in raw:
                header = cells
            else:
                bad += 1
            continue
        try:
            if b"\x00" in raw:
                raise ValueError
            cells = next(csv.reader([raw.decode("utf-8")]), [])
            if len(cells) != len(header):
                raise ValueError
            t, s = float(cells[0]), float(cells[1])
            if not (math.isfinite(t) and math.isfinite(s)):
                raise ValueError
        except (ValueError, csv.Error, UnicodeDecodeError):
            bad += 1
            continue
        steps.append(s)
    return steps, bad


#: a parser that takes the careful path (the csv module, line by line) for any chunk
CAREFUL = ParseTuning(large_min_lines=10**9, plain_min_lines=10**9)


def read(data: bytes, cuts: list[int], tuning: ParseTuning | None = None,
         ) -> tuple[list[float], list[float], int, list[str], np.ndarray, list]:
    """Feed ``data`` to a FileTail in pieces and parse each piece with a parser of ``tuning`` (the paths it
    takes); (steps, times, bad, sessions, the float32 columns, the literal NaN/Inf cells)."""
    tail, parser = FileTail("unused"), CsvParser(tuning)
    steps, times, sessions, bad, pos = [], [], [], 0, 0
    floats, nonfinite = [], []
    for cut in sorted(set(cuts)) + [len(data)]:
        chunk = tail.feed(data[pos:cut])
        pos = max(pos, cut)
        rows = parser.parse(chunk.blob)
        bad += rows.bad + chunk.overlong
        nonfinite += [(len(steps) + i, c, repr(v)) for i, c, v in rows.nonfinite]
        steps += rows.columns["step"].tolist()
        times += rows.columns["time"].tolist()
        sessions += rows.sessions
        floats.append(rows.floats)
    return steps, times, bad, sessions, np.concatenate(floats), nonfinite


def agree(whole, pieces) -> None:
    """Both ways of reading give the same rows, to the bit (time: within pandas' last-place rounding)."""
    assert whole[3] == pieces[3]  # same sessions
    np.testing.assert_allclose(whole[1], pieces[1], rtol=1e-15, atol=0)
    np.testing.assert_array_equal(whole[4], pieces[4])  # every float32 column, NaN where missing
    assert whole[5] == pieces[5]


