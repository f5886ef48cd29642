"""Turning lines of ``rank<R>.csv`` and ``rank<R>.events.jsonl`` into numbers and events.

Small increments (the usual case while following: a few rows per file) go
through the ``csv`` module, which costs microseconds; large reads (opening a
long run) go through one ``pyarrow.csv.read_csv`` call per chunk, or
``pandas.read_csv`` where pyarrow cannot be imported (pyarrow 26 refuses NumPy
1.x). All paths keep and drop the same rows; pyarrow's floats equal Python's to
the bit, pandas' may differ in ``time`` by one unit in the last place (about
2e-7 s for today's unix times): the tests feed every path the same bytes.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mstop_writer.schema import COLUMNS

from ..safe import MAX_ITEMS, clean, clean_value

#: Numeric base columns kept by the store (``session`` is kept as an index).
NUMERIC = tuple(c for c in COLUMNS if c != "session")
#: ``time`` and ``step`` come first and are kept in float64; the rest in float32.
N_EXACT = 2
assert NUMERIC[:N_EXACT] == ("time", "step")
#: Columns whose literal NaN/Inf cells are remembered (an empty cell is missing, not NaN).
WATCH_NONFINITE = ("loss", "grad_norm")
#: text of a number beyond float32's range (3.4e38): an exponent of 38 or more, or 39 digits in a row
_BIG = re.compile(rb"[eE]\+?0*(3[89]|[4-9][0-9]|[0-9]{3,})(?=,|$)|[0-9]{39}")
_FLOAT32_MAX = float(np.finfo(np.float32).max)
#: Most extra columns kept from one file (a header of 100,000 columns must not make 100,000 columns per rank).
MAX_EXTRA = 256


@dataclass(frozen=True)
class ParseTuning:
    """Which path a chunk of lines takes; every path gives the same rows (the property tests hold it).

    ``large_min_lines``: chunks with at least this many lines are a large read, parsed by pyarrow (by pandas
    without it, or where pyarrow refuses a cell). ``large_reader``: "auto" (pyarrow when it imports), or
    "pandas". ``arrow_min_lines``: chunks (and batches of many files' lines, :func:`parse_many`) of at least
    this many lines go through pyarrow's reader where it imports: one call costs about what 150-200 rows cost
    parsed a column at a time with Python's ``float`` (1.3 ms against 1.1 ms for 128 rows, 1.5 against 2.1
    for 256, here). ``plain_min_lines``: chunks with at least this many lines (and fewer than
    ``large_min_lines``) of plain text are parsed a column at a time: the runs list reads a few hundred rows
    of each of thousands of files."""

    large_min_lines: int = 2000
    large_reader: str = "auto"
    arrow_min_lines: int = 200
    plain_min_lines: int = 8

    def __post_init__(self) -> None:
        if self.large_reader not in ("auto", "arrow", "pandas"):
            raise ValueError(f"large_reader: 'auto', 'arrow' or 'pandas', not {self.large_reader!r}")


#: the paths a parser made without its own tuning takes (a test replaces it whole, by monkeypatch)
TUNING = ParseTuning()
#: Bytes a chunk may hold to go through pandas (or the plain path): printable ASCII without quotes, and
#: newlines. Anything else (quotes, NUL, control bytes, UTF-8 text) goes line by line through the careful
#: path, which reads it the way the csv module reads one line.
_PANDAS_SAFE = bytes(range(0x20, 0x7F)).replace(b'"', b"") + b"\n"

# A well-formed row may hold long text cells (a note, a path): the csv module's 128 KiB default would raise.
csv.field_size_limit(2**31 - 1)


@dataclass
class Rows:
    """Parsed rows of one rank file, in file order.

    ``exact`` holds ``time`` and ``step`` (float64), ``floats`` the other
    numeric base columns (:data:`NUMERIC` order, float32), NaN for missing: the
    store's own layout, so a large read is adopted without a copy. ``extra``
    holds the file's numeric extra columns. ``session_codes[i]`` indexes
    ``session_names``: row ``i``'s session.
    """

    exact: np.ndarray
    floats: np.ndarray
    extra: dict[str, np.ndarray]
    session_codes: np.ndarray
    session_names: list[str]
    nonfinite: list[tuple[int, str, float]] = field(default_factory=list)  # (row in this batch, column, value)
    bad: int = 0
    #: how many rows written each row stands for (a remote follower's digest merged them: its sums, its
    #: last values; mstop.sources.followers.follower), None: one each
    weights: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.session_codes)

    @property
    def columns(self) -> dict[str, np.ndarray]:
        """Every column by name (views of ``values``, then the extras)."""
        out = {n: self.exact[:, j] for j, n in enumerate(NUMERIC[:N_EXACT])}
        out.update({n: self.floats[:, j] for j, n in enumerate(NUMERIC[N_EXACT:])})
        out.update(self.extra)
        return out

    @property
    def sessions(self) -> list[str]:
        """Each row's session id."""
        return [self.session_names[c] for c in self.session_codes]


    def part(self, a: int, b: int) -> Rows:
        """Rows ``a`` to ``b`` (views of the columns), their sessions coded afresh: a batch of many files'
        lines (:func:`parse_many`) is given to the store file by file."""
        codes = self.session_codes[a:b]
        if len(codes) and codes[0] == codes[-1] and (len(codes) < 3 or not (codes != codes[0]).any()):
            codes, names = np.zeros(len(codes), np.int32), [self.session_names[int(codes[0])]]
        else:
            used, codes = np.unique(codes, return_inverse=True)
            codes, names = codes.astype(np.int32), [self.session_names[int(c)] for c in used]
        nonfinite = [(i - a, c, v) for i, c, v in self.nonfinite if a <= i < b] if self.nonfinite else []
        return Rows(self.exact[a:b], self.floats[a:b], {n: v[a:b] for n, v in self.extra.items()}, codes, names,
                    nonfinite, 0, None if self.weights is None else self.weights[a:b])


