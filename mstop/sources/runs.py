"""A directory of runs (``mstop runs/``): which of its folders are runs, and each run's last rows.

A folder is a run when it holds rank files of mstop's writer (``rank<R>.csv``, ``rank<R>.events.jsonl``)
or a MindFormers job's logs; folders are searched down to :data:`MAX_DEPTH` levels below the root and
never inside a run (its ``profile/`` folder, a MindFormers ``output/`` below it). The list reads each
writer run *near its end* (:class:`~mstop.sources.rankfiles.Tail`: the job rank's last rows for its loss
EMA, the other ranks' last rows, the events' first start and last lines) and goes on reading only what
is appended, so a thousand long runs list in about a second; a run opened in the monitor is read whole
there. MindFormers logs are read whole (their sessions and batch sizes are in their first lines).
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field

from mstop_writer.schema import CSV_PATTERN, EVENTS_PATTERN

from ..engine.reader import RunReader
from ..engine.store import Store
from ..safe import clean
from .local import LocalSource
from .mflog import WORKER_LOG, MfLogSource, has_logs
from .procwatch import pid_in
from .protocol import SourceError
from .rankfiles import Tail

#: Levels of folders below the root searched for runs (``runs/<group>/<exp>/<seed>``).
MAX_DEPTH = 3
#: the most runs one folder's list holds (each a store and, while followed, a reader): past it the rest are
#: counted in a line, never read (a host answering 100,000 runs made 2.2 GB of them)
MAX_RUNS = 10_000


def keep_runs(found: list[tuple[str, str]], problems: list[str],
              known: dict) -> tuple[list[tuple[str, str]], list[str]]:
    """At most MAX_RUNS of ``found`` (the runs already listed first, then the rest in order), and the
    problems with a line counting those left out."""
    if len(found) <= MAX_RUNS:
        return found, problems
    kept = [f for f in found if f[0] in known][:MAX_RUNS]
    kept += [f for f in found if f[0] not in known][:MAX_RUNS - len(kept)]
    left = len(found) - len(kept)
    return kept, [*problems, f"{left:,} more runs not listed (a list holds at most {MAX_RUNS:,}): open a folder "
                             "below to see them"]
#: A run's tail store is read again from near the end once it holds this many rows per rank on
#: average: a list left open for days must not grow into each run's whole history.
REBUILD_ROWS = 2_000
_RANK_FILE = re.compile(f"(?:{CSV_PATTERN})|(?:{EVENTS_PATTERN})")
_EVENTS = re.compile(EVENTS_PATTERN)
_LOG_HINT = re.compile(r"rank_\d+|log|info\.log|msrun_log|worker_\d+\.log")


def _is_run(path: str, names: list[str]) -> str | None:
    """"writer" or "mflog" when the folder ``path`` (holding ``names``) is a run, else None."""
    if any(_RANK_FILE.fullmatch(n) for n in names):
        return "writer"
    if any(_LOG_HINT.fullmatch(n) for n in names) and has_logs(path):
        return "mflog"
    return None


def find_runs(root: str, max_depth: int = MAX_DEPTH) -> tuple[list[tuple[str, str]], list[str]]:
    """The runs below ``root`` as (path, kind), sorted by path, and a line for each folder that could not
    be read, and for folders deeper than ``max_depth`` levels that were not searched. ``root`` itself is not
    among them (a root that is a run opens the monitor instead). A folder reached by two paths (a link
    ``latest -> run42``) is listed once, by its own name rather than the link's."""
    runs: list[tuple[str, str]] = []
    problems: list[str] = []
    seen = {os.path.realpath(root)}
    level = [root]
    for depth in range(max_depth):
        below: list[str] = []
        for d in level:
            try:
                with os.scandir(d) as it:
                    entries = [(e.path, e.is_symlink()) for e in it if not e.name.startswith(".") and _is_dir(e)]
            except OSError as e:
                problems.append(f"{clean(d, 4096)}: cannot be read: {e.strerror or e}")
                continue
            for sub, _ in sorted(entries, key=lambda pe: (pe[1], pe[0])):  # real folders before links to them
                real = os.path.realpath(sub)
                if real in seen:
                    continue  # a second path to a folder already listed or searched (or a loop)
                seen.add(real)
                try:
                    names = os.listdir(sub)
                except OSError as e:
                    problems.append(f"{clean(sub, 4096)}: cannot be read: {e.strerror or e}")
                    continue
                kind = _is_run(sub, names)
                if kind is not None:
                    runs.append((sub, kind))
                elif depth + 1 < max_depth:
                    below.append(sub)
                elif any(_is_subdir(sub, n) for n in names):
                    problems.append(f"{clean(sub, 4096)}: holds folders {max_depth} levels below "
                                    f"{clean(root, 4096)}, deeper than runs are looked for (--depth N)")
        level = below
    runs.sort()
    return _without_job_logs(runs, problems), problems


