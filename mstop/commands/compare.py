"""``mstop compare``: runs side by side over one window of steps (never of wall time).

Two runs with different throughput are at different steps at the same wall time, so
their losses are not comparable there; at the same step they are. Every figure here is
the engine's own definition (:mod:`mstop.engine.figures`) evaluated over the rows with
``first <= step <= last`` instead of the recent window.

A run is a group of one or more repeats (``base-1,base-2``): a figure of a group is the
mean over its members, and a difference smaller than the spread (max − min) of the
baseline's members or of the run's is marked "within noise".
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .. import fmt
from ..engine import figures
from ..engine.figures import Options
from ..engine.reader import RunReader
from ..engine.store import Snapshot
from ..safe import clean
from ..sources.protocol import Connection

#: warm-up skipped at the start of the default window: the first 10 % of the common steps or
#: WARMUP_STEPS steps, whichever is more (compilation and warm-up distort the first steps),
#: but never more than half of the common steps
WARMUP_STEPS = 20
WARMUP_FRACTION = 0.10
#: "loss at step N" is the mean loss over steps N − LOSS_HALF_WIDTH .. N + LOSS_HALF_WIDTH, all ranks
LOSS_HALF_WIDTH = 10

#: the compared figures: key (public: JSON/CSV), column title, how a value is shown
FIGURES: tuple[tuple[str, str, Callable[[float | None], str]], ...] = (
    ("step_time", "median step time", fmt.ms),
    ("tokens_per_s", "tokens/s", fmt.si),
    ("samples_per_s", "samples/s", fmt.si),  # the throughput of runs without tokens (batch 32 against 64)
    ("mfu", "MFU", fmt.pct),
    ("mem_headroom", "min headroom", fmt.pct),
    ("mem_peak", "peak memory", fmt.gib),
    ("data_wait_frac", "data wait", fmt.pct),
    ("loss_at", "loss at step N", lambda v: fmt.num(v, 5)),
    ("goodput", "goodput", fmt.pct),  # of the whole job's wall time, not the window (mstop.engine.goodput)
    # from the profile inside the window or nearest to it (mstop_writer.profiling; the caption says which)
    ("comm_share", "comm share", fmt.pct),
    ("compute_share", "compute share", fmt.pct),
    ("idle_share", "idle share", fmt.pct),
)
KEYS = tuple(k for k, _, _ in FIGURES)
#: what the "What changed" list compares between runs (from each run's start event)
CONFIG_KEYS = ("run_name", "note", "argv", "env", "parallel_mode", "world_size", "git_commit")


class CompareError(ValueError):
    """A comparison that cannot be made at all (no common steps, a bad --steps): said in one sentence."""


def split_group(arg: str) -> list[str]:
    """The members of one run argument: ``a,b`` is a group of repeats; an existing path that holds
    a comma is one run."""
    if "," in arg and not os.path.exists(arg):
        return [p for p in arg.split(",") if p]
    return [arg]


def short_labels(groups: list[list[str]]) -> list[str]:
    """Run labels for tables: local paths without the directory they all share (``runs/a``, ``runs/b``
    → ``a``, ``b``); ``host:/path`` sources as given."""
    local = [os.path.abspath(s) for g in groups for s in g if not _remote(s)]
    prefix = os.path.commonpath([os.path.dirname(p) for p in local]) if local else ""

    def short(spec: str) -> str:
        if _remote(spec) or not prefix:
            return spec
        return os.path.relpath(os.path.abspath(spec), prefix)

    return [clean(",".join(short(s) for s in g), 256) for g in groups]  # names from the disk: no control codes


def _remote(spec: str) -> bool:
    from ..sources import SourceError, check_spec

    try:
        return check_spec(spec, exists=False) is not None
    except SourceError:
        return False


def read_runs(groups: list[list[str]], *, connection: Connection | None = None) -> list[Run]:
    """Each group of specs (one run, or its repeats) read once, labelled by :func:`short_labels`; a source
    that cannot be read raises SourceError (a ValueError: mstop compare says it and exits 2)."""
    from ..sources import read_once

    runs = []
    for label, group in zip(short_labels(groups), groups):
        members = [Member(spec, read_once(spec, connection=connection or Connection()))
                   for spec in group]
        runs.append(Run(label, members))
    return runs


def parse_steps(text: str) -> tuple[int, int]:
    """``A:B`` (inclusive) → (A, B)."""
    a, sep, b = text.partition(":")
    try:
        first, last = int(a), int(b)
    except ValueError:
        raise CompareError(f"--steps {text!r}: expected A:B with whole steps, e.g. 400:500") from None
    if not sep or first > last or first < 0:
        raise CompareError(f"--steps {text!r}: expected A:B with 0 <= A <= B")
    return first, last


@dataclass
class Member:
    """One run directory (or ``host:/path``) and what was read from it."""

    spec: str
    store: Snapshot

    def __post_init__(self) -> None:
        self.spec = clean(self.spec, 4096)  # a directory's name is shown: no control codes

    def steps(self) -> tuple[float, float] | None:
        """First and last step on the run's current timeline over all ranks (None: no rows)."""
        lo, hi = math.inf, -math.inf
        run = RunReader(self.store)
        for r in run.with_rows():
            st = run.column(r, "step", timeline=True)
            if len(st):
                lo, hi = min(lo, float(st.min())), max(hi, float(st.max()))
        return (lo, hi) if lo <= hi else None

    def config(self) -> dict[str, Any]:
        """The recorded configuration: the lowest rank's latest start event."""
        run = RunReader(self.store)
        for r in run.ranks:
            start = run.start(r)
            if start:
                return {k: start.get(k) for k in CONFIG_KEYS}
        return {k: None for k in CONFIG_KEYS}


