"""``mstop summary``: the run's figures once, as a table for people or JSON for scripts."""

from __future__ import annotations

import math
from typing import Any

from .. import fmt
from ..engine import devices, endings, figures
from ..engine.diagnosis import diagnose
from ..engine.figures import Options
from ..engine.incidents import steps_text
from ..engine.reader import RunReader
from ..engine.store import Reads, Snapshot
from ..safe import MAX_ITEMS, MAX_TEXT, clean

#: The keys of ``summary --json``, in order (public: never renamed or dropped).
KEYS = ("run_dir", "ranks", "step", "rows", "bad_rows", "resets", "segments", "repeated_steps", "loss",
        "loss_ema", "tokens_per_s", "mfu", "mem_headroom", "data_wait_frac", "status", "last_checkpoint",
        "alerts", "stragglers", "dropped_rows", "bad_events", "writer_errors", "refused_files", "incidents",
        "samples_per_s", "source", "goodput", "profile", "clocks", "error_line", "log_path", "devices", "culprit",
        "processes", "goodput_definition", "log_refused", "refused_cells", "notes", "diagnosis", "alert_history")


#: which definition of the goodput ledger ``goodput`` follows (docs/health.md, "Goodput"): 2 since issue 39
#: (each row classified once, against its rank's previous block; a resumed session's repeated steps are the
#: ones recomputed); 3 since issue 40 (a resumed session's first row measured against the rows before it,
#: a job dead by its silence ended when it was known dead: neither productive nor wall ever falls); 4 since
#: issue 58 (a rank's time after its clean end while others ran is finished_early, no longer down)
GOODPUT_DEFINITION = 4


def _json_number(v: float | None) -> Any:
    """None stays None (unknown); NaN and ±Inf become the strings ``nan``/``inf``/``-inf`` (strict JSON)."""
    if v is None:
        return None
    if math.isfinite(v):
        return v
    return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")


def summarize(store: Reads, run_dir: str, opts: Options, health: Any = None,
              specs: list[str] | None = None) -> dict[str, Any]:
    """The summary object: exactly :data:`KEYS` (``alerts`` from ``health``, a :class:`~mstop.engine.health.Health`;
    ``specs``: the run's sources, where the ranks' logs are looked for; ``run_dir`` by default)."""
    from ..engine.health import Health

    health = health or Health()
    opts = health.rules.options(opts)
    store = store.snapshot()  # one moment: every figure reads one window, a following source goes on
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
        "samples_per_s": _json_number(figures.samples_per_s(store)),
        "source": figures.source(store),
        "goodput": _goodput(store, opts),
        "profile": figures.latest_profile(store),
        "clocks": _clocks(store, opts),
    }
    out["error_line"], out["log_path"], refused = _log(store, specs or [run_dir], opts, out["status"])
    d = devices.summary(store) if store.devices else None
    out["devices"] = {k: _json_number(v) if isinstance(v, float) else v for k, v in d.public().items()} \
        if d is not None else None
    if out["devices"] is not None:
        out["devices"]["bad_rows"] = store.bad_device_rows  # lines of the devices files that are no row
    c = endings.culprit(store, opts)
    out["culprit"] = c.public() if c is not None else None
    out["processes"] = _processes(store)
    out["goodput_definition"] = GOODPUT_DEFINITION
    out["log_refused"] = refused
    out["refused_cells"] = {why: {"count": n, "first": first} for why, (n, first) in store.refused_cells.items()}
    out["notes"] = list(store.notes)  # what the files or hosts made mstop say (the table's "! note" lines)
    out["diagnosis"] = [v.public() for v in diagnose(store, rules=health.rules)]  # what slows the job (issue 59)
    out["alert_history"] = _alert_history(specs or [run_dir])
    assert tuple(out) == KEYS
    return out


