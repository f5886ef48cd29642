"""Rank files into the store: the glue every source of writer runs shares, local and remote alike.

A rank file is ``rank<R>.csv`` (metric rows) or ``rank<R>.events.jsonl`` (events), named as the writer
names them (:mod:`mstop_writer.schema`). :func:`followed` makes the record a source keeps for one (its
rank, kind, reader and parser), :func:`ingest` parses a chunk of its bytes into the store, and
:class:`Tail` positions files near their ends for the runs list. Nothing here reads a directory or a
connection: that is each source's own business.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from mstop_writer.schema import CSV_PATTERN, DEVICES_PATTERN, EVENTS_PATTERN

from ..engine.devices import DevicesParser
from ..engine.reader import RunReader
from ..engine.store import Batch, Store
from ..formats.mflog import MfLogParser
from ..formats.parse import CsvParser, Rows, parse_events, parse_joined
from . import files as _files
from .files import FIRST_CHUNK, Chunk, FileTail, not_regular

CSV_RE = re.compile(CSV_PATTERN)
EVENTS_RE = re.compile(EVENTS_PATTERN)
DEVICES_RE = re.compile(DEVICES_PATTERN)
#: a devices file is begun this near its end: its last samples are all the screen and the rules read
DEVICES_TAIL = 512 << 10
#: the rank of a devices file's record: it belongs to a host, not to a rank
NO_RANK = -1
#: Seconds between checks that files did not grow unseen by native events.


@dataclass
class Followed:
    """One rank file a source follows: which rank, which kind, its reader (and parser for CSV files)."""

    rank: int
    kind: str  # "csv", "events", "devices" (a host's NPUs), or "mflog" (a MindFormers log stream)
    tail: FileTail
    parser: CsvParser | None = None
    devices: DevicesParser | None = None
    log: MfLogParser | None = None
    cursor: str = ""  # a remote log stream's place (device:inode:offset of the file being read)


@dataclass
class Tail:
    """How much of each file a source reading "near the end" reads: the job's rank (the lowest: its loss
    EMA needs its last terms), the other ranks' metrics, and events (their first start, then the end)."""

    job_bytes: int = 32 << 10
    rank_bytes: int = 4 << 10
    events_bytes: int = 32 << 10
    events_head: int = 1

    def begin(self, store: Store, files: dict[str, Followed]) -> None:
        """Position files just found near their ends (their first lines fed to the store)."""
        ranks = [f.rank for f in files.values() if f.kind == "csv"] + RunReader(store).with_rows()
        job = min(ranks) if ranks else None
        for f in files.values():
            if f.kind == "events":
                chunk = f.tail.start_near_end(self.events_bytes, self.events_head)
            elif f.kind == "csv":
                chunk = f.tail.start_near_end(self.job_bytes if f.rank == job else self.rank_bytes)
            else:
                continue
            if chunk.blob:
                ingest(store, f, chunk)


def why_not_followed(path: str) -> str | None:
    """Why a file named like a rank file is not one (a FIFO, a directory, a dangling link), or None.

    ``os.stat`` never opens the file, so a FIFO cannot block here."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "a dangling symbolic link" if os.path.islink(path) else None  # None: raced away, read as missing
    except OSError as e:
        return f"cannot be read: {e.strerror or e}"
    if not stat.S_ISREG(st.st_mode):
        return not_regular(st.st_mode)
    return None if os.access(path, os.R_OK) else "permission denied"


def rank_file(name: str) -> tuple[int, str] | None:
    """(rank, "csv" or "events") for a rank file's name as the writer names them, (NO_RANK, "devices") for a
    host's devices file; None for any other."""
    m = CSV_RE.fullmatch(name)
    if m is not None:
        return int(m.group(1)), "csv"
    m = EVENTS_RE.fullmatch(name)
    if m is not None:
        return int(m.group(1)), "events"
    return (NO_RANK, "devices") if DEVICES_RE.fullmatch(name) else None


#: the most older parts of one rank file read (``rank0.csv.1`` ... ``rank0.csv.9999``, as logrotate numbers them)
ROTATED_DIGITS = 4


