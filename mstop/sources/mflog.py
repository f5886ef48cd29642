"""Following a MindFormers job through its logs: ``mstop output/`` for a job nobody changed.

MindFormers writes ``output/log/rank_<R>/info.log`` with Python's ``RotatingFileHandler`` (50 MB,
five backups by default): a restarted job appends to it, and a full one is renamed ``info.log.1``
(``.1`` becoming ``.2`` ...) while a new ``info.log`` begins. :class:`LogStream` reads a rank's files as
one stream: oldest backup first on a cold read, and across a rotation by following the file it was
reading (by inode) to its new name, so no line is lost or read twice. :class:`MfLogSource` polls the
rank folders (log lines come once a step; polling also works on network filesystems) and parses with
:class:`~mstop.formats.mflog.MfLogParser`. The remote follower has its own copy of these rules.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import threading
from typing import Any, Callable

from ..engine.reader import RunReader
from ..engine.store import Batch, Store
from ..fmt import count as fmt_count
from ..formats.mflog import MfLogParser, SchedulerLog, WorkerState
from .files import CHUNK, MAX_LINE, SIGNATURE, Chunk, FileTail, _pread, hole_at
from .protocol import SourceState

log = logging.getLogger("mstop")

LOG_NAME = "info.log"
RANK_DIR = re.compile(r"rank_(0|[1-9][0-9]{0,6})")
ROTATED = re.compile(r"info\.log\.([1-9][0-9]{0,3})")
#: the name a rank's log stream has in a store and over ssh: ``rank_<R>/info.log``, or msrun's ``worker_<R>.log``
STREAM = re.compile(r"rank_(0|[1-9][0-9]{0,6})/info\.log|worker_(0|[1-9][0-9]{0,6})\.log")
#: seconds between polls while following
POLL = 1.0


def stream_name(rank: int) -> str:
    return f"rank_{rank}/{LOG_NAME}"


def stream_rank(name: str) -> int | None:
    """The rank of a log stream's name (``rank_3/info.log``), or None for any other name."""
    m = STREAM.fullmatch(name)
    return int(m.group(1) or m.group(2)) if m is not None else None


#: msrun's per-rank logs (``msrun --log_dir=DIR``: ``DIR/worker_<N>.log``, each rank's stdout and stderr) and
#: its scheduler's; a MindFormers job's ``output/msrun_log/`` holds them
WORKER_LOG = re.compile(r"worker_(0|[1-9][0-9]{0,6})\.log")
SCHEDULER_LOG = "scheduler.log"
MSRUN_DIR = "msrun_log"


def _numbered(folder: str, pattern: re.Pattern[str], kind: Callable[[str], bool]) -> dict[int, str]:
    """The entries of ``folder`` whose names ``pattern`` matches, by the number in them, that ``kind``
    (os.path.isfile, os.path.isdir) holds for."""
    try:
        names = os.listdir(folder)
    except OSError:
        return {}
    out = {}
    for n in names:
        m = pattern.fullmatch(n)
        if m is not None and kind(os.path.join(folder, n)):
            out[int(m.group(1))] = n
    return out


def worker_logs(folder: str) -> dict[int, str]:
    """The msrun worker logs in ``folder`` by rank (from the file name)."""
    return _numbered(folder, WORKER_LOG, os.path.isfile)


def find_logs(path: str) -> dict[int, tuple[str, str]]:
    """Every rank's log of a job nobody changed, as rank → (folder, file name): a MindFormers job's
    ``rank_<R>/info.log`` (for its ``output/``, ``output/log/`` or one ``rank_<R>``), else msrun's
    ``worker_<N>.log`` (in ``path`` or its ``msrun_log/``). MindFormers' own logs win: the worker logs of
    such a job hold the same lines."""
    found = log_root(path)
    if found is not None:
        root, only = found
        return {r: (d, LOG_NAME) for r, d in _rank_dirs(root).items()
                if (only is None or r == only) and _has_log(d)}
    path = os.path.abspath(path)
    for folder in (path, os.path.join(path, MSRUN_DIR)):
        workers = worker_logs(folder)
        if workers:
            return {r: (folder, n) for r, n in workers.items()}
    return {}


