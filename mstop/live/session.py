"""The monitor's state and its frames, without a screen: what ``mstop RUN_DIR`` follows and shows.

A :class:`MonitorSession` owns the store and its sources, the health rules and the alert bookkeeping, the
baseline and the overlays, and the cache of the history's incidents. :meth:`MonitorSession.frame` builds
one frame from a snapshot and **returns** it with what is new in it (alerts never told before, whether a
history scan is due); it never calls back into whoever draws. The screen draws the frame, rings the bell,
runs ``--on-alert`` and schedules the scan from what it got, so the frame can be built and tested without
Textual, and no circle runs through the screen's redraw.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..engine import figures, processes, rankstate
from ..engine.diagnosis import Diagnosis
from ..engine.endings import error_rank
from ..engine.figures import ENDED, Options
from ..engine.goodput import Ledger, ledger
from ..engine.health import Alert, Health, Rules
from ..engine.incidents import Incident
from ..engine.reader import RunReader
from ..engine.store import Snapshot
from ..formats.logs import last_error
from ..formats.logstate import SOURCE_PLAIN
from ..safe import clean
from ..sources import SourceError, Sources, check_spec, read_once
from ..sources.logs import (
    LogTail,
    add_log_waits,
    find_rank_log,
    job_rank_of,
    last_error_of,
    rank_log,
    remote_tail,
)
from ..sources.nodesets import host_part
from ..sources.remote import parse_target, rank_host
from ..view.baseline import baseline_overlay, run_part
from ..view.build import build_view
from ..view.charts import incident_marks, step_range
from ..view.frame import View
from ..view.marks import heat_marks
from ..view.parts import reading_header
from ..view.stacks import STUCK_KINDS
from .alerting import Alerting
from .logpane import LogPane
from .options import MonitorOptions
from .routing import AlertRouting, local_dir

#: the monitor as the command line starts it with no options
DEFAULT_OPTIONS = MonitorOptions()

#: the header's status while the first read of what is already written goes on (no status of the job yet)
READING = "reading"

#: Fewest seconds between two scans of the history for incidents (marks on the loss chart; a always scans).
INCIDENTS_EVERY = 10.0


@dataclass
class Frame:
    """One frame and what is new in it, for the screen to act on."""

    view: View
    fresh: list[Alert] = field(default_factory=list)  # alerts never told before: ring, --on-alert
    #: diagnosis verdicts never told before (healthy is none): ring, --on-alert (as mstop.engine.diagnosis'
    #: Verdict.told gives them)
    fresh_verdicts: list[Any] = field(default_factory=list)
    scan: list[Alert] | None = None  # a history scan is due, for these alerts (run it off the UI thread)
    routed: list[Any] = field(default_factory=list)  # notifications the routing rules gave (already sent)


#: the statuses whose stack dumps explain them (the stacks view, t, is then in the footer)
STACKS_EXPLAIN = ("stalled", "dead", "failed")
#: seconds between two reads of a stalled or dead writer run's rank logs for their waits
LOG_WAITS_EVERY = 10.0


class MonitorSession:
    """What the monitor follows, and its frames (no screen code: see the module's docstring)."""

    def __init__(self, specs: list[str], options: MonitorOptions = DEFAULT_OPTIONS, *,
                 overlays: list[tuple[str, Snapshot]] = (), run_label: str = "",
                 on_update: Callable[[], None] | None = None) -> None:
        self.specs = list(specs)
        self.run_dir = clean(" ".join(self.specs), 4096)  # shown in the title: no control codes
        self.on_update = on_update  # told when something new is there to draw (a remote log's error read)
        self.options = options
        clock = options.clock
        self.source = Sources(self.specs, poll=options.poll, on_update=on_update,
                              connection=options.connection, digest=options.digest)
        self.store = self.source.store  # fed by the sources; read here only through its snapshots
        self.health = Health(options.rules or Rules())
        self.diagnosis = Diagnosis(self.health.rules)  # what slows the job, held from frame to frame
        # ages and "stalled" use the remote host's clock when following over ssh
        self.opts = self.health.rules.options(Options(peak_flops=options.peak_flops,
                                                      clock=clock or self.source.clock,
                                                      arrival_clock=None if clock else time.time))
        self.alerting = Alerting(options.alert_command)
        #: alerts routed by the rules (mstop.live.routing), when a rules file was given
        self.routing = AlertRouting(options.routing, local_dir(self.specs)) if options.routing is not None else None
        self.custom: tuple[str, ...] = ()  # the m dialog's columns
        #: other runs drawn by step beside this one (the runs list's o): (name, store)
        self.overlays = [(clean(n, 256), store) for n, store in overlays]
        self.run_label = clean(run_label, 256)  # this run's name in an overlay's legend
        self.baseline_spec = options.baseline  # --baseline / b: another run overlaid by step
        self.baseline_store: Snapshot | None = None
        self.reading = False  # the first read of what is already written is going on
        self.job_note: str | None = None  # mstop demo: how its job ended
        self._incidents: tuple[int, float, list[Incident]] = (-1, 0.0, [])
        #: a plain log's ended job's ledger read afterwards ((store version, status), ledger), and whether a
        #: read of it is under way (_goodput_afterwards)
        self._after: tuple[tuple, Ledger | None] = ((), None)
        self._after_busy = False
        self.logs_dir = options.logs_dir  # --logs DIR: where the ranks' own logs are (mstop.sources.logs)
        self._culprit_log: tuple[tuple, list[str]] = ((), [])  # (key, header lines) of the culprit's last error
        #: the ranks' logs read for their waits (_log_waits): when last, whether a read goes on, what was given
        self._waits_at, self._waits_busy = -1e18, False
        self._waits_told: set[tuple[int, str, int]] = set()

    # -- frames ----------------------------------------------------------------------

    def frame(self, *, points: int, xaxis: str = "step", recent: bool = False, ranks_view: bool = False,
              header_only: bool = False) -> Frame:
        """This moment's frame: the figures, the baseline's and overlays' curves, the alerts and the
        incidents' marks. The ranks view (and ``header_only``, the once-a-second tick) builds no run-wide
        chart: at 1,024 ranks every millisecond counts."""
        if self.reading:  # a part of the files: no figure, no alert told, no incident scanned from it
            # what is read so far is no state of the job: the header says it is reading, how far it came, and
            # the newest row's age by its own time (every row read "arrived" just now: 0 s ago, of a row 3
            # minutes old); no snapshot (at 10,000 ranks a frame a second froze every rank and took a third
            # of the read)
            now = self.opts.clock()
            v = View(now=now)
            v.header = reading_header(self.store.progress(), self.opts, now)
            v.header.status = READING
            v.header.notes = self.notes(v)
            return Frame(v)
        snap = self.store.snapshot()
        charts = not (ranks_view or header_only)
        v = build_view(snap, self.opts, points=points, xaxis=xaxis, recent=recent,
                       custom=self.custom, header_only=not charts)
        v.header.notes = self.notes(v)
        # a stalled, dead or failed run with dumps, or a rank whose dump says it is stuck in a step (its peers
        # wait: the status may still read running)
        v.header.stacks_explain = bool(snap.ranks_with("stacks")) and (
            v.header.status in STACKS_EXPLAIN or bool(processes.stack_groups(snap)))
        self._goodput_afterwards(v, snap)
        self._log_waits(v.header.status, snap)
        if charts and self.baseline_store is not None:
            # its last path component names it on the screen (the whole path is in the b dialog)
            spec = self.baseline_spec or ""
            name = clean(os.path.basename(spec.rstrip("/")) or spec, 256)
            baseline_overlay(v, self.baseline_store, name, self.opts, points=points, recent=recent)
        if charts:
            v.overlays = [run_part(v, store, name, self.opts, points=points, recent=recent)
                          for name, store in self.overlays]
            v.name = self.run_label
        out = Frame(v)
        v.alerts = self.health.alerts(snap, self.opts)
        v.diagnosis = self.diagnosis.look(snap)
        # the stacks view says the hang's waits and the failure's root first (mstop.view.stacks): t is shown
        v.header.stacks_explain = v.header.stacks_explain or any(d.kind in STUCK_KINDS for d in v.diagnosis)
        v.marks = heat_marks(v.alerts)
        v.new_alerts, out.fresh = self.alerting.update(v.alerts)
        out.fresh_verdicts = self.alerting.verdicts(v.diagnosis)
        if self.routing is not None:
            out.routed = self.routing.look(time.time(), v.alerts, v.diagnosis)
        if charts:
            past, out.scan = self._past_incidents(v.alerts)
            v.loss.incident_marks = incident_marks(snap, [i for i in past if not i.active], xaxis,
                                                   step_range(v.header.step, recent))
        return out

    def _goodput_afterwards(self, v: View, snap: Snapshot) -> None:
        """A plain MindSpore log's job that has ended: its goodput as its files read afterwards give it, as
        ``summary`` reads them. Followed live, its unstamped lines were timed by their arrival, and each row
        is classified once (goodput definition 4); read afterwards, TimeMonitor's per-step times space them:
        the two differed (71 % live, 76 % afterwards, measured on a real 2-worker job). The files are read
        once more on a thread of its own when the job ends; the live figure stands until that is done."""
        if v.header.status not in ENDED or (figures.source(snap) or {}).get("kind") != SOURCE_PLAIN \
                or len(self.specs) != 1:
            return
        key = (snap.version, v.header.status)
        if self._after[0] != key and not self._after_busy:
            self._after_busy = True

            def read() -> None:
                try:
                    got = ledger(read_once(self.specs[0], connection=self.options.connection).snapshot(), self.opts)
                except Exception:  # noqa: BLE001 - the live figure stands
                    got = None
                self._after, self._after_busy = (key, got), False
                if self.on_update is not None:
                    self.on_update()

            threading.Thread(target=read, name="mstop-goodput-afterwards", daemon=True).start()
        got = self._after[1]
        if got is not None and got.goodput is not None:
            v.header.goodput, v.header.goodput_lost = got.goodput, got.largest_losses(2)

    def _log_waits(self, status: str, snap: Snapshot) -> None:
        """A writer's run that stalled or died: its ranks' own logs read on a thread of its own (at most every
        LOG_WAITS_EVERY seconds) for the peers their collectives timed out waiting for (mstop.sources.logs.
        add_log_waits): the hang's wait-for graph, as for a job read from its logs. Only where a start event
        names its rank's log (or --logs names a folder): no thread otherwise."""
        now = time.monotonic()
        if status not in STACKS_EXPLAIN or self._waits_busy or now - self._waits_at < LOG_WAITS_EVERY:
            return
        self._waits_at = now
        if not self.logs_dir and not any(o.start and isinstance(o.start.get("logs"), list)
                                         for o in rankstate.states(snap).one):  # (the frame's, kept)
            return
        self._waits_busy = True

        def read() -> None:
            try:
                if add_log_waits(self.store, self.specs, self.logs_dir, self._waits_told, snap) and self.on_update:
                    self.on_update()
            except Exception:  # noqa: BLE001 - the logs are evidence, never a reason to stop following
                pass
            finally:
                self._waits_busy = False

        threading.Thread(target=read, name="mstop-log-waits", daemon=True).start()

    def notes(self, v: View) -> list[str]:
        """The header's notes: hosts not connected, ranks in two sources, clocks, the demo job, the view's own."""
        h = v.header
        if self.reading:  # the first read is still going on (q quits meanwhile)
            return [f"reading what is written so far: {self.store.rows:,} rows (q quits)"]
        missing = [spec for spec in self.specs if ":" not in spec and not os.path.isdir(spec)]
        empty = [] if RunReader.count(self.store) or self.store.rank_files else [
            f"{clean(missing[0], 4096)} does not exist yet: waiting for it" if missing else
            f"no rank files (rank*.csv) nor MindFormers logs in {self.run_dir} yet, nor runs below it: waiting"]
        return (self.source.states() + self.store.duplicates + ([h.skew_note] if h.skew_note else [])
                + ([self.job_note] if self.job_note else []) + empty + self.culprit_error(h.status) + h.notes)

    def show_rank(self, rank: int | None) -> None:
        """The rank the screen shows in detail (the ranks view's), told when it changes: a host that merges its
        ranks' rows (a digest) sends that rank's as written from now on."""
        self.source.show(rank)

    # -- the ranks' own logs ---------------------------------------------------------

    def log_pane(self, rank: int | None) -> LogPane:
        """The log pane of ``rank`` (None: the job's rank, the lowest), its first lines read; over ssh not
        yet (a round trip to a host that may not answer: the screen reads it off its thread)."""
        if rank is None:
            rank = job_rank_of(self.store)
        log, refused = (None, None) if self._elsewhere(rank) else find_rank_log(self.store, self.specs, rank,
                                                                                 self.logs_dir)
        pane = LogPane(rank, log.path if log is not None else None, refused=refused,
                       tail=LogTail(log.path, log) if log is not None else None)
        if pane.path is None:  # a source on another host: its log is read there, while the pane is open
            tail = remote_tail(self.store, self.specs, rank, self.options.connection)
            if tail is not None:
                pane = LogPane(rank, tail.path, tail=tail)
        pane.crash = RunReader(self.store).crash(rank)
        if not getattr(pane.tail, "remote", False):
            pane.read()
        return pane

    def culprit(self, status: str) -> int | None:
        """The rank whose log a failed or dead run's header quotes and ``L`` opens: the one a fact names, else
        the one whose abort came first (mstop.engine.endings.error_rank), else None (a job killed whole)."""
        if status not in ("failed", "dead"):
            return None
        return error_rank(self.store, self.opts)

    def culprit_error(self, status: str) -> list[str]:
        """For a failed or dead run, where its answer is: the culprit's crash stack when it crashed (``t``
        shows it: its log holds no error line of a segfault), then the last error its log holds, as header
        lines (a multi-line message line by line); read again only when the log changed."""
        rank = self.culprit(status)
        crash = RunReader(self.store).crash(rank) if rank is not None else None
        said = [f"rank {rank} {clean(crash, 400)} (t)"] if crash is not None else []
        return said + self._log_error(rank)

    def _log_error(self, rank: int | None) -> list[str]:
        """The culprit's log's last error as header lines (none when it has none, or no rank is named)."""
        log = rank_log(self.store, self.specs, rank, self.logs_dir) if rank is not None and \
            not self._elsewhere(rank) else None
        if log is None:
            return self._remote_culprit_error(rank) if rank is not None else []
        try:
            st = os.stat(log.path)
        except OSError:
            return []
        key = (log.path, st.st_size, st.st_mtime_ns)
        if self._culprit_log[0] != key:
            err = last_error_of(log)
            self._culprit_log = (key, [] if err is None else _error_note(rank, os.path.basename(log.path), err))
        return self._culprit_log[1]

    def _elsewhere(self, rank: int) -> bool:
        """With ``--hosts auto``: whether ``rank`` ran on another host (its start event says), so its log is
        read there, never a file of the same name on this machine."""
        return self.options.connection.hosts and rank_host(RunReader(self.store).start(rank)) is not None

    def _remote_culprit_error(self, rank: int) -> list[str]:
        """The same over ssh: the culprit's log read once on its host (on a thread: a round trip must not
        hold a frame), its lines shown from the next frame on."""
        key = ("remote", rank)
        if self._culprit_log[0] == key:
            return self._culprit_log[1]
        self._culprit_log = (key, [])
        tail = remote_tail(self.store, self.specs, rank, self.options.connection)
        if tail is None:
            return []

        def read() -> None:
            tail.read()
            err = last_error(tail.lines)
            if err is not None and self._culprit_log[0] == key:
                self._culprit_log = (key, _error_note(rank, tail.path.rsplit("/", 1)[-1], err))
                if self.on_update is not None:
                    self.on_update()

        threading.Thread(target=read, name="mstop-remote-log", daemon=True).start()
        return []

    def first_read_done(self) -> None:
        """What was already there did not just arrive: its own times tell its age; and the smoothed loss,
        tokens and goodput of a part of the files are counted again from the whole."""
        self.reading = False
        self.store.forget_arrivals()

    # -- incidents -------------------------------------------------------------------

    def _past_incidents(self, alerts: list[Alert]) -> tuple[list[Incident], list[Alert] | None]:
        """The last scan's incidents, and the alerts to scan with when a new scan is due (the store changed
        and INCIDENTS_EVERY seconds passed): scanning a long history costs up to a second, so the caller
        runs :meth:`scan` off its UI thread."""
        version, at, got = self._incidents
        now = time.monotonic()
        if version != self.store.version and now - at >= INCIDENTS_EVERY:
            self._incidents = (self.store.version, now, got)  # one scan at a time
            return got, list(alerts)
        return got, None

    def scan(self, alerts: list[Alert]) -> bool:
        """Scan the history for incidents (any thread); whether the loss chart's marks changed."""
        before = self._incidents[2]
        # a snapshot: a scan of a long history holds no lock the screen or the reading thread waits for
        found = self.health.incidents(self.store.snapshot(), self.opts, alerts)
        self._incidents = (self._incidents[0], self._incidents[1], found)
        return [i.first_step for i in found] != [i.first_step for i in before]

    def alerts_now(self) -> tuple[list[Alert], list[Incident]]:
        """The a key: every active alert (marked seen) and the run's past incidents, scanned now."""
        alerts = self.health.alerts(self.store.snapshot(), self.opts)
        self.alerting.seen(alerts)
        got = self.health.incidents(self.store.snapshot(), self.opts, alerts)
        self._incidents = (self.store.version, time.monotonic(), got)
        return alerts, [i for i in got if not i.active]

    # -- the baseline ----------------------------------------------------------------

    def read_baseline(self, spec: str) -> Snapshot | str:
        """Read a baseline run once (a finished run, usually; any thread): its store, or why it cannot be
        read."""
        try:
            return read_once(spec, connection=self.options.connection).snapshot()
        except SourceError as e:
            return str(e)

    def use_baseline(self, spec: str | None, got: Snapshot | str | None = None) -> str | None:
        """Use a baseline just read (``spec`` None: none); why it is not used, or None."""
        if spec is None or isinstance(got, str) or got is None:
            self.baseline_spec, self.baseline_store = None, None
            return got if isinstance(got, str) else None
        self.baseline_spec, self.baseline_store = spec, got
        return None

    def first_read(self) -> str | None:
        """Read what is already written (any thread); why a source could not, or None (its own loop retries
        while following)."""
        try:
            self.source.read_all()
        except SourceError as e:
            return str(e)
        return None

    # -- a profile of the running job ------------------------------------------------

    def profile_command(self) -> str | None:
        """For a run on another host: the ssh command that asks its job for a profile (mstop writes nothing
        there), with the ssh options the monitor was given (``-F FILE``, ``-o ...``: the host may be named by
        them alone); None for a run on this machine (:meth:`ask_profile` writes the request)."""
        import shlex as _shlex

        from mstop_writer.profiling import REQUEST_NAME

        part = host_part(self.specs[0])
        if part is not None:  # a node set: ClusterShell's clush asks every host (%h: each host's own path)
            hosts, where = part
            path = _shlex.quote(f"{where.rstrip('/')}/{REQUEST_NAME}")
            given = " ".join(self.options.connection.ssh_options)
            options = f"-o {_shlex.quote(given)} " if given else ""
            return f"clush {options}-w {_shlex.quote(hosts)} {_shlex.quote(f'echo 10 > {path}')}"
        target = parse_target(self.specs[0])
        if target is None:
            return None
        path = _shlex.quote(f"{target.path.rstrip('/')}/{REQUEST_NAME}")
        options = "".join(f"{_shlex.quote(o)} " for o in self.options.connection.ssh_options)
        return f"ssh {options}{_shlex.quote(target.host)} {_shlex.quote(f'echo 10 > {path}')}"

    def ask_profile(self, steps: int) -> str | None:
        """Write RUN_DIR/profile.request for the next ``steps`` steps (never through a link, never blocking on
        a FIFO); why it could not, or None."""
        from mstop_writer.profiling import write_request

        try:
            check_spec(self.specs[0])
            write_request(self.specs[0], steps)
        except (OSError, ValueError) as e:
            return str(e)
        return None

    def on_alert(self, alerts: list[dict[str, Any]]) -> list[str]:
        """Run --on-alert for these alerts (a worker thread: it may take a while); what failed."""
        return list(self.alerting.run_command(alerts))


def _error_note(rank: int, name: str, err: Any) -> list[str]:
    """The header's lines for a culprit's last error (mstop.formats.logs.LastError): its first line named by
    the log's file, then up to two more of its message."""
    return [f"rank {rank}'s log ({name}, L opens it): {err.lines[0]}"] + [f"    {line}" for line in err.lines[1:3]]