def rank_part(name: str) -> tuple[int, str, int] | None:
    """(rank, kind, part) of a rank file's name: part 0 for the file the writer writes, K for its K-th older
    part renamed away by a rotation (``rank0.csv.1`` the newest of them: logrotate's numbers); (NO_RANK,
    "devices", 0) for a host's devices file; None for any other name."""
    kind = rank_file(name)
    if kind is not None:
        return kind[0], kind[1], 0
    base, _, k = name.rpartition(".")
    if not (k.isdigit() and k.isascii() and k[0] != "0" and len(k) <= ROTATED_DIGITS):
        return None
    kind = rank_file(base)
    return (kind[0], kind[1], int(k)) if kind is not None and kind[1] != "devices" else None


def read_order(name: str) -> tuple[bool, int, str, int]:
    """Where a followed file comes in a round: metrics files first (a rank's rows before its events), and a
    rank's older parts before its newer ones (its rows in the order they were written)."""
    part = rank_part(name)
    if part is None:
        return True, NO_RANK, name, 0
    return part[1] != "csv", part[0], part[1], -part[2]


def rotation_groups(names: Iterable[str], followed: Iterable[str]) -> dict[tuple[int, str], set[str]]:
    """The (rank, kind) groups a rotation touches, each with its listed names (``names``: a folder's listing) and
    the name of the file the writer writes: those of which an older part is listed or followed (``followed``).
    An older part's name ends with a digit, a rank file's never: most listings have none and cost one look
    at each name's last character."""
    listed = [n for n in names if n[-1:].isdigit()]
    groups: dict[tuple[int, str], set[str]] = {}
    for n in [n for n in followed if n[-1:].isdigit()] + listed:
        part = rank_part(n)
        if part is not None and part[2]:
            groups.setdefault(part[:2], set())
    for n in listed:
        part = rank_part(n)
        if part is not None and part[2]:
            groups[part[:2]].add(n)
    for rank, kind in groups:
        groups[rank, kind].add(f"rank{rank}.csv" if kind == "csv" else f"rank{rank}.events.jsonl")
    return groups


#: an events file's first read: its lines are parsed one by one and most are heartbeats only counted, so it is
#: read in pieces (memory bounded, not the file's size: 2M heartbeat lines took 1.66 GB read whole); a piece
#: still holds a start event far longer than a writer writes (a 20 MB one is read, and cut to the bounds)
EVENTS_FIRST = 64 << 20


def followed(name: str, tail_path: str, store: Store, source: str,
             kind: tuple[int, str] | None = None) -> Followed | None:
    """The record for a rank file named ``name`` of ``source`` (``kind``: its rank_file(), when known).
    None for any other name (never used as a path), and for a rank another source already feeds."""
    if kind is None:
        part = rank_part(name)
        kind = part[:2] if part is not None else None
    if kind is not None and kind[1] == "devices":
        return Followed(NO_RANK, "devices", FileTail(tail_path), devices=DevicesParser())
    if kind is None or not store.claim(kind[0], source):
        return None
    f = Followed(kind[0], kind[1], FileTail(tail_path, first=FIRST_CHUNK if kind[1] == "csv" else EVENTS_FIRST))
    if f.kind == "csv":
        f.parser = CsvParser()
        store.add_rank_file(f.rank)
    return f


def extra_note(f: Followed) -> str | None:
    """What to say of a rank file with more extra columns than are kept (None: none dropped)."""
    p = f.parser
    if p is None or not p.extra_dropped:
        return None
    return f"rank{f.rank}.csv has {len(p.extra) + p.extra_dropped} extra columns: the first {len(p.extra)} are kept"