def _alert_history(specs: list[str]) -> list[dict[str, Any]]:
    """What the alert routing notified, kept beside a local run (mstop.live.routing: fired, repeat, cleared,
    silenced), its texts cleaned; [] for a run over ssh or one no router followed."""
    from ..live.routing import history, local_dir

    folder = local_dir(specs)
    out = []
    for h in history(folder) if folder is not None else []:
        t = h.get("time")
        out.append({"time": t if isinstance(t, (int, float)) and math.isfinite(t) else None,
                    **{k: clean(str(h.get(k, "")), MAX_TEXT) for k in ("state", "kind", "severity", "message")},
                    "ranks": [r for r in h.get("ranks") or [] if isinstance(r, int) and not isinstance(r, bool)]})
    return out


def _processes(store: Snapshot) -> dict[str, Any]:
    """Per rank, its current process as its exit witness saw it last (mstop.engine.processes.facts)."""
    out = {}
    run = RunReader(store)
    for r in run.ranks:
        f = run.process(r)
        if f is not None:
            out[str(r)] = f
    return out


#: the most files of one kind of trouble the table lists (the rest are counted; --json has them all)
SHOWN = 10

#: the ranks whose logs are looked at for an error of a run that did not fail, after the job rank's (each
#: log's tail is read: a 4,096-rank job is not read whole for a summary)
LOOKED_AT = 32


def _log(store: Snapshot, specs: list[str], opts: Options,
         status: str) -> tuple[str | None, str | None, str | None]:
    """A failed or dead run's culprit (a rank a fact names, else the one whose abort came first): the last error
    line its own log holds (else its abort's), and the log's path; for any other run, the last error of the
    job rank's log, else of the first of the next LOOKED_AT ranks' logs that holds one (that log's path),
    else the job rank's log with no error. Third: why a file named as that rank's log is not read (a file
    the job could not have written)."""
    from ..engine.endings import error_rank, first_line
    from ..formats.logs import clean_lines
    from ..sources.logs import find_rank_log, job_rank_of, last_error_of

    run = RunReader(store)
    if run.empty():
        return None, None, None
    failed = status in ("failed", "dead")
    culprit = error_rank(store, opts) if failed else None
    rank = culprit if culprit is not None else job_rank_of(store)
    log, refused = find_rank_log(store, specs, rank)
    path = log.path if log is not None else None
    refused = clean(refused, MAX_TEXT) if refused is not None else None
    err = last_error_of(log) if log is not None else None
    if not failed:
        if err is not None:
            return err.lines[0], path, refused
        for other in [r for r in sorted(run.ranks) if r != rank][:LOOKED_AT]:  # a running rank's error
            there, _ = find_rank_log(store, specs, other)
            got = last_error_of(there) if there is not None else None
            if got is not None and there is not None:
                return got.lines[0], there.path, refused
        return None, path, refused
    if err is not None:
        return err.lines[0], path, refused
    aborts = run.events(rank, "abort")
    line = first_line(str(aborts[-1].get("error") or "")) if aborts else ""
    return (clean_lines(line)[0] if line else None), path, refused


def _clocks(store: Snapshot, opts: Options) -> dict[str, Any] | None:
    """Clocks that disagree (mstop.engine.clocks): seconds the job's clock reads ahead of this machine's,
    per rank seconds its clock reads ahead of the reference rank's, and the words; None when they agree."""
    c = figures.rank_clocks(store, opts)
    if not c.own and not c.ranks:
        return None
    return {"job_ahead_s": round(c.job, 3), "ahead_s": {str(r): round(v, 3) for r, v in sorted(c.own.items())},
            "reference_rank": c.reference,
            "ranks_ahead_s": {str(r): round(v, 3) for r, v in sorted(c.ranks.items())}, "notes": c.notes()}


def _goodput(store: Snapshot, opts: Options) -> dict[str, Any] | None:
    from ..engine.goodput import ledger

    g = ledger(store, opts)
    return None if g is None else g.public()


def goodput_text(g: dict[str, Any] | None) -> str:
    """``71 % · lost: recomputed 9 h, down 6 h`` from the summary's goodput object (the two largest losses)."""
    from ..engine.goodput import largest_losses, losses_text

    if g is None or g.get("goodput") is None:
        return "n/a"
    lost = largest_losses(g, g["wall"])
    text = f"{100 * g['goodput']:.0f} % of {fmt.span(g['wall'])}"
    return text + (f" · lost: {losses_text(lost)}" if lost else "")