def parse_joined(parser: CsvParser, blobs: list[bytes]) -> tuple[Rows, list[int]] | None:
    """The complete lines of several files that share ``parser``'s header, parsed by one call (a read round
    of 1,024 followed files costs one parse, not 1,024): the rows of all of them in order, and how many lines
    each file gave; None when one of them needs the careful path (a quote, a control byte, a short or long
    line, a bad time or step): each is then parsed on its own, so what the store gets never depends on how
    the lines were grouped."""
    if parser.header is None or not all(b.endswith(b"\n") for b in blobs):
        return None
    body = b"".join(blobs)
    if body.translate(None, _PANDAS_SAFE):
        return None
    lines = body.count(b"\n")
    t = parser.tuning
    arrow = arrow_csv() if lines >= min(t.arrow_min_lines, t.large_min_lines) and t.large_reader != "pandas" else None
    got = parser._parse_arrow(arrow, body, 0) if arrow is not None else None
    if got is None or got.bad or len(got) != lines:  # pyarrow refused a cell, or a line is bad: line by line
        got = parser._parse_plain(body)
    if got is None or got.bad:  # a bad line is counted by its own file's careful parse
        return None
    return got, [b.count(b"\n") for b in blobs]


def parse_many(parser: CsvParser, blobs: list[bytes]) -> list[Rows] | None:
    """:func:`parse_joined`, as each file's own rows."""
    joined = parse_joined(parser, blobs)
    if joined is None:
        return None
    got, counts = joined
    out, at = [], 0
    for n in counts:
        out.append(got.part(at, at + n))
        at += n
    return out


def _codes(sessions: list[str]) -> tuple[np.ndarray, list[str]]:
    if sessions and sessions.count(sessions[0]) == len(sessions):  # the usual case: one session
        return np.zeros(len(sessions), np.int32), [sessions[0]]
    names: dict[str, int] = {}
    codes = np.fromiter((names.setdefault(s, len(names)) for s in sessions), dtype=np.int32, count=len(sessions))
    return codes, list(names)