def ingest(store: Store, f: Followed, chunk: Chunk) -> None:
    """Parse one chunk of a rank file into the store (local and remote sources alike)."""
    if f.kind == "devices":
        assert f.devices is not None
        if chunk.reset:
            f.devices.reset()
        samples, bad = f.devices.parse(chunk.blob)
        store.ingest_devices(samples, bad + chunk.overlong)
        return
    store.file_time(f.rank, f.kind, chunk.mtime)
    if chunk.reset:
        if f.kind == "csv":
            assert f.parser is not None
            f.parser.reset()
            store.reset_rank(f.rank)
        else:
            store.reset_events(f.rank)
    if chunk.overlong:
        name = f"rank{f.rank}.csv" if f.kind == "csv" else f"rank{f.rank}.events.jsonl"
        store.note(f"{name}: a line of over {_files.MAX_LINE >> 20} MiB with no line end skipped (counted bad; "
                   "a sparse or zero-filled file?)")
    if f.kind == "csv":
        assert f.parser is not None
        rows = f.parser.parse(chunk.blob)
        rows.bad += chunk.overlong
        if (note := extra_note(f)) is not None:
            store.note(note)
        store.append(Batch.of(f.rank, rows))
    else:
        ev = parse_events(chunk.blob)
        store.ingest_events(f.rank, ev.items, ev.bad + chunk.overlong, ev.cut)


#: Largest chunk a round parses with other files' (one of more bytes costs its own parse little more than
#: the copy a join makes of it)
BATCH_BYTES = 4 << 20
#: Bytes a round keeps before it parses them (a first read of 10,000 files: a few parses, not one copy of all)
ROUND_BYTES = 32 << 20