def profile_text(p: dict[str, Any]) -> str:
    """``compute 62 % · comm not overlapped 28 % (overlapped 9 %) · idle 10 % · steps 100-110, rank 0``."""
    return (f"compute {100 * p['compute']:.0f} % · comm not overlapped {100 * p['comm_not_overlapped']:.0f} % "
            f"(overlapped {100 * p['overlapped']:.0f} %) · idle {100 * p['idle']:.0f} % · "
            + (f"bubble {100 * p['bubble']:.0f} % · " if "bubble" in p else "")
            + f"steps {p['first_step']}-{p['last_step']}, rank {p['rank']}")


def _num(v: Any, form: str = "{:,.4g}", unit: str = "") -> str:
    if v is None:
        return "n/a"
    return v if isinstance(v, str) else form.format(v) + unit


def _pct(v: Any) -> str:
    return "n/a" if v is None else (v if isinstance(v, str) else f"{100 * v:.1f} %")


def render_table(summary: dict[str, Any], store: Snapshot, opts: Options | None = None) -> Any:
    """A rich table of the summary for people (units shown, unknowns as n/a)."""
    from rich.table import Table
    from rich.text import Text

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    for k, v in _figure_rows(summary, store, opts or Options()) + _file_rows(summary, store, opts) + \
            _alert_rows(summary):
        table.add_row(Text(k), Text(str(v)))  # Text: names from files are shown literally, never as markup
    return table


def _figure_rows(summary: dict[str, Any], store: Snapshot, opts: Options) -> list[tuple[str, str]]:
    """The run's figures, one per line."""
    ck = summary["last_checkpoint"]
    status = summary["status"]
    failures = figures.writer_failures(store)
    if failures:
        status += f" — writer failed: {failures[0]}"
    refused, why = figures.refused_rows(store)
    cells, why_cells = figures.refused_cells(store)
    lost = max(0, summary["dropped_rows"] - RunReader(store).rejected())
    source = summary["source"]
    return [
        *[("diagnosis" if i == 0 else "", v["words"]) for i, v in enumerate(summary["diagnosis"])],
        ("run", summary["run_dir"]),
        *([("source", f"{source['kind']}: no {', '.join(source['cannot_give'])}")] if source else []),
        ("status", status),
        ("ranks", f"{summary['ranks']:,}"),
        ("step", _num(summary["step"], "{:,}")),
        ("loss (smoothed)", _loss_text(summary)),
        ("tokens/s", _num(summary["tokens_per_s"], "{:,.0f}")),
        *([("samples/s", _num(summary["samples_per_s"], "{:,.4g}"))] if summary["tokens_per_s"] is None
          and summary["samples_per_s"] is not None else []),
        ("MFU", _pct(summary["mfu"]) if summary["mfu"] is not None  # why not, as the monitor's panel says
         else f"n/a: {figures.mfu_missing(store, opts)}"),
        ("memory headroom (worst)", _pct(summary["mem_headroom"])),
        ("data wait (worst rank)", _pct(summary["data_wait_frac"])),
        ("goodput", goodput_text(summary["goodput"])),
        *([("step time (profile)", profile_text(summary["profile"]))] if summary["profile"] else []),
        ("last checkpoint", "none" if ck is None else f"step {ck['step']}: {ck['path']}"),
        ("rows read", f"{summary['rows']:,}" + (f", {summary['bad_rows']:,} bad" if summary["bad_rows"] else "")
         + (f", {lost:,} lost " + ("from the log (lines lost between two reads)" if source else "by the writer")
            if lost else "")
         + (f", {fmt.count(refused, 'row{s} refused by the writer')}" + (f" ({why})" if why else "")
            if refused else "")),
        *([("cells refused", f"{cells:,} ({why_cells})")] if cells else []),
        ("segments", f"{summary['segments']}" + (f", {summary['repeated_steps']} repeated steps" + _whose(store)
                                                  if summary["repeated_steps"] else "")),
    ]


