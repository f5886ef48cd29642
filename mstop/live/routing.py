"""Alerts that route and hold still (issue 61, item 3): a rules file, silences, and the sinks notifications go to.

An alert storm is what on-call people learn to ignore: 1,024 ranks dying are one event, a condition that
flaps at its threshold is one, and a known problem being worked on is none. So between the alerts a frame
holds and the people told sits a :class:`Router`, one per followed run:

- a **route** per alert kind (or severity, or ``*``), from a TOML rules file: ``for`` (seconds the condition
  must hold before it fires), ``clear_after`` (seconds it must be gone before it clears: a condition back
  within that time never fired twice; hysteresis in time, beside the health rules' own in value),
  ``group`` (one notification for every rank of the kind, their ranks listed), ``repeat`` (seconds between
  reminders while it fires; 0: never) and ``sinks``;
- **silences** kept beside the run (``mstop.silences.jsonl``, one JSON line each: kind, until, reason, who),
  made and listed by ``mstop silence``: a silenced kind fires into the history, not to a sink;
- the **sinks**: ``bell`` (the monitor rings), ``command`` (``--on-alert``: the notification as JSON on its
  standard input), ``file`` (one JSON line a notification, appended), ``http`` (a POST of that JSON to a URL:
  an on-site relay; a timeout, retries). Sinks run on one thread of their own, fed by a bounded queue: a sink
  that hangs or fails delays no frame, and what could not be sent is counted and said;
- the **history**: each ``fired``, ``repeat``, ``cleared`` and ``silenced``, appended to
  ``mstop.alerts.jsonl`` beside the run (``summary --json``'s ``alert_history`` reads it back).

The rules file (``--alert-rules FILE``, else ``mstop-alerts.toml`` in the run directory)::

    [sinks]
    file = "/var/log/mstop/alerts.jsonl"
    http = "http://relay.example:8080/mstop"     # POSTed JSON; http_timeout (s), http_retries
    command = "notify-send mstop"                # as --on-alert

    [[route]]
    match = "critical"                           # dead_rank, job_dead, ... (CRITICAL below)
    for = 0
    clear_after = 120
    repeat = 3600
    sinks = ["http", "file", "bell"]

    [[route]]
    match = "*"
    for = 60
    sinks = ["file"]
"""

from __future__ import annotations

import json
import os
import queue
import shlex
import subprocess
import threading
import time
import urllib.request
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

#: the alert kinds (and diagnosis verdicts) a route matching ``critical`` takes; every other is ``warning``
CRITICAL = frozenset({"nan_loss", "oom_risk", "dead_rank", "job_dead", "job_failed", "stopped_rank", "stuck_rank",
                      "device_unhealthy", "hbm_full", "hang", "root_cause", "relaunch_loop"})
SINKS = ("bell", "command", "file", "http")
#: files beside the run
SILENCES = "mstop.silences.jsonl"
HISTORY = "mstop.alerts.jsonl"
#: notifications waiting for the sinks' thread at most (more are dropped, counted)
QUEUE = 1000


def severity(kind: str) -> str:
    return "critical" if kind in CRITICAL else "warning"


def duration(v: Any, key: str) -> float:
    """Seconds from a number or ``"90s"``, ``"15m"``, ``"2h"``, ``"1d"``; a ValueError naming ``key``."""
    if isinstance(v, bool):
        raise ValueError(f"{key}: a duration, not {v!r}")
    if isinstance(v, (int, float)):
        s = float(v)
    elif isinstance(v, str) and v.strip():
        t = v.strip()
        unit = {"s": 1, "m": 60, "h": 3600, "d": 86400}.get(t[-1])
        try:
            s = float(t[:-1]) * unit if unit else float(t)
        except ValueError:
            raise ValueError(f"{key}: {v!r} is no duration (like 90, \"90s\", \"15m\", \"2h\")") from None
    else:
        raise ValueError(f"{key}: {v!r} is no duration")
    if not 0 <= s < 1e9:
        raise ValueError(f"{key}: {v!r} is out of range")
    return s


@dataclass(frozen=True)
class Route:
    """What one kind's alerts do (defaults: fire at once, clear after 60 s gone, grouped, no reminder)."""

    match: str = "*"
    for_s: float = 0.0
    clear_s: float = 60.0
    group: bool = True
    repeat_s: float = 0.0
    sinks: tuple[str, ...] = ("bell", "command")

    def takes(self, kind: str) -> int:
        """How closely this route matches ``kind`` (0: not at all; a kind before a severity before ``*``)."""
        return 3 if self.match == kind else 2 if self.match == severity(kind) else 1 if self.match == "*" else 0