class Round:
    """The rank files' chunks of one read round, parsed together: the new lines of every followed file whose
    parser shares a header go through one parse and into the store by one append (one hold of its lock) (at 1,024
    ranks a round is 1,024 one-line chunks; parsing each on its own was most of a followed row's cost).

    :meth:`add` keeps a chunk that can wait (new complete lines of a CSV file with its header read) and
    ingests anything else at once: a rank file's chunk after what it kept (the store sees each file's chunks
    in read order), an events or devices file's without waiting for the rows kept (a rank's rows and its
    events are two files, read in either order: a checkpoint found after its rows moves them);
    :meth:`add_digest` keeps a remote digest's merged lines, each standing for some rows (joined with the
    others: a host's digest is most of what a node set sends); :meth:`flush` ingests what it kept. A group
    the batched parse refuses (a quote, a bad line) is ingested file by file, so the rows are those the
    one-by-one reading gives."""

    def __init__(self, store: Store, *, overlap: bool = False) -> None:
        """``overlap``: a first read's (each file read once): what was kept is parsed on a thread of its own
        while the next files are read and the last parse's rows appended (pyarrow parses without the GIL:
        the two cores work at once); :meth:`flush` waits for it, :meth:`close` ends the thread."""
        self.store = store
        self.kept: list[tuple[Followed, Chunk, list[int] | None]] = []
        self.bytes = 0  # of the chunks kept
        self.headers: dict[bytes, CsvParser] = {}  # a first line read as a header -> the parser that read it
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="mstop-parse") if overlap else None
        self._pending: Future[tuple[Batch, list[str]]] | None = None

    def add(self, f: Followed, chunk: Chunk) -> None:
        if not (chunk.blob or chunk.reset or chunk.overlong):  # nothing new: only when the file was written
            if f.kind != "devices":
                self.store.file_time(f.rank, f.kind, chunk.mtime)
            return
        if (f.kind == "csv" and f.parser is not None and chunk.blob and len(chunk.blob) <= BATCH_BYTES
                and not (chunk.reset or chunk.overlong or chunk.more)):
            if f.parser.header is None:  # a first read: the header taken now, the rows parsed with the others'
                chunk = self._header(f, chunk)
            if f.parser.header is not None and chunk.blob:
                self.kept.append((f, chunk, None))
                self.bytes += len(chunk.blob)
                if self.bytes >= ROUND_BYTES:
                    self._send()
                return
        if f.kind == "csv":
            self.flush()  # after the rows kept before it (a file's rows in order)
        ingest(self.store, f, chunk)  # events and device samples: their own files (rows may wait for a flush)

    def add_digest(self, f: Followed, lines: bytes, weights: list[int]) -> None:
        """A digest's lines of ``f`` (complete, one a row: the sender says so, the parse checks), each standing
        for ``weights[i]`` rows written."""
        self.kept.append((f, Chunk(blob=lines), weights))

    def _header(self, f: Followed, chunk: Chunk) -> Chunk:
        """A file's first chunk without its header line (or the lines before it, counted bad: what the
        parser reads of them goes into the store now), to be parsed with other files' rows."""
        assert f.parser is not None
        blob, at = chunk.blob, 0
        nl = blob.find(b"\n")
        first = blob[:nl + 1] if nl >= 0 else b""
        known = self.headers.get(first)
        if known is not None:  # the header line of a file read before
            f.parser.header_of(known)
            at = len(first)
        while f.parser.header is None and at < len(blob):
            nl = blob.find(b"\n", at)
            nl = len(blob) - 1 if nl < 0 else nl
            rows = f.parser.parse(blob[at:nl + 1])
            at = nl + 1
            if len(rows) or rows.bad:
                self.flush()  # after the rows kept before it
                self.store.append(Batch.of(f.rank, rows))
            elif at == len(first) and f.parser.header is not None and b"\r" not in first:
                self.headers[first] = f.parser  # its first line was its header
        if (note := extra_note(f)) is not None:
            self.store.note(note)
        return Chunk(blob=blob[at:], mtime=chunk.mtime)

    def flush(self) -> None:
        """Ingest the chunks kept (and any parse under way), by one append each in the order they were read."""
        self._send()
        self._land()

    def _send(self) -> None:
        """Parse what is kept: now, or on the pool while the caller reads on (the parse before it landed)."""
        kept, self.kept, self.bytes = self.kept, [], 0
        if not kept:
            return
        if self._pool is None:
            self._into_store(*self._parsed(kept))
            return
        before, self._pending = self._pending, self._pool.submit(self._parsed, kept)
        if before is not None:
            self._into_store(*before.result())

    def _land(self) -> None:
        if self._pending is not None:
            got, self._pending = self._pending, None
            self._into_store(*got.result())

    def close(self) -> None:
        """Stop the parsing thread (of an ``overlap`` round), after any parse under way."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def _into_store(self, batch: Batch, notes: list[str]) -> None:
        for n in notes:
            self.store.note(n)
        self.store.append(batch)

    def _parsed(self, kept: list[tuple[Followed, Chunk, list[int] | None]]) -> tuple[Batch, list[str]]:
        """The kept chunks as one batch in the order they were read (those whose files share a header parsed
        together; a group the batched parse refuses, file by file), and what to say of them."""
        groups: dict[tuple[str, ...], list[int]] = {}
        for i, (f, _, _) in enumerate(kept):
            assert f.parser is not None and f.parser.header is not None
            groups.setdefault(tuple(f.parser.header), []).append(i)
        parsed: list[tuple[Rows, int, int] | None] = [None] * len(kept)
        for idx in groups.values():
            items = [kept[i] for i in idx]
            parser = items[0][0].parser
            assert parser is not None
            joined = parse_joined(parser, [c.blob for _, c, _ in items]) if len(items) > 1 else None
            if joined is None or any(w is not None and len(w) != n for (_, _, w), n in zip(items, joined[1])):
                continue
            rows, counts = joined
            if any(w is not None for _, _, w in items):
                rows.weights = np.concatenate([np.asarray(w if w is not None else np.ones(n), np.float64)
                                               for (_, _, w), n in zip(items, counts)])
            at = 0
            for i, n in zip(idx, counts):
                parsed[i] = (rows, at, at + n)
                at += n
        batch, notes = Batch(), []
        for (f, chunk, weights), got in zip(kept, parsed):
            batch.file_time(f.rank, f.kind, chunk.mtime)
            if got is None:
                rows = self._alone(f, chunk, weights, notes)
                got = (rows, 0, len(rows))
            if got[2] > got[1] or got[0].bad:
                batch.parts.append((f.rank, *got))
        return batch, notes

    def _alone(self, f: Followed, chunk: Chunk, weights: list[int] | None, notes: list[str]) -> Rows:
        """One kept chunk's rows parsed on its own: a digest's lines that are not each a row are taken as rows
        of one (the rows they stand for beyond them not counted), and said (in ``notes``)."""
        assert f.parser is not None
        rows = f.parser.parse(chunk.blob)
        if (note := extra_note(f)) is not None:
            notes.append(note)
        if weights is not None:
            if rows.bad or len(rows) != len(weights):
                notes.append(f"rank {f.rank}: a host's digest lines that are not each a row were read as they are")
            else:
                rows.weights = np.asarray(weights, np.float64)
        return rows
