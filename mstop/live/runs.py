"""The runs list: one row of figures per run, its sort and its filter (``mstop runs/``).

Every figure of a row is the engine's own (the same functions ``mstop summary`` calls), computed on the
store the list holds for that run: the run's last rows until it is opened, its whole history after
(:mod:`mstop.sources.runs`). Goodput needs the whole history, so it is known once a run has been read
whole (opened in the monitor, or a MindFormers log).
"""

from __future__ import annotations

import logging
import math
import operator
import re
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from ..engine import figures
from ..engine.figures import Options
from ..engine.health import Health, Rules
from ..engine.reader import RunReader
from ..engine.store import Reads, Snapshot
from ..safe import clean
from ..sources.protocol import DEFAULT_CONNECTION, Connection
from ..sources.runs import run_spec

#: The list's columns, in order: (key, heading). The keys are public: sort keys, filter fields, JSON.
COLUMNS = (
    ("name", "run"), ("status", "status"), ("step", "step"), ("loss", "loss (smoothed)"),
    ("tokens_per_s", "tokens/s"), ("mfu", "MFU"), ("headroom", "headroom"), ("goodput", "goodput"),
    ("alerts", "alerts"), ("started", "started"), ("duration", "duration"), ("verdict", "slowed by"),
    ("host", "host"), ("note", "note"),
)
#: statuses from best to worst (the order a status sort uses: what needs a look comes last, or first reversed)
STATUS_ORDER = {s: i for i, s in enumerate(("running", "starting", "waiting", "finished", "stalled", "dead",
                                            "failed", "unreadable", "reading"))}

log = logging.getLogger("mstop")


@dataclass
class RunRow:
    """One run's figures for the list (None: not known)."""

    key: str  # its path (local) or host:path: unique in the list
    name: str
    host: str
    status: str
    step: int | None = None
    total: int | None = None
    loss: float | None = None
    tokens_per_s: float | None = None
    mfu: float | None = None
    headroom: float | None = None
    goodput: float | None = None
    alerts: int = 0
    incidents: int = 0
    alert_kinds: list[str] = field(default_factory=list)
    #: its worst diagnosis verdict (mstop.engine.diagnosis: ``compute_straggler``, ...), "" when healthy or unknown
    verdict: str = ""
    started: float | None = None  # the run's first start (its clock)
    ended: float | None = None  # its last sign of life, once it ended (finished, dead, failed); None: going on
    note: str = ""
    run_name: str | None = None  # the name the writer was given (shown where it differs from the path)
    #: the alerts and incidents count from the whole history (summary's figures): False while only the files'
    #: ends are read (a NaN 300 steps back is not among them); the list shows "?" until it is read
    history: bool = False
    error: str | None = None
    hint: str = ""  # shown in place of the note: why the list has no figures for it
    config: dict[str, Any] = field(default_factory=dict)  # the start event's fields (filter conditions)
    full: bool = False  # figures from the whole history (else from the last rows)

    def value(self, key: str, now: float) -> Any:
        """The value a sort or a filter compares for ``key`` (``started`` as an age in seconds; the summary's
        names for the same figures, ``loss_ema`` and ``mem_headroom``, as the columns')."""
        key = ALIASES.get(key, key)
        if key == "started":
            return None if self.started is None else now - self.started
        if key == "duration":
            return self.duration(now)
        if key in ROW_KEYS:
            return getattr(self, key)
        return self.config.get(key)


    def duration(self, now: float) -> float | None:
        """Seconds from its first start to its end, or to ``now`` while it goes on."""
        end = self.ended if self.status in figures.ENDED else now
        return None if self.started is None or end is None else max(0.0, end - self.started)


ROW_KEYS = frozenset(k for k, _ in COLUMNS) | {"total", "incidents"}
#: names the summary uses for the same figures, accepted in filters
ALIASES = {"loss_ema": "loss", "mem_headroom": "headroom"}


