"""The monitor's panels: each turns a :class:`~mstop.view.View` into something drawable.

User-controlled text (run names, notes, column names, host names, paths) is
always wrapped in ``rich.text.Text``, never parsed as markup.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Static
from textual_plotext import PlotextPlot

from ... import fmt
from ...engine.figures import STATUSES
from ...view import DATA_WARN, MEM_CRIT, MEM_WARN, RankRow, Series, View


def _finite(s: Series | None) -> tuple[list[float], list[float]]:
    if s is None:
        return [], []
    ok = np.isfinite(s.y) & np.isfinite(s.x)
    return s.x[ok].tolist(), s.y[ok].tolist()


def _log_ticks(lo: float, hi: float) -> list[float]:
    """Tick positions (log10 values) for a log axis over [lo, hi]: the decades inside, else the ends and
    their geometric middle (a range inside one decade)."""
    decades = [float(k) for k in range(math.ceil(lo), math.floor(hi) + 1)]
    if len(decades) >= 2:
        step = max(1, len(decades) // 5)
        return decades[::step]
    return sorted({lo, (lo + hi) / 2, hi})


class Chart(PlotextPlot):
    """A line chart of one or more series (one plot object per widget: its own ``self.plt``).

    Lines use half-block "hd" marks rather than braille: block elements are in
    every monospace font, braille is missing from many (then it is drawn wider
    and the chart runs past its frame).
    """

    def show_series(self, title: str, lines: list[tuple[str, Series | None]], *, log: bool = False,
                    right: tuple[str, Series | None] | None = None,
                    hlines: list[float] = (), vlines: list[float] = (),
                    points: list[tuple[list[float], list[float], str]] = ()) -> None:
        plt = self.plt
        plt.clear_figure()
        self._title = title  # set at render time, cut to the width: plotext leaves a longer title out entirely
        lows, highs = [], []
        for label, series in lines:
            xs, ys = _finite(series)
            if log:  # drawn as log10 with decade labels: plotext's own log scale transforms its data in
                # place, so a second render of the same figure (a resize) failed with a math domain error
                pairs = [(x, math.log10(y)) for x, y in zip(xs, ys) if y > 0]
                xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
                if ys:
                    lows.append(min(ys))
                    highs.append(max(ys))
            if xs:
                # plotext's legend reads three marks of a line (label only lines that have them) and
                # fails on log axes: the title names the lines there
                plt.plot(xs, ys, marker="hd", label=label if len(xs) >= 3 and not log else None)

        if right is not None:  # a second quantity on its own axis (lr and grad norm differ by 10^4)
            xs, ys = _finite(right[1])
            if xs:
                plt.plot(xs, ys, marker="hd", label=f"{right[0]} (right axis)" if len(xs) >= 3 else None,
                         yside="right")
        for xs, ys, label in points:
            if log:
                pairs = [(x, math.log10(y)) for x, y in zip(xs, ys) if y > 0]
                xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
            if xs:  # checkpoints as "C", incidents as "!", evaluations as "x"
                plt.scatter(xs, ys, marker={"checkpoint": "C", "incident": "!"}.get(label, "x"),
                            label=label if len(xs) >= 3 and not log else None)
        for y in hlines:
            if not log or y > 0:
                plt.hline(math.log10(y) if log else y)
        for x in vlines[:20]:
            plt.vline(x)
        if log and lows:
            ticks = _log_ticks(min(lows), max(highs))
            plt.yticks(ticks, [f"{10 ** t:.3g}" for t in ticks])
        self.refresh()

    def render(self):
        """Draw the plot; a plotting failure shows its message instead of stopping the monitor."""
        if self.size.height < 5 or self.size.width < 24:
            return Text("")  # too small to read: an empty panel beats an unreadable one
        try:
            title = getattr(self, "_title", "")
            room = self.size.width - 4  # plotext leaves out a title within 4 columns of the width (measured)
            self.plt.title(title if len(title) <= room else title[: max(0, room - 1)] + "…")
            return super().render()
        except Exception as e:  # noqa: BLE001 - plotext has corner cases; the screen must go on
            return Text(f"(chart unavailable: {type(e).__name__}: {e})")


class Header(Static):
    """Run name, device, ranks, progress, times, checkpoint, status."""

    def show(self, v: View) -> None:
        t = Text()
        t.append(Text(v.run_name or "(unnamed run)", style="bold"))
        t.append(f" · {v.device or 'device n/a'} · world {v.world_size or 'n/a'} · ranks seen {v.ranks_seen}")
        t.append(f"   status {v.status.upper()}")
        for s in STATUSES:
            self.set_class(v.status == s, f"status-{s}")
        if v.writer_errors:
            t.append("   ! writer failed: ")
            t.append(Text(v.writer_errors[0]))
        if v.bad_rows:
            t.append(f"   ! {v.bad_rows:,} bad rows")
        if v.dropped_rows:
            t.append(f"   ! {v.dropped_rows:,} rows dropped by the writer")
        if v.alerts:
            t.append(f"   ALERTS {len(v.alerts)}")
            if v.new_alerts:
                t.append(f" ({v.new_alerts} new: a)")
        self.set_class(bool(v.new_alerts), "new-alerts")
        for note in v.notes:
            t.append("   ! ")
            t.append(Text(note))
        t.append("\n")
        step = "n/a" if v.step is None else f"{v.step:,}"
        if v.total_steps:
            frac = (v.step or 0) / v.total_steps
            t.append(f"step {step} / {v.total_steps:,} {fmt.bar(frac, 10)} {100 * frac:.0f} %"
                     f" · ETA {fmt.duration(v.eta)}")
        else:
            t.append(f"step {step}")
        t.append(f" · {fmt.num(v.steps_per_s, 3)} steps/s · tokens seen {fmt.si(v.tokens_seen)}"
                 f" · elapsed {fmt.duration(v.elapsed)}\n")
        t.append(f"last row {fmt.duration(v.since_last_row)} ago · ")
        if v.compile_s is not None:
            t.append(f"compile {fmt.ms(v.compile_s)} · ")
        if v.repeated_steps:
            t.append(f"{v.repeated_steps:,} steps repeated after a resume ({fmt.duration(v.repeated_seconds)}) · ")
        ck = v.last_checkpoint
        if ck is None:
            t.append("no checkpoint yet")
        else:
            t.append(f"checkpoint step {ck.get('step')}, {fmt.duration(v.checkpoint_age)} ago: ")
            t.append(Text(str(ck.get("path"))))
        self.update(t)


class LossPanel(Vertical):
    """Raw and smoothed loss, NaN marks, eval points; lr and grad norm below."""

    DEFAULT_CSS = "LossPanel > #loss-base { height: auto; padding: 0 1; display: none; }"

    def compose(self):
        yield Static(id="loss-base")  # the differences against a baseline, when one is chosen
        yield Chart(id="loss-chart")
        yield Chart(id="custom-chart")
        yield Chart(id="lr-chart")

    def show(self, v: View, *, log: bool, smoothing: float, recent: bool = False) -> None:
        xlabel = {"step": "step", "time": "unix time", "tokens": "tokens seen"}[v.xaxis]
        title = f"loss {fmt.num(v.loss)}  smoothed({smoothing:g}) {fmt.num(v.loss_ema)}  min {fmt.num(v.loss_min)}"
        if v.nan_steps:
            title += f"  !! NaN/Inf at {xlabel} {fmt.num(v.nan_steps[0], 6)}"
        if v.chart_rank:
            title += f"  (rank {v.chart_rank})"
        if log:
            title += "  (log)"
        if recent:
            title += "  · recent"
        evals: dict[str, tuple[list[float], list[float]]] = {}
        for step, name, val in v.evals:
            if v.xaxis == "step":
                evals.setdefault(name, ([], []))[0].append(step)
                evals[name][1].append(val)
        if v.segment_starts:
            title += f"  | restarts at {', '.join(fmt.num(x, 6) for x in v.segment_starts[:3])}"
        marks = [(xs, ys, f"eval {k}") for k, (xs, ys) in evals.items()]
        if v.checkpoints:
            marks.append(([x for x, _ in v.checkpoints], [y for _, y in v.checkpoints], "checkpoint"))
        if v.incident_marks:
            marks.append(([x for x, _ in v.incident_marks], [y for _, y in v.incident_marks], "incident"))
        lines = [("raw", v.loss_raw), ("smoothed", v.loss_smooth)]
        base = self.query_one("#loss-base", Static)
        base.display = bool(v.baseline)
        if v.baseline:  # drawn before this run's smoothed line, which stays on top where they coincide
            lines.insert(1, ("baseline smoothed", v.base_loss))
            t = Text("vs baseline ")
            t.append(Text(v.baseline))
            if v.base_loss_delta is not None:
                rel = v.base_loss_delta / abs(v.base_loss_ema) if v.base_loss_ema else None
                t.append(f" at step {fmt.num(v.base_step, 9)}: smoothed loss {v.base_loss_delta:+.4g}"
                         + (f" ({100 * rel:+.1f} %)" if rel is not None else ""))
            if v.base_note:
                t.append(f" · {v.base_note}")
            base.update(t)
        self.query_one("#loss-chart", Chart).show_series(
            title, lines, log=log,
            vlines=v.nan_steps + v.segment_starts, points=marks)
        if v.custom:
            names = ", ".join(v.custom)
            self.query_one("#custom-chart", Chart).show_series(
                f"{names}   x: {xlabel}", [(name, series) for name, series in v.custom.items()])
        self.query_one("#lr-chart", Chart).show_series(
            f"lr {fmt.num(v.lr_now)}   grad norm {fmt.num(v.grad_norm_now)}   x: {xlabel}",
            [("lr", v.lr)], right=("grad norm", v.grad_norm))


class ThroughputPanel(Vertical):
    DEFAULT_CSS = "ThroughputPanel > Static { height: auto; }"

    def compose(self):
        yield Static(id="tp-text")
        yield Chart(id="tp-chart", classes="small-chart")

    def show(self, v: View) -> None:
        t = Text(f"tokens/s {fmt.si(v.tokens_per_s)}")
        if v.base_tps_change is not None:  # at the step the loss panel names
            t.append(f" ({100 * v.base_tps_change:+.1f} % vs baseline)\nstep time {fmt.ms(v.step_time)}"
                     f"   samples/s {fmt.num(v.samples_per_s, 4)}")
        else:  # two lines either way: the chart below keeps its room
            t.append(f"   samples/s {fmt.num(v.samples_per_s, 4)}\nstep time {fmt.ms(v.step_time)}")
        self.query_one("#tp-text", Static).update(t)
        # the baseline first: this run's line is drawn over it where they meet
        lines = ([("baseline", v.base_throughput)] if v.baseline else []) + [("tokens/s", v.throughput)]
        self.query_one("#tp-chart", Chart).show_series("tokens/s" + (" (and baseline)" if v.baseline else ""), lines)


class MfuPanel(Vertical):
    DEFAULT_CSS = "MfuPanel > Static { height: auto; max-height: 2; }"

    def compose(self):
        yield Static(id="mfu-text")
        yield Chart(id="mfu-chart", classes="small-chart")

    def show(self, v: View) -> None:
        t = Text()
        if v.peak_flops is None:
            t.append("MFU n/a: peak unknown, pass --peak-tflops")
        else:
            t.append(f"MFU {fmt.pct(v.mfu)}")
            if v.base_mfu_delta is not None:
                t.append(f" ({100 * v.base_mfu_delta:+.1f} pp vs baseline)")
            t.append(f" · peak {v.peak_flops / 1e12:,.0f} TFLOP/s\n")
            t.append(Text(str(v.peak_source or "")))
        self.query_one("#mfu-text", Static).update(t)
        series = v.mfu_series
        chart = self.query_one("#mfu-chart", Chart)
        chart.set_class(series is None, "empty")  # CSS hides it (and in small terminals anyway)
        self.set_class(series is None, "no-chart")  # and the panel shrinks to its text: room for the others
        if series is not None:
            lines = [("MFU %", Series(series.x, series.y * 100))]
            if v.base_mfu is not None:  # drawn first: this run's line goes over it where they meet
                lines.insert(0, ("baseline", Series(v.base_mfu.x, v.base_mfu.y * 100)))
            chart.show_series("MFU %" + (" (and baseline)" if v.baseline else ""), lines)


class MemoryPanel(Vertical):
    DEFAULT_CSS = "MemoryPanel > Static { height: auto; }"

    def compose(self):
        yield Static(id="mem-text")
        yield Chart(id="mem-chart", classes="small-chart")

    def show(self, v: View) -> None:
        h = v.mem_headroom
        t = Text()
        crit, warn = h is not None and h < MEM_CRIT, h is not None and MEM_CRIT <= h < MEM_WARN
        if crit:
            t.append("!! CRITICAL ")
        elif warn:
            t.append("! warning ")
        t.append(f"headroom {fmt.pct(h)} ")
        t.append(fmt.bar(None if h is None else 1 - h, 8))
        self.set_class(crit, "critical")
        self.set_class(warn, "warning")
        t.append("\n")
        t.append(Text(v.mem_worst or "n/a"))
        t.append(f": used {fmt.gib(v.mem_used)} / peak {fmt.gib(v.mem_peak)} / total {fmt.gib(v.mem_total)}")
        if v.mem_source == "host":
            t.append(" (host RAM)")
        self.query_one("#mem-text", Static).update(t)
        chart = self.query_one("#mem-chart", Chart)
        chart.set_class(v.headroom is None, "empty")
        self.set_class(v.headroom is None, "no-chart")
        if v.headroom is not None:
            who = v.mem_worst if v.mem_worst is not None and v.mem_worst.kind == "rank" else f"rank {v.chart_rank}"
            chart.show_series(f"headroom %, {who}",
                              [("headroom %", Series(v.headroom.x, v.headroom.y * 100))],
                              hlines=[100 * MEM_WARN, 100 * MEM_CRIT])


class DataPanel(Static):
    def show(self, v: View) -> None:
        t = Text()
        t.append(f"data wait {fmt.pct(v.data_wait_frac)} of step time")
        if v.data_worst_rank is not None:
            t.append(f" (worst: rank {v.data_worst_rank})")
        starving = v.data_wait_frac is not None and v.data_wait_frac > DATA_WARN
        if starving:
            t.append(f"  ! input-bound: above {DATA_WARN:.0%}")
        self.set_class(starving, "warning")
        t.append(f"\ndevice queue depth {fmt.num(v.queue_depth, 3)}")
        if v.queue_depth is not None and v.chart_rank is not None:
            t.append(f" (rank {v.chart_rank})")
        self.update(t)


RANK_COLUMNS = (("rank", "rank"), ("host", "host"), ("step", "step"), ("step_time", "step time"),
                ("tokens_per_s", "tokens/s"), ("headroom", "headroom"), ("data_wait", "data wait"),
                ("age", "last row"))


@dataclass
class HostRow(RankRow):
    """A host's ranks summed up for the grouped table: the worst of each column (``rank``: its lowest)."""

    count: int = 0


