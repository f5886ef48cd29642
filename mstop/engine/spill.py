"""A store's oldest rows, out of memory: written to one private file, read back exactly when asked for.

A ``top`` left open for a week on a 1,024-rank job must not hold every row it ever read (at one row every 5 s
that was ~14 GB). The store keeps a budget of rows in memory (:data:`KEEP_ROWS`, ``MSTOP_KEEP_ROWS``): past
it, each rank's oldest rows go here in chunks of :data:`SPILL_ROWS` rows, column by column, and are read back
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


#: Rows all ranks together hold in memory before their oldest go to the spill file (``MSTOP_KEEP_ROWS``;
#: ``all``: never spill). A million rows are 20-90 MB (17 bytes a row and 4 per float column that varies); a
#: rank holds between its share and a chunk more.
KEEP_ROWS = env_int("MSTOP_KEEP_ROWS", 1_000_000, 0)
#: Rows a spilled chunk holds (``MSTOP_SPILL_ROWS``: the tests make it small to spill in every run).
SPILL_ROWS: int = env_int("MSTOP_SPILL_ROWS", 512, 1) or 512
#: Rows a rank always holds, however many ranks share the budget: its recent rows, which the live rules read
#: at every frame (a spike's 100 previous steps and 20 recent ones).
MIN_HELD = max(1, SPILL_ROWS // 2)
#: Bytes of columns read back that are kept for the next reader (the newest used): a chart of a short run
#: or a resumed rank reads the same spilled rows at every frame.
CACHE_BYTES = 32 << 20


@dataclass(frozen=True)
class Chunk:
    """Rows ``first``..``first + n - 1`` of one rank in the spill file: each column's (offset, dtype), or its
    one value when every row of the chunk held it (a constant column costs no bytes)."""

    first: int
    n: int
    cols: dict[str, tuple[int, str] | float]
    #: what a reader checks before reading it back: its latest time, its lowest and highest step, and the latest
    #: time of each session's rows in it (mstop.engine.ledgerfold: a late checkpoint)
    tmax: float = float("nan")
    smin: float = float("nan")
    smax: float = float("nan")
    sess_tmax: dict[int, float] | None = None


class SpillFile:
    """One store's spill file (opened at the first write)."""

    def __init__(self, directory: str | None = None) -> None:
        self.directory = directory or os.environ.get("MSTOP_SPILL_DIR") or None
        self._fd: int | None = None
        self._end = 0
        self._lock = threading.Lock()
        self.failed: str | None = None  # why a write failed (the rows stayed in memory)
        self.written = 0  # bytes written
        self.reads = 0  # reads that went to the file (not the cache)
        self.ram_disk: str | None = None  # the file's directory when it is a RAM disk (tmpfs): no memory saved
        self._cache: OrderedDict[tuple[int, int, str], np.ndarray] = OrderedDict()
        self._cached = 0  # bytes in the cache

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
            if got is not None:
                self._cache.move_to_end(key)
                return got
        got = self._read(off, n, dtype)
        got.flags.writeable = False
        with self._lock:
            if key not in self._cache:
                self._cache[key] = got
                self._cached += got.nbytes
                while self._cached > CACHE_BYTES and self._cache:
                    self._cached -= self._cache.popitem(last=False)[1].nbytes
        return got

    def _read(self, off: int, n: int, dtype: str) -> np.ndarray:
        self.reads += 1
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

    def write_chunk(self, first: int, columns: dict[str, np.ndarray]) -> Chunk:
        """Rows ``first``.. of one rank, each column's values (equal lengths): written, constant ones kept as
        their value."""
        cols: dict[str, tuple[int, str] | float] = {}
        n = 0
        for name, v in columns.items():
            n = len(v)
            if v.dtype.kind == "f" and n and _constant(v):
                cols[name] = float(v[0])
            else:
                cols[name] = (self.put(v), v.dtype.str)
        t, step, sess = columns["time"], columns["step"], columns["session"]
        by = {int(k): float(np.max(t[sess == k])) for k in np.unique(sess).tolist()}
        return Chunk(first, n, cols, float(np.max(t)), float(np.min(step)), float(np.max(step)), by)

    def read(self, chunk: Chunk, name: str, dtype: np.dtype) -> np.ndarray:
        """Column ``name`` of a chunk as ``dtype`` (NaN when the chunk did not have it)."""
        got = chunk.cols.get(name)
        if got is None:
            return np.full(chunk.n, np.nan, dtype)
        if isinstance(got, float):
            return np.full(chunk.n, got, dtype)
        off, code = got
        return self.get(off, chunk.n, code).astype(dtype, copy=False)

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


def _constant(v: np.ndarray) -> bool:
    """Whether every value is the first (NaN equal to NaN, and -0.0 told from 0.0: read back bit for bit)."""
    b = v.view(np.uint32 if v.dtype.itemsize == 4 else np.uint64)
    return bool((b == b[0]).all())
