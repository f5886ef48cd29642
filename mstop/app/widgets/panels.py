"""The run-wide panels: loss (with lr and grad norm), throughput, MFU, memory, input pipeline.

User-controlled text (run names, notes, column names, host names, paths) is always wrapped in
``rich.text.Text``, never parsed as markup.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from rich.text import Text
from textual.containers import Vertical
from textual.widgets import Static

from mstop_writer.schema import UNITS

from ... import fmt
from ...view import DATA_WARN, MEM_CRIT, MEM_WARN, BaselinePart, Line, Series, View
from .chart import Chart

#: a frame without a baseline: every difference None
NO_BASELINE = BaselinePart("")


class LossPanel(Vertical):
    """Raw and smoothed loss, NaN marks, eval points; lr and grad norm below."""

    DEFAULT_CSS = "LossPanel > #loss-base { height: auto; padding: 0 1; display: none; }"

    def compose(self):
        yield Static(id="loss-base")  # the differences against a baseline, when one is chosen
        yield Chart(id="loss-chart")
        yield Chart(id="custom-chart")
        yield Chart(id="lr-chart")

    def show(self, v: View, *, log: bool, smoothing: float, recent: bool = False) -> None:
        b = v.baseline or NO_BASELINE  # every field None without one
        xlabel = {"step": "step", "time": "wall time", "tokens": "tokens seen"}[v.xaxis]
        raw = v.loss.raw
        if v.xaxis == "time" and raw is not None and len(raw.x):  # the axis counts m:ss from its first point
            xlabel = f"time since {fmt.clock_tick(float(raw.x[0]))}"
        stale = v.loss.now is not None and not math.isfinite(v.loss.now)  # the EMA skips NaN: not a figure of now
        title = f"loss {fmt.num(v.loss.now)}  smoothed({smoothing:g}) {fmt.num(v.loss.ema)}" \
            f"{' before it' if stale else ''}  min {fmt.num(v.loss.min)}"
        if v.loss.nan_steps:
            title += f"  !! NaN/Inf at step {v.loss.nan_first_step:,}"  # a step on every x axis, not unix seconds
        if v.chart_rank is not None and (v.chart_rank or v.header.ranks_seen > 1):  # the header's is the furthest
            title += f"  (rank {v.chart_rank})"
        if log:
            title += "  (log)"
        if recent:
            title += "  · recent"
        evals: dict[str, tuple[list[float], list[float]]] = {}
        for step, name, val in v.loss.evals:
            if v.xaxis == "step":
                evals.setdefault(name, ([], []))[0].append(step)
                evals[name][1].append(val)
        if v.loss.segment_starts:
            title += f"  | restarts at {', '.join(fmt.num(x, 6) for x in v.loss.segment_starts[:3])}"
        marks = [(xs, ys, f"eval {k}") for k, (xs, ys) in evals.items()]
        if v.loss.checkpoints:
            marks.append(([x for x, _ in v.loss.checkpoints], [y for _, y in v.loss.checkpoints], "checkpoint"))
        if v.loss.incident_marks:
            marks.append(([x for x, _ in v.loss.incident_marks], [y for _, y in v.loss.incident_marks], "incident"))
        lines = [Line("raw", v.loss.raw, "raw"),
                 Line(f"1 {v.name} smoothed" if v.overlays else "smoothed", v.loss.smooth)]
        base = self.query_one("#loss-base", Static)
        base.display = bool(v.baseline)
        lines[1:1] = overlay_lines(v, "loss")  # drawn before this run's smoothed line, which stays on top
        if v.baseline:  # drawn before this run's smoothed line, which stays on top where they coincide
            lines.insert(1, Line("baseline smoothed", b.loss, "baseline"))
            t = Text("vs baseline ")
            t.append(Text(b.name))
            if b.loss_delta is not None:
                rel = b.loss_delta / abs(b.loss_ema) if b.loss_ema else None
                t.append(f" at step {fmt.num(b.step, 9)}: smoothed loss {b.loss_delta:+.4g}"
                         + (f" ({100 * rel:+.1f} %)" if rel is not None else ""))
            if b.note:
                t.append(f" · {b.note}")
            base.update(t)
        self.query_one("#loss-chart", Chart).show_series(
            title, lines, log=log,
            vlines=v.loss.nan_steps + v.loss.segment_starts, points=marks, xkind=v.xaxis, nan_x=v.loss.nan_steps)
        if v.loss.custom:
            self._custom(v, xlabel)
        self.query_one("#lr-chart", Chart).show_series(
            f"lr {fmt.num(v.loss.lr_now)}   grad norm {fmt.num(v.loss.grad_norm_now)}   x: {xlabel}"
            + (f" · rank {v.chart_rank}" if v.header.ranks_seen > 1 and v.chart_rank is not None else ""),
            [Line("lr", v.loss.lr)], right=Line("grad norm", v.loss.grad_norm, "right"), xkind=v.xaxis)


    def _custom(self, v: View, xlabel: str) -> None:
        """The / key's columns: those in the first one's unit on the left axis, the first in another unit
        on the right; more units than two are named as not drawn (mem bytes beside a loss would flatten it)."""
        unit = {name: UNITS.get(name, "") for name in v.loss.custom}
        first = next(iter(v.loss.custom))
        left = [Line(n, s) for n, s in v.loss.custom.items() if unit[n] == unit[first]]
        other = [(n, s) for n, s in v.loss.custom.items() if unit[n] != unit[first]]
        title = f"{', '.join(v.loss.custom)}   x: {xlabel}"
        if len(other) > 1:
            title += f"   ({', '.join(n for n, _ in other[1:])}: other units, not drawn)"
        self.query_one("#custom-chart", Chart).show_series(
            title, left, right=Line(other[0][0], other[0][1], "right") if other else None, xkind=v.xaxis,
            yunit=fmt.axis_unit(first, unit[first]))


class ThroughputPanel(Vertical):
    DEFAULT_CSS = "ThroughputPanel > Static { height: auto; }"

    def compose(self):
        yield Static(id="tp-text")
        yield Chart(id="tp-chart", classes="small-chart")

    def show(self, v: View) -> None:
        b = v.baseline or NO_BASELINE  # every field None without one
        t = Text(f"tokens/s {fmt.si(v.throughput.tokens_per_s)}")
        if b.tps_change is not None:  # at the step the loss panel names
            t.append(f" ({100 * b.tps_change:+.1f} % vs baseline)\nstep time {fmt.ms(v.throughput.step_time)}"
                     f"   samples/s {fmt.num(v.throughput.samples_per_s, 4)}")
        elif b.sps_change is not None:  # no tokens on one side: samples/s is the throughput compared
            t.append(f"   samples/s {fmt.num(v.throughput.samples_per_s, 4)} ({100 * b.sps_change:+.1f} % vs "
                     f"baseline)\nstep time {fmt.ms(v.throughput.step_time)}")
        else:  # two lines either way: the chart below keeps its room
            t.append(f"   samples/s {fmt.num(v.throughput.samples_per_s, 4)}"
                     f"\nstep time {fmt.ms(v.throughput.step_time)}")
        prof = v.throughput.profile
        if prof is not None:  # three short lines: the panel is narrow
            t.append(f"\ncompute {100 * prof['compute']:.0f} %  comm {100 * prof['comm_not_overlapped']:.0f} %  "
                     f"idle {100 * prof['idle']:.0f} %\n")
            t.append(profile_bar(prof, 12))
            t.append(f"  data wait {fmt.pct(v.data.wait_frac)}")
            if "bubble" in prof:  # pipeline parallelism (Ascend's step_trace_time.csv): receive time
                t.append(f"  bubble {100 * prof['bubble']:.0f} %")
            t.append(f"\nprofile: steps {prof['first_step']}-{prof['last_step']}, "
                     f"{fmt.duration(v.now - prof['time'])} ago")
        self.query_one("#tp-text", Static).update(t)
        # the baseline first: this run's line is drawn over it where they meet
        what = v.throughput.series_of
        lines = (([Line("baseline", b.throughput, "baseline")] if v.baseline else []) + overlay_lines(v, "throughput")
                 + [Line(what, v.throughput.series)])
        whose = f", rank {v.chart_rank}" if v.chart_rank is not None and v.header.ranks_seen > 1 else ""
        self.query_one("#tp-chart", Chart).show_series(what + whose + (" (and baseline)" if v.baseline else ""),
                                                       lines,
                                                       xkind=v.xaxis, yunit="tok/s" if what == "tokens/s" else "/s")


def overlay_lines(v: View, part: str) -> list[Line]:
    """The runs overlaid (the runs list's o): one line each, its mark the run's number (2 on)."""
    return [Line(o.name, getattr(o, part), "overlay", str(i)) for i, o in enumerate(v.overlays, start=2)]


def profile_bar(prof: dict[str, Any], width: int) -> Text:
    """A step's time as a bar: compute █, communication not overlapped ▒, idle ░ (told apart without
    colour too); each cell one width-th of the step."""
    parts = [("compute", "█", "green"), ("comm_not_overlapped", "▒", "red"), ("idle", "░", "grey50")]
    t = Text()
    used = 0
    for i, (key, ch, style) in enumerate(parts):
        n = round(prof[key] * width) if i < len(parts) - 1 else width - used
        n = max(0, min(n, width - used))
        t.append(ch * n, style=style)
        used += n
    return t


class MfuPanel(Vertical):
    DEFAULT_CSS = "MfuPanel > Static { height: auto; max-height: 2; }"

    def compose(self):
        yield Static(id="mfu-text")
        yield Chart(id="mfu-chart", classes="small-chart")

    def show(self, v: View) -> None:
        b = v.baseline or NO_BASELINE  # every field None without one
        t = Text()
        box = self.query_one("#mfu-text", Static)
        why = None
        if v.throughput.mfu is None and v.throughput.mfu_missing:
            why = v.throughput.mfu_missing
        elif v.throughput.peak_flops is None:
            why = "peak unknown, pass --peak-tflops"
        box.set_class(why is not None, "wrap")  # why it is missing, wrapped over as many lines as it takes
        # (up to four: with no MFU there is no chart, so the panel has the room; two cut it mid-sentence at
        # 120 columns; a small terminal keeps two, its loss chart needs the rows)
        box.styles.max_height = 4 if why is not None and not self.screen.has_class("narrow") else 2
        if why is not None:
            t.append(f"MFU n/a: {why}")
        else:
            t.append(f"MFU {fmt.pct(v.throughput.mfu)}")
            if b.mfu_delta is not None:
                t.append(f" ({100 * b.mfu_delta:+.1f} pp vs baseline)")
            t.append(f" · peak {fmt.flops(v.throughput.peak_flops)}\n")
            t.append(Text(str(v.throughput.peak_source or "")))
        self.query_one("#mfu-text", Static).update(t)
        series = v.throughput.mfu_series
        chart = self.query_one("#mfu-chart", Chart)
        chart.set_class(series is None, "empty")  # CSS hides it (and in small terminals anyway)
        self.set_class(series is None, "no-chart")  # and the panel shrinks to its text: room for the others
        if series is not None:
            lines = [Line("MFU %", Series(series.x, series.y * 100))]
            if b.mfu is not None:  # drawn first: this run's line goes over it where they meet
                lines.insert(0, Line("baseline", Series(b.mfu.x, b.mfu.y * 100), "baseline"))
            lines[:0] = [replace(ln, series=Series(ln.series.x, ln.series.y * 100)) for ln in overlay_lines(v, "mfu")
                         if ln.series is not None]
            chart.show_series("MFU %" + (" (and baseline)" if v.baseline else ""), lines, xkind=v.xaxis, yunit="%")


class MemoryPanel(Vertical):
    DEFAULT_CSS = "MemoryPanel > Static { height: auto; }"

    def compose(self):
        yield Static(id="mem-text")
        yield Chart(id="mem-chart", classes="small-chart")

    def show(self, v: View) -> None:
        h = v.memory.headroom
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
        host = " (host RAM)" if v.memory.source == "host" else ""
        if "memory" in v.header.cannot_give and h is None:
            t.append(f"\nnot in a {v.header.source}{host}")
        else:  # the longest form that fits: the total is never the part cut off
            text = self.query_one("#mem-text", Static)
            width = text.content_size.width if text.is_mounted and text.content_size.width else 10_000
            who = v.memory.worst or "n/a"
            used, peak, total = (fmt.gib(x) for x in (v.memory.used, v.memory.peak, v.memory.total))
            full = f"used {used} / peak {peak} / total {total}"
            same = all(x.endswith(" GiB") for x in (used, peak, total))
            short = f"used {used[:-4]} / peak {peak[:-4]} / total {total}" if same else full
            least = f"peak {peak[:-4]} / total {total}" if same else f"peak {peak} / total {total}"
            if len(f"{who}: {full}{host}") <= width:
                t.append("\n").append_text(Text(who)).append(f": {full}{host}")
            elif len(f"{who}: {short}{host}") <= width:
                t.append("\n").append_text(Text(who)).append(f": {short}{host}")
            else:  # the rank joins the first line if it fits there; the peak and the total stay
                if t.cell_len + 1 + len(who) <= width:
                    t.append(" ").append_text(Text(who))
                t.append(f"\n{short if len(short + host) <= width else least}{host}")
        if v.memory.devices is not None:
            t.append("\n").append_text(device_line(v.memory.devices))
        self.query_one("#mem-text", Static).update(t)
        chart = self.query_one("#mem-chart", Chart)
        chart.set_class(v.memory.series is None, "empty")
        self.set_class(v.memory.series is None, "no-chart")
        if v.memory.series is not None:
            worst = v.memory.worst
            who = worst if worst is not None else f"rank {v.chart_rank}"
            chart.show_series(f"headroom %, {who}",
                              [Line("headroom %", Series(v.memory.series.x, v.memory.series.y * 100))],
                              hlines=[100 * MEM_WARN, 100 * MEM_CRIT], xkind=v.xaxis, yunit="%")


class DataPanel(Static):
    def show(self, v: View) -> None:
        t = Text()
        if "data wait" in v.header.cannot_give and v.data.wait_frac is None:
            self.update(f"data wait: not in a {v.header.source}\ndevice queue depth n/a")
            self.set_class(False, "warning")
            return
        t.append(f"data wait {fmt.pct(v.data.wait_frac)} of step time")
        if v.data.worst_rank is not None:
            t.append(f" (worst: rank {v.data.worst_rank})")
        starving = v.data.wait_frac is not None and v.data.wait_frac > DATA_WARN
        if starving:
            t.append(f"  ! input-bound: above {DATA_WARN:.0%}")
        self.set_class(starving, "warning")
        t.append(f"\ndevice queue depth {fmt.num(v.data.queue_depth, 3)}")
        if v.data.queue_depth is not None and v.data.queue_rank is not None:
            t.append(f" (rank {v.data.queue_rank})")
        self.update(t)


def device_line(d) -> Text:
    """The NPUs under the memory panel: ``NPU x8: AICore 87 % (min 12 % h1 NPU 3) · mem max 97 % (h1 NPU 5)
    · 54 °C max · 1 not OK``, from a DeviceSummary (npu-smi, sampled by the writers)."""
    t = Text(f"NPU x{d.devices}: AICore {fmt.pct(d.aicore_mean)}")
    if d.aicore_min is not None and d.devices > 1:
        t.append(f" (min {fmt.pct(d.aicore_min.aicore)} ").append_text(Text(d.aicore_min.label)).append(")")
    if d.memory_max is not None:
        t.append(f" · mem max {fmt.pct(d.memory_max.memory_share)}")
    if d.temperature_max is not None:
        t.append(f" · {d.temperature_max.temperature:.0f} °C max")
    if d.unhealthy:
        t.append(f" · {len(d.unhealthy)} not OK", style="bold red")
    return t