def _file_rows(summary: dict[str, Any], store: Snapshot, opts: Options | None) -> list[tuple[str, str]]:
    """What is wrong with the files and clocks: read again, ignored, bad, cut, refused, not merged."""
    rows = []
    rows += [("! clock", note) for note in (summary["clocks"] or {}).get("notes", [])]
    ahead = figures.future_skew(store, opts) if opts is not None and not summary["clocks"] else None
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
    rows += [("! note", note) for note in store.notes]
    rows += [("! devices", note) for note in devices.sampling_notes(store)]
    refused = list(summary["refused_files"].items())
    rows += [("! not followed", f"{name}: {why}") for name, why in refused[:SHOWN]]
    if len(refused) > SHOWN:  # 30,000 refused names were 30,000 lines
        rows.append(("! not followed", f"and {len(refused) - SHOWN:,} more files (summary --json lists them all)"))
    rows += [("! writer failed", msg) for msg in figures.writer_failures(store)[1:]]
    rows += [("! not merged", note) for note in store.duplicates]
    return rows


def _whose(store: Snapshot) -> str:
    """`` (rank 3, the most of any rank)`` when the ranks repeated different counts of steps, else nothing."""
    _, _, rank, differ = figures.repeated(store)
    return f" (rank {rank}, the most of any rank)" if differ else ""


def _alert_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The active alerts, then the ten latest past incidents."""
    rows = [(f"! {a['kind']}", a["message"]) for a in summary["alerts"]]
    past = [i for i in summary["incidents"] if not i["active"]]
    rows += [(f"incident {i['kind']}", f"{steps_text(i['first_step'], i['last_step'])}: {i['message']}")
             for i in past[-10:]]
    if len(past) > 10:
        rows.append(("incidents", f"{len(past) - 10} older ones (--json lists them all)"))
    return rows


def runs_table(summaries: list[dict[str, Any]]) -> Any:
    """``mstop summary DIR`` for a folder of runs: a line per run (its summary object's main figures)."""
    from rich.table import Table

    t = Table(box=None, pad_edge=False)
    for h in ("run", "status", "step", "loss (smoothed)", "tokens/s", "MFU", "headroom", "goodput", "alerts",
              "slowed by"):
        t.add_column(h, justify="left" if h in ("run", "status", "slowed by") else "right")
    for s in summaries:
        g = s.get("goodput") or {}
        t.add_row(clean(str(s["run_dir"]), 4096), s["status"], fmt.num(s["step"], 9) if s["step"] is not None else "",
                  fmt.num(_shown_loss(s)), fmt.si(_from_json(s["tokens_per_s"])),
                  fmt.pct(_from_json(s["mfu"])), fmt.pct(_from_json(s["mem_headroom"])), fmt.pct(g.get("goodput")),
                  str(len(s["alerts"])), _worst(s))
    return t


def _worst(s: dict[str, Any]) -> str:
    """A run's worst diagnosis verdict (``compute straggler``), "" when healthy or before any row."""
    kind = s["diagnosis"][0]["kind"] if s["diagnosis"] else "healthy"
    return "" if kind == "healthy" else kind.replace("_", " ")


def _loss_text(s: dict[str, Any]) -> str:
    """``1.234 (1.250)``; a last loss of NaN/Inf: ``nan (smoothed 1.499 before it: no longer meaningful)``."""
    last = _from_json(s["loss"])
    if last is not None and not math.isfinite(last):
        return f"{_num(s['loss'])} (the last finite losses' smoothed {_num(s['loss_ema'])}: not a figure of now)"
    return f"{_num(s['loss'])} ({_num(s['loss_ema'])})"


def _shown_loss(s: dict[str, Any]) -> float | None:
    """figures.shown_loss from a summary object: its last loss when that is NaN/Inf, else its smoothed loss."""
    last = _from_json(s["loss"])
    return last if last is not None and not math.isfinite(last) else _from_json(s["loss_ema"])


def _from_json(v: Any) -> float | None:
    """A summary number back from its JSON form (``nan``/``inf`` strings)."""
    if isinstance(v, str):
        return float(v)
    return v