def run_row(key: str, name: str, host: str, store: Reads, opts: Options, health: Health, *, full: bool,
            error: str | None = None, hint: str = "", history: History | None = None) -> RunRow:
    """The row of one run from its store (the engine's figures; ``health`` keeps the run's alert state). A
    store of the files' ends (``full`` False) gives its alerts and incidents from ``history`` (the whole
    history read by :func:`read_history`) and the newest rows' alerts; without one they are unknown."""
    store = store.snapshot()
    meta = figures.run_meta(store)
    first = figures.first_start(store)
    # a log read to no rows, or with lines that look like steps in no known format: say it in the list
    said = [n for n in store.notes if "like steps but match" in n or "like a step but matches" in n
            or "no step lines yet" in n]
    hint = hint or (said[0] if said else "")
    status = "unreadable" if error and not RunReader.count(store) else figures.status(store, opts)
    alerts = health.alerts(store, opts) if store.rows else []
    row = RunRow(key=key, name=name, host=host or str(meta.get("host") or ""), status=status,
                 step=figures.step(store), total=_int(meta.get("total_steps")),
                 loss=figures.shown_loss(store, opts), tokens_per_s=figures.tokens_per_s(store),
                 mfu=figures.mfu(store, opts), headroom=figures.mem_headroom(store),
                 alerts=len(alerts), alert_kinds=sorted({a.kind for a in alerts}), started=first,
                 note=str(meta.get("note") or ""), error=error, hint=hint, config=dict(meta), full=full,
                 run_name=str(meta["run_name"]) if meta.get("run_name") else None, history=full)
    if full and store.rows:
        from ..engine.goodput import ledger

        g = ledger(store, opts)
        row.goodput = None if g is None else g.public().get("goodput")
        row.incidents = sum(not i.active for i in health.incidents(store, opts, alerts))
    elif history is not None:  # the tail's alerts and what the whole history held (a NaN long ago)
        kinds = {(a.kind, a.rank) for a in alerts} | set(history.active)
        row.alerts, row.alert_kinds = len(kinds), sorted({k for k, _ in kinds})
        row.incidents, row.goodput, row.history = history.incidents, history.goodput, True
    row.ended = figures.last_row_time(store) if status in figures.ENDED else None
    if store.rows:
        from ..engine.diagnosis import diagnose

        worst = diagnose(store, rules=health.rules)
        row.verdict = worst[0].kind if worst and worst[0].kind != "healthy" else ""
    return row


@dataclass
class History:
    """What a run's whole history says that the files' ends cannot: its alerts that still hold (a NaN loss
    300 steps back keeps nan_loss active), its past incidents, its goodput; read once in the background."""

    active: list[tuple[str, int | None]]
    incidents: int
    goodput: float | None
    version: tuple | None = ()  # the run's files when read (their names, sizes and times)
    read_at: float = 0.0  # monotonic time of the read


def read_history(spec: str, opts: Options, health: Health, **read: Any) -> History:
    """Read a run whole (``read_once``), take its alerts, incidents and goodput, and let the store go."""
    from ..engine.goodput import ledger
    from ..sources import read_once

    store = read_once(spec, **read).snapshot()
    alerts = health.alerts(store, opts)
    g = ledger(store, opts) if store.rows else None
    incidents = sum(not i.active for i in health.incidents(store, opts, alerts))
    return History(sorted({(a.kind, a.rank) for a in alerts}, key=str), incidents,
                   None if g is None else g.public().get("goodput"))


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


# -- sorting ------------------------------------------------------------------------------------------------