@dataclass
class Run:
    """A run argument: one member, or a group of repeats."""

    label: str
    members: list[Member]


@dataclass
class Cell:
    """One figure of one run: the group's mean, its spread, its change against the baseline."""

    value: float | None = None
    spread: float | None = None  # max − min over the members (None with one member)
    change_pct: float | None = None
    within_noise: bool = False
    message: str | None = None  # why there is no value ("no data in 400:500")


@dataclass
class Comparison:
    first: int
    last: int
    loss_at: int
    warmup: str  # how the window was chosen, for people
    runs: list[Run]
    cells: list[dict[str, Cell]]
    notes: list[list[str]]  # per run: restarts inside the window, short runs, missing columns
    changes: list[list[str]] = field(default_factory=list)  # per run: what differs from the baseline
    loss_last: int | None = None  # the last step the loss mean reads: loss_at + LOSS_HALF_WIDTH, or where runs end
    #: per run: where its step-time shares come from ("base-1: the profile of steps 200-210")
    sources: list[list[str]] = field(default_factory=list)

    @property
    def loss_steps(self) -> tuple[int, int]:
        """The steps the "loss at step N" mean covers, as far as every run goes (a run that ends before them
        has no loss there: its cell says so, and the range is not cut below its start: never ``690:512``)."""
        lo, hi = self.loss_at - LOSS_HALF_WIDTH, self.loss_at + LOSS_HALF_WIDTH
        if self.loss_last is not None and lo <= self.loss_last < hi:
            hi = self.loss_last
        return lo, hi


