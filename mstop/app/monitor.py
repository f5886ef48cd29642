"""``mstop RUN_DIR``: the live monitor (Textual)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import time
from typing import Any, Callable

from textual import on
from textual.app import App, ComposeResult
from textual.await_complete import AwaitComplete
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Static

from ..live import Frame, MonitorOptions, MonitorSession, Throttle, close_connections, fresh_lines, stop_programs
from ..safe import clean
from ..view import (
    X_AXES,
    Line,
    RankTable,
    Snapshot,
    View,
    numeric_columns,
    rank_series,
    stacks_lines,
    values_at_step,
)
from .messages import StoreChanged
from .screens import (
    AlertsScreen,
    BaselineScreen,
    GoToStepScreen,
    HelpScreen,
    LogScreen,
    MetricsScreen,
    ProfileScreen,
    StacksScreen,
)
from .widgets import (
    HEAT_METRICS,
    PROFILE_METRICS,
    AlertsPanel,
    Chart,
    DataPanel,
    DeviceStrip,
    Header,
    HeatStrip,
    KeysFooter,
    LossPanel,
    MemoryPanel,
    MfuPanel,
    RankDetail,
    RanksTable,
    ThroughputPanel,
)

SMOOTHING = (0.0, 0.6, 0.8, 0.9, 0.95, 0.99)
#: Seconds a signalled app gets to close its screen before its cleanups run and the process ends anyway.
EXIT_GRACE = 5.0


class MonitorScreen(Screen[None]):
    """Follow one run (its sources) and draw its figures: the screen of ``mstop RUN_DIR``, and the one the
    runs list opens (Enter) and closes again (Escape, ``back`` set)."""

    #: the footer shows the keys used most and always "? help" (it is cut at the right on narrow terminals,
    #: so help comes second); every key is in the help
    BINDINGS = [
        ("q", "app.quit", "quit"),
        Binding("escape", "back", "runs"),
        ("question_mark", "help", "help"),
        ("a", "alerts", "alerts"),
        # t in the footer only while the stacks view explains the state (a crash's, a hang's stack dumps):
        # shown through a binding of its own, which check_action hides otherwise (a hidden binding is a
        # disabled one in Textual: the key then falls to the t below, which always works)
        Binding("t", "stacks_shown", "stacks"),
        ("r", "ranks", "ranks"),
        ("p", "pause", "pause"),
        ("x", "xaxis", "x axis"),
        ("w", "window", "window"),
        ("b", "baseline", "baseline"),
        Binding("s", "smoothing(-1)", "smooth-", show=False),
        Binding("S", "smoothing(1)", "smooth+", show=False),
        Binding("l", "log", "log", show=False),
        Binding("g", "goto", "go to step", show=False),
        Binding("slash", "metrics", "metrics", show=False),
        Binding("m", "heat_metric", "heat metric", show=False),
        Binding("P", "profile", "profile", show=False),
        Binding("L", "log_pane", "rank's log", show=False),
        Binding("t", "stacks", "stacks", show=False),
    ]
    #: what the keys change; each watcher redraws (p, x, l, w)
    paused = reactive(False, init=False)
    xaxis = reactive("step", init=False)
    log_scale = reactive(False, init=False)
    recent = reactive(False, init=False)

    def __init__(self, run_dir: str | list[str], options: MonitorOptions | None = None, *,
                 job: subprocess.Popen | None = None, job_log: str | None = None, back: bool = False,
                 overlays: list[tuple[str, Snapshot]] = (), run_label: str = "") -> None:
        super().__init__()
        self.back = back  # opened from the runs list: Escape returns to it
        self.job, self.job_log = job, job_log  # mstop demo: the training job it started, and where its output goes
        specs = [run_dir] if isinstance(run_dir, str) else list(run_dir)
        #: what the monitor follows and its frames, without screen code (mstop.live.session)
        self.options = options = options or MonitorOptions()
        self.session = MonitorSession(specs, options, overlays=overlays, run_label=run_label,
                                      on_update=self._source_updated)
        self.follow = options.follow
        self.bell_on_alert = options.bell
        #: frames of their own (new rows, the tick) spaced by the budget and by what frames cost
        self.throttle = Throttle(options.redraw)
        self._drawn_version = -1
        self._drawn_rows = 0
        self._last_view: View | None = None
        self._stacks_explain = False  # the footer shows t (the last frame's header said so)
        self.selected_rank: int | None = None  # the rank the ranks view shows in detail
        self._detail_of: tuple[int, str] | None = None  # (frame, row key) the detail shows
        self._frames = 0  # frames drawn (redraws)
        self._read_error: str | None = None  # why the first read failed (a source's error), shown once

    @property
    def last_view(self) -> View | None:
        """The frame model the screen drew last (None before the first frame): what is on screen, as numbers."""
        return self._last_view

    @property
    def frames_drawn(self) -> int:
        """How many frames the screen has drawn."""
        return self._frames

    @property
    def drawn_version(self) -> int:
        """The store version the last frame showed (-1 before the first)."""
        return self._drawn_version

    @property
    def reading(self) -> bool:
        """The first read of what is already written is going on (on a thread)."""
        return self.session.reading

    def compose(self) -> ComposeResult:
        yield Static(" PAUSED: the display is frozen, reading goes on (p to resume)", id="paused")
        yield Header(id="header")
        yield AlertsPanel(id="alerts")
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield LossPanel(id="loss", classes="panel")
            with Vertical(id="right"):
                yield ThroughputPanel(id="throughput", classes="panel")
                yield MfuPanel(id="mfu", classes="panel")
                yield MemoryPanel(id="memory", classes="panel")
                yield DataPanel(id="data", classes="panel")
        with Vertical(id="ranks-view"):
            yield Static(id="heat-title")
            yield HeatStrip(id="heat")
            with Horizontal(id="rank-pane"):
                yield RankDetail(id="rank-detail")
                yield Chart(id="rank-chart")
            yield DeviceStrip(id="device-strip")
            yield RanksTable(id="ranks")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#loss").border_title = "loss"
        self.query_one("#throughput").border_title = "throughput"
        self.query_one("#mfu").border_title = "MFU"
        self.query_one("#memory").border_title = "memory"
        self.query_one("#data").border_title = "input pipeline"
        self._layout_for(self.size.width, self.size.height)
        self.set_focus(None)  # the ranks table takes the keys only while it is shown
        # What is already written is read on a thread while the screen shows how far it is and keys work
        # (q and Ctrl-C quit during a long load; the thread stops at its next chunk). The event loop only
        # ticks meanwhile, so the reading thread has the GIL nearly to itself.
        self.session.reading = True
        self.redraw()
        self._reading_ticker = self.set_interval(1.0, self._loading_tick)
        _on_thread(self._first_read, lambda error: self.app.call_from_thread(self._read, error),
                   name="mstop-load")

    def _first_read(self) -> None:
        """On the loading thread: what is written so far (a source's error is kept to be shown)."""
        self._read_error = self.session.first_read()

    def _read(self, error: BaseException | None) -> None:
        """The first read is done: follow from here, draw, tick."""
        self._reading_ticker.stop()
        self.session.reading = False
        if not self.is_attached:
            return  # quit while reading
        if error is not None:
            raise error
        if self._read_error is not None:  # shown, and retried by the source's own loop
            self.notify(self._read_error, severity="error", timeout=10)
        self.session.first_read_done()
        if self.session.baseline_spec:
            self._baseline_read(self.session.baseline_spec, self.session.read_baseline(self.session.baseline_spec))
        if self.follow:
            self.session.source.follow()
        self.redraw()
        self.set_interval(1.0, self.tick)
        self._start_export()

    def _start_export(self) -> None:
        """--openmetrics / --listen: the run's figures exported every --export-every seconds, on a worker
        (a summary of 10,000 ranks takes seconds: never on the screen's loop)."""
        o = self.session.options
        if not (o.openmetrics or o.listen):
            return
        from ..commands.export import Exporter

        self._exporter = Exporter(self.session.specs, self.session.run_dir, o.openmetrics, o.listen)
        if self._exporter.error is not None:
            self.notify(self._exporter.error, severity="error", timeout=10)

        def run() -> None:
            error = self._exporter.once(self.session.store, self.session.opts, self.session.health)
            if error is not None:
                self.app.call_from_thread(self.notify, f"export: {error}", severity="error")

        self.set_interval(o.export_every, lambda: self.run_worker(run, thread=True, name="mstop-export",
                                                                  exclusive=True, group="export",
                                                                  exit_on_error=False))
        self.run_worker(run, thread=True, name="mstop-export", exclusive=True, group="export", exit_on_error=False)

    def _loading_tick(self) -> None:
        """While the first read goes on: the header says how far it is (rows so far), once a second."""
        try:
            self.redraw()
        except NoMatches:
            return

    def on_unmount(self) -> None:
        self.session.source.stop()  # following, or still reading what was written (a long first read stops too)
        if self.session.routing is not None:
            self.session.routing.close()  # what is queued for the sinks is sent (two seconds at most)
        if getattr(self, "_exporter", None) is not None:
            self._exporter.close()

    def on_resize(self, event) -> None:  # noqa: ANN001
        self._layout_for(event.size.width, event.size.height)
        size = (event.size.width, event.size.height)
        if self._last_view is not None and size != getattr(self, "_sized", size):
            self.call_after_refresh(self.redraw)  # the texts choose their form by width: choose again
        self._sized = size

    def _layout_for(self, width: int, height: int) -> None:
        self.set_class(width < 100 or height < 30, "narrow")
        self.set_class(height < 30, "short")  # the header in three lines: the loss chart keeps its rows

    # -- updates -------------------------------------------------------------------

    def _source_updated(self) -> None:
        self.post_message(StoreChanged())

    @on(StoreChanged)
    def _store_changed(self) -> None:
        if self.session.store.version == self._drawn_version:
            return  # the source checked and found nothing new (it says so every pass): the tick ages the header
        if self.throttle.due() or self._drawn_rows == 0:  # the first data: draw at once
            self.redraw()  # otherwise the next tick draws it: the store's version moved on

    def _check_job(self) -> None:
        """mstop demo's job: reaped when it ends (no <defunct> process), and a failure pointed at its log."""
        if self.job is None or self.session.job_note is not None or self.job.poll() is None:
            return
        code = self.job.returncode
        if code == 0:
            self.session.job_note = "the demo job finished"
        else:
            self.session.job_note = f"the demo job exited with code {code}: its output is in {self.job_log}"
            self.notify(self.session.job_note, severity="error", timeout=30)
        self.redraw()

    def tick(self) -> None:
        """Once a second: a delayed redraw happens, or, with nothing new, only the ages in the header move."""
        self._check_job()
        try:
            if not self.throttle.due(every=0.0):
                return  # frames are costly: a later tick (the tick itself comes once a second)
            if self.session.store.version != self._drawn_version or self.has_class("show-ranks"):
                self.redraw()  # the ranks view: every rank's age moves, and its letters with the status
            elif not self.paused:
                with self.throttle.frame():
                    v = self._act(self.session.frame(points=self._points(), header_only=True))
                    self.query_one(Header).show(v)
                    self.query_one(AlertsPanel).show(v)
                    self._footer_for(v)
        except NoMatches:  # a tick while the app is closing: its widgets are already gone
            return

    def redraw(self) -> None:
        """Draw every visible panel from one frame, built from a snapshot of the store (the reading thread
        goes on meanwhile)."""
        if self.paused:
            return
        with self.throttle.frame():
            self._draw()

    def _draw(self) -> None:
        """redraw's body, timed by the throttle."""
        self._drawn_version = self.session.store.version
        self._drawn_rows = self.session.store.rows
        ranks_view = self.has_class("show-ranks")
        v = self._act(self.session.frame(points=self._points(), xaxis=self.xaxis, recent=self.recent,
                                         ranks_view=ranks_view))
        self._last_view = v
        self._frames += 1
        with self.app.batch_update():
            self.query_one(Header).show(v)
            self.query_one(AlertsPanel).show(v)
            self._footer_for(v)
            if ranks_view:
                self.query_one(DeviceStrip).show(v)
                self.query_one(RanksTable).show(v)
                self._show_detail(v)
            else:
                self.query_one(LossPanel).show(v, log=self.log_scale, smoothing=self.session.opts.ema_weight,
                                               recent=self.recent)
                self.query_one(ThroughputPanel).show(v)
                self.query_one(MfuPanel).show(v)
                self.query_one(MemoryPanel).show(v)
                self.query_one(DataPanel).show(v)
            self.app.sub_title = f"{self.session.run_dir}  ({self.session.source.mode})"
            if isinstance(self.app.screen, AlertsScreen):  # open over this monitor: it follows the frames
                self.session.alerting.seen(v.alerts)
                self.app.screen.show(v.alerts)

    def _points(self) -> int:
        """Points per chart series: about the loss chart's width in braille dots."""
        return max(40, self.size.width * 2 // 3)

    def _act(self, f: Frame) -> View:
        """Do what a frame asks of the screen: ring and run --on-alert once for each alert that is new (or, with
        routing rules, ring for what they send to the bell and show what a sink failed at), and scan the
        history for incidents on a worker when due (drawn again when its marks changed)."""
        routing = self.session.routing
        if routing is not None:
            if any(n.state in ("fired", "repeat") and "bell" in n.sinks for n in f.routed):
                self.app.bell()
            for error in routing.sinks.errors():
                self.notify(error, severity="error")
        elif (f.fresh or f.fresh_verdicts) and self.bell_on_alert:
            self.app.bell()
        if routing is None and (f.fresh or f.fresh_verdicts) and self.session.alerting.command:
            told = [a.public() for a in f.fresh] + [v.told() for v in f.fresh_verdicts]
            self.run_worker(lambda: self._run_on_alert(told), thread=True, name="mstop-on-alert",
                            group="on-alert", exit_on_error=False)
        if f.scan is not None:
            alerts = f.scan

            def scan() -> None:
                if self.session.scan(alerts):
                    self.app.call_from_thread(self.redraw)  # new marks for the loss chart

            self.run_worker(scan, thread=True, name="mstop-incidents", exclusive=True, group="incidents",
                            exit_on_error=False)
        return f.view

    # -- keys ------------------------------------------------------------------------

    def action_pause(self) -> None:
        self.paused = not self.paused

    def watch_paused(self, paused: bool) -> None:
        self.set_class(paused, "paused")
        if not paused:
            self.redraw()

    def action_smoothing(self, delta: int) -> None:
        w = self.session.opts.ema_weight
        i = min(range(len(SMOOTHING)), key=lambda k: abs(SMOOTHING[k] - w))
        self.session.opts.ema_weight = SMOOTHING[max(0, min(len(SMOOTHING) - 1, i + delta))]
        self.app.clear_notifications()  # pressed again and again: one toast, not a pile over the panels
        self.notify(f"loss smoothing {self.session.opts.ema_weight:g}", timeout=2)
        self.redraw()

    def action_xaxis(self) -> None:
        self.xaxis = X_AXES[(X_AXES.index(self.xaxis) + 1) % len(X_AXES)]

    def action_log(self) -> None:
        self.log_scale = not self.log_scale

    def action_window(self) -> None:
        self.recent = not self.recent
        self.app.clear_notifications()
        self.notify("window: recent (last 10 %)" if self.recent else "window: whole run", timeout=2)

    def watch_xaxis(self) -> None:
        self.redraw()

    def watch_log_scale(self) -> None:
        self.redraw()

    def watch_recent(self) -> None:
        self.redraw()

    def action_ranks(self) -> None:
        self.toggle_class("show-ranks")
        table = self.query_one(RanksTable)
        if self.has_class("show-ranks"):
            table.focus()
        else:
            self.set_focus(None)
        self.call_after_refresh(self.redraw)  # after layout: the ranks page fills the table's height

    def _baseline_read(self, spec: str, got: Snapshot | str) -> None:
        """Use a baseline just read, or say why there is none (never fatal)."""
        why = self.session.use_baseline(spec, got)
        if why is not None:
            self.notify(f"baseline not loaded: {why}", severity="error", timeout=10)
        self.redraw()

    def action_baseline(self) -> None:
        def chosen(spec: str | None) -> None:
            if spec is None:  # escape: unchanged
                return
            if not spec:
                self.session.use_baseline(None)
                self.redraw()
                return
            # read off the UI thread: over ssh that can take up to the connect timeout, and the screen must go on
            self.notify(f"reading baseline {spec} ...", timeout=3)
            self.run_worker(lambda: self.app.call_from_thread(self._baseline_read, spec,
                                                              self.session.read_baseline(spec)),
                            thread=True, name="mstop-baseline", exit_on_error=False)

        self.app.push_screen(BaselineScreen(self.session.baseline_spec), chosen)

    def action_profile(self) -> None:
        """Ask the running job for a profile of its next steps: write RUN_DIR/profile.request after a
        confirmation (a local run), or show the ssh command that would (``host:/path``)."""
        spec = self.session.source.specs[0]
        status = self._last_view.header.status if self._last_view is not None else None
        if status in ("finished", "dead", "failed"):  # no job reads a request any more
            self.notify(f"the run is {status}: there is no job to profile (a request is read by a running job)",
                        severity="warning", timeout=6)
            return
        command = self.session.profile_command()
        if command is not None:
            self.app.push_screen(ProfileScreen(clean(spec, 256), clean(command, 1024)))
            return

        def chosen(n: int | None) -> None:
            if n is None:
                return
            why = self.session.ask_profile(n)
            if why is not None:
                self.notify(f"could not ask for a profile: {why}", severity="error")
                return
            self.notify(f"asked for a profile of the next {n} steps (profile.request written)", timeout=5)

        self.app.push_screen(ProfileScreen(clean(spec, 256), None), chosen)

    def action_log_pane(self) -> None:
        """L: the rank's own log: the ranks view's rank, else a failed or dead run's culprit (opened at its
        last error), else the job's rank."""
        status = self._last_view.header.status if self._last_view is not None else ""
        culprit = self.session.culprit(status)
        rank = self.selected_rank if self.has_class("show-ranks") and self.selected_rank is not None else culprit
        self.app.push_screen(LogScreen(self.session.log_pane(rank), at_error=rank is not None and rank == culprit))

    def action_stacks(self) -> None:
        """t: each rank's newest stack, ranks grouped by where their main thread is."""
        store, connection = self.session.store, self.session.options.connection
        self.app.push_screen(StacksScreen(stacks_lines(store), lambda: fresh_lines(store, connection)))

    def action_goto(self) -> None:
        self.app.push_screen(GoToStepScreen(lambda step: values_at_step(self.session.store, step)))

    def _run_on_alert(self, alerts: list[dict[str, Any]]) -> None:
        """On a worker thread: the --on-alert command for each alert; what failed is shown."""
        for error in self.session.on_alert(alerts):
            self.app.call_from_thread(self.notify, error, severity="error")

    def action_heat_metric(self) -> None:
        strip = self.query_one(HeatStrip)
        ranks = self._last_view.ranks if self._last_view is not None else RankTable()
        for _ in HEAT_METRICS:  # the profile's shares only where several ranks have one (the slow card shows)
            strip.metric = (strip.metric + 1) % len(HEAT_METRICS)
            attr = HEAT_METRICS[strip.metric][1]
            if attr not in PROFILE_METRICS or sum(x is not None for x in ranks.column(attr)) >= 2:
                break
        if self._last_view is None or not self.has_class("show-ranks"):
            self.redraw()
            return
        # the last frame has every rank's figures: only the strip changes (a full frame at 1,024 ranks is ~100 ms)
        strip.show(self._last_view, selected=self.selected_rank)
        self.query_one("#heat-title", Static).update(strip.title(self._last_view))

    def _show_detail(self, v: View) -> None:
        """The rank under the table's cursor: its figures, alerts and chart; its cell marked in the strip."""
        key = self.query_one(RanksTable).cursor_key()
        if self._detail_of == (self._frames, key):  # the cursor event that follows a redraw: already shown
            return
        self._detail_of = (self._frames, key)
        row = self.query_one(RankDetail).show(v, key)
        rank = row.rank if row is not None else None
        if rank != self.selected_rank:
            self.session.show_rank(rank)  # its rows as written, from a host that merges them
        self.selected_rank = rank
        strip = self.query_one(HeatStrip)
        strip.show(v, selected=self.selected_rank)
        self.query_one("#heat-title", Static).update(strip.title(v))
        chart = self.query_one("#rank-chart", Chart)
        if row is None:
            chart.show_series("", [])
            return
        series = rank_series(self.session.store, row.rank, points=max(40, self.size.width * 2 // 3))
        # log scale: compilation makes the first steps 10-100x longer, and data wait is far below step time
        chart.show_series(f"rank {row.rank}: step time and data wait (s, log) by step",
                          [Line("step time", series["step_time"]), Line("data wait", series["data_wait"])], log=True)

    def on_data_table_row_highlighted(self) -> None:
        """The cursor moved: show that rank (from the last frame; no redraw, which moves rows)."""
        if self._last_view is not None and self.has_class("show-ranks"):
            self._show_detail(self._last_view)

    @on(RanksTable.SortChanged)
    def _sort_changed(self) -> None:
        self.redraw()

    @on(HeatStrip.Selected)
    def _strip_selected(self, event: HeatStrip.Selected) -> None:
        """A heat strip cell was clicked: that rank in the table, its figures and chart below the strip."""
        self.query_one(RanksTable).select_rank(event.rank)
        if self._last_view is not None:
            self._show_detail(self._last_view)

    def action_alerts(self) -> None:
        """Show every active alert, then the run's past incidents, and mark the alerts seen."""
        alerts, past = self.session.alerts_now()
        told = list(self.session.routing.told) if self.session.routing is not None else []
        self.app.push_screen(AlertsScreen(alerts, past, told))
        self.redraw()

    def action_metrics(self) -> None:
        def chosen(columns: tuple[str, ...] | None) -> None:
            self.session.custom = columns or ()
            self.set_class(bool(self.session.custom), "has-custom")
            self.redraw()

        self.app.push_screen(MetricsScreen(numeric_columns(self.session.store), self.session.custom), chosen)

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen())

    def action_back(self) -> None:
        """Escape, in a monitor the runs list opened: back to the list (its cursor where it was)."""
        if self.back:
            self.dismiss()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Escape (and its footer key) only where there is a list to go back to; the footer's t only while the
        stacks explain the state (t itself always works)."""
        if action == "stacks_shown":
            return self._stacks_explain
        return self.back if action == "back" else True

    def action_stacks_shown(self) -> None:
        self.action_stacks()

    def _footer_for(self, v: View) -> None:
        """The footer's keys for this frame: t appears while the stacks explain the state."""
        if v.header.stacks_explain != self._stacks_explain:
            self._stacks_explain = v.header.stacks_explain
            self.refresh_bindings()


def forget_dead_styles() -> None:
    """Empty Textual's ``StylesCache.get_inner_outer`` memo. It is an ``lru_cache`` on a method, keyed by the
    instance (Textual 8.2, Textualize/textual#6665), so it keeps up to 1,024 widgets' style caches, every line
    they drew, after their screen is gone: a monitor opened for weeks, its screens pushed and popped, held
    them all. Emptying it costs one recomputation per widget at the next draw."""
    from textual import _styles_cache

    memo = getattr(getattr(_styles_cache, "StylesCache", None), "get_inner_outer", None)
    if hasattr(memo, "cache_clear"):
        memo.cache_clear()


class MstopApp(App[None]):
    """What every mstop app does however the process ends: SIGTERM and SIGHUP quit as q does, and after a
    grace time :meth:`stops` and :attr:`cleanups` run anyway (:func:`quit_on_signal`)."""

    CSS_PATH = "monitor.tcss"
    #: Ctrl-C quits as q does, as in top and htop (Textual's own asks "Do you want to quit?"), on every
    #: screen and while the first read is going on
    BINDINGS = [Binding("ctrl+c", "quit", "quit", show=False, priority=True)]
    ENABLE_COMMAND_PALETTE = False  # nothing in it a user of these screens needs, and its key crowded the footer
    TITLE = "mstop"

    def __init__(self) -> None:
        # NO_COLOR: no colour at all (Textual's own maps colours to 256-colour greys unless it draws with the
        # terminal's ANSI colours, where it drops them): every distinction is a glyph or a word too
        super().__init__(ansi_color=True if "NO_COLOR" in os.environ else None)
        #: what must be undone however the app ends (mstop demo: stop the job, remove its directory)
        self.cleanups: list[Callable[[], None]] = []
        self._stopping = False

    def on_mount(self) -> None:
        install_signals(self)

    def pop_screen(self) -> AwaitComplete:
        """Pop as Textual does, then let the popped screen's drawn lines go (:func:`forget_dead_styles`)."""
        done = super().pop_screen()
        forget_dead_styles()
        return done

    def on_unmount(self) -> None:
        forget_dead_styles()
        stop_programs()  # a one-shot read (L, t, d) waiting on a silent host must not hold the exit

    def _signalled(self, code: int) -> None:
        quit_on_signal(self, code)

    def stops(self) -> list[Callable[[], None]]:
        """What stops this app's sources: every monitor screen's."""
        return [s.source.stop for s in self.screen_stack if isinstance(s, MonitorScreen)]


class MonitorApp(MstopApp):
    """``mstop RUN_DIR``: the monitor screen of one run, ``app.monitor``.

    ``options`` is a :class:`~mstop.live.MonitorOptions`; keywords are its fields, for a caller that sets a few
    (``MonitorApp(run, follow=False, clock=...)``): they are made into one object here, never relayed.
    ``job`` and ``job_log``: the training job ``mstop demo`` started, and where its output goes."""

    def __init__(self, run_dir: str | list[str], options: MonitorOptions | None = None, *,
                 job: subprocess.Popen | None = None, job_log: str | None = None, **fields: Any) -> None:
        super().__init__()
        self.monitor = MonitorScreen(run_dir, MonitorOptions.given(options, **fields), job=job, job_log=job_log)

    def get_default_screen(self) -> Screen:
        return self.monitor

    def stops(self) -> list[Callable[[], None]]:
        return [self.monitor.session.source.stop]


def _on_thread(fn: Callable[[], Any], then: Callable[[BaseException | None], None], name: str) -> None:
    """Run ``fn`` on a daemon thread, then ``then(what it raised, or None)`` on that thread (``then`` hands
    it to the event loop). A daemon thread: quitting mid-read never waits for it at interpreter exit."""

    def work() -> None:
        result: BaseException | None = None
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - handed on
            result = e
        try:
            then(result)
        except RuntimeError:  # the app is gone: it quit while reading
            pass

    threading.Thread(target=work, name=name, daemon=True).start()


def quit_on_signal(app: Any, code: int) -> None:
    """SIGTERM or SIGHUP: quit as q does. The terminal may be gone (a dropped ssh session) and closing the
    screen may then never finish: after EXIT_GRACE seconds ``app.stops()`` and ``app.cleanups`` run here
    and the process ends."""
    if app._stopping:
        return
    app._stopping = True
    app.exit(return_code=code)

    def last_resort() -> None:
        time.sleep(EXIT_GRACE)
        for fn in [*app.stops(), *app.cleanups]:
            try:
                fn()
            except Exception:  # noqa: BLE001 - leaving anyway: do the rest
                pass
        close_connections()
        os._exit(code)

    threading.Thread(target=last_resort, name="mstop-exit", daemon=True).start()


def install_signals(app: Any) -> None:
    """SIGTERM (kill, timeout) and SIGHUP (a dropped terminal or ssh session) end the app as q does, so
    every source, ssh connection and the demo's job are stopped on the way out (``app._signalled``)."""
    loop = asyncio.get_running_loop()
    for sig, code in ((signal.SIGTERM, 143), (signal.SIGHUP, 129)):
        try:
            loop.add_signal_handler(sig, app._signalled, code)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread (tests), or no signals
            pass