def sort_rows(rows: list[RunRow], key: str, reverse: bool, now: float) -> list[RunRow]:
    """Rows by ``key``; unknown values last in either direction, ties by name."""
    def value(r: RunRow) -> Any:
        v = r.value(key, now)
        if key == "status":
            return STATUS_ORDER.get(str(v), len(STATUS_ORDER))
        if isinstance(v, float) and math.isnan(v):
            return None
        return v.lower() if isinstance(v, str) else v

    by_name = sorted(rows, key=lambda r: r.name)
    pairs = [(value(r), r) for r in by_name]  # each value once: a sort of 1,000 rows runs every redraw
    known = [p for p in pairs if p[0] not in (None, "")]
    known.sort(key=lambda p: p[0], reverse=reverse)  # stable: equal values stay by name
    return [r for _, r in known] + [r for v, r in pairs if v in (None, "")]


# -- filtering ----------------------------------------------------------------------------------------------


class FilterError(ValueError):
    """A filter that does not read (its message says where and what is allowed)."""


_OPS: dict[str, Callable[[Any, Any], bool]] = {
    ">=": operator.ge, "<=": operator.le, "!=": operator.ne, "=": operator.eq, ">": operator.gt, "<": operator.lt,
}
_TERM = re.compile(r"^([A-Za-z_][A-Za-z0-9_.]*)\s*(>=|<=|!=|!~|==|=|>|<|~)\s*(.*)$", re.S)
FILTER_HELP = ("words match a run's name or note; FIELD=V, FIELD!=V, FIELD>N, >=, <, <=, FIELD~TEXT (contains), "
               "FIELD!~TEXT; FIELD is a column (status, step, loss, tokens_per_s, mfu, headroom, goodput, alerts, "
               "host, note, name) or a field of the run's start event (world_size, device, parallel_mode, ...); "
               "quote a value with spaces: note~\"two words\"")


@dataclass
class Condition:
    field: str
    op: str
    value: str


@dataclass
class Filter:
    """Terms that must all hold: bare words (in the name or note, any case) and conditions."""

    text: str = ""
    words: list[str] = field(default_factory=list)
    not_words: list[str] = field(default_factory=list)  # !~WORD: not in the name, run name nor note
    conditions: list[Condition] = field(default_factory=list)

    def matches(self, row: RunRow, now: float) -> bool:
        hay = f"{row.name}\n{row.run_name or ''}\n{row.note}".lower()
        if any(w not in hay for w in self.words) or any(w in hay for w in self.not_words):
            return False
        return all(_holds(c, row.value(c.field, now)) for c in self.conditions)


def parse_filter(text: str, fields: set[str] | None = None) -> Filter:
    """The filter typed after ``/``. ``fields``: the start-event fields the runs have (a condition on a field
    neither a column nor one of these is a FilterError, as is a comparison of a number with text). A bare
    ``!~WORD`` is a word the run's name and note must not contain (``mfu<0.3 !~ablation``)."""
    out = Filter(text=clean(text.strip(), 512))  # shown in the title: no control codes
    known = ROW_KEYS | set(ALIASES) | (fields or set())
    for term in _split_terms(text, known):
        if term.startswith("!~") and len(term) > 2:
            out.not_words.append(term[2:].lower())
            continue
        m = _TERM.match(term)
        if m is None:
            if any(op in term for op in ("=", "<", ">", "~")):
                raise FilterError(f"{term!r}: a condition is FIELD OP VALUE, e.g. status=running, world_size>=64, "
                                  "note~recompute; !~WORD leaves out runs whose name or note has WORD")
            out.words.append(term.lower())
            continue
        name, op, value = m.group(1), "=" if m.group(2) == "==" else m.group(2), m.group(3).strip()
        if fields is not None and name not in known:
            raise FilterError(f"{name!r}: no such field; fields are the columns ({', '.join(k for k, _ in COLUMNS)}) "
                              f"and the runs' start fields ({', '.join(sorted(fields)[:12])}"
                              f"{', ...' if len(fields) > 12 else ''})")
        if not value:
            raise FilterError(f"{term!r}: nothing to compare with after {op!r}")
        if op in (">", ">=", "<", "<=") and _number(value) is None:
            raise FilterError(f"{term!r}: {op} compares numbers, and {value!r} is not one")
        out.conditions.append(Condition(name, op, value))
    return out