def _host_row(host: str, ranks: list) -> HostRow:
    def pick(attr, f):
        vals = [getattr(r, attr) for r in ranks if getattr(r, attr) is not None]
        return f(vals) if vals else None

    return HostRow(rank=min(r.rank for r in ranks), host=host, step=pick("step", min),
                   step_time=pick("step_time", max), tokens_per_s=pick("tokens_per_s", min),
                   headroom=pick("headroom", min), data_wait=pick("data_wait", max), age=pick("age", max),
                   count=len(ranks))


class RanksTable(DataTable):
    """Every rank, sortable by any column (click a header). Like htop, only the page on screen is
    built (pgup/pgdn, home/end, arrows past the edge move the page): a frame costs the same with
    8 ranks or 1,024."""

    BINDINGS = [Binding("pagedown", "page(1)", "page down", show=False),
                Binding("pageup", "page(-1)", "page up", show=False),
                Binding("home", "edge(0)", "first", show=False), Binding("end", "edge(1)", "last", show=False),
                Binding("h", "toggle_group", "group by host", show=False)]
    sort_key = "rank"
    sort_reverse = False
    offset = 0
    _view: View | None = None

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.expanded = set()  # per table, not shared between instances
        for key, label in RANK_COLUMNS:
            self.add_column(label, key=key)

    @property
    def page_size(self) -> int:
        return max(1, self.size.height - 1)

    grouped = False  # h: a row per host, Enter expands it to its ranks
    expanded: set[str] = set()

    def show(self, v: View) -> None:
        self._view = v

        def key(r):
            val = getattr(r, self.sort_key)
            missing = val is None or (isinstance(val, float) and math.isnan(val))
            return (missing, val if not missing else 0)

        ranks = sorted(v.ranks, key=key, reverse=self.sort_reverse)
        lines: list[tuple[str, object]] = []  # ("host", HostRow) or ("rank", RankRow)
        if self.grouped:
            hosts: dict[str, list] = {}
            for r in ranks:
                hosts.setdefault(r.host, []).append(r)
            groups = [_host_row(h, rs) for h, rs in hosts.items()]
            groups.sort(key=key, reverse=self.sort_reverse)
            for g in groups:
                lines.append(("host", g))
                if g.host in self.expanded:
                    lines += [("rank", r) for r in hosts[g.host]]
        else:
            lines = [("rank", r) for r in ranks]
        self._lines = lines
        if self._want is not None:  # select_rank: put that rank's row on the page, under the cursor
            at = next((i for i, (kind, r) in enumerate(lines) if kind == "rank" and r.rank == self._want), None)
            self._want = None
            if at is not None:
                if not self.offset <= at < self.offset + self.page_size:
                    self.offset = max(0, at - self.page_size // 2)
                self.offset = max(0, min(self.offset, len(lines) - self.page_size))
                self._cursor_to = at - self.offset
        self.offset = max(0, min(self.offset, len(lines) - self.page_size))
        page = lines[self.offset: self.offset + self.page_size]
        cursor = self.cursor_row if self._cursor_to is None else self._cursor_to
        self._cursor_to = None
        self.clear()
        for kind, r in page:
            first = (("- " if r.host in self.expanded else "+ ") + f"{r.count} ranks") if kind == "host" \
                else (f"  {r.rank}" if self.grouped else str(r.rank))
            self.add_row(first, Text(r.host), fmt.num(r.step, 9), fmt.ms(r.step_time), fmt.si(r.tokens_per_s),
                         fmt.pct(r.headroom), fmt.pct(r.data_wait), fmt.duration(r.age),
                         key=f"host:{r.host}" if kind == "host" else str(r.rank))
        if page:
            self.move_cursor(row=min(cursor, len(page) - 1))
        arrow = "down" if self.sort_reverse else "up"
        what = "hosts and ranks" if self.grouped else "ranks"
        self.border_title = (f"{what} {self.offset + 1}-{self.offset + len(page)} of {len(lines):,}"
                             f" · sorted by {self.sort_key} ({arrow}) · click a header to sort, pgup/pgdn to page"
                             f" · h: {'ungroup' if self.grouped else 'group by host'}")

    _want: int | None = None
    _cursor_to: int | None = None
    _lines: list = []

    def select_rank(self, rank: int) -> None:
        """Move the cursor to ``rank`` (paging to it; in the grouped table its host is expanded)."""
        if self._view is None:
            return
        if self.grouped:
            host = next((r.host for r in self._view.ranks if r.rank == rank), None)
            if host is not None:
                self.expanded.add(host)
        self._want = rank
        self.show(self._view)

    def action_toggle_group(self) -> None:
        self.grouped = not self.grouped
        self.offset = 0
        if self._view is not None:
            self.show(self._view)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        key = str(event.row_key.value)
        if key.startswith("host:"):
            host = key[5:]
            self.expanded.symmetric_difference_update({host})
            if self._view is not None:
                self.show(self._view)

    def on_resize(self) -> None:
        if self._view is not None:  # the page holds as many rows as fit
            self.show(self._view)

    def _move(self, offset: int) -> None:
        self.offset = max(0, offset)
        if self._view is not None:
            self.show(self._view)

    def action_page(self, direction: int) -> None:
        self._move(self.offset + direction * self.page_size)

    def action_edge(self, last: int) -> None:
        self._move(10**9 if last else 0)

    def action_cursor_down(self) -> None:
        if self.cursor_row >= self.row_count - 1:
            self._move(self.offset + 1)
        else:
            super().action_cursor_down()

    def action_cursor_up(self) -> None:
        if self.cursor_row <= 0 and self.offset > 0:
            self._move(self.offset - 1)
        else:
            super().action_cursor_up()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        key = str(event.column_key.value)
        self.sort_reverse = not self.sort_reverse if key == self.sort_key else False
        self.sort_key = key
        self.offset = 0
        self.app.redraw()


class AlertsPanel(Static):
    """The active alerts, one line each (shown when there are any)."""

    def show(self, v: View) -> None:
        self.display = bool(v.alerts)
        if not v.alerts:
            return
        t = Text()
        for i, a in enumerate(v.alerts[:8]):
            if i:
                t.append("\n")
            t.append(f"!! {a.kind} ")
            t.append(Text(a.message))
        if len(v.alerts) > 8:
            t.append(f"\n... and {len(v.alerts) - 8} more (a: all)")
        self.update(t)


LEVELS = "▁▂▃▄▅▆▇█"
#: heat strip metrics (m cycles): label, RankRow attribute, whether a high value is bad
HEAT_METRICS = (("step time", "step_time", True), ("data wait", "data_wait", True),
                ("headroom", "headroom", False), ("lag", "lag", True), ("last-row age", "age", True))
#: the most lines of cells the strip uses; beyond, one cell stands for several ranks (their worst)
HEAT_LINES = 10
#: a cell is an outlier when it is this many robust deviations (1.4826·MAD) from the median on the bad side,
#: and at least OUTLIER_MARGIN of the median away (a flat run's tiny MAD must not light up noise)
OUTLIER_K, OUTLIER_MARGIN = 4.0, 0.25


class HeatStrip(Static, can_focus=False):
    """One cell per rank for the chosen metric, as glyph levels (readable without colour): the odd rank
    out among 1,024 at a glance. Ranks with a per-rank alert show its letter instead: D dead,
    S straggler, L lagging, M memory, W data wait; ``?`` has no value yet. Colour comes from the
    component classes below (NO_COLOR terminals keep the glyphs). Clicking a cell selects that rank.

    Levels span the ranks' range, but never less than OUTLIER_MARGIN of the median: on a healthy run
    the noise between ranks stays in the low glyphs instead of filling the scale."""

    COMPONENT_CLASSES = {"heat-strip--normal", "heat-strip--outlier", "heat-strip--alert",
                         "heat-strip--missing", "heat-strip--selected"}

    class Selected(Message):
        """A cell was clicked: select ``rank`` in the table and show its figures."""

        def __init__(self, rank: int) -> None:
            super().__init__()
            self.rank = rank

    metric = 0
    selected: int | None = None
    _picks: list[int] = []  # per cell, in drawing order, the rank it shows (a click selects it)
    _args: tuple | None = None

    def title(self, v: View) -> str:
        label, _attr, high_bad = HEAT_METRICS[self.metric]
        per = self._per_cell(len(v.ranks))
        return (f"{label} by rank ({len(v.ranks):,}{f', a cell = {per} ranks, their worst' if per > 1 else ''}; "
                f"{'high' if high_bad else 'low'} is bad; m: metric; click a cell; "
                f"D dead S straggler L lagging M memory W data wait)")

    def _width(self) -> int:
        return max(1, self.content_size.width or (self.app.size.width - 2))

    def _per_cell(self, n: int) -> int:
        return max(1, math.ceil(n / (self._width() * HEAT_LINES)))

    def show(self, v: View, marks: dict[int, str], selected: int | None = None) -> None:
        self._args = (v, marks)
        self.selected = selected
        _label, attr, high_bad = HEAT_METRICS[self.metric]
        ranks = sorted(v.ranks, key=lambda r: r.rank)
        value = _values(v, attr)
        known = np.array([x for x in value.values() if x is not None and math.isfinite(x)])
        med = float(np.median(known)) if len(known) else 0.0
        mad = float(np.median(np.abs(known - med))) * 1.4826 if len(known) else 0.0
        margin = OUTLIER_MARGIN * abs(med)
        lo, hi = (float(known.min()), float(known.max())) if len(known) else (0.0, 0.0)
        if hi - lo < margin:  # a flat run: centre a minimum span on the median
            lo, hi = med - margin / 2, med + margin / 2
        sign = 1.0 if high_bad else -1.0
        per = self._per_cell(len(ranks))
        width = self._width()
        cells = [[r.rank for r in ranks[i:i + per]] for i in range(0, len(ranks), per)]
        styles = {n: self.get_component_rich_style(f"heat-strip--{n}", partial=True)
                  for n in ("normal", "outlier", "alert", "missing", "selected")}

        def style_of(key: tuple[str, bool]) -> Style:
            return styles[key[0]] + (styles["selected"] if key[1] else Style())

        t = Text(no_wrap=True, overflow="crop")
        self._picks = []
        run: list[str] = []  # glyphs of one style are appended as one span: 1,024 spans cost the
        run_style = None     # compositor ~80 ms per frame, a few long runs almost nothing
        for i, cell in enumerate(cells):
            if i and i % width == 0:
                run.append("\n")
            vals = [(value[r], r) for r in cell if value[r] is not None and math.isfinite(value[r])]
            marked = next((r for r in cell if r in marks), None)
            if marked is not None:  # a cell of several ranks shows, and selects, an alert's rank first
                glyph, kind, pick = marks[marked], "alert", marked
            elif not vals:
                glyph, kind, pick = "?", "missing", cell[0]
            else:
                x, pick = max(vals) if high_bad else min(vals)  # a cell of several ranks: their worst
                k = 0 if hi <= lo else int((x - lo) / (hi - lo) * (len(LEVELS) - 1) + 0.5)
                glyph = LEVELS[max(0, min(len(LEVELS) - 1, k))]  # the glyph's height is the value
                outlier = sign * (x - med) > max(OUTLIER_K * mad, margin) and len(known) >= 3
                kind = "outlier" if outlier else "normal"
            self._picks.append(pick)
            style = (kind, selected is not None and selected in cell)
            if style != run_style and run:
                t.append("".join(run), style_of(run_style))
                run = []
            run_style = style
            run.append(glyph)
        if run:
            t.append("".join(run), style_of(run_style))
        self.update(t)

    def on_resize(self) -> None:
        if self._args is not None:  # cells per line follow the width
            self.show(*self._args, selected=self.selected)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        width = self._width()
        i = (offset.y + int(self.scroll_offset.y)) * width + offset.x
        if 0 <= i < len(self._picks) and offset.x < width:
            self.post_message(self.Selected(self._picks[i]))


def _values(v: View, attr: str) -> dict[int, float | None]:
    """Each rank's value of a heat strip metric; ``lag`` is steps behind the median rank."""
    if attr == "lag":
        steps = sorted(x.step for x in v.ranks if x.step is not None)
        med = steps[len(steps) // 2] if steps else None
        return {r.rank: None if r.step is None or med is None else float(med - r.step) for r in v.ranks}
    return {r.rank: getattr(r, attr) for r in v.ranks}
