"""Modal screens: help, go to step, baseline, metrics, alerts, stacks, a rank's log."""

from __future__ import annotations

from typing import Any, Callable

from rich.segment import Segment
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.strip import Strip
from textual.widgets import Input, RichLog, SelectionList, Static
from textual.widgets._toggle_button import ToggleButton  # its box glyphs: SelectionList draws them
from textual.widgets.option_list import OptionDoesNotExist

from mstop_writer.schema import UNITS

from .. import fmt
from ..view import error_lines, ranks_text
from .messages import LogLinesRead

KEYS = (
    ("q", "quit"),
    ("p", "pause the display (reading goes on)"),
    ("s / S", "less / more loss smoothing"),
    ("x", "x axis: step, wall time, tokens seen"),
    ("l", "log scale for the loss"),
    ("w", "window: whole run / recent"),
    ("g", "go to a step: every figure at that step"),
    ("/", "custom metrics: pick numeric columns to chart"),
    ("r", "ranks view: heat strip and table (click a header to sort)"),
    ("m", "ranks view: the heat strip's metric"),
    ("h", "ranks view: group by host (Enter expands a host)"),
    ("a", "every active alert (and mark them seen)"),
    ("b", "baseline: overlay another run's curves by step (empty: none)"),
    ("P", "profile the next N steps of the running job (a request file; over ssh: the command)"),
    ("t", "stacks: where each rank is stuck, ranks grouped (d there: a fresh py-spy dump)"),
    ("L", "the rank's own log (the ranks view's rank; a failed run: the culprit's): n / N error lines, / search"),
    ("?", "this help"),
    ("escape", "close a dialog"),
)


class HelpScreen(ModalScreen[None]):
    """The keys of a screen (the monitor's by default), then any further sections: (heading, text)."""

    BINDINGS = [("escape,question_mark,q", "dismiss", "close")]

    def __init__(self, title: str = "mstop keys", keys: tuple[tuple[str, str], ...] = KEYS,
                 sections: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__()
        self.title_text, self.keys, self.sections = title, keys, sections

    def compose(self) -> ComposeResult:
        t = Text(self.title_text + "\n", style="bold")
        width = max(8, *(len(k) for k, _ in self.keys))
        for key, what in self.keys:
            t.append(f"  {key:<{width}} ")
            t.append(what + "\n")
        for heading, text in self.sections:
            t.append(f"\n{heading}\n", style="bold")
            t.append(f"  {text}\n")
        yield VerticalScroll(Static(t), id="help")  # scrolls where the terminal is shorter than the list


class BaselineScreen(ModalScreen[str | None]):
    """Ask for a baseline run (a directory or host:/path; empty: none); dismissed with the answer."""

    BINDINGS = [("escape", "dismiss", "close")]

    def __init__(self, current: str | None) -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        yield Vertical(Static("baseline run (directory or host:/path; empty: no baseline):"),
                       Input(value=self.current or "", placeholder="runs/baseline", id="baseline-input"),
                       id="baseline-dialog")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())


class ProfileScreen(ModalScreen["int | None"]):
    """Ask before asking a running job for a profile: for a local run, the step count to write into its
    profile.request (Enter writes, escape cancels); for ``host:/path``, the one-line command to run (the
    viewer writes nothing on another host by itself)."""

    BINDINGS = [("escape", "dismiss", "close")]

    def __init__(self, target: str, command: str | None) -> None:
        super().__init__()
        self.target, self.command = target, command

    def compose(self) -> ComposeResult:
        if self.command is not None:
            yield Vertical(Static(Text("To profile the next 10 steps, run this (mstop writes nothing on another "
                                       "host by itself), then watch for the profile:\n\n" + self.command
                                       + "\n\nescape: close")), id="profile-dialog")
            return
        yield Vertical(Static(Text(f"Profile the next N steps of {self.target}? Enter writes its profile.request "
                                   "(the job takes it within a few seconds); escape cancels.")),
                       Input(value="10", placeholder="steps", id="profile-input"), id="profile-dialog")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        self.dismiss(int(text) if text.isdigit() and int(text) > 0 else None)