_OP = re.compile(r"^(>=|<=|!=|!~|==|=|>|<|~)")


def _split_terms(text: str, known: set[str]) -> list[str]:
    """Terms separated by spaces, as a shell splits them (``note~"two words"`` is one term). An operator with
    spaces around it joins the field before it when that is a field (``world_size >= 64``); after a word
    that is no field (``cnn !~sweep``) or a condition (``mfu<0.3 !~ablation``) it starts a term of its own."""
    import shlex

    try:
        tokens = shlex.split(text.strip())
    except ValueError as e:  # an unbalanced quote
        raise FilterError(f"{clean(text, 512)!r}: {e} (quote a value with spaces: note~\"two words\")") from None
    out: list[str] = []
    for tok in tokens:
        prev = out[-1] if out else None
        if prev is not None and prev in known and _OP.match(tok):
            out[-1] = prev + tok  # FIELD OP[VALUE]
        elif prev is not None and _OP.fullmatch(prev[len(prev.rstrip("=<>!~")):] or "-") and \
                prev.rstrip("=<>!~") in known:
            out[-1] = prev + tok  # FIELD OP VALUE, the value after a space
        else:
            out.append(tok)
    return out


def _number(text: str) -> float | None:
    t = text.strip().rstrip("%")
    try:
        v = float(t)
    except ValueError:
        return None
    return v / 100 if text.strip().endswith("%") else v


def _holds(c: Condition, v: Any) -> bool:
    if c.op in ("~", "!~"):
        found = v is not None and c.value.lower() in str(v).lower()
        return found if c.op == "~" else not found
    if v is None:
        return c.op == "!="
    want = _number(c.value)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if want is None:
            return c.op == "!="
        return _OPS[c.op](float(v), want)
    if c.op in ("=", "!="):
        return (str(v).lower() == c.value.lower()) == (c.op == "=")
    got = _number(str(v))
    return got is not None and want is not None and _OPS[c.op](got, want)


# -- the list, kept up to date --------------------------------------------------------------------------------

#: Seconds between searches for new (or removed) runs.
DISCOVER_EVERY = 5.0
#: Runs read first when the screen has not said which rows it shows (a page of a tall terminal).
PAGE = 40
#: Seconds between reads of a run's new bytes (a directory scan when nothing changed): a row on screen,
#: and one off it (sorting or filtering by a figure sees it at most this late).
READ_EVERY = 2.0
READ_HIDDEN_EVERY = 10.0
#: Seconds a run's row (its alerts: the costly part) is kept while its store does not change; its status,
#: which time alone changes (running -> stalled -> dead), is computed again on every pass.
ROW_EVERY = 300.0
#: Least seconds between two reads of one run's whole history (a live run's files change every second; its
#: new rows' alerts come from the files' ends meanwhile).
HISTORY_EVERY = 60.0


def runs_model(watches: list[Any], *, rules: Rules | None = None, peak_tflops: float | None = None,
               clock: Callable[[], float] | None = None) -> RunsModel:
    """The runs list's model for these watches: every run's figures under ``rules`` (a fresh Health per run),
    MFU against ``peak_tflops`` when given, ages on ``clock``."""
    rules = rules or Rules()
    opts = rules.options(Options(peak_flops=peak_tflops * 1e12 if peak_tflops else None, clock=clock or time.time))
    return RunsModel(watches, opts, lambda: Health(rules))


def compare_options(peak_tflops: float | None) -> Options:
    """``mstop compare``'s settings for the runs list's c: MFU against ``peak_tflops`` when given."""
    return Options(peak_flops=peak_tflops * 1e12 if peak_tflops else None)


