"""The header (the run, its progress, times and file troubles) and the active alerts below it.

User-controlled text (run names, notes, column names, host names, paths) is always wrapped in
``rich.text.Text``, never parsed as markup.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.widgets import Static

from ... import fmt
from ...view import ENDED, STATUSES, View, losses_text, since_text


def refusal_step(message: str) -> str:
    """``step 'abc'`` out of a refusal's words (``row for step 'abc' not written: ...``), else its start."""
    words = message.removeprefix("row for ").split(" not written", 1)[0]
    return words if words.startswith("step ") else message[:60]


#: a piece that is never dropped nor cut: the status, the alerts badge, the step
KEEP = 10
#: a verdict's kind as the diagnosis line shows it (mstop.engine.diagnosis.KINDS)
VERDICT_LABELS = {"hang": "HANG", "root_cause": "ROOT CAUSE", "relaunch_loop": "RELAUNCH LOOP",
                  "input_bound": "INPUT-BOUND", "input_straggler": "INPUT STRAGGLER",
                  "compute_straggler": "COMPUTE STRAGGLER", "host_straggler": "HOST STRAGGLER",
                  "wait_heavy": "WAIT-HEAVY", "memory_creep": "MEMORY CREEP", "mismatch": "MISMATCH"}


@dataclass
class Piece:
    """One part of a header line: its text, how much it matters (``rank``: the lowest is dropped first;
    ``KEEP`` never), the separator before it, and the fewest cells it may be cut to (None: whole or not at
    all) once pieces below ``cut_rank`` are gone, from its end or its start (a path keeps its end)."""

    text: Text
    rank: int
    sep: str = " · "
    least: int | None = None
    cut_rank: int | None = None
    keep_end: bool | str = False


def _cut(t: Text, n: int, keep_end: bool | str) -> Text:
    """``t`` in ``n`` cells: its start and ``…`` (or ``…`` and its end; "middle": its start, ``…`` and its
    last 20 cells, where a note's file name is)."""
    if t.cell_len <= n:
        return t
    if keep_end == "middle" and n > 30:
        out = t[:n - 21]
        out.append("…")
        out.append_text(t[len(t) - 20:])
        return out
    if keep_end is True:
        out = Text("…")
        out.append_text(t[len(t) - (n - 1):])
        return out
    keep = max(0, n - 1)
    space = t.plain.rfind(" ", 0, keep + 1)
    if n >= WORD_CUT_FROM and space > keep - WORD_BACK:  # at a word's end: an error line is not cut mid-word
        keep = space
    out = t[:keep]
    out.rstrip()
    out.append("…")
    return out


#: the most cells a cut goes back to end at a word (a longer word is cut inside), for a piece cut to at
#: least WORD_CUT_FROM cells (an error line, a note); a shorter one keeps the start of its last word
#: (``! writer failed: OSE…`` says more than ``! writer failed:…``)
WORD_BACK = 12
WORD_CUT_FROM = 40


def fit(pieces: list[Piece], width: int) -> Text:
    """The pieces in their order in ``width`` cells. While too wide, the next step by rank (the lowest
    first; of equals, the rightmost): a piece cut to its least, or dropped; ``KEEP`` pieces stay whole.
    Then cut pieces take back what room is left. So the status and the alerts badge are on screen at every
    width, and the device, the compile time or a path's start go first."""
    shown = {id(p): p.text for p in pieces}
    live = list(pieces)

    def width_of() -> int:
        return sum(shown[id(p)].cell_len + (len(p.sep) if i else 0) for i, p in enumerate(live))

    steps = [(p.rank, -i, "drop", p) for i, p in enumerate(pieces) if p.rank < KEEP]
    steps += [(p.cut_rank if p.cut_rank is not None else p.rank, -i - 0.5, "cut", p)
              for i, p in enumerate(pieces) if p.least is not None]
    done: list[tuple[str, Piece, Text]] = []  # each step taken, with what the piece showed before it
    for _, _, what, p in sorted(steps, key=lambda s: (s[0], s[1])):
        over = width_of() - width
        if over <= 0:
            break
        if p not in live:
            continue
        if what == "drop":
            done.append((what, p, shown[id(p)]))
            live.remove(p)
        elif shown[id(p)].cell_len > (p.least or 0):
            done.append((what, p, shown[id(p)]))
            shown[id(p)] = _cut(p.text, max(p.least or 0, shown[id(p)].cell_len - over), p.keep_end)
    # then undo what was not needed, the most telling first (the last taken): a step taken before the one
    # that made the line fit may have been made needless by it
    for what, p, before in reversed(done[:-1]):
        if what == "drop":
            at = next((i for i, q in enumerate(live) if pieces.index(q) > pieces.index(p)), len(live))
            live.insert(at, p)
            if width_of() > width:
                live.remove(p)
        elif p in live:
            room = width - width_of()
            if room > 0:
                shown[id(p)] = _cut(p.text, min(before.cell_len, shown[id(p)].cell_len + room), p.keep_end)
    out = Text()
    for i, p in enumerate(live):
        if i:
            out.append(p.sep)
        out.append_text(shown[id(p)])
    return out