#: files looked at to tell whose a log folder is: a writer run's events files (their first lines) and a log
#: folder's worker logs (their heads), at most this many of each
WHOSE_FILES = 16


def _without_job_logs(runs: list[tuple[str, str]], problems: list[str]) -> list[tuple[str, str]]:
    """``runs`` without the log folders that are a writer run's own job's (``msrun --log_dir`` beside the run
    it writes): a folder of logs whose workers' pids (MindSpore's line prefix) are those its sibling writer
    run's start events name is the same job, not a run of its own (it would list ``waiting``: a writer job's
    logs hold no steps); each is said in ``problems``."""
    writers: dict[str, list[str]] = {}
    for path, kind in runs:
        if kind == "writer":
            writers.setdefault(os.path.dirname(path), []).append(path)
    out = []
    for path, kind in runs:
        owner = None
        if kind == "mflog" and writers.get(os.path.dirname(path)):
            pids = _worker_pids(path)
            owner = next((w for w in writers[os.path.dirname(path)] if pids & _writer_pids(w)), None)
        if owner is None:
            out.append((path, kind))
        else:
            problems.append(f"{clean(path, 4096)}: the logs of {clean(os.path.basename(owner), 256)}'s processes "
                            "(msrun --log_dir): shown with that run, not as a run of its own")
    return out


def _worker_pids(path: str) -> set[int]:
    """The pids msrun's worker logs in ``path`` name (their first MindSpore-prefixed lines)."""
    try:
        names = sorted(n for n in os.listdir(path) if WORKER_LOG.fullmatch(n))[:WHOSE_FILES]
    except OSError:
        return set()
    return {p for n in names if (p := pid_in(os.path.join(path, n))) is not None}


def _writer_pids(path: str) -> set[int]:
    """The pids a writer run's start events name (the first line of each events file, up to 64 KiB)."""
    out: set[int] = set()
    try:
        names = sorted(n for n in os.listdir(path) if _EVENTS.fullmatch(n))[:WHOSE_FILES]
    except OSError:
        return out
    for n in names:
        try:
            with open(os.path.join(path, n), "rb") as f:
                first = json.loads(f.read(64 << 10).split(b"\n", 1)[0])
        except (OSError, ValueError):
            continue
        if isinstance(first, dict) and first.get("kind") == "start" and type(first.get("pid")) is int:
            out.add(first["pid"])
    return out


def _is_subdir(parent: str, name: str) -> bool:
    return not name.startswith(".") and os.path.isdir(os.path.join(parent, name))


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def kind_of(path: str) -> str | None:
    """"writer" or "mflog" when ``path`` is itself a run (the monitor's directory), else None (a folder of
    runs, an empty or unreadable one)."""
    try:
        return _is_run(path, os.listdir(path))
    except OSError:
        return None


def run_spec(run: RunTail) -> str:
    """How a run of the list is named as a source (``host:/path`` over ssh): its key in the list, and what
    the monitor, compare and summary are given for it."""
    return f"{run.host}:{run.path}" if run.host else run.path