def read_overlays(named: list[tuple[str, str]], *,
                  connection: Connection = DEFAULT_CONNECTION) -> list[tuple[str, Snapshot]] | str:
    """The runs list's o: each (name, spec) read once, or why one could not be (any thread)."""
    from ..sources import SourceError, read_once

    try:
        return [(name, read_once(spec, connection=connection).snapshot()) for name, spec in named]
    except SourceError as e:
        return str(e)


class RunsModel:
    """The rows of every run the watches find, kept up to date by :meth:`refresh` (one thread calls it;
    any thread reads :meth:`snapshot`). A watch has ``label``, ``discover()`` (new runs), ``runs`` (path ->
    run: ``path``, ``name``, ``host``, ``store``, ``full``, ``error``, ``read()``) and ``problems``."""

    def __init__(self, watches: list[Any], opts: Options, health: Callable[[], Health]) -> None:
        self.watches = watches
        self.opts = opts
        self.new_health = health
        self.lock = threading.Lock()
        self.rows: dict[str, RunRow] = {}
        self.problems: list[str] = []
        self.version = 0  # moves on whenever a row or a problem changes
        self.read_count = 0  # runs read at least once
        self.first: list[str] = []  # keys to read before the others (the page on screen)
        self._health: dict[str, Health] = {}
        self._done: dict[str, tuple[int, float]] = {}  # key -> (store version, monotonic time of its row)
        self._found_at = -math.inf
        self._errors: dict[str, str] = {}
        self.histories: dict[str, History] = {}  # key -> its whole history's alerts, read in the background
        #: seconds of each pass spent reading histories once every tail is read (one run at least)
        self.history_budget = 1.0

    def runs(self) -> dict[str, Any]:
        """Every run of every watch, by its key (:func:`~mstop.sources.runs.run_spec`)."""
        return {run_spec(r): r for w in self.watches for r in w.runs.values()}

    def refresh(self, progress: Callable[[], None] | None = None, *, every: float = 0.25) -> None:
        """One pass: find runs (every DISCOVER_EVERY s), read the new bytes of those due (the page on screen
        first), and compute their rows; ``progress`` is called every ``every`` seconds of work."""
        now = time.monotonic()
        if now - self._found_at >= DISCOVER_EVERY:
            self._discover()
            self._found_at = now
        runs = self.runs()
        # the page on screen first; before the screen has said which, the first runs by name (its default
        # order): it is told once they are read, then every ``every`` seconds (each telling is a redraw,
        # which competes with the reading for the one interpreter)
        page = [k for k in self.first if k in runs] or sorted(runs, key=lambda k: runs[k].name)[:PAGE]
        order = page + [k for k in runs if k not in self._done] + list(runs)
        seen: set[str] = set()
        told = time.monotonic()
        for i, k in enumerate(order):
            if k in seen:
                continue
            seen.add(k)
            run = runs[k]
            due = READ_EVERY if i < len(page) else READ_HIDDEN_EVERY  # the rows on screen most often
            if k in self._done and time.monotonic() - run.read_at < due:
                continue
            self._update(k, run)
            if progress is not None and (i == len(page) - 1 or i >= len(page) and time.monotonic() - told >= every):
                progress()
                told = time.monotonic()
        self._histories(runs, page)
        with self.lock:
            gone = [k for k in self.rows if k not in runs]
            for k in gone:
                del self.rows[k]
                self._done.pop(k, None)
                self.histories.pop(k, None)
            if gone:
                self.version += 1
        if progress is not None:
            progress()

    def _histories(self, runs: dict[str, Any], page: list[str]) -> None:
        """Read the whole history of runs whose rows only know their files' ends (the page first), for up to
        ``history_budget`` seconds once every run's tail has been read; a run's history is read again when
        its files change (and this pass has time)."""
        if any(k not in self._done for k in runs):
            return  # every tail first: the list's figures before its histories
        t0 = time.monotonic()
        order = [k for k in page if k in runs] + sorted(k for k in runs if k not in page)
        for k in order:
            run = runs[k]
            if run.full or run.error:
                continue
            seen = run.history_version()
            had = self.histories.get(k)
            if had is not None and (had.version == seen or time.monotonic() - had.read_at < HISTORY_EVERY):
                continue  # read, and unchanged since (or read again at most every HISTORY_EVERY s)
            try:
                got = read_history(k, self.opts, self.new_health(), **getattr(run, "read_options", {}))
            except Exception as e:  # noqa: BLE001 - a history that cannot be read leaves the row as it is
                log.info("mstop: the history of %s could not be read: %s", k, e)
                continue
            got.version, got.read_at = seen, time.monotonic()
            self.histories[k] = got
            self._done.pop(k, None)  # its row again, with the history
            self._update(k, run)
            if time.monotonic() - t0 >= self.history_budget:
                return

    def _discover(self) -> None:
        problems = []
        for w in self.watches:
            try:
                new = w.discover()
                self._errors.pop(w.label, None)
                with self.lock:  # listed at once by name; their figures come as they are read
                    for run in new:
                        key = run_spec(run)
                        if key not in self.rows:
                            self.rows[key] = RunRow(key=key, name=run.name, host=run.host, status="reading")
                    self.version += bool(new)
            except Exception as e:  # noqa: BLE001 - one source that cannot be read leaves the others listed
                self._errors[w.label] = f"{w.label}: {e}"
            problems += list(w.problems)
        with self.lock:
            new = list(self._errors.values()) + problems
            if new != self.problems:
                self.problems = new
                self.version += 1

    def update(self, key: str) -> None:
        """Read one run now and compute its row (a run just back from its monitor)."""
        run = self.runs().get(key)
        if run is not None:
            self._update(key, run)

    def _update(self, key: str, run: Any) -> None:
        """Read a run's new bytes; its row again when its store moved (or ROW_EVERY passed), else its status."""
        try:
            run.read()
        except Exception as e:  # noqa: BLE001 - a run that cannot be read is a row saying so
            run.error = f"{type(e).__name__}: {e}"
        version = run.store.version
        done = self._done.get(key)
        health = self._health.setdefault(key, self.new_health())
        if done is None or done[0] != version or time.monotonic() - done[1] >= ROW_EVERY or run.error:
            row = self._row(key, run, health)
            self._done[key] = (version, time.monotonic())
            if done is None:
                self.read_count += 1
        else:
            old = self.rows.get(key)
            if old is None:
                return
            row = replace(old)
            snap = run.store.snapshot()
            row.status = figures.status(snap, self.opts)
            row.ended = figures.last_row_time(snap) if row.status in figures.ENDED else None
            if (row.status, row.ended) == (old.status, old.ended):
                return  # nothing to draw again: ages and durations are taken at drawing time
            if row.status != old.status:  # what time alone changed may change its alerts too: all of it again
                row = self._row(key, run, health)
        with self.lock:
            self.rows[key] = row
            self.version += 1

    def _row(self, key: str, run: Any, health: Health) -> RunRow:
        try:
            return run_row(key, run.name, run.host, run.store, self.opts, health, full=run.full, error=run.error,
                           hint=getattr(run, "hint", ""), history=self.histories.get(key))
        except Exception as e:  # noqa: BLE001 - one run that breaks a figure is a row saying so, never the list
            log.exception("mstop: the row of %s could not be computed", key)
            return RunRow(key=key, name=run.name, host=run.host, status="unreadable",
                          error=f"cannot be summarised: {type(e).__name__}: {e} (a bug: please report it)")

    def snapshot(self) -> tuple[list[RunRow], list[str], int]:
        """(rows, problems, version) as they are now."""
        with self.lock:
            return list(self.rows.values()), list(self.problems), self.version

    def fields(self) -> set[str]:
        """The start-event fields any run has (what a filter may name besides the columns)."""
        with self.lock:
            return {k for r in self.rows.values() for k in r.config}