def member_figures(m: Member, first: int, last: int, loss_at: int,
                   opts: Options) -> tuple[dict[str, Cell], list[str], list[str]]:
    """The figures of one member over steps first..last (inclusive), notes about them, and where its
    step-time shares come from."""
    notes: list[str] = []
    cells = {k: Cell() for k in KEYS}
    store = m.store
    span = m.steps()
    if span is None:
        for c in cells.values():
            c.message = "empty run: no rows"
        return cells, [f"{m.spec}: empty run (no rows)"], []
    store = store.snapshot()
    per = _per_rank_figures(store, first, last, opts)
    if not per["ranks"]:
        for c in cells.values():
            c.message = f"no data in {first}:{last}"
        notes.append(f"{m.spec}: no data in {first}:{last} (its steps: {span[0]:.0f}-{span[1]:.0f})")
    else:
        if span[1] < last:
            notes.append(f"{m.spec}: fewer steps than asked: ends at step {span[1]:.0f}")
        if span[0] > first:
            notes.append(f"{m.spec}: starts at step {span[0]:.0f}, after {first}")
        run = RunReader(store)
        restarts = sorted({seg.first_step for r in run.ranks for seg in run.segments(r)[1:]
                           if first < seg.first_step <= last})
        if restarts:
            notes.append(f"{m.spec}: restart inside the window at step "
                         f"{', '.join(f'{s:.0f}' for s in restarts[:5])} (the figures use the rows of the "
                         "current timeline; the first steps after a restart include its warm-up)")
        cells["step_time"].value = figures.median(per["step_time"])
        cells["tokens_per_s"].value = figures.median(per["tokens_per_s"])
        cells["samples_per_s"].value = figures.median(per["samples_per_s"])
        cells["mfu"].value = figures.median(per["mfu"])
        heads = figures.headrooms_of(figures.RankMemory.joined(per["memory"]))
        cells["mem_headroom"].value = min(heads.values()) if heads else None
        peaks = [x for x in per["mem_peak"] if not math.isnan(x)]
        cells["mem_peak"].value = max(peaks) if peaks else None
        dwf = per["data_wait_frac"]
        cells["data_wait_frac"].value = float(np.nanmax(dwf)) if (~np.isnan(dwf)).any() else None
        no_mfu = figures.mfu_missing(store, opts) or "none in this window"
        for key, why in (("tokens_per_s", "no tokens column"), ("samples_per_s", "no samples column"),
                         ("mfu", no_mfu),
                         ("mem_headroom", "no memory columns"), ("mem_peak", "no memory columns"),
                         ("data_wait_frac", "no data_wait column"), ("step_time", "no step_time column")):
            if cells[key].value is None:
                cells[key].message = f"n/a: {why}"
    source = _job_figures(cells, m, first, last, opts)
    cells["loss_at"] = _loss_at(store, loss_at)
    return cells, notes, [source] if source is not None else []


def _loss_at(store: Snapshot, loss_at: int) -> Cell:
    """The mean finite loss over steps loss_at ± LOSS_HALF_WIDTH on the current timeline, all ranks; a loss
    that is NaN/Inf there is said beside it (a run gone NaN never reads as a healthy figure)."""
    lo, hi = loss_at - LOSS_HALF_WIDTH, loss_at + LOSS_HALF_WIDTH
    vals = []
    bad = 0
    run = RunReader(store)
    for r in run.with_rows():
        step = run.column(r, "step", timeline=True)
        eff = run.timeline(r)
        at = (step >= lo) & (step <= hi)
        v = run.column(r, "loss", timeline=True)[at]
        literal = {i for i, c, _ in run.nonfinite(r) if c == "loss"}  # a cell that said NaN, not an empty one
        bad += sum(1 for i in np.flatnonzero(eff)[at].tolist() if i in literal) if literal else 0
        vals.append(v[np.isfinite(v)])
    got = np.concatenate(vals) if vals else np.empty(0)
    said = f"{bad} NaN/Inf loss{'es' if bad != 1 else ''} in steps {lo}:{hi}" if bad else None
    if not len(got):
        return Cell(message=said or f"no loss in steps {lo}:{hi}")
    return Cell(value=float(got.mean()), message=said)


def _job_figures(cells: dict[str, Cell], m: Member, first: int, last: int, opts: Options) -> str | None:
    """The whole job's goodput, and the step-time shares of the profile inside the window or nearest to it;
    which profiles those were (None without one)."""
    from ..engine.goodput import ledger

    store = m.store
    g = ledger(store, opts)
    cells["goodput"].value = g.goodput if g is not None else None
    if cells["goodput"].value is None:
        cells["goodput"].message = "n/a: no wall time"
    prof = figures.profile_shares(store, first, last)
    for key, part in (("comm_share", "comm_not_overlapped"), ("compute_share", "compute"), ("idle_share", "idle")):
        cells[key].value = prof[part] if prof else None
        if prof is None:
            cells[key].message = "n/a: no profile"
    if prof is None:
        return None
    return f"{m.spec}: shares from the profile of steps " + ", ".join(f"{a}-{b}" for a, b in prof["steps"][:4])


#: the window's tables are built for a few ranks at a time, at most this many cells each: a run of a million
#: steps on 64 ranks would otherwise need 64 x 1,000,000 x 7 float64 (3.6 GB) at once
CHUNK_CELLS = 4_000_000


def _chunks(widths: dict[int, int]) -> Iterator[list[int]]:
    """Consecutive ranks whose padded table (ranks x the widest) stays within CHUNK_CELLS (at least one rank)."""
    chunk: list[int] = []
    widest = 0
    for r, n in widths.items():
        if chunk and max(widest, n) * (len(chunk) + 1) > CHUNK_CELLS:
            yield chunk
            chunk, widest = [], 0
        chunk.append(r)
        widest = max(widest, n)
    if chunk:
        yield chunk


