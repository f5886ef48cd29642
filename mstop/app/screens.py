"""Modal screens: help, go to step."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from . import fmt

KEYS = (
    ("q", "quit"),
    ("p", "pause the display (reading goes on)"),
    ("s / S", "less / more loss smoothing"),
    ("x", "x axis: step, wall time, tokens seen"),
    ("l", "log scale for the loss"),
    ("w", "window: whole run / recent"),
    ("g", "go to a step: every figure at that step"),
    ("r", "ranks table (click a header to sort)"),
    ("?", "this help"),
    ("escape", "close a dialog"),
)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [("escape,question_mark,q", "dismiss", "close")]

    def compose(self) -> ComposeResult:
        t = Text("mstop keys\n\n", style="bold")
        for key, what in KEYS:
            t.append(f"  {key:<8} ")
            t.append(what + "\n")
        yield Vertical(Static(t), id="help")


class GoToStepScreen(ModalScreen[None]):
    """Ask for a step, then show every figure of every rank at that step."""

    BINDINGS = [("escape", "dismiss", "close")]

    def compose(self) -> ComposeResult:
        yield Vertical(Static("go to step:"), Input(placeholder="step number", id="step-input"),
                       Static(id="step-values"), id="goto")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        from ..view import values_at_step

        out = self.query_one("#step-values", Static)
        try:
            step = float(event.value.strip())
        except ValueError:
            out.update(Text(f"not a step number: {event.value!r}"))
            return
        values = values_at_step(self.app.store, step)
        if not values:
            out.update(Text(f"no row at step {event.value.strip()} on the run's current timeline"))
            return
        t = Text(f"step {event.value.strip()}\n", style="bold")
        cols = sorted({c for row in values.values() for c, val in row.items() if val is not None})
        for r, row in list(values.items())[:16]:
            t.append(f"rank {r}: ")
            t.append(Text("  ".join(f"{c}={fmt.num(row.get(c), 6)}" for c in cols if row.get(c) is not None)))
            t.append("\n")
        if len(values) > 16:
            t.append(f"... and {len(values) - 16} more ranks\n")
        out.update(t)