def has_logs(path: str) -> bool:
    """Whether ``path`` is a job read from its own logs (MindFormers' or msrun's)."""
    return bool(find_logs(path))


def _has_log(folder: str) -> bool:
    try:
        return any(n == LOG_NAME or ROTATED.fullmatch(n) for n in os.listdir(folder))
    except OSError:
        return False


def _rank_dirs(root: str) -> dict[int, str]:
    return {r: os.path.join(root, n) for r, n in _numbered(root, RANK_DIR, os.path.isdir).items()}


def log_root(path: str) -> tuple[str, int | None] | None:
    """Where a MindFormers job's rank folders are, for its ``output/``, its ``output/log/`` or one
    ``rank_<R>`` folder: (the folder holding ``rank_<R>`` folders, the one rank to read or None for all);
    None when ``path`` is none of these."""
    path = os.path.abspath(path)
    m = RANK_DIR.fullmatch(os.path.basename(path))
    if m is not None and _has_log(path):
        return os.path.dirname(path), int(m.group(1))
    for root in (os.path.join(path, "log"), path):
        if any(_has_log(d) for d in _rank_dirs(root).values()):
            return root, None
    return None


def has_writer_files(path: str) -> bool:
    """Whether ``path`` holds rank files of mstop's writer (they win over logs beside them)."""
    from .rankfiles import rank_file

    try:
        return any((k := rank_file(n)) is not None and k[1] != "devices" for n in os.listdir(path))
    except OSError:
        return False


