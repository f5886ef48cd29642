"""``mstop summary``: the run's figures once, as a table for people or JSON for scripts."""

from __future__ import annotations

import math
from typing import Any

from .. import fmt
from ..engine import figures
from ..engine.figures import Options
from ..engine.incidents import steps_text
from ..engine.store import Store
from ..safe import MAX_ITEMS, MAX_TEXT, clean

#: The keys of ``summary --json``, in order (public: never renamed or dropped).
KEYS = ("run_dir", "ranks", "step", "rows", "bad_rows", "resets", "segments", "repeated_steps", "loss",
        "loss_ema", "tokens_per_s", "mfu", "mem_headroom", "data_wait_frac", "status", "last_checkpoint",
        "alerts", "stragglers", "dropped_rows", "bad_events", "writer_errors", "refused_files", "incidents")


def _json_number(v: float | None) -> Any:
    """None stays None (unknown); NaN and ±Inf become the strings ``nan``/``inf``/``-inf`` (strict JSON)."""
    if v is None:
        return None
    if math.isfinite(v):
        return v
    return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")


def summarize(store: Store, run_dir: str, opts: Options, health: Any = None) -> dict[str, Any]:
    """The summary object: exactly :data:`KEYS` (``alerts`` from ``health``, a :class:`~mstop.health.Health`)."""
    from ..engine.health import Health

    health = health or Health()
    opts = health.rules.options(opts)
    with store.lock:  # one consistent snapshot: a following source waits, and every figure reads one window
        alerts = health.alerts(store, opts)
        out = {
            "run_dir": clean(run_dir, 4096),
            "ranks": len(store.rank_files),
            "step": figures.step(store),
            "rows": store.rows,
            "bad_rows": store.bad_rows,
            "resets": store.resets,
            "segments": figures.segments(store),
            "repeated_steps": figures.repeated_steps(store),
            "loss": _json_number(figures.loss(store)),
            "loss_ema": _json_number(figures.loss_ema(store, opts)),
            "tokens_per_s": _json_number(figures.tokens_per_s(store)),
            "mfu": _json_number(figures.mfu(store, opts)),
            "mem_headroom": _json_number(figures.mem_headroom(store)),
            "data_wait_frac": _json_number(figures.data_wait_frac(store)),
            "status": figures.status(store, opts),
            "last_checkpoint": figures.last_checkpoint(store),
            "alerts": [a.public() for a in alerts],
            "stragglers": sorted(a.rank for a in alerts if a.kind == "straggler" and a.rank is not None),
            "dropped_rows": figures.dropped_rows(store),
            "bad_events": store.bad_events,
            "writer_errors": figures.writer_errors(store),
            "refused_files": dict(sorted(store.refused.items())),
            "incidents": [i.public() for i in health.incidents(store, opts, alerts)],
        }
    assert tuple(out) == KEYS
    return out


def render_table(summary: dict[str, Any], store: Store, opts: Options | None = None) -> Any:
    """A rich table of the summary for people (units shown, unknowns as n/a)."""
    from rich.table import Table
    from rich.text import Text

    def num(v: Any, fmt: str = "{:,.4g}", unit: str = "") -> str:
        if v is None:
            return "n/a"
        if isinstance(v, str):
            return v
        return fmt.format(v) + unit

    def pct(v: Any) -> str:
        return "n/a" if v is None else (v if isinstance(v, str) else f"{100 * v:.1f} %")

    ck = summary["last_checkpoint"]
    status = summary["status"]
    if summary["writer_errors"]:
        status += f" — writer failed: {summary['writer_errors'][0]}"
    rows = [
        ("run", summary["run_dir"]),
        ("status", status),
        ("ranks", str(summary["ranks"])),
        ("step", num(summary["step"], "{:,}")),
        ("loss (smoothed)", f"{num(summary['loss'])} ({num(summary['loss_ema'])})"),
        ("tokens/s", num(summary["tokens_per_s"], "{:,.0f}")),
        ("MFU", pct(summary["mfu"])),
        ("memory headroom (worst)", pct(summary["mem_headroom"])),
        ("data wait (worst rank)", pct(summary["data_wait_frac"])),
        ("last checkpoint", "none" if ck is None else f"step {ck['step']}: {ck['path']}"),
        ("rows read", f"{summary['rows']:,}" + (f", {summary['bad_rows']:,} bad" if summary["bad_rows"] else "")
         + (f", {summary['dropped_rows']:,} dropped by the writer" if summary["dropped_rows"] else "")),
        ("segments", f"{summary['segments']}" + (f", {summary['repeated_steps']} repeated steps"
                                                  if summary["repeated_steps"] else "")),
    ]
    ahead = figures.future_skew(store, opts) if opts is not None else None
    if ahead is not None:
        rows.append(("! clock", f"row times are {fmt.duration(ahead)} ahead of this machine's clock: ages use "
                                "the files' modification times"))
    if summary["resets"]:
        rows.append(("files read again", str(summary["resets"])))
    if store.ignored_files:
        rows.append(("ignored files", ", ".join(sorted(store.ignored_files)[:5])))
    if store.bad_events:
        rows.append(("bad event lines", str(store.bad_events)))
    if store.cut_events:
        rows.append(("events cut", f"{store.cut_events} (text over {MAX_TEXT} characters or over {MAX_ITEMS} "
                                   "items kept short)"))
    for note in store.notes:
        rows.append(("! note", note))
    for name, why in summary["refused_files"].items():
        rows.append(("! not followed", f"{name}: {why}"))
    for msg in summary["writer_errors"][1:]:
        rows.append(("! writer failed", msg))
    for note in store.duplicates:
        rows.append(("! not merged", note))
    for a in summary["alerts"]:
        rows.append((f"! {a['kind']}", a["message"]))
    past = [i for i in summary["incidents"] if not i["active"]]
    for i in past[-10:]:
        rows.append((f"incident {i['kind']}", f"{steps_text(i['first_step'], i['last_step'])}: {i['message']}"))
    if len(past) > 10:
        rows.append(("incidents", f"{len(past) - 10} older ones (--json lists them all)"))
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    for k, v in rows:
        table.add_row(Text(k), Text(str(v)))  # Text: names from files are shown literally, never as markup
    return table
