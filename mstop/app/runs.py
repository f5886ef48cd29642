"""``mstop runs/``: every run below a folder, live; open one, mark several to compare or overlay them."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any, Callable

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.widgets import Input, Static

from ..live import MonitorOptions
from ..live.runs import (
    COLUMNS,
    FILTER_HELP,
    Filter,
    FilterError,
    RunsModel,
    compare_options,
    parse_filter,
    read_overlays,
    run_spec,
    runs_model,
    sort_rows,
)
from ..safe import clean
from ..view import Rules
from .monitor import MonitorScreen, MstopApp
from .screens import HelpScreen
from .widgets.footer import KeysFooter
from .widgets.runs import RunsTable

#: The model's thread waits this many times as long as its last pass took before the next.
PACE = 9.0
#: Most runs overlaid in one monitor (the issue's 8: one colour and one mark digit each).
MAX_OVERLAY = 8
RUNS_KEYS = (
    ("enter", "open the run's monitor (escape comes back here)"),
    ("space", "mark / unmark a run and move to the next, as htop's space tags (the first marked is the baseline)"),
    ("=", "mark as a repeat of the last marked run (compared as one group)"),
    ("c", "compare the marked runs (the table of mstop compare)"),
    ("o", f"overlay the marked runs by step in one monitor, every repeat of a group (up to {MAX_OVERLAY})"),
    ("left right", "scroll the columns sideways (the run's name stays)"),
    ("u", "unmark every run"),
    ("/", "filter (escape: leave it as it was; empty: no filter)"),
    ("s / S", "sort by the next column / reverse (or click a header)"),
    ("pgup pgdn", "page; home / end: first / last"),
    ("q", "quit"),
)


class RunsChanged(Message):
    """The model has new rows (posted from its thread)."""


class CompareScreen(ModalScreen[None]):
    """The comparison of the marked runs: the text ``mstop compare`` prints for them."""

    BINDINGS = [("escape,q,c", "dismiss", "close")]
    DEFAULT_CSS = """
    CompareScreen #compare { overflow-x: auto; overflow-y: auto; }
    CompareScreen #compare-text { width: auto; }
    """

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text, self.text = title, text

    def compose(self) -> ComposeResult:
        t = Text(self.title_text + "\n\n", style="bold", no_wrap=True, overflow="ignore")
        t.append(Text(self.text))  # as wide as the table: it scrolls sideways rather than wrap
        yield VerticalScroll(Static(t, id="compare-text"), id="compare")


class RunsScreen(Screen[None]):
    """The list of runs. A thread keeps the model fresh; the screen draws it once a second (and at once
    when a change arrives), filtered and sorted."""

    BINDINGS = [
        ("q", "app.quit", "quit"),
        ("question_mark", "help", "help"),
        Binding("space", "mark", "mark ↓"),
        Binding("equals_sign", "mark(True)", "mark repeat", show=False),
        ("c", "compare", "compare"),
        ("o", "overlay", "overlay"),
        ("slash", "filter", "filter"),
        Binding("s", "sort(1)", "sort"),
        Binding("S", "sort(-1)", "reverse", show=False),
        Binding("u", "unmark", "unmark", show=False),
    ]
    DEFAULT_CSS = """
    RunsScreen #runs-title { height: 1; background: $panel; padding: 0 1; }
    RunsScreen #runs-notes { height: auto; max-height: 5; padding: 0 1; color: $warning; }
    RunsScreen #runs-filter { display: none; }
    RunsScreen.filtering #runs-filter { display: block; }
    RunsScreen RunsTable { height: 1fr; }
    """

    def __init__(self, model: RunsModel, *, label: str, open_options: MonitorOptions,
                 clock: Callable[[], float] | None = None, follow: bool = True) -> None:
        super().__init__()
        self.model = model
        self.label = clean(label, 4096)
        self.open_options = open_options  # what a run's monitor gets (peak, rules, the connection, clock)
        self.clock = clock or time.time
        self.follow = follow
        self.filter = Filter()
        self.filter_error = ""
        self.marks: list[list[str]] = []  # groups of run keys: the first is the baseline
        self._drawn = -1
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="runs-title")
        yield Static(id="runs-notes")
        yield RunsTable(id="runs")
        yield Input(placeholder="filter: words, status=running, world_size>=64, note~recompute", id="runs-filter")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one(RunsTable).focus()
        if self.follow:
            self._thread = threading.Thread(target=self._run, name="mstop-runs", daemon=True)
            self._thread.start()
        else:
            self.model.refresh()
        self.call_after_refresh(self.redraw)
        self.set_interval(1.0, self.redraw)

    def on_unmount(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        """The model's thread: a pass, then a short wait; the screen is told of progress as it goes."""
        told: set[str] = set()
        while not self._stop.is_set():
            t = time.monotonic()
            try:
                self.model.refresh(self._changed)
            except Exception as e:  # noqa: BLE001 - the list must go on; each kind said once
                if type(e).__name__ not in told:
                    told.add(type(e).__name__)
                    self.app.call_from_thread(self.notify, f"runs list: {type(e).__name__}: {e}", severity="error")
            # paced: a pass over a thousand idle runs costs ~0.15 s here: the list keeps to ~10 % of a core (and
            # looks again within 5 s after the first pass, which reads every run)
            self._stop.wait(min(5.0, max(1.0, PACE * (time.monotonic() - t))))

    def _changed(self) -> None:
        self.post_message(RunsChanged())

    @on(RunsChanged)
    def _runs_changed(self) -> None:
        if self.model.version != self._drawn:
            self.redraw()

    # -- drawing ---------------------------------------------------------------------------------------

    def visible(self, rows: list | None = None) -> list:
        """The rows shown now (of ``rows``, by default the model's): filtered, sorted."""
        rows = self.model.snapshot()[0] if rows is None else rows
        table = self.query_one(RunsTable)
        now = self.clock()
        rows = [r for r in rows if self.filter.matches(r, now)]
        return sort_rows(rows, table.sort_key, table.sort_reverse, now)

    def redraw(self) -> None:
        every, problems, version = self.model.snapshot()
        self._drawn = version
        table = self.query_one(RunsTable)
        rows = self.visible(every)
        table.show(rows, self._mark_numbers(), self.clock())
        # the page on screen is read first on the model's next pass
        self.model.first = [r.key for r in rows[table.offset: table.offset + table.page_size]]
        total = len(self.model.runs())
        t = Text(f"{self.label}: {total:,} run{'s' if total != 1 else ''}")
        if self.model.read_count < total:
            t.append(f" (reading {self.model.read_count:,}/{total:,})", style="yellow")
        if self.filter.text:
            t.append(f" · {len(rows):,} match ")
            t.append(Text(self.filter.text, style="bold"))
        arrow = "down" if table.sort_reverse else "up"
        t.append(f" · sorted by {table.sort_key} ({arrow})")
        if self.marks:
            t.append(f" · marked {sum(len(g) for g in self.marks)} (c compare, o overlay)")
        self.query_one("#runs-title", Static).update(t)
        notes = Text()
        if self.filter_error:
            notes.append(Text(f"bad filter: {self.filter_error}\n", style="bold red"))
        for p in problems[:4]:
            notes.append(Text(p + "\n"))
        if len(problems) > 4:
            notes.append(f"... and {len(problems) - 4} more\n")
        if not total and not problems and self.model.read_count == 0 and self.model.watches:
            notes.append(Text(f"no runs below {self.label} yet (a run is a folder with rank*.csv or a "
                              "MindFormers log, at most 3 levels down): waiting for one\n"))
        box = self.query_one("#runs-notes", Static)
        notes.rstrip()  # in place
        box.update(notes)
        box.display = bool(notes.plain.strip())

    def _mark_numbers(self) -> dict[str, int]:
        return {k: i for i, g in enumerate(self.marks, start=1) for k in g}

    @on(RunsTable.SortChanged)
    def _sorted(self) -> None:
        self.redraw()

    # -- keys ------------------------------------------------------------------------------------------

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen("mstop runs: keys", RUNS_KEYS, (
            ("filter", f"{FILTER_HELP}\n  e.g.  status=running world_size>=64 note~recompute  mfu<0.3 !~ablation"),
            ("figures", "from each run's last rows first; alerts, past incidents and goodput from its whole history, "
                        "read in the background (alerts '?' until then)"))))

    def action_sort(self, direction: int) -> None:
        table = self.query_one(RunsTable)
        if direction < 0:
            table.sort_by(table.sort_key)  # the same key: reversed
            return
        keys = [k for k, _ in COLUMNS]
        table.sort_by(keys[(keys.index(table.sort_key) + 1) % len(keys)] if table.sort_key in keys else keys[0])
        table.sort_reverse = False

    def action_filter(self) -> None:
        self.set_class(True, "filtering")
        box = self.query_one("#runs-filter", Input)
        box.value = self.filter.text
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            self.filter = parse_filter(event.value, self.model.fields())
        except FilterError as e:
            self.filter_error = str(e)
            self.redraw()
            return  # the box stays open with the text to mend
        self.filter_error = ""
        self.set_class(False, "filtering")
        self.query_one(RunsTable).focus()
        self.redraw()

    def on_key(self, event: Any) -> None:
        if event.key == "escape" and self.has_class("filtering"):
            event.stop()
            self.filter_error = ""
            self.set_class(False, "filtering")
            self.query_one(RunsTable).focus()
            self.redraw()

    def _cursor(self) -> str:
        return self.query_one(RunsTable).cursor_run

    def action_mark(self, repeat: bool = False) -> None:
        key = self._cursor()
        if not key:
            return
        for g in self.marks:
            if key in g:
                g.remove(key)
                self.marks = [g for g in self.marks if g]
                break
        else:
            if repeat and self.marks:
                self.marks[-1].append(key)
            else:
                self.marks.append([key])
        self.query_one(RunsTable).step_down()
        self.redraw()

    def action_unmark(self) -> None:
        self.marks = []
        self.redraw()

    def on_data_table_row_selected(self, event: Any) -> None:
        """Enter on a run: its monitor; Escape there comes back to this list."""
        key = str(event.row_key.value)
        run = self.model.runs().get(key)
        if run is None:
            return
        monitor = MonitorScreen(run_spec(run), self.open_options, back=True)
        self.app.push_screen(monitor, lambda _: self._returned(key, monitor))

    def _returned(self, key: str, monitor: MonitorScreen) -> None:
        """Back from a run's monitor: the cursor on that run, and the whole history it read kept (goodput)."""
        run = self.model.runs().get(key)
        if run is not None and hasattr(run, "adopt") and monitor.session.store.rows:
            run.adopt(monitor.session.store, monitor.session.source)
            self.model.update(key)
        self.query_one(RunsTable).select_run(key)
        self.redraw()

    def _marked_specs(self) -> list[list[str]] | None:
        runs = self.model.runs()
        groups = [[run_spec(runs[k]) for k in g if k in runs] for g in self.marks]
        groups = [g for g in groups if g]
        if len(groups) < 2:
            self.notify("mark two runs or more first (space; = for a repeat)", severity="warning")
            return None
        return groups

    def action_compare(self) -> None:
        groups = self._marked_specs()
        if groups is None:
            return
        self.notify(f"comparing {len(groups)} runs ...", timeout=3)
        opts = compare_options(self.open_options.peak_tflops)
        connection = self.open_options.connection  # how a run of the list is read: the command line's

        def work() -> None:
            from ..commands import plain_text
            from ..commands.compare import CompareError, compare, read_runs, render

            try:
                runs = read_runs(groups, connection=connection)
                text = plain_text(render(compare(runs, opts=opts), "table"))
            except (CompareError, ValueError) as e:
                self.app.call_from_thread(self.notify, f"cannot compare: {e}", severity="error", timeout=10)
                return
            title = "mstop compare " + " ".join(",".join(g) for g in groups) + "   (escape: back; arrows scroll)"
            self.app.call_from_thread(self.app.push_screen, CompareScreen(clean(title, 4096), text))

        self.run_worker(work, thread=True, name="mstop-compare", exit_on_error=False)

    def action_overlay(self) -> None:
        groups = self._marked_specs()
        if groups is None:
            return
        specs = [spec for g in groups for spec in g]  # every member of a group of repeats: its spread shows
        if len(specs) > MAX_OVERLAY:
            self.notify(f"{len(specs)} runs marked: overlaying the first {MAX_OVERLAY}", severity="warning")
            specs = specs[:MAX_OVERLAY]
        connection = self.open_options.connection
        self.notify(f"reading {len(specs) - 1} runs to overlay ...", timeout=3)

        def work() -> None:
            from ..commands.compare import short_labels

            names = short_labels([[s] for s in specs])
            others = read_overlays(list(zip(names[1:], specs[1:])), connection=connection)
            if isinstance(others, str):
                self.app.call_from_thread(self.notify, f"cannot overlay: {others}", severity="error", timeout=10)
                return

            def show() -> None:
                self.app.push_screen(MonitorScreen(specs[0], self.open_options, back=True, overlays=others,
                                                   run_label=names[0]))

            self.app.call_from_thread(show)

        self.run_worker(work, thread=True, name="mstop-overlay", exit_on_error=False)


class RunsApp(MstopApp):
    """``mstop DIR`` for a folder of runs (or several sources): the runs screen first."""

    def __init__(self, watches: list[Any], options: MonitorOptions | None = None, *, label: str,
                 follow: bool = True, **fields: Any) -> None:
        """``options``: what each run's monitor gets (its ``clock`` is also the list's); keywords are its fields.
        ``follow``: the list keeps reading its runs (a run's monitor follows as ``options.follow`` says)."""
        super().__init__()
        options = MonitorOptions.given(options, **fields)
        options = replace(options, rules=options.rules or Rules())
        self.model = runs_model(watches, rules=options.rules, peak_tflops=options.peak_tflops, clock=options.clock)
        self.runs_screen = RunsScreen(self.model, label=label, open_options=options, clock=options.clock,
                                      follow=follow)

    def get_default_screen(self) -> Screen:
        return self.runs_screen

    def stops(self) -> list[Callable[[], None]]:
        return [self.runs_screen._stop.set, *super().stops()]