def _per_rank_figures(store: Snapshot, first: int, last: int, opts: Options) -> dict[str, Any]:
    """Per-rank figures over steps first..last, computed a chunk of ranks at a time (bounded memory)."""
    rows = figures.step_rows(store, first, last)  # ranks without rows in the window are left out
    out: dict[str, Any] = {"ranks": [], "step_time": [], "tokens_per_s": [], "samples_per_s": [], "mfu": [],
                           "data_wait_frac": [], "mem_peak": [], "memory": []}
    for chunk in _chunks({r: len(idx) for r, idx in rows.items()}):
        w = figures.rows_window(store, {r: rows[r] for r in chunk})
        out["ranks"] += w.ranks
        out["step_time"] += list(figures.rank_step_time(w))
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # ranks without memory
            peak = w.cols["mem_peak"]
            out["mem_peak"] += list(np.nanmax(np.where(np.isnan(peak), -np.inf, peak), axis=1))
        out["tokens_per_s"] += list(figures.rank_tokens_per_s(store, w))
        out["samples_per_s"] += list(figures.rank_samples_per_s(store, w))
        out["mfu"] += list(figures.rank_mfu(store, opts, w))
        out["data_wait_frac"] += list(figures.rank_data_wait_frac(store, w))
        out["memory"].append(figures.rank_memory(w))
    out["mem_peak"] = [x if math.isfinite(x) else math.nan for x in out["mem_peak"]]
    for k in ("step_time", "tokens_per_s", "samples_per_s", "mfu", "data_wait_frac"):
        out[k] = np.array(out[k], dtype=np.float64)
    return out


def default_window(runs: list[Run]) -> tuple[int, int, str]:
    """The steps every member of every run has covered, minus the warm-up (see WARMUP_*)."""
    spans = [(m.spec, m.steps()) for r in runs for m in r.members]
    covered = [s for _, s in spans if s is not None]
    if not covered:
        raise CompareError("no run has any rows")
    first, last = max(s[0] for s in covered), min(s[1] for s in covered)
    if first > last:
        listing = ", ".join(f"{spec} {s[0]:.0f}-{s[1]:.0f}" for spec, s in spans if s is not None)
        raise CompareError(f"no steps that every run covers ({listing}): pass --steps A:B")
    common = int(last) - int(first) + 1
    skip = max(WARMUP_STEPS, math.ceil(WARMUP_FRACTION * common))
    if skip > common // 2:
        return int(first), int(last), (f"steps every run covers: {first:.0f}:{last:.0f} "
                                       f"(too few to skip a warm-up of {skip} steps: none skipped)")
    return int(first) + skip, int(last), (f"steps every run covers: {first:.0f}:{last:.0f}, "
                                          f"warm-up skipped: the first {skip}")


def compare(runs: list[Run], *, steps: tuple[int, int] | None = None, loss_at: int | None = None,
            opts: Options | None = None) -> Comparison:
    """Compare ``runs`` (the first is the baseline) over ``steps`` (default: :func:`default_window`)."""
    opts = opts or Options()
    if steps is not None:
        first, last = steps
        how = f"steps {first}:{last} (as asked)"
    else:
        first, last, how = default_window(runs)
    n = last if loss_at is None else loss_at
    per_run: list[dict[str, Cell]] = []
    notes: list[list[str]] = []
    sources: list[list[str]] = []
    raw: list[list[dict[str, Cell]]] = []
    for run in runs:
        got = [member_figures(m, first, last, n, opts) for m in run.members]
        raw.append([g[0] for g in got])
        notes.append([x for g in got for x in g[1]])
        sources.append([x for g in got for x in g[2]])
    for cells in raw:
        merged = {}
        for k in KEYS:
            vals = [c[k].value for c in cells if c[k].value is not None]
            cell = Cell()
            if vals:
                cell.value = float(np.mean(vals))
                cell.spread = float(max(vals) - min(vals)) if len(vals) > 1 else None
                if len(vals) < len(cells):
                    cell.message = f"{len(vals)} of {len(cells)} repeats"
                else:  # what a member said beside its figure (NaN losses in the window)
                    said = list(dict.fromkeys(c[k].message for c in cells if c[k].message))
                    cell.message = "; ".join(said) or None
            else:
                cell.message = next((c[k].message for c in cells if c[k].message), "n/a")
            merged[k] = cell
        per_run.append(merged)
    base = per_run[0]
    for cells in per_run[1:]:
        for k in KEYS:
            b, c = base[k], cells[k]
            if b.value is None or c.value is None:
                continue
            if b.value != 0:
                c.change_pct = 100.0 * (c.value - b.value) / abs(b.value)
            noise = max(b.spread or 0.0, c.spread or 0.0)
            c.within_noise = (b.spread is not None or c.spread is not None) and abs(c.value - b.value) < noise
    base_cfg = runs[0].members[0].config()
    changes = [[]] + [_config_diff(base_cfg, r.members[0].config()) for r in runs[1:]]
    ends = [figures.step(m.store) for r in runs for m in r.members]
    loss_last = min((e for e in ends if e is not None), default=None)
    return Comparison(first, last, n, how, runs, per_run, notes, changes, loss_last, sources)