@dataclass
class RunTail:
    """One run of the list: a store fed from near the end of its files, and how it was read."""

    path: str
    name: str  # its path below the root: how the list names it
    kind: str  # "writer" or "mflog"
    host: str = ""  # "" for this machine; the ssh host otherwise
    store: Store = field(default_factory=Store)
    error: str | None = None  # why it cannot be read now (shown in its row)
    full: bool = False  # the store holds the run's whole history (a MindFormers log, or opened)
    read_at: float = 0.0  # monotonic time of its last read
    _source: LocalSource | MfLogSource | None = None
    _seen: tuple | None = None  # its rank files' names, sizes and times when last read

    def _signature(self) -> tuple | None:
        """Its rank files' (name, size, mtime) now: one directory scan and a stat each (None: a MindFormers
        log, whose files live below it, is read every time)."""
        if self.kind != "writer":
            return None
        try:
            with os.scandir(self.path) as it:
                return tuple(sorted((e.name, (st := e.stat()).st_size, st.st_mtime_ns) for e in it
                                    if _RANK_FILE.fullmatch(e.name)))
        except OSError:
            return None

    def read(self) -> None:
        """Read what is new (the first call: near the end); nothing when no rank file changed; rebuilt from
        near the end once grown big."""
        seen = self._signature()
        if seen is not None and seen == self._seen and self._source is not None:
            self.read_at = time.monotonic()
            return  # nothing new: no file opened
        self._seen = seen
        if self._source is not None and not self.full and self.store.rows > REBUILD_ROWS * max(
                1, RunReader.count(self.store)):
            self._source, self.store = None, Store()
        if self._source is None:
            self._source = (MfLogSource(self.path, self.store) if self.kind == "mflog"
                            else LocalSource(self.path, self.store, tail=Tail()))
            self.full = self.kind == "mflog"
        try:
            if not os.path.isdir(self.path):
                raise SourceError(f"{clean(self.path, 4096)}: no such directory (removed?)", missing=True)
            self._source.read_all()
            self.error = None
        except (SourceError, OSError) as e:
            self.error = str(e)
        self.read_at = time.monotonic()


    def history_version(self) -> tuple | None:
        """Its rank files as last read (names, sizes, times): a history read before is stale when they moved;
        None for a MindFormers log (read whole anyway)."""
        return self._seen

    def adopt(self, store: Store, source: object) -> None:
        """Keep the whole history a monitor read of this run (and its source, which reads on from where it
        stopped): the row's figures from all of it from now on, goodput included."""
        self.store, self._source, self.full = store, source, True  # type: ignore[assignment]
        self._seen = None


class RunsWatch:
    """The runs below one local root, found again by :meth:`discover` (the runs list's model calls it, and
    reads each run); :attr:`runs` is a dict replaced whole, never changed in place, so another thread may
    read it while one discovers."""

    def __init__(self, root: str, *, max_depth: int = MAX_DEPTH) -> None:
        self.root = os.path.abspath(root)
        self.label = root
        self.max_depth = max_depth
        self.runs: dict[str, RunTail] = {}
        self.problems: list[str] = []

    @classmethod
    def single(cls, path: str) -> RunsWatch:
        """A watch of one run (``mstop runs/ other/run``: that run listed beside the folder's)."""
        w = cls(path, max_depth=0)
        w.root = os.path.dirname(os.path.abspath(path))
        w.only = os.path.abspath(path)
        return w

    only: str | None = None  # single(): the one run, else None

    def discover(self) -> list[RunTail]:
        """Find the runs now; return the ones that are new (already-known runs keep their stores)."""
        if self.only is not None:
            found, problems = [(self.only, kind_of(self.only) or "writer")], []
        elif not os.path.isdir(self.root):
            raise SourceError(f"{clean(self.root, 4096)}: no such directory", missing=True)
        else:
            found, problems = find_runs(self.root, self.max_depth)
        found, problems = keep_runs(found, problems, self.runs)
        runs, new = {}, []
        for path, kind in found:
            old = self.runs.get(path)
            if old is None or old.kind != kind:
                old = RunTail(path, clean(os.path.relpath(path, self.root), 4096), kind)  # shown: no control codes
                new.append(old)
            runs[path] = old
        self.runs, self.problems = runs, problems
        return new

    def read(self, runs: list[RunTail] | None = None) -> None:
        """Read (the new bytes of) ``runs``, by default every run."""
        for run in list(self.runs.values()) if runs is None else runs:
            run.read()