@dataclass(frozen=True)
class Rules:
    """The routes and where the sinks send."""

    routes: tuple[Route, ...] = (Route(),)
    command: tuple[str, ...] | None = None
    file: str | None = None
    url: str | None = None
    http_timeout: float = 5.0
    http_retries: int = 2

    def route(self, kind: str) -> Route | None:
        """The route that matches ``kind`` most closely (first of equals); None: no route takes it."""
        best = max(self.routes, key=lambda r: r.takes(kind), default=None)
        return best if best is not None and best.takes(kind) else None

    @classmethod
    def load(cls, path: str | None, command: list[str] | None = None) -> Rules:
        """The rules of a TOML file (None: the defaults, ``--on-alert``'s ``command``); a ValueError that says
        the file and the key."""
        if path is None:
            return cls(command=tuple(command) if command else None)
        try:
            import tomllib
        except ImportError:  # Python 3.10
            import tomli as tomllib  # type: ignore[no-redef]
        try:
            with open(path, "rb") as f:
                data = tomllib.load(f)
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ValueError(f"{path}: {e}") from None
        try:
            return cls._of(data, command)
        except (ValueError, TypeError) as e:
            raise ValueError(f"{path}: {e}") from None

    @classmethod
    def _of(cls, data: dict[str, Any], command: list[str] | None) -> Rules:
        unknown = set(data) - {"sinks", "route"}
        if unknown:
            raise ValueError(f"unknown keys {sorted(unknown)} (known: sinks, route)")
        sinks = data.get("sinks") or {}
        known = {"file", "http", "http_timeout", "http_retries", "command"}
        if not isinstance(sinks, dict) or set(sinks) - known:
            raise ValueError(f"[sinks]: keys are {sorted(known)}")
        routes = []
        for k, r in enumerate(data.get("route") or [], 1):
            if not isinstance(r, dict) or set(r) - {"match", "for", "clear_after", "group", "repeat", "sinks"}:
                raise ValueError(f"[[route]] {k}: keys are match, for, clear_after, group, repeat, sinks")
            chosen = tuple(r.get("sinks", ("bell", "command")))
            if set(chosen) - set(SINKS):
                raise ValueError(f"[[route]] {k}: sinks are {', '.join(SINKS)}, not {sorted(set(chosen) - set(SINKS))}")
            routes.append(Route(str(r.get("match", "*")), duration(r.get("for", 0), "for"),
                                duration(r.get("clear_after", 60), "clear_after"), bool(r.get("group", True)),
                                duration(r.get("repeat", 0), "repeat"), chosen))
        cmd = shlex.split(sinks["command"]) if sinks.get("command") else command
        return cls(tuple(routes) or (Route(),), tuple(cmd) if cmd else None, sinks.get("file"), sinks.get("http"),
                   duration(sinks.get("http_timeout", 5.0), "http_timeout"), int(sinks.get("http_retries", 2)))


# -- silences --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Silence:
    kind: str  # an alert kind, a severity, or "*"
    until: float
    reason: str = ""
    by: str = ""
    time: float = 0.0

    def covers(self, kind: str, now: float) -> bool:
        return now < self.until and self.kind in (kind, severity(kind), "*")


def silences(run_dir: str) -> list[Silence]:
    """The silences kept beside the run, the newest word on each kind last (a removal is one that ended)."""
    out: dict[str, Silence] = {}
    try:
        with open(os.path.join(run_dir, SILENCES), encoding="utf-8", errors="replace") as f:
            lines = f.read(1 << 20).splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            d = json.loads(line)
            s = Silence(str(d["kind"]), float(d["until"]), str(d.get("reason", "")), str(d.get("by", "")),
                        float(d.get("time", 0.0)))
        except (ValueError, KeyError, TypeError):
            continue
        out[s.kind] = s
    return list(out.values())


def add_silence(run_dir: str, kind: str, seconds: float, reason: str = "", now: float | None = None) -> Silence:
    """Silence ``kind`` for ``seconds`` (0: end its silence now); an OSError when the run's folder is not
    writable."""
    import getpass

    t = time.time() if now is None else now
    try:
        who = getpass.getuser()
    except (KeyError, OSError):
        who = ""
    s = Silence(kind, t + seconds, reason, who, t)
    with open(os.path.join(run_dir, SILENCES), "a", encoding="utf-8") as f:
        f.write(json.dumps(s.__dict__) + "\n")
    return s


# -- the router --------------------------------------------------------------------------------------------

@dataclass
class Notification:
    """What a sink is told: one kind (and its ranks), fired, a reminder, cleared or silenced."""

    state: str  # fired, repeat, cleared, silenced
    kind: str
    ranks: list[int]
    message: str
    time: float
    severity: str
    sinks: tuple[str, ...] = ()

    def public(self) -> dict[str, Any]:
        return {"time": round(self.time, 3), "state": self.state, "kind": self.kind, "severity": self.severity,
                "ranks": self.ranks, "message": self.message}