class GoToStepScreen(ModalScreen[None]):
    """Ask for a step, then show every figure of every rank at that step."""

    BINDINGS = [("escape", "dismiss", "close")]

    def __init__(self, lookup: Callable[[float], dict[int, dict[str, float | None]]]) -> None:
        super().__init__()
        self.lookup = lookup  # step -> every rank's values there (mstop.view.values_at_step)

    def compose(self) -> ComposeResult:
        yield Vertical(Static("go to step:"), Input(placeholder="step number", id="step-input"),
                       Static(id="step-values"), id="goto")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        out = self.query_one("#step-values", Static)
        try:
            step = float(event.value.strip())
        except ValueError:
            out.update(Text(f"not a step number: {event.value!r}"))
            return
        values = self.lookup(step)
        if not values:
            out.update(Text(f"no row at step {event.value.strip()} on the run's current timeline"))
            return
        t = Text(f"step {event.value.strip()}\n", style="bold")
        cols = sorted({c for row in values.values() for c, val in row.items() if val is not None})
        for r, row in list(values.items())[:16]:
            t.append(f"rank {r}: ")
            t.append(Text("  ".join(f"{c}={fmt.exact(row.get(c), UNITS.get(c, ''))}" for c in cols
                                    if row.get(c) is not None)))
            t.append("\n")
        if len(values) > 16:
            t.append(f"... and {len(values) - 16} more ranks\n")
        out.update(t)


class MarkedSelectionList(SelectionList[str]):
    """A SelectionList whose box holds its mark only when chosen: Textual draws the same ``X`` in every box and
    tells chosen from not by colour alone, so with NO_COLOR every row looked ticked."""

    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        segments = list(strip)
        if len(segments) < 4 or segments[1].text != ToggleButton.BUTTON_INNER:
            return strip
        try:
            option = self.get_option_at_index(self.scroll_offset.y + y)
        except OptionDoesNotExist:
            return strip
        if option.value in self.selected:
            return strip
        segments[1] = Segment(" " * len(ToggleButton.BUTTON_INNER), segments[1].style)
        return Strip(segments, strip.cell_length)


