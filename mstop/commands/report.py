"""``mstop report``: PNG plots and a markdown page of one or more runs, readable after ``scp -r``.

Every plot has step on its x axis (runs are compared at equal steps), one line per run
directory, with restart boundaries (dotted), checkpoints (triangles) and alerts (red)
marked. ``report.md`` holds the comparison table exactly as ``mstop compare --format
markdown`` prints it for the same runs, then the pictures.

matplotlib is an optional dependency (``pip install ./writer '.[report]'`` in a clone): the monitor and
the writer never need it.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .. import __version__
from ..engine import figures
from ..engine.figures import Options
from ..engine.health import Health, Rules
from ..engine.reader import RunReader
from ..engine.smoothing import ema_series, evenly
from ..engine.store import Snapshot
from .compare import Comparison, Member, Run, render_markdown, short_labels

#: points per line (the store's min/max buckets keep spikes and NaNs however long the run)
POINTS = 2000
#: throughput and MFU vary row to row: a rolling median over this many rows is drawn over the raw values
ROLLING = 20
#: with more ranks than this, the per-rank plots draw only the worst ranks (and say so)
MAX_RANK_LINES = 8


@dataclass
class Plot:
    name: str  # file name without .png
    title: str
    caption: str


PLOTS = (
    Plot("loss", "loss (thin: raw, thick: smoothed)", "Loss of the lowest rank: raw and smoothed (EMA)."),
    Plot("lr", "learning rate", "Learning rate."),
    Plot("grad_norm", "gradient norm", "Global gradient norm."),
    Plot("tokens_per_s", "tokens/s", "Tokens per second (all ranks), per row of the lowest rank."),
    Plot("samples_per_s", "samples/s", "Samples per second (all ranks), per row of the lowest rank: the "
         "throughput of runs without tokens."),
    Plot("mfu", "MFU (%)", "Model FLOPs utilisation."),
    Plot("headroom", "memory headroom per rank (%)", "1 − peak / total memory, per rank (the worst ranks when "
         "there are many)."),
    Plot("data_wait", "data-wait share of step time per rank (%)", "data_wait / step_time per row, per rank "
         "(the worst ranks when there are many)."),
)


def available() -> str | None:
    """None when matplotlib can be imported, else what to install."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return ("mstop report draws with matplotlib: pip install matplotlib "
                "(in a clone: pip install ./writer '.[report]')")
    return None


#: a figure per second of a count: the file's column (tokens/s), else the count over the step time
PER_SECOND = {"tokens_per_s": "tokens", "samples_per_s": "samples"}


def _xy(store: Snapshot, r: int, col: str) -> tuple[np.ndarray, np.ndarray]:
    if col == "samples_per_s":  # no such column: derived (_column)
        return np.empty(0), np.empty(0)
    x, y = store.series(r, col, POINTS, x="step")
    ok = np.isfinite(y)
    return x[ok], y[ok]


#: a figure per row of a rank, from the read door: a column, or one derived from columns
Value = Callable[[RunReader, int], np.ndarray]


def _timeline(run: RunReader, r: int, value: Value) -> tuple[np.ndarray, np.ndarray]:
    """(step, value) of a rank's rows on its current timeline where the value is finite."""
    eff = run.timeline(r)
    with np.errstate(all="ignore"):
        y = value(run, r)[eff]
    x = run.column(r, "step", eff)
    ok = np.isfinite(y)
    return x[ok], y[ok]


def _column(col: str) -> Value:
    """A column's values; tokens/s derived from tokens and step time when the file has no such column,
    samples/s always (no file has its column)."""
    def value(run: RunReader, r: int) -> np.ndarray:
        y = run.column(r, col) if col != "samples_per_s" else None
        if col in PER_SECOND and (y is None or np.isnan(y).all()):
            return run.column(r, PER_SECOND[col]) / run.column(r, "step_time")
        return y
    return value