@dataclass
class _Group:
    first: float
    ranks: set[int] = field(default_factory=set)
    message: str = ""
    firing: bool = False
    silenced: bool = False
    sent: float = 0.0
    gone: float | None = None


class Router:
    """Alerts in, notifications out, by the rules: call :meth:`update` with each frame's alerts."""

    def __init__(self, rules: Rules, silenced: Callable[[], list[Silence]] = list) -> None:
        self.rules, self._silenced = rules, silenced
        self._groups: dict[tuple[str, int | None], _Group] = {}

    def update(self, now: float, alerts: Iterable[tuple[str, int | None, str]]) -> list[Notification]:
        """``alerts``: (kind, rank or None, message) of what holds now. The notifications due now."""
        present: dict[tuple[str, int | None], tuple[set[int], str]] = {}
        for kind, rank, message in alerts:
            route = self.rules.route(kind)
            if route is None:
                continue
            key = (kind, None if route.group else rank)
            ranks, _ = present.setdefault(key, (set(), message))
            if rank is not None:
                ranks.add(rank)
        out: list[Notification] = []
        quiet = self._silenced()
        for key, (ranks, message) in present.items():
            out += self._held(key, ranks, message, now, quiet)
        for key in [k for k in self._groups if k not in present]:
            out += self._gone(key, now)
        return out

    def _held(self, key: tuple[str, int | None], ranks: set[int], message: str, now: float,
              quiet: list[Silence]) -> list[Notification]:
        kind, route = key[0], self.rules.route(key[0])
        assert route is not None  # (update keeps only routed kinds)
        g = self._groups.setdefault(key, _Group(now))
        g.gone, g.message = None, message
        g.ranks |= ranks  # ranks that join a firing group are in its next notification (a reminder, its clear)
        silent = any(s.covers(kind, now) for s in quiet)
        if not g.firing:
            if now - g.first < route.for_s:
                return []
            g.firing, g.silenced, g.sent = True, silent, now
            return [self._note("silenced" if silent else "fired", key, g, now, () if silent else route.sinks)]
        if silent:
            g.silenced = True
            return []
        due = route.repeat_s > 0 and now - g.sent >= route.repeat_s
        if due or (g.silenced and not silent):  # a reminder, or a silence that ended on a condition that holds
            g.sent, g.silenced = now, False
            return [self._note("repeat" if due else "fired", key, g, now, route.sinks)]
        return []

    def _gone(self, key: tuple[str, int | None], now: float) -> list[Notification]:
        g = self._groups[key]
        route = self.rules.route(key[0]) or Route()
        if not g.firing:
            del self._groups[key]  # pending only: it never fired, nothing to clear
            return []
        if g.gone is None:
            g.gone = now
        if now - g.gone < route.clear_s:
            return []
        del self._groups[key]
        return [self._note("cleared", key, g, now, () if g.silenced else route.sinks)]

    @staticmethod
    def _note(state: str, key: tuple[str, int | None], g: _Group, now: float,
              sinks: tuple[str, ...]) -> Notification:
        return Notification(state, key[0], sorted(g.ranks), g.message, now, severity(key[0]), tuple(sinks))


# -- the sinks ---------------------------------------------------------------------------------------------