class CsvParser:
    """Parse one rank file's lines: the first line is its header."""

    def __init__(self, tuning: ParseTuning | None = None) -> None:
        self.tuning = tuning or TUNING  # which path a chunk takes (the same rows either way)
        self.header: list[str] | None = None
        self.extra: list[str] = []  # numeric columns beyond the base ones, in file order
        self.extra_dropped = 0  # extra columns past MAX_EXTRA, not kept
        self._index: dict[str, int] = {}
        self._plan: tuple[list[int], list[tuple[int, str]]] = ([], [])

    def header_of(self, other: CsvParser) -> None:
        """Take the header ``other`` read (this file's first line is the same bytes as the line it read it
        from): a first read of 10,000 rank files parses their one header line once."""
        self.header, self._index, self.extra, self.extra_dropped, self._plan = (
            other.header, other._index, other.extra, other.extra_dropped, other._plan)

    def reset(self) -> None:
        """The file is read again from its start: its header comes again."""
        self.header = None
        self._index = {}

    def parse(self, blob: bytes) -> Rows:
        """Parse complete lines (a :class:`~mstop.sources.files.Chunk`'s ``blob``). A line ends with LF, CRLF or a
        lone CR. Every line is a row or one counted bad row, and no line changes how the next is read
        (quoting never spans lines)."""
        if b"\r" in blob:
            blob = blob.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if blob and not blob.endswith(b"\n"):
            blob += b"\n"
        bad = 0
        start = 0  # where the rows begin: after a header line, without copying the blob
        while self.header is None and start < len(blob):
            nl = blob.find(b"\n", start)
            end = len(blob) if nl < 0 else nl
            line = blob[start:end]
            start = end + 1
            cols = _cells(line.decode("utf-8", "replace").lstrip("\ufeff")) if b"\x00" not in line else None
            if cols is not None and "time" in cols and "step" in cols:
                cols = [clean(c, 128) for c in cols]  # column names are shown: no control codes
                self.header = cols
                self._index = {c: i for i, c in enumerate(cols)}
                extra = [c for c in cols if c not in COLUMNS]
                self.extra = extra[:MAX_EXTRA]  # each is a column per rank in the store: bounded
                self.extra_dropped = len(extra) - len(self.extra)
                names = NUMERIC + tuple(self.extra)
                # per header, once: where each stored column is in a row, and which to watch for NaN
                self._plan = ([self._index.get(c, -1) for c in names],
                              [(names.index(c), c) for c in WATCH_NONFINITE])
            else:
                bad += 1  # garbage before a header: counted, and the next line may be the header
        if self.header is None or start >= len(blob):
            return _empty(self.extra, bad)
        t = self.tuning
        arrow = arrow_csv() if t.large_reader != "pandas" and _lines_at_least(
            blob, start, min(t.arrow_min_lines, t.large_min_lines)) else None
        # pyarrow reads ASCII without quotes (a quote may span lines there) and NUL as the careful path does,
        # or refuses the chunk (a cell that is not a number); not other bytes: a bad UTF-8 line of the wrong
        # width makes pyarrow print an "exception ignored" to stderr. Three scans at memory speed.
        got = self._parse_arrow(arrow, blob, start) if arrow is not None and blob.isascii() \
            and blob.find(b'"', start) < 0 and blob.find(b"\x00", start) < 0 else None
        if got is not None:
            got.bad += bad
            return got
        n_lines = blob.count(b"\n", start)
        plain = n_lines >= t.plain_min_lines and not blob.translate(None, _PANDAS_SAFE)
        if plain and n_lines >= t.large_min_lines:
            # pyarrow refused the chunk (a cell it cannot read): pandas reads it with Python's own float parser,
            # so the numbers stay those the other paths give, bit for bit
            rows = self._parse_pandas(blob, start, n_lines, exact=arrow is not None)
        else:
            got = self._parse_plain(blob[start:]) if plain else None
            rows = got if got is not None else self._parse_csv(blob[start:].split(b"\n")[:-1])
        rows.bad += bad
        return rows

    # -- the two paths ---------------------------------------------------------

    def _parse_csv(self, lines: list[bytes]) -> Rows:
        assert self.header is not None
        width = len(self.header)
        idx, watch = self._plan
        s_idx = self._index.get("session", -1)
        out: list[list[float]] = []
        sessions: list[str] = []
        nonfinite: list[tuple[int, str, float]] = []
        bad = 0
        for raw in lines:
            if b"\x00" in raw:
                bad += 1
                continue
            try:
                cells = _cells(raw.decode("utf-8"))
            except UnicodeDecodeError:
                cells = None
            if cells is None or len(cells) != width:
                bad += 1
                continue
            try:  # the usual row: every cell a number or empty, read without a call per cell
                vals = [(float(cells[i]) if cells[i] else math.nan) if i >= 0 else math.nan for i in idx]
            except ValueError:  # text in a numeric cell: NaN there, numbers elsewhere
                vals = [_num(cells[i]) if i >= 0 else math.nan for i in idx]
            t, s = vals[0], vals[1]
            if not (math.isfinite(t) and math.isfinite(s)):
                bad += 1
                continue
            row = len(sessions)
            for j, c in watch:
                if not math.isfinite(vals[j]):
                    f = _literal_nonfinite(cells[idx[j]])
                    if f is not None:
                        nonfinite.append((row, c, f))
            out.append(vals)
            sessions.append(cells[s_idx] if s_idx >= 0 else "")
        nonfinite.sort()
        table = np.array(out, dtype=np.float64).reshape(len(out), len(idx))
        return _rows(table, self.extra, sessions, nonfinite, bad,
                     big=any(_BIG.search(raw) is not None for raw in lines) if len(lines) < 64 else True)

    def _parse_plain(self, body: bytes) -> Rows | None:
        """Lines of plain ASCII (no quotes), every one with the header's width, and every time and step a
        number, read a column at a time with Python's own ``float`` (the csv path's numbers, bit for bit);
        None for anything else, which the careful path then reads line by line."""
        assert self.header is not None
        width = len(self.header)
        counts = _commas_per_line(body)
        if not len(counts) or (counts != width - 1).any():
            return None
        n = len(counts)
        cells = body.replace(b"\n", b",").split(b",")[: n * width]
        idx, watch = self._plan
        table = np.full((n, len(idx)), np.nan)
        for j, i in enumerate(idx):
            if i < 0:
                continue
            col = cells[i::width]
            try:
                table[:, j] = [float(c) if c else math.nan for c in col]
            except ValueError:  # text in a numeric column: NaN, as the csv path reads it
                table[:, j] = [_num(c.decode()) for c in col]
        if not (np.isfinite(table[:, 0]).all() and np.isfinite(table[:, 1]).all()):
            return None  # a bad row: the careful path counts it
        nonfinite = []
        for j, c in watch:
            for r in np.flatnonzero(~np.isfinite(table[:, j])):
                f = _literal_nonfinite(cells[int(r) * width + idx[j]].decode())
                if f is not None:
                    nonfinite.append((int(r), c, f))
        nonfinite.sort()
        s_idx = self._index.get("session", -1)
        sessions = [c.decode() for c in cells[s_idx::width]] if s_idx >= 0 else [""] * n
        # beyond float32's range, from the numbers (a regex over the text costs more than the parse)
        big = bool((np.abs(table[:, N_EXACT:len(NUMERIC)]) > _FLOAT32_MAX).any())
        return _rows(table, self.extra, sessions, nonfinite, 0, big=big)

    def _parse_arrow(self, arrow: Any, blob: bytes, start: int) -> Rows | None:
        """Parse the lines of ``blob`` from ``start`` with pyarrow (no copy of the bytes): each known column
        read as float64 (pyarrow's float parser is correctly rounded, as Python's ``float`` is), the session
        dictionary-encoded, a line of another width counted bad. None when a kept column holds text pyarrow
        cannot read as a number (``1_0``, a word): pandas then reads that chunk cell by cell."""
        pa, pacsv = arrow
        width = len(self.header or ())
        names = [str(i) for i in range(width)]
        types = {names[i]: pa.float64() for n in NUMERIC + tuple(self.extra)
                 if (i := self._index.get(n)) is not None}
        s_idx = self._index.get("session")
        if s_idx is not None:
            types[names[s_idx]] = pa.dictionary(pa.int32(), pa.string())
        bad = [0]

        def skip(_row: Any) -> str:
            bad[0] += 1
            return "skip"

        try:
            table = pacsv.read_csv(
                pa.BufferReader(pa.py_buffer(blob).slice(start)),
                read_options=pacsv.ReadOptions(column_names=names, block_size=1 << 22),
                parse_options=pacsv.ParseOptions(invalid_row_handler=skip, ignore_empty_lines=False),
                convert_options=pacsv.ConvertOptions(column_types=types, include_columns=list(types),
                                                     null_values=[""], strings_can_be_null=False))
        except (pa.ArrowInvalid, UnicodeDecodeError):
            return None
        n = table.num_rows

        def column(c: str, out: np.ndarray | None = None) -> np.ndarray:
            i = self._index.get(c)
            if i is None:
                out = np.empty(n) if out is None else out
                out[:] = np.nan
                return out
            return _arrow_floats(table.column(names[i]), n, out)

        exact = np.stack([column(c) for c in NUMERIC[:N_EXACT]])
        by_column = np.empty((len(NUMERIC) - N_EXACT, n), np.float32)  # written in place, no float64 copy
        with np.errstate(over="ignore"):  # beyond float32's range is inf in the store (documented)
            for j, c in enumerate(NUMERIC[N_EXACT:]):
                column(c, by_column[j])
        extra = {c: column(c) for c in self.extra}
        watched = {c: column(c) for c in WATCH_NONFINITE if c in self._index}  # float64: 1e39 is no Inf
        literal = {c: _arrow_literal(table.column(names[self._index[c]]), v) for c, v in watched.items()}
        ok = np.isfinite(exact[0]) & np.isfinite(exact[1])
        if s_idx is not None:
            codes, session_names = _arrow_codes(table.column(names[s_idx]))
        else:
            codes, session_names = np.zeros(n, np.int32), [""]
        if not ok.all():
            bad[0] += int((~ok).sum())
            exact, by_column, codes = exact[:, ok], by_column[:, ok], codes[ok]
            extra = {c: a[ok] for c, a in extra.items()}
            watched = {c: a[ok] for c, a in watched.items()}
            literal = {c: m[ok] for c, m in literal.items()}
        nonfinite = sorted((int(r), c, float(watched[c][r])) for c, m in literal.items() for r in np.flatnonzero(m))
        return Rows(_transposed(exact), _transposed(by_column), extra, codes, session_names, nonfinite, bad[0])

    def _rows_of(self, columns: dict[str, np.ndarray], codes: np.ndarray, session_names: list[str],
                 nonfinite: list[tuple[int, str, float]], bad: int) -> Rows:
        """Rows in the store's layout from a large read's float64 columns."""
        exact = _row_major([columns[n] for n in NUMERIC[:N_EXACT]], np.float64)
        with np.errstate(over="ignore"):  # beyond float32's range is inf in the store (documented)
            floats = _row_major([columns[n] for n in NUMERIC[N_EXACT:]], np.float32)
        return Rows(exact, floats, {n: columns[n] for n in self.extra}, codes, session_names, nonfinite, bad)

    def _parse_pandas(self, blob: bytes, start: int, n_lines: int, exact: bool = False) -> Rows:
        """Parse the lines of ``blob`` from offset ``start`` (the blob is not copied); ``exact``: every cell read
        as text and made a number by Python's float parser (pandas' own may differ from it in the last place,
        and its ``round_trip`` parser read an integer column's empty cells as 0: pandas 3.0.6)."""
        import pandas as pd

        assert self.header is not None
        width = len(self.header)
        blob, start, bad = _keep_full_lines(blob, start, n_lines, width)
        if start < 0:
            return _empty(self.extra, bad)
        s_idx = self._index.get("session")
        source = io.BytesIO(blob)  # shares the bytes, no copy
        source.seek(start)
        try:
            df = pd.read_csv(source, header=None, low_memory=False, names=range(width), keep_default_na=False,
                             na_values=[""], skip_blank_lines=False, engine="c", encoding_errors="strict",
                             dtype=str if exact else {s_idx: str} if s_idx is not None else None)
        except (UnicodeDecodeError, ValueError):  # pandas' ParserError is a ValueError: a long line
            return self._parse_csv(blob[start:].split(b"\n")[:-1])
        columns, text_cols = self._frame_columns(df)
        ok = np.isfinite(columns["time"]) & np.isfinite(columns["step"])
        sessions = df[s_idx].fillna("").to_numpy(dtype=object) if s_idx is not None else None
        if not ok.all():
            bad += int((~ok).sum())
            columns = {n: a[ok] for n, a in columns.items()}
            text_cols = {n: a[ok] for n, a in text_cols.items()}
            # sessions of the rows kept only: a bad line's cell (a repeated header's "session") is no session
            sessions = sessions[ok] if sessions is not None else None
        if sessions is not None:
            codes, uniques = pd.factorize(sessions, sort=False)
            codes, session_names = codes.astype(np.int32), [str(u) for u in uniques]
        else:
            codes, session_names = np.zeros(int(ok.sum()), np.int32), [""]
        return self._rows_of(columns, codes, session_names, _nonfinite_cells(columns, text_cols), bad)

    def _frame_columns(self, df: Any) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Every known column of a parsed frame as float64 (all NaN when the header lacks it), and the raw
        cells of the columns that held text (a literal "nan" does this too: converted cell by cell)."""
        import pandas as pd

        columns: dict[str, np.ndarray] = {}
        text_cols: dict[str, np.ndarray] = {}
        for n in NUMERIC + tuple(self.extra):
            i = self._index.get(n)
            if i is None:
                columns[n] = np.full(len(df), np.nan)
                continue
            col = df[i]
            if pd.api.types.is_numeric_dtype(col.dtype):
                columns[n] = col.to_numpy(dtype=np.float64, na_value=np.nan)
            else:
                raw = col.to_numpy(dtype=object)
                text_cols[n] = raw
                try:  # every cell a number or empty (NaN): Python's float of each, in one loop
                    columns[n] = raw.astype(np.float64)
                except (ValueError, TypeError):  # text among them: NaN for it
                    columns[n] = np.array([_cell_value(x) for x in raw], dtype=np.float64)
        return columns, text_cols


def _row_major(columns: list[np.ndarray], dtype: Any) -> np.ndarray:
    """Columns as one row-major table of ``dtype`` (the store's layout)."""
    n = len(columns[0]) if columns else 0
    by_column = np.empty((len(columns), n), dtype)
    for j, c in enumerate(columns):
        by_column[j] = c
    return _transposed(by_column)


def _transposed(by_column: np.ndarray) -> np.ndarray:
    """A column-major table (a row per column) as the store's row-major one, a block of rows at a time,
    which stays in cache (three times faster than writing each column with a stride)."""
    k, n = by_column.shape
    # room for rows that will follow (a sixteenth, as the store grows): the store adopts the whole array,
    # so following the file appends in place instead of copying every row read so far at its first row
    # (pages never written are never resident)
    room = np.empty((n + n // 16 + 64, k), by_column.dtype)
    out = room[:n]
    for i in range(0, n, 4096):
        out[i:i + 4096] = by_column[:, i:i + 4096].T
    return out


def _lines_at_least(blob: bytes, start: int, n: int) -> bool:
    """Whether ``blob`` holds ``n`` newlines from ``start``, without counting all of a large blob's."""
    cap = start + 256 * n
    return blob.count(b"\n", start, cap) >= n or (len(blob) > cap and blob.count(b"\n", start) >= n)


_ARROW: Any = "unset"


def arrow_csv() -> Any:
    """(pyarrow, pyarrow.csv), or None where pyarrow is missing or refuses to import (pyarrow 26 with
    NumPy 1.x raises at import); looked for once."""
    global _ARROW
    if _ARROW == "unset":
        try:
            import pyarrow
            import pyarrow.csv
            _ARROW = (pyarrow, pyarrow.csv)
        except Exception:  # noqa: BLE001 - whatever the import raises, pandas reads instead
            _ARROW = None
    return _ARROW


def _valid(chunk: Any) -> np.ndarray | None:
    """A pyarrow chunk's validity bitmap as booleans (None: no nulls)."""
    bitmap = chunk.buffers()[0]
    if bitmap is None or chunk.null_count == 0:
        return None
    bits = np.unpackbits(np.frombuffer(bitmap, np.uint8), bitorder="little")
    return bits[chunk.offset:chunk.offset + len(chunk)].astype(bool)


def _arrow_floats(col: Any, n: int, out: np.ndarray | None = None) -> np.ndarray:
    """A pyarrow float64 column as one numpy array (into ``out`` when given: a float32 row is converted on
    the way), NaN for nulls, from the chunks' buffers (pyarrow's own ``to_numpy`` imports pandas)."""
    out = np.empty(n) if out is None else out
    at = 0
    for chunk in col.chunks:
        k = len(chunk)
        out[at:at + k] = np.frombuffer(chunk.buffers()[1], np.float64, count=k, offset=8 * chunk.offset)
        valid = _valid(chunk)
        if valid is not None:
            out[at:at + k][~valid] = np.nan
        at += k
    return out


def _arrow_literal(col: Any, values: np.ndarray) -> np.ndarray:
    """Where a pyarrow float column holds a NaN or Inf that its cell said (not an empty cell, a null)."""
    mask = ~np.isfinite(values)
    if col.null_count == int(mask.sum()):  # nulls read as NaN: every non-finite value is an empty cell
        return np.zeros(len(values), bool)
    valid = [_valid(chunk) for chunk in col.chunks]
    return mask & np.concatenate([np.ones(len(c), bool) if v is None else v for c, v in zip(col.chunks, valid)])


def _arrow_codes(col: Any) -> tuple[np.ndarray, list[str]]:
    """A dictionary-encoded pyarrow column as session codes and names (chunks may have own dictionaries)."""
    names: dict[str, int] = {}
    parts = []
    for chunk in col.chunks:
        lookup = np.array([names.setdefault(s, len(names)) for s in chunk.dictionary.to_pylist()], np.int32)
        idx = chunk.indices
        parts.append(lookup[np.frombuffer(idx.buffers()[1], np.int32, count=len(idx), offset=4 * idx.offset)]
                     if len(lookup) else np.zeros(len(chunk), np.int32))
    codes = np.concatenate(parts) if parts else np.zeros(0, np.int32)
    return codes.astype(np.int32, copy=False), list(names) or [""]


def _keep_full_lines(blob: bytes, start: int, n_lines: int, width: int) -> tuple[bytes, int, int]:
    """The blob with only its lines of ``width`` fields (pandas would misread the others), where they
    start (-1: none left), and how many were bad.

    When the blob holds exactly width-1 commas per line on average, the only way a line can be short is
    if another is long, and pandas refuses long lines: so the counts alone prove every line is good;
    except the first line: pandas takes a first line one field too long as an index column, or cuts it
    (index_col=False), without an error; so its count is checked on its own."""
    first_end = blob.find(b"\n", start)
    if blob.count(b",", start) == n_lines * (width - 1) and blob.count(b",", start, first_end) == width - 1:
        return blob, start, 0
    blob = blob[start:]
    good = _commas_per_line(blob) == width - 1
    bad = int(len(good) - good.sum())
    if not bad:
        return blob, 0, 0
    kept = [ln for ln, ok in zip(blob.split(b"\n")[:-1], good) if ok]
    return (b"\n".join(kept) + b"\n", 0, bad) if kept else (b"", -1, bad)


def _nonfinite_cells(columns: dict[str, np.ndarray], text_cols: dict[str, np.ndarray]) -> list[tuple[int, str, float]]:
    """(row, column, value) of every cell that said NaN or Inf in the watched columns, sorted (an empty cell
    is missing, not NaN)."""
    out: list[tuple[int, str, float]] = []
    for c in WATCH_NONFINITE:
        v = columns[c]
        for r in np.flatnonzero(~np.isfinite(v)):
            if c in text_cols:
                cell = text_cols[c][r]
                f = _literal_nonfinite(cell) if isinstance(cell, str) else (
                    float(cell) if isinstance(cell, float) and math.isinf(cell) else None)
            else:
                f = None if np.isnan(v[r]) else float(v[r])  # numeric column: NaN only from empty cells
            if f is not None:
                out.append((int(r), c, f))
    out.sort()
    return out


def _cells(text: str) -> list[str] | None:
    """One line's cells as the csv module reads a single line (None when it cannot): a quote opened on this
    line never swallows the next one."""
    if '"' not in text:
        return text.split(",")
    try:
        return next(csv.reader((text,)), [])
    except csv.Error:
        return None


def _commas_per_line(blob: bytes) -> np.ndarray:
    """Commas in each line of ``blob`` (lines end with a newline), vectorised."""
    arr = np.frombuffer(blob, dtype=np.uint8)
    ends = np.flatnonzero(arr == 10)
    return np.bincount(np.searchsorted(ends, np.flatnonzero(arr == 44)), minlength=len(ends))[: len(ends)]


def _cell_value(x: Any) -> float:
    """A cell of a column pandas could not make numeric: numbers kept, text parsed, empty = NaN."""
    if isinstance(x, str):
        return _num(x)
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return float(x)
    return math.nan


def _num(text: str) -> float:
    """A cell as a float; NaN for empty or non-numeric text."""
    if not text:
        return math.nan
    try:
        return float(text)
    except ValueError:
        return math.nan


def _literal_nonfinite(text: str) -> float | None:
    """The value of a cell that literally says NaN or ±Inf; None for numbers, empty or other text."""
    try:
        f = float(text)
    except ValueError:
        return None
    return None if math.isfinite(f) else f


def _rows(table: np.ndarray, extra: list[str], sessions: list[str], nonfinite: list, bad: int,
          big: bool = True) -> Rows:
    """Rows from a table whose columns are NUMERIC then the extras (``big``: it may hold numbers beyond
    float32's range)."""
    k = len(NUMERIC)
    codes, names = _codes(sessions)
    sub = table[:, N_EXACT:k]
    if big:  # rare: beyond float32's range is inf in the store (documented)
        with np.errstate(over="ignore"):
            floats = sub.astype(np.float32)
    else:  # the usual case, without errstate's cost (two seterr calls: half the cost of a small parse)
        floats = sub.astype(np.float32)
    return Rows(table[:, :N_EXACT], floats,
                {n: table[:, k + j] for j, n in enumerate(extra)}, codes, names, nonfinite, bad)


def _empty(extra: list[str], bad: int) -> Rows:
    return Rows(np.empty((0, N_EXACT)), np.empty((0, len(NUMERIC) - N_EXACT), np.float32),
                {n: np.empty(0) for n in extra}, np.empty(0, np.int32), [], [], bad)


@dataclass
class Events:
    """Events parsed from lines of one events file: each checked against :data:`EVENT_FIELDS`."""

    items: list[dict[str, Any]]
    bad: int = 0
    cut: int = 0  # events whose text or lists were cut to the bounds of mstop.safe
    #: heartbeats read into a run of heartbeats held as at most two items (_beat): only counted, as a reader
    #: keeps only a run's newest and latest times (every line is an item, bad, or one of these)
    folded: int = 0


def _text(v: Any) -> bool:
    return v is None or isinstance(v, str)


def _number(v: Any) -> bool:
    """A finite number (JSON's huge integers and 1e400 included: they must not overflow later)."""
    if v is None:
        return True
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(float(v))
    except OverflowError:
        return False


def _count(v: Any) -> bool:
    return v is None or (isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**53)


def _pids(v: Any) -> bool:
    """A list of process ids (an exit's ``peers_alive``)."""
    return v is None or (isinstance(v, list) and all(x is not None and _count(x) for x in v))


def _metrics(v: Any) -> bool:
    """Eval metrics: a mapping of names to numbers (or the writer's "nan"/"inf" strings)."""
    return v is None or (isinstance(v, dict) and all(isinstance(x, (int, float, str)) and not isinstance(x, bool)
                                                     and (not isinstance(x, (int, float)) or _number(x))
                                                     for x in v.values()))


#: The largest step number an event may carry: beyond it a step is not a count of anything a job ran (a
#: 400-digit step is a hostile line, and would print as one)
MAX_STEP = 2.0**53


def _step(v: Any) -> bool:
    """A step: a finite number no larger than :data:`MAX_STEP` (or None)."""
    return v is None or (_number(v) and abs(float(v)) <= MAX_STEP)


def _span(v: Any) -> bool:
    """A ``profile_steps`` span: two steps, first <= last (or None)."""
    return v is None or (isinstance(v, list) and len(v) == 2 and all(x is not None and _step(x) for x in v)
                         and v[0] <= v[1])


def _shares(v: Any) -> bool:
    """A profile's shares: names to finite numbers from 0 to 100 (of the step; or None)."""
    return v is None or (isinstance(v, dict) and all(x is not None and _number(x) and 0 <= x <= 100
                                                     for x in v.values()))


def _top_ops(v: Any) -> bool:
    """A profile's operators: a list of {name: text, seconds: a finite number >= 0}."""
    return v is None or (isinstance(v, list) and all(
        isinstance(o, dict) and isinstance(o.get("name"), str) and o.get("seconds") is not None
        and _number(o.get("seconds")) and o["seconds"] >= 0 for o in v))


def _step_rows(v: Any) -> bool:
    """A profile's steps: a list of mappings of names to finite numbers, each with a step."""
    return v is None or (isinstance(v, list) and all(
        isinstance(r, dict) and r.get("step") is not None and _step(r.get("step"))
        and all(x is not None and _number(x) for x in r.values()) for r in v))


def _stack_threads(v: Any) -> bool:
    """A stack event's threads: a list of {thread, current, frames: [text]}."""
    return v is None or (isinstance(v, list) and all(
        isinstance(t, dict) and isinstance(t.get("frames", []), list)
        and all(isinstance(f, str) for f in t.get("frames", [])) for t in v))


#: The known fields of events and what each must be; a wrong one makes the event a counted bad event.
#: Unknown fields are kept (cleaned), for newer writers.
EVENT_FIELDS: dict[str, Any] = {
    "session": _text, "run_name": _text, "note": _text, "host": _text, "device": _text, "path": _text,
    "error": _text, "message": _text, "reason": _text, "memory_source": _text, "memory_detail": _text,
    "parallel_mode": _text,
    "peak_flops_source": _text, "flops_per_token_source": _text, "rank_source": _text, "n_params_source": _text,
    "step": _step, "first_step": _step, "last_step": _step, "profile_steps": _span, "steps": _count,
    "shares": _shares, "top_ops": _top_ops, "steps_profiled": _step_rows, "source": _text, "epoch": _number,
    "peak_flops": _number, "flops_per_token": _number,
    "tokens_per_step": _number, "samples_per_step": _number, "heartbeat_interval": _number,
    "world_size": _count, "rank": _count, "total_steps": _count, "n_params": _count, "rows": _count,
    "events": _count, "rejected": _count, "step_offset": _count, "schema": _count, "pid": _count,
    "metrics": _metrics,
    # the exit witness (mstop_writer.witness): process facts, the end of the process, stacks
    "state": _text, "cpu_s": _number, "rss": _count, "threads": _count, "how": _text, "signal": _text,
    "run_delay_s": _number,
    "code": _number, "last_state": _text, "since": _number, "limit": _number, "stacks": _stack_threads,
    "witness_pid": _count, "pid_start": _count, "boot_id": _text, "pid_ns": _text, "witness": _text,
    "fatal_stacks": _text, "peers_alive": _pids, "ppid": _count,
    # the writer holds a flock on its events file while it lives (mstop_writer._files.LifeLock)
    "life_lock": lambda v: isinstance(v, bool),
}


def _fields_ok(obj: dict[str, Any]) -> bool:
    """Every known field of an event of the type it must be: a pass over the event's own few keys, not over
    the 60 fields it may have (a heartbeat has three; at 100,000 ranks they are most lines read)."""
    for k, v in obj.items():
        check = EVENT_FIELDS.get(k)
        if check is not None and not check(v):
            return False
    return True


def parse_events(blob: bytes) -> Events:
    """Parse JSON lines; a line that is not a JSON object with a finite ``time``, a text ``kind`` and known
    fields of the right types is bad. Strings are cleaned of control codes and bounded (mstop.safe)."""
    items: list[dict[str, Any]] = []
    bad = cut = folded = 0
    beats = 0  # how many of items' last entries are heartbeats in a row (at most 2 kept: see _beat)
    for raw in io.BytesIO(blob):  # line by line, not a list of a million lines at once
        raw = raw.rstrip(b"\r\n")
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError):
            bad += 1
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("kind"), str) or obj.get("time") is None \
                or not _number(obj.get("time")):
            bad += 1
            continue
        if not _fields_ok(obj):
            bad += 1
            continue
        if obj["kind"] == "heartbeat" and beats:
            before = len(items)
            beats = _beat(items, beats, float(obj["time"]))
            folded += before + 1 - len(items)
            continue
        clean_obj, was_cut = clean_value(obj)
        if was_cut:
            cut += 1
            if isinstance(obj.get("metrics"), dict) and len(obj["metrics"]) > MAX_ITEMS:
                clean_obj["metrics_total"] = len(obj["metrics"])
        clean_obj["time"] = float(obj["time"])
        items.append(clean_obj)
        beats = 1 if obj["kind"] == "heartbeat" else 0
    return Events(items, bad, cut, folded)


def _beat(items: list[dict[str, Any]], beats: int, t: float) -> int:
    """A heartbeat after heartbeats: a reader keeps only the newest one's time and the latest of all their
    times (mstop.engine.store), so a run of them is held as at most two (the latest, then the newest): an
    events file of a million heartbeats is not a million dicts. Returns how many of ``items``' last entries
    are the run's."""
    latest = items[-1] if beats == 1 else max(items[-2], items[-1], key=lambda e: e["time"])
    if t >= latest["time"]:
        items[-beats:] = [{"time": t, "kind": "heartbeat"}]
        return 1
    items[-beats:] = [latest, {"time": t, "kind": "heartbeat"}]
    return 2