class LogStream:
    """A rank's log files (``info.log.K`` ... ``info.log.1``, ``info.log``; or ``worker_3.log``'s) read as one
    stream of lines."""

    def __init__(self, folder: str, name: str = LOG_NAME) -> None:
        self.folder = folder
        self.name = name
        self._rotated = re.compile(re.escape(name) + r"\.([1-9][0-9]{0,3})")
        self.ident: tuple[int, int] | None = None  # the file being read
        self.offset = 0  # bytes of it read
        self.lines = FileTail(os.path.join(folder, name))  # only splits the bytes into lines
        #: times lines were lost: the file being read rotated past the last backup between two reads, or
        #: truncated in place (copytruncate) with no copy of it found
        self.lost = 0
        self._head = b""  # the first bytes of the file being read: its copy after a copytruncate starts so
        self.denied: set[str] = set()  # its files this user may not read

    def chain(self) -> list[tuple[str, os.stat_result]]:
        """The regular log files, oldest first."""
        try:
            names = os.listdir(self.folder)
        except OSError:
            return []
        found = []
        for n in names:
            m = self._rotated.fullmatch(n)
            if m is not None or n == self.name:
                path = os.path.join(self.folder, n)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    if not os.access(path, os.R_OK):
                        self.denied.add(n)  # said by the source; its lines are missing
                        continue
                    self.denied.discard(n)
                    found.append((-int(m.group(1)) if m else 0, path, st))
        return [(p, st) for _, p, st in sorted(found)]

    def read(self) -> Chunk:
        """New complete lines: the rest of the file being read, then the newer files in order."""
        out = Chunk()
        chain = self.chain()
        if not chain:
            return out
        pos = self._position(chain)
        # logs are parsed line by line in Python (about 1 us a byte): 8 MiB at a time, so a reader that is
        # told to stop (q during a long first read) stops within a fraction of a second
        budget = CHUNK
        parts: list[bytes] = []
        skipped = 0
        while True:
            path, st = chain[pos]
            out.mtime = max(out.mtime or 0.0, st.st_mtime)
            if st.st_size < self.offset or (self.offset and st.st_size > self.offset and self._head
                                            and self._read_at(path, 0, len(self._head)) != self._head):
                # truncated in place (copytruncate), perhaps grown past the old size since: its new lines follow
                rest = self._from_copy(chain, st, budget)
                parts.append(rest)
                budget -= len(rest)
                self.offset, self._head = 0, b""
            if st.st_size - self.offset > MAX_LINE:
                skipped += self._past_hole(path, st.st_size)
            data = self._read(path, min(budget, st.st_size - self.offset))
            self.ident = (st.st_dev, st.st_ino)
            if self.offset < SIGNATURE:
                self._head = (self._head + data[: SIGNATURE - self.offset])[:SIGNATURE]
            self.offset += len(data)
            parts.append(data)
            budget -= len(data)
            if budget <= 0:
                out.more = True
                break
            if pos + 1 >= len(chain) or self.offset < st.st_size:
                break
            pos += 1
            # a file that did not end with a newline: its last line ends there (this read's bytes of it, or
            # what an earlier read left waiting)
            if (data and not data.endswith(b"\n")) or (not data and self.lines.pending):
                parts.append(b"\n")
            self.offset, self._head = 0, b""  # the newer file from its start (the loop takes its identity)
        got = self.lines.feed(b"".join(parts))
        out.blob, out.overlong = got.blob, got.overlong + skipped
        return out

    def _past_hole(self, path: str, size: int) -> int:
        """Step over a hole (a sparse file's unwritten bytes: NULs, no line end among them) longer than a line
        may be, without reading it: a 20 GB hole named ``worker_0.log`` or ``scheduler.log`` cost 9-43 s of
        reads. The line it is in is dropped as overlong (1 returned: counted); 0 when there is none."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return 0
        try:
            gap = hole_at(fd, self.offset, size)
        finally:
            os.close(fd)
        if gap <= MAX_LINE:
            return 0
        self.offset += gap
        return self.lines.drop_line()

    def _from_copy(self, chain: list[tuple[str, os.stat_result]], truncated: os.stat_result, budget: int) -> bytes:
        """The lines the file being read had gained since the last read before it was truncated in place: in
        its copy (logrotate's copytruncate copies, then truncates), another file of the chain that starts
        with the same bytes and is at least as long as what was read. None found: counted lost."""
        for path, st in chain:
            if (st.st_dev, st.st_ino) == (truncated.st_dev, truncated.st_ino) or st.st_size < self.offset:
                continue
            if self._head and self._read_at(path, 0, len(self._head)) == self._head:
                data = self._read(path, min(budget, st.st_size - self.offset))
                if self.offset + len(data) < st.st_size:
                    self.lost += 1  # more than one read's worth: the rest is not read
                return data if not data or data.endswith(b"\n") else data + b"\n"
        self.lost += 1
        return b""

    def _position(self, chain: list[tuple[str, os.stat_result]]) -> int:
        if self.ident is None:
            return 0  # a cold read: from the oldest backup
        for i, (_, st) in enumerate(chain):
            if (st.st_dev, st.st_ino) == self.ident:
                return i
        self.lost += 1  # deleted, or rotated past the last backup: go on with the newest file
        self.ident, self.offset = None, 0
        return len(chain) - 1

    def _read(self, path: str, n: int) -> bytes:
        return self._read_at(path, self.offset, n)

    @staticmethod
    def _read_at(path: str, offset: int, n: int) -> bytes:
        if n <= 0:
            return b""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return b""
        try:
            return _pread(fd, n, offset)
        except OSError:
            return b""
        finally:
            os.close(fd)


class MfLogSource:
    """Feed ``store`` from a MindFormers job's logs (same interface as LocalSource)."""

    def __init__(self, path: str, store: Store, *, poll: float | None = None,
                 on_update: Callable[[], None] | None = None) -> None:
        self.run_dir = os.fspath(path)
        self.label = self.run_dir
        self.clock_skew = 0.0
        self.store = store
        self.poll = poll
        self.on_update = on_update
        self.state = SourceState(mode="once", poll_interval=poll)
        self._streams: dict[int, tuple[LogStream, MfLogParser]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._errors: set[str] = set()
        self._scheduler: tuple[LogStream, SchedulerLog] | None = None
        self._ended: set[tuple[int, str, str]] = set()  # (rank, session, kind) given from the scheduler log
        from .procwatch import ProcessWatch

        #: the workers' processes, watched from this host while following (mstop.sources.procwatch)
        self.processes = ProcessWatch(store, on_update)

    @property
    def streams(self) -> list[LogStream]:
        """The rank logs followed, in rank order (read-only: their names, offsets and what was lost)."""
        return [st for _, (st, _parser) in sorted(self._streams.items())]

    def read_all(self) -> int:
        """Read every rank's log to its end, held rows included; return the rows added."""
        before = self.store.rows
        self._discover()
        for r in list(self._streams):
            if self._stop.is_set():
                break
            self._read(r, final=True)
            stream = self._streams[r][0]
            if stream.name != LOG_NAME:  # msrun's worker log: its process, as it is now (or found ended)
                self.processes.consider(r, os.path.join(stream.folder, stream.name), follow=False)
        self._read_scheduler()
        return self.store.rows - before

    def _read_scheduler(self) -> None:
        """msrun's scheduler log beside the worker logs: a worker that unregistered ended cleanly (LossMonitor
        prints no end of its own), one that timed out was lost (mstop.formats.mflog.SchedulerLog)."""
        if self._scheduler is None:
            folder = next((st.folder for st, _ in self._streams.values() if st.name != LOG_NAME), None)
            if folder is None or not os.path.isfile(os.path.join(folder, SCHEDULER_LOG)):
                return
            self._scheduler = (LogStream(folder, SCHEDULER_LOG), SchedulerLog())
        stream, sched = self._scheduler
        while True:
            chunk = stream.read()
            worker_states(self.store, {r: p for r, (_, p) in self._streams.items()}, sched.parse(chunk.blob),
                          self._ended, sched.expected)
            if not chunk.more:
                break

    def follow(self) -> None:
        self.state.mode = "poll"
        self._thread = threading.Thread(target=self._run, name="mstop-mflog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.processes.stop()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.state.missing = not os.path.isdir(self.run_dir)
                self._discover()
                for r in list(self._streams):
                    self._read(r, final=False)
                    stream = self._streams[r][0]
                    if stream.name != LOG_NAME:  # msrun's worker log: the worker's own standard output
                        self.processes.consider(r, os.path.join(stream.folder, stream.name))
                self._read_scheduler()
                if self.on_update is not None:
                    self.on_update()
            except Exception as e:  # noqa: BLE001 - a bad file must not stop following the others
                key = f"{type(e).__name__}: {e}"
                if key not in self._errors:
                    self._errors.add(key)
                    self.state.notes.append(f"error while reading: {key}")
                    log.exception("mstop: error while reading %s", self.run_dir)
            self._stop.wait(self.poll or POLL)

    def _discover(self) -> None:
        for r, (folder, name) in find_logs(self.run_dir).items():
            if r in self._streams:
                continue
            if not self.store.claim(r, self.label):
                continue
            self.store.add_rank_file(r)
            root = os.path.dirname(folder) if name == LOG_NAME else folder  # rank_R's parent, or msrun's folder
            self._streams[r] = (LogStream(folder, name), MfLogParser(r, run_name=_run_name(root)))

    def _read(self, r: int, *, final: bool) -> None:
        stream, parser = self._streams[r]
        lost = stream.lost
        while True:
            chunk = stream.read()
            if stream.lost > lost:  # before its lines are parsed: the steps lost end at the next one read
                lost = stream.lost
                note_lost(self.store, r, parser)
            if chunk.mtime is not None:
                self.store.saw_mtime(chunk.mtime)
            ingest_log(self.store, r, parser, chunk.blob, bad=chunk.overlong, flush=not chunk.blob or
                       (final and not chunk.more), arrived=chunk.mtime, name=label(stream))
            if not chunk.more or self._stop.is_set():
                break
        for name in sorted(stream.denied):
            self.store.note(f"rank_{r}/{name}: permission denied: its lines are not read")


def worker_states(store: Store, parsers: dict[int, MfLogParser], states: list[WorkerState],
                  told: set[tuple[int, str, str]], world: int | None = None) -> None:
    """What msrun's scheduler log said of workers, as events of their current sessions (local and remote
    sources alike): an ``end`` for a worker that unregistered, a ``lost`` for one the scheduler timed out.
    ``told``: (rank, session, kind) already given, so a session gets each once. ``world``: the workers the
    scheduler expected (SchedulerLog.expected), the job's world size where its logs name none."""
    for r, parser in parsers.items() if world else ():
        e = parser.state.world(world)  # type: ignore[arg-type]
        if e is not None:
            store.ingest_events(r, [e])
    for w in states:
        parser = parsers.get(w.rank)
        if parser is None or parser.state.session is None or parser.state.ended:
            continue
        key = (w.rank, parser.state.session, w.kind)
        if key in told:
            continue
        told.add(key)
        t = w.time
        if w.kind == "end":  # it unregistered after its last step, whatever the log's clock says (unstamped
            # lines are timed by when the file was written, which can be after the scheduler's line)
            last = RunReader(store).last(w.rank, "time")
            if last is not None:
                t = max(t, last)
        e: dict[str, Any] = {"kind": w.kind, "time": t, "session": parser.state.session, "step": parser.state.last_step,
                             "source": "msrun scheduler.log"}
        if w.kind == "lost":
            e["error"] = w.line
        store.ingest_events(w.rank, [e])


def note_lost(store: Store, rank: int, parser: MfLogParser | None = None) -> None:
    """Say that lines of a rank's log could not be read (local and remote sources alike), and have the
    steps they held counted when the next step is read (``parser``: the rank's; LogState.count_lost)."""
    store.note(f"{stream_name(rank)}: lines lost between two reads (rotated past its last backup, or "
               "truncated in place with no copy found): their rows are missing")
    if parser is not None:
        parser.state.lines_lost()


def label(stream: LogStream) -> str:
    """A log stream's name as readers say it: ``rank_3/info.log``, ``worker_3.log``."""
    if stream.name == LOG_NAME:
        return f"{os.path.basename(stream.folder)}/{LOG_NAME}"
    return stream.name


def ingest_log(store: Store, rank: int, parser: MfLogParser, blob: bytes, *, bad: int = 0, flush: bool,
               arrived: float | None = None, name: str | None = None) -> None:
    """Parse new lines of a rank's log into the store (local and remote sources alike); ``flush`` when no
    more lines are there for now (the held row and a trailing error go in); ``arrived``: when the lines
    were written (the file's time: the time of step lines with no timestamp). What could not be read is
    said, never a silent zero: lines that look like steps in no known format, a log with no step yet."""
    name = name or stream_name(rank)
    parts = [parser.parse(blob, arrived)] if blob else []
    if flush:
        parts.append(parser.flush())
    if parser.state.utf16 is not None:
        store.note(f"{name} is UTF-16 ({parser.state.utf16.upper()}): read as such")
    if parser.state.look_alike:
        one = parser.state.look_alike == 1
        store.note_as(f"{name}:look-alike", f"{name}: {fmt_count(parser.state.look_alike, 'line')} "
                      f"{'looks like a step but matches' if one else 'look like steps but match'} no format "
                      f"mstop knows (counted bad); the first: {parser.state.first_look_alike}")
    if parser.state.untimed:
        store.note_as(f"{name}:untimed", f"{name}: {fmt_count(parser.state.untimed, 'step line')} without a "
                      "timestamp: timed by when the file was written")
    if parser.state.lines_seen and not parser.state.step_lines:
        store.note_as(f"{name}:none", f"{name}: {fmt_count(parser.state.lines_seen, 'line')}, no step lines yet")
    elif parser.state.step_lines:
        store.note_as(f"{name}:none", None)
    for p in parts:
        p.rows.bad += bad
        bad = 0
        store.append(Batch.of(rank, p.rows))
        if p.events:
            store.ingest_events(rank, p.events)
        for e in p.events:
            if e["kind"] == "dropped":  # the steps in lines lost between two reads, counted
                store.note(f"{name}: steps {e['steps'][0]:,}-{e['steps'][1]:,} were in lines lost between two "
                           f"reads: {fmt_count(e['rows'], 'row')} counted as dropped")


def _run_name(root: str) -> str:
    """The job's name as its folders tell it: the folder holding ``output/`` (``.../myjob/output/log``)."""
    from ..safe import clean

    parts = os.path.abspath(root).split(os.sep)
    if parts and parts[-1] in ("log", MSRUN_DIR):
        parts = parts[:-1]
    if parts and parts[-1] == "output" and len(parts) > 1:
        return clean(parts[-2] or "output", 128)
    return clean(parts[-1] if parts else root, 128)
