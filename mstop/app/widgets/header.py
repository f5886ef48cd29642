"""The header (the run, its progress, times and file troubles) and the active alerts below it.

User-controlled text (run names, notes, column names, host names, paths) is always wrapped in
``rich.text.Text``, never parsed as markup.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ... import fmt
from ...engine.figures import ENDED, STATUSES
from ...engine.goodput import losses_text
from ...view import View, since_text


def refusal_step(message: str) -> str:
    """``step 'abc'`` out of a refusal's words (``row for step 'abc' not written: ...``), else its start."""
    words = message.removeprefix("row for ").split(" not written", 1)[0]
    return words if words.startswith("step ") else message[:60]


class Header(Static):
    """Run name, device, ranks, progress, times, checkpoint, status."""

    def show(self, v: View) -> None:
        h = v.header
        for s in STATUSES:
            self.set_class(h.status == s, f"status-{s}")
        self.set_class(bool(v.new_alerts), "new-alerts")
        t = self._first_line(v)
        t.append("\n")
        t.append_text(self._progress_line(v))
        t.append("\n")
        t.append_text(self._times_line(v))
        self.update(t)

    @staticmethod
    def _first_line(v: View) -> Text:
        """The run, its status, what is wrong with its files, the alerts badge, the notes."""
        h = v.header
        t = Text()
        t.append(Text(h.run_name or "(unnamed run)", style="bold"))
        t.append(f" · {h.device or 'device n/a'} · world {h.world_size or 'n/a'} · ranks seen {h.ranks_seen}")
        t.append(f"   status {h.status.upper()}")
        if h.writer_errors:
            t.append("   ! writer failed: ")
            t.append(Text(h.writer_errors[0]))
        for n, what in ((h.bad_rows, "bad row"), (h.bad_events, "bad event"), (h.dropped_rows,
                        "row{s} lost by the writer"), (h.refused_rows, "row{s} refused by the writer")):
            if n:
                t.append(f"   ! {fmt.count(n, what)}")
                if what.startswith("row{s} refused") and h.refused:
                    t.append(Text(f" ({refusal_step(h.refused)})"))
        if v.alerts:
            t.append(f"   ALERTS {len(v.alerts)}")
            if v.new_alerts:
                t.append(f" ({v.new_alerts} new: a)")
        for note in h.notes:
            t.append("   ! ")
            t.append(Text(note))
        return t

    @staticmethod
    def _progress_line(v: View) -> Text:
        """The step (of the total), the ETA and pace, or how long no row came; tokens seen, elapsed."""
        h = v.header
        t = Text()
        step = "n/a" if h.step is None else f"{h.step:,}"
        if h.total_steps:
            frac = (h.step or 0) / h.total_steps
            t.append(f"step {step} / {h.total_steps:,} {fmt.bar(frac, 10)} {100 * frac:.0f} %")
            if h.status not in ENDED and h.quiet is None:  # an ended run has no time to go
                t.append(f" · ETA {fmt.duration(h.eta) if h.eta is not None else 'n/a (' + h.status + ')'}")
        else:
            t.append(f"step {step}")
        if h.step_spread is not None and h.step_spread[1] - h.step_spread[0] > 1:
            t.append(f" (ranks at {h.step_spread[0]:,}-{h.step_spread[1]:,})")
        if h.quiet is not None:  # far past its pace: no live ETA nor pace, but how long it has been silent
            t.append(" · ")
            t.append(h.quiet, style="bold")
        elif h.status not in ENDED:
            t.append(f" · {fmt.num(h.steps_per_s, 3)} steps/s")
        t.append(f" · tokens seen {fmt.si(h.tokens_seen)} · elapsed {fmt.duration(h.elapsed)}")
        return t

    @staticmethod
    def _times_line(v: View) -> Text:
        """The last row's age, compilation, repeated steps, goodput, the last checkpoint."""
        h = v.header
        t = Text(f"last row {fmt.duration(h.since_last_row)} ago · ")
        if h.compile_s is not None:
            t.append(f"compile {fmt.ms(h.compile_s)} · ")
        if h.repeated_steps:
            t.append(f"{h.repeated_steps:,} steps repeated after a resume ({fmt.duration(h.repeated_seconds)}) · ")
        if h.goodput is not None:
            lost = losses_text(h.goodput_lost)
            t.append(f"goodput {100 * h.goodput:.0f} %" + (f" (lost: {lost})" if lost else "") + " · ")
        ck = h.last_checkpoint
        if ck is None:
            t.append("no checkpoint yet")
        else:
            t.append(f"checkpoint step {ck.get('step')}, {fmt.duration(h.checkpoint_age)} ago: ")
            t.append(Text(str(ck.get("path"))))
        return t


class AlertsPanel(Static):
    """The active alerts, one line each with since when it holds (shown when there are any). In a small
    terminal (under 30 rows) they collapse to one count line, so the loss chart keeps its rows."""

    #: the most alert lines shown in a full-size terminal; the rest are counted (a lists them all)
    LINES = 4

    def show(self, v: View) -> None:
        self.display = bool(v.alerts)
        if not v.alerts:
            return
        small = self.app.size.height < 30
        if small and len(v.alerts) > 1:
            kinds = sorted({a.kind for a in v.alerts})
            self.update(Text(f"!! {len(v.alerts)} alerts: {', '.join(kinds)} (a: list)", no_wrap=True,
                             overflow="ellipsis"))
            return
        t = Text(no_wrap=small, overflow="ellipsis")
        for i, a in enumerate(v.alerts[:self.LINES]):
            if i:
                t.append("\n")
            t.append(f"!! {a.kind} ")
            t.append(Text(a.message))
            since = since_text(a, v.now)
            if since:
                t.append(f" · {since}")
        if len(v.alerts) > self.LINES:
            t.append(f"\n... and {len(v.alerts) - self.LINES} more (a: all)")
        self.update(t)
