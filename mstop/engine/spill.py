"""A store's oldest rows, out of memory: written to one private file, read back exactly when asked for.

A ``top`` left open for a week on a 1,024-rank job must not hold every row it ever read (at one row every 5 s
that was ~14 GB). The store keeps a budget of rows in memory (:class:`SpillBudget`: ``keep_rows``,
``MSTOP_KEEP_ROWS``): past it, each rank's oldest rows go here in chunks of ``chunk_rows`` rows
(``MSTOP_SPILL_ROWS``), column by column, and are read back
(the same bytes: the same float32 and float64 values, so every figure is what it was) by the few readers that
need history older than what a rank holds (a resume that reclassifies old rows, an exact value at an old step,
a chart's first draw of an old stretch). What the screen and the rules read at every frame (each rank's last
rows, the folds, the charts' block summaries) stays in memory.

The file is a :func:`tempfile.TemporaryFile` in ``MSTOP_SPILL_DIR`` (default: the system's temporary
directory, ``TMPDIR``): created private (mode 0600, ``O_EXCL``), unlinked at once, so nothing is left behind
however mstop ends, and nothing a run's files say decides where it is. Writes happen under the store's lock
(appends only); reads use ``pread`` and may come from any thread. A write that fails (a full disk) keeps the
rows in memory and says so once (:attr:`SpillFile.failed`): nothing is lost.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np


def env_int(name: str, default: int | None, least: int) -> int | None:
    """An integer setting from the environment (``all`` or ``none``: no limit); the default when unset or
    unreadable."""
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in ("all", "none", "unlimited"):
        return None
    try:
        return max(least, int(raw.replace("_", "")))
    except ValueError:
        return default


@dataclass(frozen=True)
class SpillBudget:
    """How many rows a store holds in memory. ``keep_rows``: rows all ranks together hold before their oldest
    go to the spill file (None: never spill; a million rows are 20-90 MB, 17 bytes a row and 4 per float column
    that varies; a rank holds between its share and a chunk more); ``chunk_rows``: rows a spilled chunk holds;
    ``min_held``: rows a rank always holds however many ranks share the budget, its recent rows, which the
    live rules read at every frame (a spike's 100 previous steps and 20 recent ones; default half a chunk)."""

    keep_rows: int | None = 1_000_000
    chunk_rows: int = 512
    min_held: int = 0

    def __post_init__(self) -> None:
        if self.keep_rows is not None and self.keep_rows < 0 or self.chunk_rows < 1 or self.min_held < 0:
            raise ValueError(f"a spill budget needs keep_rows >= 0 and chunk_rows >= 1: {self!r}")
        if not self.min_held:
            object.__setattr__(self, "min_held", max(1, self.chunk_rows // 2))

    @classmethod
    def from_environment(cls) -> SpillBudget:
        """The budget ``MSTOP_KEEP_ROWS`` (``all``: never spill) and ``MSTOP_SPILL_ROWS`` set, read now (each
        store made reads them: a process that sets them after importing mstop is heard)."""
        chunk = env_int("MSTOP_SPILL_ROWS", 512, 1) or 512
        return cls(keep_rows=env_int("MSTOP_KEEP_ROWS", 1_000_000, 0), chunk_rows=chunk)

#: Bytes of columns read back that are kept for the next reader (the newest used): a chart of a short run
#: or a resumed rank reads the same spilled rows at every frame.
CACHE_BYTES = 32 << 20
#: Bytes a one-pass reader keeps of what it read back (:func:`one_pass`): a rank's chunks, read a value at a time
PASS_BYTES = 4 << 20

_local = threading.local()


@contextmanager
def one_pass() -> Iterator[None]:
    """Columns read back on this thread inside the block (the incident scan of every rank's history) are kept
    only while it lasts, in a small cache of their own (PASS_BYTES), not in the one frames share: a scan every
    few minutes filled that with what no frame reads again (1,024 ranks followed for an hour: 32 MB held for
    good, most of the memory the run grew by)."""
    prev = getattr(_local, "kept", None)
    if prev is None:
        _local.kept = _Lru(PASS_BYTES)
    try:
        yield
    finally:
        if prev is None:
            _local.kept = None


class _Lru:
    """The newest arrays read back, up to ``limit`` bytes (not thread-safe: one thread's, or under a lock)."""

    def __init__(self, limit: int) -> None:
        self.limit, self.bytes = limit, 0
        self.kept: OrderedDict[tuple[int, int, str], np.ndarray] = OrderedDict()

    def get(self, key: tuple[int, int, str]) -> np.ndarray | None:
        got = self.kept.get(key)
        if got is not None:
            self.kept.move_to_end(key)
        return got

    def put(self, key: tuple[int, int, str], value: np.ndarray) -> None:
        if key in self.kept:
            return
        self.kept[key] = value
        self.bytes += value.nbytes
        while self.bytes > self.limit and self.kept:
            self.bytes -= self.kept.popitem(last=False)[1].nbytes


@dataclass(frozen=True)
class Written:
    """One spill of one rank's rows (a whole number of chunks, one write): each column's offset in the file,
    its rows in a row, or its one value when every row spilled held it (a constant column costs no bytes)."""

    first: int  # the rank's row its first row is
    rows: int
    cols: dict[str, tuple[int, str] | float]


@dataclass(frozen=True)
class Chunk:
    """Rows ``first``..``first + n - 1`` of one rank in the spill file, part of a :class:`Written`; with what a
    reader checks before reading it back: its latest time, its lowest and highest step, and the latest time of
    each session's rows in it (mstop.engine.ledgerfold: a late checkpoint)."""

    first: int
    n: int
    written: Written
    tmax: float
    smin: float
    smax: float
    sess_tmax: dict[int, float]

    def has(self, name: str) -> tuple[int, str] | float | None:
        """Where column ``name`` of this chunk is: (offset, dtype), its one value, or None (not there)."""
        got = self.written.cols.get(name)
        if isinstance(got, tuple):
            off, code = got
            return off + (self.first - self.written.first) * np.dtype(code).itemsize, code
        return got


class SpillFile:
    """One store's spill file (opened at the first write)."""

    def __init__(self, directory: str | None = None) -> None:
        self.directory = directory or os.environ.get("MSTOP_SPILL_DIR") or None
        self._fd: int | None = None
        self._end = 0
        self._lock = threading.Lock()
        self.failed: str | None = None  # why a write failed (the rows stayed in memory)
        self.written = 0  # bytes written
        self.ram_disk: str | None = None  # the file's directory when it is a RAM disk (tmpfs): no memory saved
        self._cache = _Lru(CACHE_BYTES)  # what frames read back (CACHE_BYTES), under the lock

    def _open(self) -> int:
        if self._fd is None:
            f = tempfile.TemporaryFile(prefix="mstop-spill-", dir=self.directory)
            self._fd = os.dup(f.fileno())
            f.close()
            where = self.directory or tempfile.gettempdir()
            self.ram_disk = where if fs_type(where) in ("tmpfs", "ramfs") else None
        return self._fd

    def put(self, data: np.ndarray) -> int:
        """Append an array's bytes; their offset. OSError when the file cannot take them."""
        buf = memoryview(np.ascontiguousarray(data)).cast("B")
        with self._lock:
            fd, off = self._open(), self._end
            done = 0
            while done < len(buf):
                done += os.pwrite(fd, buf[done:], off + done)
            self._end += len(buf)
            self.written += len(buf)
            return off

    def get(self, off: int, n: int, dtype: str) -> np.ndarray:
        """``n`` values of ``dtype`` written at ``off`` (read-only: the newest read are kept, CACHE_BYTES)."""
        key = (off, n, dtype)
        with self._lock:
            got = self._cache.get(key)
        own: _Lru | None = getattr(_local, "kept", None)  # a one-pass reader's own
        if got is None and own is not None:
            got = own.get(key)
        if got is not None:
            return got
        got = self._read(off, n, dtype)
        got.flags.writeable = False
        if own is not None:
            own.put(key, got)
            return got
        with self._lock:
            self._cache.put(key, got)
        return got

    def _read(self, off: int, n: int, dtype: str) -> np.ndarray:
        size = n * np.dtype(dtype).itemsize
        out = bytearray(size)
        view = memoryview(out)
        got = 0
        fd = self._fd
        if fd is None:
            raise OSError("the spill file was never written")
        while got < size:
            k = os.preadv(fd, [view[got:]], off + got)
            if k <= 0:
                raise OSError(f"the spill file ends at {off + got}, {size - got} bytes short")
            got += k
        return np.frombuffer(out, dtype=dtype)

    def write_chunks(self, first: int, size: int, k: int, blocks: list[tuple[tuple[str, ...], np.ndarray]],
                     constant: dict[str, float]) -> list[Chunk]:
        """Rows ``first``.. of one rank, ``k`` chunks of ``size`` rows: blocks of columns (their names, and
        their rows: one column, or a row-major block of several; a block of no column is skipped), among them
        ``time``, ``step`` and ``session``, and the columns of one value throughout (``constant``; a float
        column of one value bit for bit is found so too). One write: each column's rows in a row, so a reader
        of many chunks reads each column once."""
        m = k * size
        cols: dict[str, tuple[int, str] | float] = dict(constant)
        parts: list[np.ndarray] = []
        off = 0
        named: dict[str, np.ndarray] = {}
        for names, v in blocks:
            if not names:
                continue
            v = v[:m].reshape(m, -1)
            if v.dtype.kind == "f":  # one value bit for bit (NaN as NaN, -0.0 as -0.0): kept as that value
                bits = v.view(np.uint32 if v.dtype.itemsize == 4 else np.uint64)
                same = (bits == bits[0]).all(axis=0)
            else:
                same = np.zeros(v.shape[1], bool)
            for j in np.flatnonzero(same).tolist():
                cols[names[j]] = float(v[0, j])
            vary = np.flatnonzero(~same)
            if len(vary):
                by_col = np.ascontiguousarray(v[:, vary].T)  # each column's rows in a row
                for i, j in enumerate(vary.tolist()):
                    cols[names[j]] = (off + i * by_col.shape[1] * by_col.itemsize, v.dtype.str)
                parts.append(by_col.reshape(-1).view(np.uint8))
                off += by_col.nbytes
            for j, name in enumerate(names):
                if name in ("time", "step", "session"):
                    named[name] = v[:, j]
        base = self.put(np.concatenate(parts)) if parts else 0
        w = Written(first, m, {n: ((v[0] + base, v[1]) if isinstance(v, tuple) else v) for n, v in cols.items()})
        t, step, sess = (named[c].reshape(k, size) for c in ("time", "step", "session"))
        tmax, smin, smax = t.max(axis=1).tolist(), step.min(axis=1).tolist(), step.max(axis=1).tolist()
        one = bool((sess == sess[0, 0]).all())
        out = []
        for j in range(k):
            by = {int(sess[0, 0]): tmax[j]} if one else \
                {int(x): float(np.max(t[j][sess[j] == x])) for x in np.unique(sess[j]).tolist()}
            out.append(Chunk(first + j * size, size, w, tmax[j], smin[j], smax[j], by))
        return out

    def read(self, chunks: list[Chunk], name: str, dtype: np.dtype) -> np.ndarray:
        """Column ``name`` of consecutive chunks of one rank, as ``dtype`` (NaN where a chunk did not have it):
        one read for the chunks of one write."""
        out: list[np.ndarray] = []
        i = 0
        while i < len(chunks):
            c = chunks[i]
            got = c.has(name)
            j = i + 1
            while j < len(chunks) and chunks[j].written is c.written:
                j += 1
            n = sum(x.n for x in chunks[i:j])
            if got is None:
                out.append(np.full(n, np.nan, dtype))
            elif isinstance(got, float):
                out.append(np.full(n, got, dtype))
            else:
                out.append(self.get(got[0], n, got[1]).astype(dtype, copy=False))
            i = j
        return out[0] if len(out) == 1 else np.concatenate(out)

    @property
    def cached_bytes(self) -> int:
        """Bytes of columns read back kept for the next reader."""
        return self._cache.bytes

    def stat(self) -> os.stat_result | None:
        """The file's status (its mode, its links: none once unlinked); None before it is opened."""
        return os.fstat(self._fd) if self._fd is not None else None

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __del__(self) -> None:  # the file is unlinked already: closing frees its blocks
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit anything may be gone
            pass


def fs_type(path: str) -> str | None:
    """The type of the file system ``path`` is on (the longest mount point above it in /proc/self/mounts)."""
    path = os.path.realpath(path)
    best, kind = "", None
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 3:
                    continue
                mnt = parts[1].replace("\\040", " ")
                if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best):
                    best, kind = mnt, parts[2]
    except OSError:
        return None
    return kind