class Header(Static):
    """Run name, device, ranks, progress, times, checkpoint, status: each line fitted to the width by what
    matters most (the status and the alerts badge always; the device, compile time or a path first to go)."""

    _view: View | None = None

    def show(self, v: View) -> None:
        self._view = v
        h = v.header
        for s in STATUSES:
            self.set_class(h.status == s, f"status-{s}")
        self.set_class(bool(v.new_alerts), "new-alerts")
        width = (self.content_size.width or max(20, self.app.size.width - 2)) if self.is_mounted else 10_000
        t = fit(self._diagnosis_line(v), width)
        t.append("\n")
        t.append_text(fit(self._first_line(v), width))
        t.append("\n")
        if self.is_mounted and self.screen.has_class("short"):  # a short terminal: three lines, the loss
            # chart keeps its rows; progress and times share one, the least telling of them left out
            t.append_text(fit(self._progress_line(v) + self._times_line(v), width))
        else:
            t.append_text(fit(self._progress_line(v), width))
            t.append("\n")
            t.append_text(fit(self._times_line(v), width))
        self.update(t)

    def on_resize(self) -> None:
        if self._view is not None:  # what each width keeps differs: fit the lines again
            self.show(self._view)

    @staticmethod
    def _diagnosis_line(v: View) -> list[Piece]:
        """What slows the job, worst first: the first verdict's kind and words, how many more (issue 59)."""
        if not v.diagnosis:
            return [Piece(Text("diagnosis: n/a (no rows yet)", style="dim"), KEEP)]
        first = v.diagnosis[0]
        healthy = first.kind == "healthy"
        label = "HEALTHY" if healthy else VERDICT_LABELS.get(first.kind, first.kind.upper())
        out = [Piece(Text(label, style="bold green" if healthy else "bold reverse"), KEEP, sep=""),
               Piece(Text(first.words.removeprefix("healthy: ")), 8, sep="  ", least=24, cut_rank=8)]
        if len(v.diagnosis) > 1:
            more = ", ".join(VERDICT_LABELS.get(d.kind, d.kind) for d in v.diagnosis[1:4])
            out.append(Piece(Text(f"(+{len(v.diagnosis) - 1}: {more})"), 9, sep="  "))
        return out

    @staticmethod
    def _first_line(v: View) -> list[Piece]:
        """The run, its status, what is wrong with its files, the alerts badge, the notes."""
        h = v.header
        out = [Piece(Text(h.run_name or "(unnamed run)", style="bold"), KEEP - 1, least=12, cut_rank=5),
               Piece(Text(h.device or "device n/a"), 2),
               Piece(Text(f"world {f'{h.world_size:,}' if h.world_size else 'n/a'}"), 4),
               Piece(Text(f"ranks seen {h.ranks_seen:,}"), 3),
               Piece(Text(f"status {h.status.upper()}"), KEEP, sep="   ")]
        if h.writer_errors:
            out.append(Piece(Text("! writer failed: ").append_text(Text(h.writer_errors[0])), 7, sep="   ",
                             least=24, cut_rank=6))
        for n, what in ((h.bad_rows, "bad row"), (h.bad_events, "bad event"), (h.dropped_rows,
                        "row{s} lost by the writer"), (h.refused_rows, "row{s} refused by the writer")):
            if n:
                t = Text(f"! {fmt.count(n, what)}")
                if what.startswith("row{s} refused") and h.refused:
                    t.append_text(Text(f" ({refusal_step(h.refused)})"))
                out.append(Piece(t, 8, sep="   ", least=len(f"! {fmt.count(n, what)}"), cut_rank=2))
        if h.refused_cells:  # impossible cells made missing: the figures are of the rest
            said = f"! {fmt.count(h.refused_cells, 'cell{s} refused')}"
            out.append(Piece(Text(said).append_text(Text(f" ({h.refused_cells_why})")), 8, sep="   ",
                             least=len(said), cut_rank=2))
        if v.alerts:
            badge = f"ALERTS {len(v.alerts)}" + (f" ({v.new_alerts} new: a)" if v.new_alerts else "")
            out.append(Piece(Text(badge), KEEP, sep="   "))
        for i, note in enumerate(h.notes):
            # a note says what is wrong with the reading (a clock, a host, a folder not there yet): the first
            # goes after the device and the counts, cut before it goes; later ones go before it
            first = i == 0
            out.append(Piece(Text("! ").append_text(Text(note)), 8 if first else max(1, 6 - i), sep="   ",
                             least=40 if first else 24, cut_rank=5 if first else 1, keep_end="middle"))
        return out

    @staticmethod
    def _progress_line(v: View) -> list[Piece]:
        """The step (of the total), the ETA and pace, or how long no row came; tokens seen, elapsed."""
        h = v.header
        step = "n/a" if h.step is None else f"{h.step:,}"
        out = []
        if h.total_steps:
            frac = (h.step or 0) / h.total_steps
            out.append(Piece(Text(f"step {step} / {h.total_steps:,} {fmt.bar(frac, 10)} {100 * frac:.0f} %"),
                             KEEP))
            if h.status not in ENDED and h.quiet is None:  # an ended run has no time to go
                eta = fmt.duration(h.eta) if h.eta is not None else "n/a (" + h.status + ")"
                out.append(Piece(Text(f"ETA {eta}"), 8))
        else:
            out.append(Piece(Text(f"step {step}"), KEEP))
        if h.step_spread is not None and h.step_spread[1] - h.step_spread[0] > 1:
            out.append(Piece(Text(f"(ranks at {h.step_spread[0]:,}-{h.step_spread[1]:,})"), 6, sep=" "))
        if h.quiet is not None:  # far past its pace: no live ETA nor pace, but how long it has been silent
            out.append(Piece(Text(h.quiet, style="bold"), 9, least=16, cut_rank=4))
        elif h.status not in ENDED:
            out.append(Piece(Text(f"{fmt.num(h.steps_per_s, 3)} steps/s"), 5))
        out.append(Piece(Text(f"tokens seen {fmt.si(h.tokens_seen)}"), 3))
        out.append(Piece(Text(f"elapsed {fmt.duration(h.elapsed)}"), 7))
        return out

    @staticmethod
    def _times_line(v: View) -> list[Piece]:
        """The last row's age, compilation, repeated steps, goodput, the last checkpoint."""
        h = v.header
        out = [Piece(Text(f"last row {fmt.duration(h.since_last_row)} ago"), 9)]
        if h.compile_s is not None:
            out.append(Piece(Text(f"compile {fmt.ms(h.compile_s)}"), 2))
        if h.repeated_steps:
            whose = f"{h.repeated_whose}, " if h.repeated_whose is not None else ""
            out.append(Piece(Text(f"{h.repeated_steps:,} steps repeated after a resume "
                                  f"({whose}{fmt.duration(h.repeated_seconds)})"), 5, least=24, cut_rank=4))
        if h.goodput is not None:
            lost = losses_text(h.goodput_lost)
            out.append(Piece(Text(f"goodput {100 * h.goodput:.0f} %" + (f" (lost: {lost})" if lost else "")), 7,
                             least=len(f"goodput {100 * h.goodput:.0f} %"), cut_rank=3))
        ck = h.last_checkpoint
        if ck is None:
            out.append(Piece(Text("no checkpoint yet"), 6))
        else:
            out.append(Piece(Text(f"checkpoint step {ck.get('step')}, {fmt.duration(h.checkpoint_age)} ago"), 6))
            out.append(Piece(Text(str(ck.get("path"))), 6, sep=": ", least=12, cut_rank=1, keep_end=True))
        return out


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