class MetricsScreen(ModalScreen[tuple[str, ...]]):
    """Filter every numeric column by name; the chosen ones are charted in their own panel."""

    BINDINGS = [("escape", "done", "done")]

    def __init__(self, columns: list[str], chosen: tuple[str, ...]) -> None:
        super().__init__()
        self.columns, self.chosen = columns, set(chosen)

    def compose(self) -> ComposeResult:
        yield Vertical(Static("custom metrics: type to filter, space to choose, escape when done"),
                       Input(placeholder="filter", id="metric-filter"),
                       MarkedSelectionList(*self._options(""), id="metric-list"), id="metrics")

    def _options(self, pattern: str) -> list[tuple[Text, str, bool]]:
        """The columns matching ``pattern``; a chosen one also says so in text (``*``)."""
        return [(Text(("* " if c in self.chosen else "  ") + c), c, c in self.chosen) for c in self.columns
                if pattern.lower() in c.lower()]

    def _fill(self, pattern: str, highlighted: int = 0) -> None:
        """The list again, for a new filter or choice."""
        sl = self.query_one(SelectionList)
        sl.clear_options()
        sl.add_options(self._options(pattern))
        if sl.option_count:
            sl.highlighted = min(highlighted, sl.option_count - 1)

    def on_input_changed(self, event: Input.Changed) -> None:
        self._fill(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one(SelectionList).focus()

    def on_selection_list_selection_toggled(self, event: SelectionList.SelectionToggled) -> None:
        value = event.selection.value
        self.chosen.symmetric_difference_update({value})
        self._fill(self.query_one("#metric-filter", Input).value, self.query_one(SelectionList).highlighted or 0)

    def action_done(self) -> None:
        self.dismiss(tuple(c for c in self.columns if c in self.chosen))


class AlertsScreen(ModalScreen[None]):
    """Every active alert, then the past incidents (alerts that fired and no longer hold), newest first."""

    BINDINGS = [("escape,a,q", "dismiss", "close")]

    def __init__(self, alerts: list, incidents: list = (), notified: list = ()) -> None:
        """``notified``: the alert routing's notifications of this follow (mstop.live.routing), oldest first."""
        super().__init__()
        self.alerts, self.incidents, self.notified = alerts, list(incidents), list(notified)

    def compose(self) -> ComposeResult:
        yield VerticalScroll(Static(self._text(), id="alert-text"), id="alert-list")

    def show(self, alerts: list) -> None:
        """The alerts of the monitor's newest frame, while the dialog is open (it was a snapshot of the
        moment it opened, and disagreed with the header's badge behind it); the past incidents stay as
        scanned when it opened."""
        if [(a.kind, a.rank, a.message) for a in alerts] != [(a.kind, a.rank, a.message) for a in self.alerts]:
            self.alerts = list(alerts)
            self.query_one("#alert-text", Static).update(self._text())

    def _text(self) -> Text:
        t = Text(f"{len(self.alerts)} active alert{'s' if len(self.alerts) != 1 else ''}\n\n", style="bold")
        for a in self.alerts:
            where = "job" if a.rank is None else f"rank {a.rank}"
            t.append(f"{a.kind:<16} {where:<9} step {a.step if a.step is not None else 'n/a'}: ")
            t.append(Text(a.message))
            t.append("\n")
            for line in error_lines(getattr(a, "detail", "") or "")[:40]:  # a multi-line error, line by line
                t.append(Text(f"{'':27}{line}\n", style="dim"))
        if not self.alerts:
            t.append("none: the run looks healthy now\n")
        n = len(self.incidents)
        t.append(f"\n{n} past incident{'s' if n != 1 else ''}" + (" (the newest 30)" if n > 30 else "") + "\n\n",
                 style="bold")
        for i in self.incidents[::-1][:30]:
            where = "job" if i.rank is None else f"rank {i.rank}"
            t.append(f"{i.kind:<16} {where:<9} {i.steps()}: ")
            t.append(Text(i.message))
            t.append("\n")
        if self.notified:
            t.append(f"\nnotified by the alert rules (the newest {min(30, len(self.notified))})\n\n", style="bold")
            for n in self.notified[::-1][:30]:
                where = "job" if not n.ranks else ranks_text(n.ranks)
                t.append(f"{fmt.clock_ms(n.time)} {n.state:<9} {n.kind:<16} {where}: ")
                t.append(Text(n.message))
                t.append("\n")
        return t


class StacksScreen(ModalScreen[None]):
    """Each rank's newest stack (``t``), ranks grouped by where their main thread is: ``ranks 0-1, 3: in
    _exec_pip (mindspore/graph/api.py:2432) since step 120 · rank 2: in wait_for_input ...``. The stacks are
    dumped by each rank's own faulthandler when its step overran (or it crashed); the lines come from
    mstop.view (``stacks_lines``)."""

    BINDINGS = [("escape,t,q", "dismiss", "close"), ("d", "fresh", "py-spy dump")]

    def __init__(self, lines: list[tuple[str, str]], fresh: Any = None) -> None:
        super().__init__()
        self.lines = lines
        self.fresh = fresh  # () -> lines of a fresh py-spy dump (slow: run on a thread)

    def compose(self) -> ComposeResult:
        yield VerticalScroll(Static(self._text(self.lines), id="stacks-text"), id="alert-list")

    @staticmethod
    def _text(lines: list[tuple[str, str]]) -> Text:
        t = Text()
        for style, line in lines:
            t.append(Text(line + "\n", style=style))
        return t

    def action_fresh(self) -> None:
        """d: every rank's stacks now, with py-spy (on a thread: a dump per rank)."""
        if self.fresh is None:
            return
        self.query_one("#stacks-text", Static).update(self._text(
            self.lines + [("", ""), ("dim", "py-spy dump under way...")]))

        def work() -> None:
            lines = self.fresh()
            self.app.call_from_thread(self.query_one("#stacks-text", Static).update,
                                      self._text(self.lines + [("", "")] + lines))

        self.run_worker(work, thread=True, exclusive=True)


class LogScreen(ModalScreen[None]):
    """One rank's own log (``L``): its last lines, following as it grows; error lines in red and counted in
    the title; ``n``/``N`` the next / previous error line, ``/`` a text to find (Enter: the next line that
    holds it), ``end`` back to the newest line. What it shows comes from a :class:`mstop.live.LogPane`."""

    BINDINGS = [Binding("escape,q,L", "dismiss", "close"), Binding("n", "error(1)", "next error"),
                Binding("N", "error(-1)", "previous error"), Binding("slash", "search", "find"),
                Binding("t", "stacks", "crash stack"), Binding("end", "newest", "newest", show=False)]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """t (the stacks view, in place of this pane) where the rank crashed: its stack is there."""
        return getattr(self.pane, "crash", None) is not None if action == "stacks" else True

    def action_stacks(self) -> None:
        """t: the crash's stack, in the stacks view (this pane closes)."""
        below = self.app.screen_stack[-2] if len(self.app.screen_stack) > 1 else None
        self.dismiss()
        if below is not None and hasattr(below, "action_stacks"):
            below.action_stacks()

    def __init__(self, pane: object, *, at_error: bool = False) -> None:
        super().__init__()
        self.pane = pane
        self.at_error = at_error  # a failed run: open at the culprit's last error
        self.found: str | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="log-pane"):
            yield Static(id="log-title")
            yield Static(id="log-errors")
            yield RichLog(id="log-lines", wrap=False, markup=False, highlight=False, max_lines=20_000)
            yield Input(placeholder="text to find (Enter: next line holding it; escape: close)", id="log-find")

    def on_mount(self) -> None:
        self.query_one("#log-find", Input).display = False
        self._write(self.pane.lines)
        self._at_error()
        self._title()
        if getattr(self.pane.tail, "remote", False):
            self._follow()  # its first read, off this thread: a silent host never freezes the screen
        self.set_interval(1.0, self._follow)

    def _at_error(self) -> None:
        """A failed run's pane opens at the culprit's last error, once its lines are read (over ssh: when the
        first read, off the screen's thread, brings them)."""
        if self.at_error and self.pane.lines:
            self.at_error = False
            err = self.pane.last_error()
            if err is not None:
                self.pane.at = err.at
                self.call_after_refresh(self._show_at)

    def _write(self, lines: list[str]) -> None:
        """Add the pane's last ``len(lines)`` lines, its error lines in red."""
        log = self.query_one("#log-lines", RichLog)
        first = len(self.pane.lines) - len(lines)
        errors = {i - first for i in self.pane.errors if i >= first}
        for k, line in enumerate(lines):
            log.write(Text(line, style="bold red" if k in errors else ""), scroll_end=None)

    def _follow(self) -> None:
        if getattr(self.pane.tail, "remote", False):  # over ssh: a read is a round trip, off the screen's thread
            if not getattr(self, "_reading", False):
                self._reading = True
                self.run_worker(self._read_remote, thread=True, exclusive=True, group="log-read")
            return
        new = self.pane.read()
        if new:
            self._write(new)
            self._title()

    def _read_remote(self) -> None:
        """On the worker's thread: one read over ssh; its lines go to the screen as a message, never by
        reaching into the screen from here (it may have been closed while the host took its time)."""
        try:
            new = self.pane.read()
        finally:
            self._reading = False
        self.post_message(LogLinesRead(new))

    @on(LogLinesRead)
    def _show_new(self, event: LogLinesRead) -> None:
        if event.lines:
            self._write(event.lines)
            self._at_error()
        self._title()

    def _title(self) -> None:
        p = self.pane
        where = p.path or "no log"
        n = len(p.errors)
        at = f" · at line {p.at + 1:,}" if p.at is not None else ""  # of the lines read (the tail of a long log)
        found = f" · finding {self.found!r}" if self.found else ""
        self.query_one("#log-title", Static).update(Text(
            f"rank {p.rank}'s log: {where} · {len(p.lines):,} lines · {n} error line{'s' if n != 1 else ''}"
            f"{at}{found} · n/N errors, / find, end newest, escape close", style="bold"))
        body = Text()
        if p.problem:
            body.append(p.problem + "\n", style="yellow")
        if getattr(p, "pointer", None):
            body.append(p.pointer + "\n", style="bold yellow")
        for i in p.errors[-5:]:
            body.append(f"{i + 1:>8}  ", style="dim")
            body.append(Text(p.lines[i][:200] + "\n", style="red"))
        self.query_one("#log-errors", Static).update(body)

    def _show_at(self) -> None:
        if self.pane.at is not None:
            log = self.query_one("#log-lines", RichLog)
            log.auto_scroll = False
            log.scroll_to(y=max(0, self.pane.at - 2), animate=False)
        self._title()

    def action_error(self, direction: int) -> None:
        if self.pane.next_error(forward=direction > 0) is None:
            self.notify("no error line in this log", timeout=3)
            return
        self._show_at()

    def action_search(self) -> None:
        box = self.query_one("#log-find", Input)
        box.display = True
        box.focus()

    def action_newest(self) -> None:
        log = self.query_one("#log-lines", RichLog)
        log.auto_scroll = True
        self.pane.at = None
        log.scroll_end(animate=False)
        self._title()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.found = event.value or self.found
        if self.found and self.pane.find(self.found) is None:
            self.notify(f"{self.found!r} is in no line of this log", timeout=3)
        self._show_at()
        self.query_one("#log-lines", RichLog).focus()