def _ratio(top: str, bottom: str, minus_from_one: bool = False) -> Value:
    """A share of two columns per row (``1 - top/bottom`` with ``minus_from_one``: memory headroom)."""
    def value(run: RunReader, r: int) -> np.ndarray:
        with np.errstate(all="ignore"):
            q = run.column(r, top) / run.column(r, bottom)
        return 1.0 - q if minus_from_one else q
    return value


def _rolling_median(store: Snapshot, r: int, col: str, value: Value | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The rolling median of a column (or of ``value`` where the column is empty) over ROLLING rows of the
    rank's current timeline, downsampled to POINTS."""
    import pandas as pd

    run = RunReader(store)
    x, y = _timeline(run, r, _column(col))
    if value is not None and not len(x):
        x, y = _timeline(run, r, value)
    med = pd.Series(y).rolling(ROLLING, min_periods=1).median().to_numpy()
    sel = evenly(len(x), POINTS)
    return x[sel], med[sel]


def _per_rank(store: Snapshot, value: Value, worst_low: bool) -> tuple[list[tuple[int, Any, Any]], int]:
    """Per rank (step, value) lines over the current timeline, downsampled; with many ranks only the
    MAX_RANK_LINES worst (lowest mean when ``worst_low``). Returns the lines and how many ranks had values."""
    lines = []
    run = RunReader(store)
    for r in run.with_rows():
        x, y = _timeline(run, r, value)
        if len(x):
            sel = evenly(len(x), POINTS)
            lines.append((r, x[sel], y[sel]))
    n = len(lines)
    if n > MAX_RANK_LINES:  # the worst first (the legend reads worst to better)
        lines.sort(key=lambda t: float(np.mean(t[2])), reverse=not worst_low)
        lines = lines[:MAX_RANK_LINES]
    return lines, n


def host_headroom(store: Snapshot) -> tuple[list[tuple[str, Any, Any]], int]:
    """Per host (step, headroom) lines when ranks report host memory: the host's ranks' peaks added up at
    each step they all have, against the host's total, as the compare table and the monitor count it (a
    rank's own share of a shared host reads far too healthy)."""
    hosts: dict[str, list[int]] = {}
    run = RunReader(store)
    for r in run.with_rows():
        start = run.start(r)
        if start:
            hosts.setdefault(str(start.get("host")), []).append(r)
    lines = []
    for host, ranks in sorted(hosts.items()):
        series = [_timeline(run, r, _column("mem_peak")) for r in ranks]
        totals = [_timeline(run, r, _column("mem_total")) for r in ranks]
        common = series[0][0]
        for x, _ in series[1:]:
            common = np.intersect1d(common, x)
        if not len(common):
            continue
        used = sum(y[np.searchsorted(x, common)] for x, y in series)
        total = max(float(np.max(y)) for _, y in totals if len(y)) if any(len(y) for _, y in totals) else np.nan
        sel = evenly(len(common), POINTS)
        lines.append((f"host {host} ({len(ranks)} ranks)", common[sel], (1.0 - used / total)[sel]))
    return lines, len(lines)


def _marks(ax: Any, store: Snapshot, alerts: list[Any], color: str) -> None:
    """Restart boundaries (dotted), checkpoints (triangles on the x axis), alerts (red)."""
    run = RunReader(store)
    restarts = sorted({seg.first_step for r in run.ranks for seg in run.segments(r)[1:]})
    for step in restarts[:50]:  # one line per restart step, however many ranks restarted there
        ax.axvline(step, color=color, linestyle=":", linewidth=1)
    r0 = figures.lowest_rank(store)
    if r0 is not None:
        steps = [c["step"] for c in run.events(r0, "checkpoint") if isinstance(c.get("step"), (int, float))]
        if steps:
            ax.plot(steps, [0] * len(steps), linestyle="none", marker="^", color=color, markersize=6,
                    transform=ax.get_xaxis_transform(), clip_on=False)
        step_col = run.column(r0, "step")
        nan_steps = sorted({float(step_col[i]) for i, c, _ in run.nonfinite(r0) if c == "loss"})
        for s in nan_steps[:50]:
            ax.axvline(s, color="red", linewidth=0.8, alpha=0.6)
    for step in sorted({a.step for a in alerts if a.step is not None})[:50]:
        ax.axvline(step, color="red", linestyle="--", linewidth=0.8, alpha=0.5)


def _at_end(store: Snapshot, opts: Options, rules: Rules | None) -> tuple[list[Any], list[Any]]:
    """The alerts and the incidents as of the run's last row (a report is written afterwards: "stalled" or
    "dead" must come from the files, not from how long ago the run ended)."""
    last = figures.last_row_time(store)
    if last is None:
        return [], []
    at_end = Options(peak_flops=opts.peak_flops, ema_weight=opts.ema_weight, clock=lambda: last)
    health = Health(rules or Rules())
    alerts = health.alerts(store, at_end)
    return alerts, health.incidents(store, at_end, alerts)


def replace_file(path: str, write: Callable[[str], None]) -> None:
    """Write ``path`` as a new file: ``write`` fills a temporary file made in the same folder (O_EXCL: never
    an existing name), which then replaces ``path``'s directory entry. A link planted at ``path`` is replaced,
    never written through (its target, another user's file, stays as it was)."""
    import tempfile

    folder, name = os.path.split(path)
    fd, tmp = tempfile.mkstemp(dir=folder or ".", prefix=f".{name}.", suffix=os.path.splitext(name)[1])
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


#: how a plot draws one run: (axes, label, member, colour) -> whether it had anything to draw
Draw = Callable[[Any, str, Member, str], bool]


def write_report(runs: list[Run], comparison: Comparison, out: str, *, opts: Options | None = None,
                 rules: Rules | None = None) -> list[str]:
    """Write the PNGs and ``report.md`` into ``out``; return the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    opts = opts or Options()
    os.makedirs(out, exist_ok=True)
    flat = [m for r in runs for m in r.members]  # one line each, labelled as the table labels runs
    # "$" would start matplotlib's mathtext (an unbalanced one is an error): names are shown literally
    members: list[tuple[str, Member]] = [(label.replace("$", r"\$"), m)
                                         for label, m in zip(short_labels([[m.spec] for m in flat]), flat)]
    ends = {id(m): _at_end(m.store, opts, rules) for _, m in members}
    alerts = {k: a for k, (a, _) in ends.items()}
    incidents = {k: i for k, (_, i) in ends.items()}
    notes: dict[str, list[str]] = {p.name: [] for p in PLOTS}
    draws = _draws(opts)
    pngs = {plot.name: _figure(plt, plot, draws[plot.name], members, alerts, notes[plot.name], out) for plot in PLOTS}
    written = [p for p in pngs.values() if p is not None]
    ledgers = [(label, _ledger(m, opts)) for label, m in members]
    bar = _goodput_bars(plt, ledgers, out)
    if bar is not None:
        written.append(bar)
    profiles = [(label, figures.latest_profile(m.store)) for label, m in members]
    pbar = _profile_bars(plt, profiles, out)
    if pbar is not None:
        written.append(pbar)
    md = os.path.join(out, "report.md")
    text = (_markdown(runs, comparison, alerts, incidents, members, notes, {k for k, p in pngs.items() if p})
            + _goodput_markdown(ledgers, bar is not None) + profile_markdown(profiles, pbar is not None))

    def markdown(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)

    replace_file(md, markdown)
    written.append(md)
    return written


def _ledger(m: Member, opts: Options) -> Any:
    from ..engine.goodput import ledger

    snap = m.store.snapshot()
    return ledger(snap, opts)


#: the goodput bar's colours, bucket by bucket (productive first, in green)
BUCKET_COLORS = ("#2ca02c", "#ff7f0e", "#9467bd", "#d62728", "#8c564b", "#7f7f7f", "#1f1f1f", "#bcbd22")


def _stacked_bars(plt: Any, bars: list[tuple[str, dict[str, float]]], colors: dict[str, str], title: str,
                  path: str) -> str | None:
    """A PNG of one horizontal bar per run, split into the named parts (% each, in ``colors``' order);
    None when there is no bar to draw (no empty picture is written)."""
    if not bars:
        return None
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.5 * len(bars)), dpi=100)
    for y, (_, parts) in enumerate(bars):
        left = 0.0
        for k, color in colors.items():
            ax.barh(y, parts[k], left=left, color=color, label=k.replace("_", " ") if y == 0 else None)
            left += parts[k]
    ax.set_yticks(range(len(bars)), [label for label, _ in bars], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, ncol=len(colors), loc="upper center", bbox_to_anchor=(0.5, -0.12), frameon=False)
    fig.tight_layout()
    replace_file(path, lambda tmp: fig.savefig(tmp, bbox_inches="tight"))
    plt.close(fig)
    return path


def _goodput_bars(plt: Any, ledgers: list[tuple[str, Any]], out: str) -> str | None:
    """goodput.png: each run's wall time split into the ledger's buckets (as shares, so runs of different
    lengths compare)."""
    from ..engine.goodput import BUCKETS

    bars = [(label, {k: 100.0 * g.seconds[k] / g.wall for k in BUCKETS}) for label, g in ledgers
            if g is not None and g.wall > 0]
    return _stacked_bars(plt, bars, dict(zip(BUCKETS, BUCKET_COLORS)),
                         "Where the time went: % of each job's wall time (goodput = productive)",
                         os.path.join(out, "goodput.png"))


#: profile.png's parts and colours (compute + communication not overlapped + idle = the step)
PROFILE_COLORS = {"compute": "#2ca02c", "comm_not_overlapped": "#d62728", "idle": "#7f7f7f"}


def _profile_bars(plt: Any, profiles: list[tuple[str, Any]], out: str) -> str | None:
    """profile.png: each run's step time (its newest profile) split into compute, communication not
    overlapped and idle."""
    bars = [(label, {k: 100.0 * p[k] for k in PROFILE_COLORS}) for label, p in profiles if p is not None]
    return _stacked_bars(plt, bars, PROFILE_COLORS,
                         "Where a step's time goes: % of the profiled steps (the newest profile of each run)",
                         os.path.join(out, "profile.png"))


def profile_markdown(profiles: list[tuple[str, Any]], drawn: bool) -> str:
    if not drawn:
        return ""
    out = ["", "## Step breakdown (profiles)", "", "| run | rank | steps | compute | comm not overlapped | "
           "overlapped | idle | top operators |", "|---|---|---|---|---|---|---|---|"]
    for label, p in profiles:
        if p is None:
            continue
        ops = ", ".join(str(o.get("name")) for o in p["top_ops"][:3])
        out.append(f"| {label.replace('|', '/')} | {p['rank']} | {p['first_step']}-{p['last_step']} | "
                   + " | ".join(f"{100 * p[k]:.1f} %" for k in ("compute", "comm_not_overlapped", "overlapped", "idle"))
                   + f" | {ops.replace('|', '/')} |")
    out += ["", "![Where a step's time goes](profile.png)", ""]
    return "\n".join(out)


def _goodput_markdown(ledgers: list[tuple[str, Any]], drawn: bool) -> str:
    """The report's goodput section: a table of every bucket per run, and the bar."""
    from .. import fmt
    from ..engine.goodput import BUCKETS

    out = ["", "## Goodput", "", "Each run's wall time, first start to its end (or now), split into exclusive "
           "buckets (see the README's \"Goodput\").", "",
           "| run | wall | goodput | " + " | ".join(k.replace("_", " ") for k in BUCKETS) + " |",
           "|---|---|---|" + "---|" * len(BUCKETS)]
    for label, g in ledgers:
        name = label.replace("|", "\\|").replace("\\$", "$")
        if g is None:
            out.append(f"| {name} | n/a | n/a |" + " |" * len(BUCKETS))
            continue
        cells = [fmt.duration(g.seconds[k]) for k in BUCKETS]
        out.append(f"| {name} | {fmt.duration(g.wall)} | {fmt.pct(g.goodput)} | " + " | ".join(cells) + " |")
    out += ["", "![Where the time went](goodput.png)" if drawn else "Not drawn: no run has a wall time.", ""]
    return "\n".join(out)


def _figure(plt: Any, plot: Plot, draw: Draw, members: list[tuple[str, Member]], alerts: dict[int, list[Any]],
            notes: list[str], out: str) -> str | None:
    """One PNG: every run's line (and its alerts' marks), a note for each run without data; its path. None
    when no run has data: an empty picture is not written (report.md says it was not drawn)."""
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, ax = plt.subplots(figsize=(10, 4.5), dpi=100)
    drawn = False
    for i, (label, m) in enumerate(members):
        color = colors[i % len(colors)]
        snap = m.store.snapshot()
        if draw(ax, label, m, color):
            drawn = True
            _marks(ax, snap, alerts[id(m)], color)
        else:
            notes.append(f"{label}: no {plot.name.replace('_', ' ')} data")
    ax.set_title(plot.title + (f"   ({'; '.join(notes)})" if notes else ""), fontsize=10)
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
    if not drawn:
        plt.close(fig)
        return None
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    path = os.path.join(out, plot.name + ".png")
    replace_file(path, fig.savefig)
    plt.close(fig)
    return path


def _draws(opts: Options) -> dict[str, Draw]:
    """How each plot draws a run."""
    return {
        "loss": _draw_loss(opts),
        "lr": _draw_column("lr"),
        "grad_norm": _draw_column("grad_norm"),
        "tokens_per_s": _draw_column("tokens_per_s", smooth=True),
        "samples_per_s": _draw_column("samples_per_s", smooth=True),
        "mfu": _draw_column("mfu", 100.0, smooth=True, value=lambda run, r: run.mfu_rows(r, opts)),
        "headroom": _draw_per_rank(_ratio("mem_peak", "mem_total", minus_from_one=True), True),
        "data_wait": _draw_per_rank(_ratio("data_wait", "step_time"), False),
    }


def _draw_loss(opts: Options) -> Draw:
    """The raw loss, faint, and its smoothed line (the monitor's EMA)."""
    def draw(ax: Any, label: str, m: Member, color: str) -> bool:
        r0 = figures.lowest_rank(m.store)
        if r0 is None:
            return False
        x, y = _xy(m.store, r0, "loss")
        idx, ema = ema_series(m.store, r0, opts.ema_weight)
        if not len(x) and not len(idx):
            return False
        ax.plot(x, y, color=color, linewidth=0.6, alpha=0.35)
        if len(idx):
            sel = evenly(len(idx), POINTS)
            ax.plot(RunReader(m.store).column(r0, "step", idx[sel]), ema[sel], color=color, linewidth=1.8,
                    label=f"{label} (smoothed {opts.ema_weight:g})")
        return True
    return draw


def _draw_column(col: str, scale: float = 1.0, smooth: bool = False, value: Value | None = None) -> Draw:
    """A column of the lowest rank by step; with ``smooth`` faint, under its rolling median. ``value``
    gives the figure where the column may be empty (MFU derived as the table derives it)."""
    def draw(ax: Any, label: str, m: Member, color: str) -> bool:
        r0 = figures.lowest_rank(m.store)
        if r0 is None:
            return False
        x, y = _xy(m.store, r0, col)
        run = RunReader(m.store)
        if col in PER_SECOND and not len(x):  # derived from the count and step time
            x, y = _timeline(run, r0, _column(col))
        if value is not None and not len(x):
            x, y = _timeline(run, r0, value)
            sel = evenly(len(x), POINTS) if len(x) else np.empty(0, np.int64)
            x, y = x[sel], y[sel]
        if not len(x):
            return False
        if not smooth:
            ax.plot(x, y * scale, color=color, linewidth=1.0, label=label)
            return True
        ax.plot(x, y * scale, color=color, linewidth=0.5, alpha=0.3)
        mx, my = _rolling_median(m.store, r0, col, value)
        ax.plot(mx, my * scale, color=color, linewidth=1.6, label=f"{label} (median of {ROLLING} rows)")
        return True
    return draw


def _draw_per_rank(value: Value, worst_low: bool) -> Draw:
    """A per-rank share (headroom, data wait) for the worst ranks, the worst one bold."""
    def draw(ax: Any, label: str, m: Member, color: str) -> bool:
        if worst_low and figures.run_meta(m.store).get("memory_source") == "host":
            lines, n = host_headroom(m.store)
            what = "hosts"
        else:
            lines, n = _per_rank(m.store, value, worst_low)
            lines = [(f"rank {r}", x, y) for r, x, y in lines]
            what = "ranks"
        for k, (who, x, y) in enumerate(lines):
            worst = f" (the {len(lines)} worst of {n:,} {what})" if k == 0 and n > len(lines) else ""
            ax.plot(x, 100 * y, color=color, linewidth=1.2 if k == 0 else 0.8, alpha=0.9 if k == 0 else 0.5,
                    label=f"{label}: {who}{worst}")
        return bool(lines)
    return draw


def _markdown(runs: list[Run], comparison: Comparison, alerts: dict[int, list[Any]],
              incidents: dict[int, list[Any]], members: list[tuple[str, Member]], notes: dict[str, list[str]],
              drawn: set[str] | None = None) -> str:
    def esc(s: str) -> str:
        return str(s).replace("|", "\\|").replace("\n", " ")

    out = ["# mstop report", "", f"Written by mstop {__version__}. Runs (the first is the baseline):", ""]
    for r in runs:
        cfg = r.members[0].config()
        out.append(f"- {esc(r.label)}: {', '.join(esc(m.spec) for m in r.members)}"
                   + (f" — run_name {esc(cfg['run_name'])}" if cfg.get("run_name") else ""))
    out += ["", "## Comparison at equal steps", "", render_markdown(comparison).rstrip("\n"), "", "## Alerts", ""]
    any_alert = False
    for label, m in members:
        for a in alerts[id(m)]:
            any_alert = True
            out.append(f"- {esc(label)}: {a.kind} at step {a.step}: {esc(a.message)}")
    if not any_alert:
        out.append("None active at the end of the files.")
    out += ["", "## Incidents", "", "Every alert that fired in each run's history, oldest first.", ""]
    any_incident = False
    for label, m in members:
        for i in incidents[id(m)]:
            any_incident = True
            where = "job" if i.rank is None else f"rank {i.rank}"
            out.append(f"- {esc(label)}: {i.kind} ({where}, {i.steps()}{', active' if i.active else ''}): "
                       f"{esc(i.message)}")
    if not any_incident:
        out.append("None.")
    out += ["", "## Rows", ""]
    for label, m in members:
        st = m.store
        cells, why = figures.refused_cells(st)
        out.append(f"- {esc(label)}: {st.rows:,} rows read, {st.bad_rows:,} bad, "
                   f"{figures.dropped_rows(st):,} reported dropped by the writer"
                   + (f", {cells:,} cells refused ({esc(why or '')})" if cells else "")
                   + (f"; writer failed: {esc(figures.writer_errors(st)[0])}" if figures.writer_errors(st) else ""))
    out += ["", "## Plots", "", "x: step. Dotted lines: restarts; triangles: checkpoints; red: NaN/Inf loss and "
            "alerts.", ""]
    for p in PLOTS:
        if drawn is not None and p.name not in drawn:  # no run had data: no picture, and it says so
            out += [f"### {p.title}", "", f"Not drawn: no run has {p.name.replace('_', ' ')} data.", ""]
            continue
        out += [f"### {p.title}", "", p.caption + (f" Not drawn: {esc('; '.join(notes[p.name]))}."
                                                   if notes[p.name] else ""), "", f"![{p.title}]({p.name}.png)", ""]
    return "\n".join(out)