def _show(v: Any) -> str:
    if v is None:
        return "unset"
    if isinstance(v, list):
        return " ".join(str(x) for x in v)
    return str(v)


def _config_diff(base: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """What differs between two runs' recorded configurations, one line each."""
    out = []
    for k in CONFIG_KEYS:
        if k in ("run_name", "note"):
            continue
        a, b = base.get(k), other.get(k)
        if k == "env":
            a, b = a if isinstance(a, dict) else {}, b if isinstance(b, dict) else {}
            for var in sorted(set(a) | set(b)):
                if a.get(var) != b.get(var):
                    out.append(f"env {var}: {_show(a.get(var))} -> {_show(b.get(var))}")
        elif k == "argv" and isinstance(a, list) and isinstance(b, list):
            if a != b:
                out.append("argv: " + argv_diff([str(x) for x in a], [str(x) for x in b]))
        elif a != b:
            out.append(f"{k}: {_show(a)} -> {_show(b)}")
    return out


def argv_diff(a: list[str], b: list[str]) -> str:
    """Only the arguments that differ, each with the option it belongs to: ``--bs 8 -> --bs 16; -x``;
    quoted as a shell would (``--note 'no delay'``)."""
    import difflib
    import shlex

    parts = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        # a changed value is shown with its option: "--bs 8 -> --bs 16", not "8 -> 16"
        flag = a[i1 - 1] if 0 < i1 < len(a) and a[i1 - 1].startswith("-") and not a[i1].startswith("-") else None
        old, new = shlex.join(a[i1:i2]), shlex.join(b[j1:j2])
        if flag and op == "replace":
            old, new = f"{shlex.quote(flag)} {old}", f"{shlex.quote(flag)} {new}"
        parts.append(f"{old or '(nothing)'} -> {new or '(nothing)'}")
    return "; ".join(parts)


# -- output ----------------------------------------------------------------------------


def _cell_text(key: str, cell: Cell, baseline: bool, sep: str = " ") -> str:
    show = dict((k, f) for k, _, f in FIGURES)[key]
    if cell.value is None:
        return cell.message or "n/a"
    text = show(cell.value)
    if cell.spread is not None:
        text += f" ±{show(cell.spread / 2)}" if key not in ("mfu", "mem_headroom", "data_wait_frac") \
            else f" ±{100 * cell.spread / 2:.1f} pp"
    if not baseline:
        if cell.change_pct is not None:
            text += f"{sep}({cell.change_pct:+.1f} %{', within noise' if cell.within_noise else ''})"
        elif cell.within_noise:
            text += f"{sep}(within noise)"
    if cell.message:
        text += f" [{cell.message}]"
    return text


def _header(c: Comparison) -> list[str]:
    return ["run"] + [title.replace("step N", f"step {c.loss_at}") for _, title, _ in FIGURES]


def _rows(c: Comparison, sep: str = " ") -> list[list[str]]:
    rows = []
    for i, (run, cells) in enumerate(zip(c.runs, c.cells)):
        label = run.label + (" (baseline)" if i == 0 else "")
        if len(run.members) > 1:
            label += f" [{len(run.members)} repeats]"
        rows.append([label] + [_cell_text(k, cells[k], i == 0, sep) for k in KEYS])
    return rows


def _caption(c: Comparison) -> str:
    lo, hi = c.loss_steps
    return (f"steps {c.first}:{c.last} — {c.warmup}; loss at step {c.loss_at}: mean over steps "
            f"{lo}:{hi}, all ranks; changes against the baseline")


def _what_changed(c: Comparison) -> list[str]:
    lines = []
    for i, run in enumerate(c.runs):
        cfg = run.members[0].config()
        head = f"{run.label}{' (baseline)' if i == 0 else ''}: run_name {_show(cfg['run_name'])}"
        if cfg.get("note"):
            head += f", note: {_show(cfg['note'])}"
        lines.append(head)
        if i:
            lines += [f"  {x}" for x in c.changes[i]] or ["  no recorded difference from the baseline"]
        lines += [f"  ! {n}" for n in c.notes[i]]
        lines += [f"  · {n}" for n in (c.sources[i] if i < len(c.sources) else [])]
    return lines


def render_markdown(c: Comparison) -> str:
    """A GitHub-flavoured markdown table, its caption, and what changed (also the body of report.md)."""

    def esc(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", " ")

    out = [_caption(c), "", "| " + " | ".join(_header(c)) + " |", "|" + "---|" * len(_header(c))]
    out += ["| " + " | ".join(esc(x) for x in row) + " |" for row in _rows(c)]
    out += ["", "What changed:", ""]
    out += [f"- {esc(line.strip())}" if not line.startswith("  ") else f"  - {esc(line.strip())}"
            for line in _what_changed(c)]
    return "\n".join(out) + "\n"


def render_table(c: Comparison) -> Any:
    """A rich renderable for the terminal: the table, then what changed."""
    from rich.console import Group
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    t = Table(title=_caption(c), title_justify="left")
    for h in _header(c):
        t.add_column(h, overflow="fold")
    for row in _rows(c, sep="\n"):
        t.add_row(*(Text(x) for x in row))
    # indented lines as padding, not spaces: a long line wraps with its indent kept
    lines = [Padding(Text(line.strip()), (0, 0, 0, len(line) - len(line.lstrip()))) for line in _what_changed(c)]
    return Group(t, Text("What changed:"), *lines)


def to_json(c: Comparison) -> dict[str, Any]:
    """The comparison for scripts (keys documented in the README)."""
    return {
        "steps": {"first": c.first, "last": c.last, "how": c.warmup},
        "loss_at": {"step": c.loss_at, "first": c.loss_steps[0], "last": c.loss_steps[1]},
        "runs": [{
            "label": run.label,
            "baseline": i == 0,
            "members": [m.spec for m in run.members],
            "figures": {k: {"value": cell.value, "spread": cell.spread, "change_pct": cell.change_pct,
                            "within_noise": cell.within_noise, "message": cell.message}
                        for k, cell in cells.items()},
            "config": run.members[0].config(),
            "changes": c.changes[i],
            "notes": c.notes[i],
            "profile_sources": c.sources[i] if i < len(c.sources) else [],
        } for i, (run, cells) in enumerate(zip(c.runs, c.cells))],
    }


def render_csv(c: Comparison) -> str:
    """One row per run: label, members, window, then per figure its value, change, spread, noise, message."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    head = ["run", "baseline", "members", "first_step", "last_step", "loss_at_step"]
    for k in KEYS:
        head += [k, f"{k}_change_pct", f"{k}_spread", f"{k}_within_noise", f"{k}_message"]
    w.writerow(head)
    for i, (run, cells) in enumerate(zip(c.runs, c.cells)):
        row: list[Any] = [run.label, int(i == 0), ";".join(m.spec for m in run.members), c.first, c.last, c.loss_at]
        for k in KEYS:
            cell = cells[k]
            row += ["" if cell.value is None else repr(cell.value),
                    "" if cell.change_pct is None else f"{cell.change_pct:.4f}",
                    "" if cell.spread is None else repr(cell.spread), int(cell.within_noise), cell.message or ""]
        w.writerow(row)
    return buf.getvalue()


def render(c: Comparison, form: str) -> str | Any:
    """``table`` gives a rich renderable; the others text."""
    if form == "markdown":
        return render_markdown(c)
    if form == "csv":
        return render_csv(c)
    if form == "json":
        return json.dumps(to_json(c), ensure_ascii=False, indent=1)
    return render_table(c)