class Sinks:
    """The sinks' own thread, fed by a bounded queue: :meth:`send` never waits; a sink that hangs delays only
    the notifications after it, and each failure is kept for the screen (:meth:`errors`)."""

    def __init__(self, rules: Rules, history: str | None = None) -> None:
        self.rules, self.history = rules, history
        self._q: queue.Queue[Notification | None] = queue.Queue(QUEUE)
        self._errors: list[str] = []
        self.dropped = 0
        self.sent = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="mstop-sinks", daemon=True)
        self._thread.start()

    def send(self, notes: list[Notification]) -> None:
        for n in notes:
            try:
                self._q.put_nowait(n)
            except queue.Full:
                self.dropped += 1

    def errors(self) -> list[str]:
        with self._lock:
            out, self._errors = self._errors, []
        return out

    def close(self, wait: float = 2.0) -> None:
        """Send what is queued (at most ``wait`` seconds more), then stop."""
        try:
            self._q.put(None, timeout=wait)
        except queue.Full:
            return
        self._thread.join(wait)

    def _run(self) -> None:
        while True:
            n = self._q.get()
            if n is None:
                return
            for sink, why in self._deliver(n):
                with self._lock:
                    self._errors.append(f"alert sink {sink} failed: {why}")

    def _deliver(self, n: Notification) -> list[tuple[str, str]]:
        failed = []
        body = json.dumps(n.public(), ensure_ascii=False)
        if self.history:
            failed += self._write_line("history", self.history, body)
        r = self.rules
        if "file" in n.sinks and r.file:
            failed += self._write_line("file", r.file, body)
        if "command" in n.sinks and r.command:
            try:
                subprocess.run(list(r.command), input=body.encode(), timeout=60, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, check=False)
            except (OSError, subprocess.TimeoutExpired) as e:
                failed.append(("command", str(e)))
        if "http" in n.sinks and r.url:
            failed += self._post(r.url, body.encode())
        if not failed:
            self.sent += 1
        return failed

    @staticmethod
    def _write_line(sink: str, path: str, body: str) -> list[tuple[str, str]]:
        try:
            with open(path, "a", encoding="utf-8") as f:
                f.write(body + "\n")
        except OSError as e:
            return [(sink, f"{path}: {e.strerror or e}")]
        return []

    def _post(self, url: str, data: bytes) -> list[tuple[str, str]]:
        why = ""
        for attempt in range(self.rules.http_retries + 1):
            req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"},
                                         method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.rules.http_timeout) as resp:  # noqa: S310 (the site's URL)
                    if 200 <= resp.status < 300:
                        return []
                    why = f"HTTP {resp.status}"
            except (OSError, ValueError) as e:  # URLError, a timeout, a refused connection
                why = str(getattr(e, "reason", e))
            time.sleep(min(2.0, 0.25 * 2 ** attempt))
        return [("http", f"{url}: {why} ({self.rules.http_retries + 1} tries)")]


def history(run_dir: str, limit: int = 1000) -> list[dict[str, Any]]:
    """The notifications kept beside the run, oldest first (the last ``limit``)."""
    try:
        with open(os.path.join(run_dir, HISTORY), encoding="utf-8", errors="replace") as f:
            lines = f.read(8 << 20).splitlines()[-limit:]
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if isinstance(d, dict) and d.get("state") in ("fired", "repeat", "cleared", "silenced"):
            out.append(d)
    return out


class AlertRouting:
    """One followed run's router, sinks and silences (the monitor's session and ``mstop export`` each keep
    one): :meth:`look` at each frame's alerts and verdicts."""

    #: seconds between two reads of the silences file
    SILENCES_EVERY = 1.0

    def __init__(self, rules: Rules, run_dir: str | None) -> None:
        """``run_dir``: a local run's folder (its silences and history are kept there); None for a run over
        ssh (its silences are not read, its history kept by the file sink only)."""
        self.run_dir = run_dir
        self._quiet: tuple[float, list[Silence]] = (-1e18, [])
        self.router = Router(rules, self._silences)
        self.sinks = Sinks(rules, history=os.path.join(run_dir, HISTORY) if run_dir else None)
        #: the newest notifications of this follow (fired, repeat, cleared, silenced), for the alerts dialog
        self.told: deque[Notification] = deque(maxlen=200)

    def _silences(self) -> list[Silence]:
        now = time.monotonic()
        if self.run_dir is not None and now - self._quiet[0] >= self.SILENCES_EVERY:
            self._quiet = (now, silences(self.run_dir))
        return self._quiet[1]

    def look(self, now: float, alerts: Iterable[Any], verdicts: Iterable[Any] = ()) -> list[Notification]:
        """The notifications these alerts (mstop.engine.rules.Alert) and diagnosis verdicts give now, sent."""
        items = [(a.kind, a.rank, a.message) for a in alerts]
        items += [(v.kind, r, v.words) for v in verdicts if v.kind != "healthy" for r in (v.ranks or [None])]
        return self.send(now, items)

    def look_at(self, now: float, summary: dict[str, Any]) -> list[Notification]:
        """The same from ``summary --json``'s object (its ``alerts`` and ``diagnosis``)."""
        items = [(a["kind"], a.get("rank"), a.get("message", "")) for a in summary.get("alerts") or []]
        items += [(v["kind"], r, v.get("words", "")) for v in summary.get("diagnosis") or []
                  if v["kind"] != "healthy" for r in (v.get("ranks") or [None])]
        return self.send(now, items)

    def send(self, now: float, items: list[tuple[str, int | None, str]]) -> list[Notification]:
        notes = self.router.update(now, items)
        self.sinks.send(notes)
        self.told.extend(notes)
        return notes

    def close(self) -> None:
        self.sinks.close()


def local_dir(specs: list[str]) -> str | None:
    """The one local run folder of these sources (where silences and the history are kept), else None."""
    return specs[0] if len(specs) == 1 and os.path.isdir(specs[0]) else None
