"""``mstop export``: a run's figures and verdicts in Prometheus' text format, for the dashboards a site runs.

Sites that train on Ascend clusters often run node_exporter with its textfile collector, and Grafana over
it; their on-call people look there. ``mstop export SOURCE --openmetrics DIR`` follows the run as the monitor
does and, every ``--every`` seconds, writes ``DIR/mstop_<run>.prom`` by ``prometheus_client``'s
``write_to_textfile`` (a temporary file in the same folder, then a rename: a scrape never reads half a file;
the temporary name does not end in ``.prom``, so the collector skips it). ``--listen HOST:PORT`` serves the
same text over HTTP (loopback by default) for sites that scrape directly. The figures are ``summary --json``'s,
taken from one summary per export, so the two never disagree.

Families (every one labelled ``run``; HELP text constant): the step, loss and its EMA, tokens/s, samples/s,
MFU, memory headroom (the worst, and per rank), the data-wait share, goodput and its lost seconds by bucket,
ranks by status, restarts, incidents by kind, alerts by kind, the diagnosis's verdicts as an info family, the
age of the newest row and ``mstop_up`` (whether the run could be read). Per-rank families are bounded: up to
``--rank-limit`` ranks (default 256) every rank; above it only the ranks a verdict or an alert names, and
``mstop_ranks_exported`` says how many were.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

#: the statuses ``mstop_ranks`` counts ranks by (each rank in one)
RANK_STATUSES = ("running", "stopped", "hung", "dead", "ended")
#: ranks above which the per-rank families hold only the ranks a verdict or an alert names
RANK_LIMIT = 256
#: the ranks of one verdict given a sample each at most
VERDICT_RANKS = 64
#: the goodput ledger's buckets of lost time (docs/health.md, "Goodput")
LOST = ("input_wait", "compile", "recomputed", "checkpoint", "stalled", "down", "finished_early")

#: each family: its name, type and HELP text (the same in every file: Prometheus refuses a family whose help
#: changes between scrapes of one target)
FAMILIES = {
    "mstop_up": ("gauge", "Whether mstop could read the run at this export (1) or not (0)."),
    "mstop_step": ("gauge", "The run's newest step (the slowest rank's, as mstop summary says it)."),
    "mstop_loss": ("gauge", "The newest loss (the job rank's)."),
    "mstop_loss_ema": ("gauge", "The loss smoothed (an exponential moving average, mstop summary's loss_ema)."),
    "mstop_tokens_per_second": ("gauge", "Tokens per second of the whole job over the recent steps."),
    "mstop_samples_per_second": ("gauge", "Samples per second of the whole job over the recent steps."),
    "mstop_mfu_ratio": ("gauge", "Model FLOPs utilisation, 0 to 1."),
    "mstop_memory_headroom_ratio": ("gauge", "The least memory headroom of any rank, 0 to 1 (0: out of memory)."),
    "mstop_data_wait_ratio": ("gauge", "The share of a step spent waiting for input, median over the ranks."),
    "mstop_goodput_ratio": ("gauge", "Productive share of the run's wall time, 0 to 1."),
    "mstop_goodput_wall_seconds": ("gauge", "The wall time the goodput ledger accounts for."),
    "mstop_goodput_lost_seconds": ("gauge", "Wall time lost, by the goodput ledger's bucket."),
    "mstop_ranks": ("gauge", "Ranks by status (running, stopped, hung, dead, ended)."),
    "mstop_ranks_seen": ("gauge", "Ranks the run has rows or events of."),
    "mstop_ranks_exported": ("gauge", "Ranks the per-rank families hold (all, or the ranks a verdict names)."),
    "mstop_restarts": ("gauge", "Restarts seen: the run's sessions after its first (segments - 1)."),
    "mstop_incidents": ("gauge", "Incidents in the run's history, by kind."),
    "mstop_alerts": ("gauge", "Alerts active now, by kind."),
    "mstop_diagnosis": ("info", "A verdict of mstop's diagnosis that holds now: its kind and a rank it names "
                                "(empty: the job)."),
    "mstop_status": ("info", "The run's status (waiting, starting, running, stalled, dead, failed, finished)."),
    "mstop_newest_row_age_seconds": ("gauge", "Seconds since the run's newest row was written."),
    "mstop_rank_step": ("gauge", "A rank's newest step."),
    "mstop_rank_memory_headroom_ratio": ("gauge", "A rank's memory headroom, 0 to 1."),
    "mstop_rank_status": ("info", "A rank's status (running, stopped, hung, dead, ended)."),
}


def run_label(label: str) -> str:
    """The run's ``run`` label: its folder's last part (``host:/a/b/run-3`` gives ``run-3``), control
    characters out (the exposition escapes quotes, backslashes and line ends itself)."""
    from ..safe import clean

    return clean(os.path.basename(label.rstrip("/").split(":")[-1]) or "run", 200)


def file_name(run: str) -> str:
    """``mstop_<run>.prom``, characters of the run other than letters, digits, ``_``, ``.`` and ``-`` made
    ``_`` (a file name any collector and shell take as it is)."""
    return f"mstop_{re.sub(r'[^A-Za-z0-9_.-]', '_', run)[:100]}.prom"


def rank_statuses(fig: dict[str, Any]) -> dict[int, str]:
    """Each rank's status from the summary's own account: stopped (its process stopped: ``stopped_rank``),
    hung (a hang verdict or ``stuck_rank`` names it), dead (``dead_rank``, or the culprit of a dead or failed
    job), ended (its process ended, or the run ended), else running."""
    alerts = fig.get("alerts") or []
    named = {k: {a["rank"] for a in alerts if a["kind"] == k and a.get("rank") is not None}
             for k in ("stopped_rank", "stuck_rank", "dead_rank")}
    hung = named["stuck_rank"] | {r for v in fig.get("diagnosis") or [] if v["kind"] == "hang" for r in v["ranks"]}
    ended_run = fig.get("status") in ("dead", "failed", "finished")
    culprit = (fig.get("culprit") or {}).get("rank") if fig.get("status") in ("dead", "failed") else None
    out = {}
    for key, proc in (fig.get("processes") or {}).items():
        out[int(key)] = "ended" if proc.get("state") == "ended" else "running"
    for r in range(fig.get("ranks") or 0):
        out.setdefault(r, "ended" if ended_run else "running")
    for r in list(out):
        if r in named["stopped_rank"]:
            out[r] = "stopped"
        elif r in hung:
            out[r] = "hung"
        elif r in named["dead_rank"] or r == culprit:
            out[r] = "dead"
        elif ended_run:
            out[r] = "ended"
    return out


def _value(v: Any) -> float | None:
    """A summary number as a sample's value (its ``nan``/``inf`` strings too); None: not known, no sample."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if v in ("nan", "inf", "-inf"):
        return float(v)
    return None


class Export:
    """The families of one run from its summary (and its ranks' own figures): built at each export, served
    by :meth:`collect` to ``prometheus_client``'s writers (the file and the HTTP endpoint)."""

    def __init__(self, run: str, host: str, rank_limit: int = RANK_LIMIT) -> None:
        self.run, self.host, self.rank_limit = run, host, rank_limit
        self._families: list[Any] = []
        self._age: float | None = None
        self._lock = threading.Lock()

    def update(self, fig: dict[str, Any] | None, ranks: dict[int, dict[str, float | None]],
               age: float | None = None) -> None:
        """The families from ``fig`` (``summary --json``'s object; None: the run could not be read), each
        rank's ``step`` and ``headroom``, and the seconds since the newest row."""
        self._age = age
        fams = self._build(fig, ranks)
        with self._lock:
            self._families = fams

    def collect(self) -> Iterator[Any]:
        """prometheus_client's Collector protocol."""
        with self._lock:
            yield from self._families

    def _family(self, name: str, extra: tuple[str, ...] = ()) -> Any:
        from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily

        kind, text = FAMILIES[name]
        labels = ["run", "host", *extra]
        if kind == "info":
            return InfoMetricFamily(name[: -len("_info")] if name.endswith("_info") else name, text, labels=labels)
        return GaugeMetricFamily(name, text, labels=labels)

    def _build(self, fig: dict[str, Any] | None, ranks: dict[int, dict[str, float | None]]) -> list[Any]:
        base = [self.run, self.host]
        up = self._family("mstop_up")
        up.add_metric(base, 0.0 if fig is None else 1.0)
        if fig is None:
            return [up]
        out = [up]
        for name, key in (("mstop_step", "step"), ("mstop_loss", "loss"), ("mstop_loss_ema", "loss_ema"),
                          ("mstop_tokens_per_second", "tokens_per_s"), ("mstop_samples_per_second", "samples_per_s"),
                          ("mstop_mfu_ratio", "mfu"), ("mstop_memory_headroom_ratio", "mem_headroom"),
                          ("mstop_data_wait_ratio", "data_wait_frac")):
            v = _value(fig.get(key))
            if v is not None:
                f = self._family(name)
                f.add_metric(base, v)
                out.append(f)
        out += self._goodput(fig.get("goodput"))
        statuses = rank_statuses(fig)
        out += self._counts(fig, statuses)
        out += self._verdicts(fig)
        out += self._ranks(fig, statuses, ranks)
        return out

    def _goodput(self, g: dict[str, Any] | None) -> list[Any]:
        if not g:
            return []
        out = []
        for name, key in (("mstop_goodput_ratio", "goodput"), ("mstop_goodput_wall_seconds", "wall")):
            v = _value(g.get(key))
            if v is not None:
                f = self._family(name)
                f.add_metric([self.run, self.host], v)
                out.append(f)
        lost = self._family("mstop_goodput_lost_seconds", ("bucket",))
        for b in LOST:
            v = _value(g.get(b))
            if v is not None:
                lost.add_metric([self.run, self.host, b], v)
        return out + [lost]

    def _counts(self, fig: dict[str, Any], statuses: dict[int, str]) -> list[Any]:
        base = [self.run, self.host]
        by = Counter(statuses.values())
        ranks = self._family("mstop_ranks", ("status",))
        for s in RANK_STATUSES:
            ranks.add_metric([*base, s], float(by.get(s, 0)))
        total = self._family("mstop_ranks_seen")
        total.add_metric(base, float(fig.get("ranks") or 0))
        restarts = self._family("mstop_restarts")
        restarts.add_metric(base, float(max(0, (fig.get("segments") or 1) - 1)))
        out = [ranks, total, restarts]
        for name, items in (("mstop_incidents", fig.get("incidents") or []), ("mstop_alerts", fig.get("alerts") or [])):
            f = self._family(name, ("kind",))
            for kind, n in sorted(Counter(i["kind"] for i in items).items()):
                f.add_metric([*base, str(kind)], float(n))
            out.append(f)
        return out

    def _verdicts(self, fig: dict[str, Any]) -> list[Any]:
        base = [self.run, self.host]
        status = self._family("mstop_status")
        status.add_metric(base, {"status": str(fig.get("status"))})
        diag = self._family("mstop_diagnosis")
        for v in fig.get("diagnosis") or []:  # a sample a rank named (at most VERDICT_RANKS), or one for the job
            for r in v["ranks"][:VERDICT_RANKS] or [""]:
                diag.add_metric(base, {"kind": str(v["kind"]), "rank": str(r)})
        out = [status, diag]
        age = self._age
        if age is not None and math.isfinite(age):
            f = self._family("mstop_newest_row_age_seconds")
            f.add_metric(base, age)
            out.append(f)
        return out

    def _ranks(self, fig: dict[str, Any], statuses: dict[int, str],
               ranks: dict[int, dict[str, float | None]]) -> list[Any]:
        """Per-rank families: every rank up to the limit, else the ranks a verdict or an alert names."""
        if len(statuses) <= self.rank_limit:
            chosen = sorted(statuses)
        else:
            named = {a["rank"] for a in fig.get("alerts") or [] if a.get("rank") is not None}
            named |= {r for v in fig.get("diagnosis") or [] for r in v["ranks"]}
            named |= {r for r, s in statuses.items() if s != "running" and s != "ended"}
            chosen = sorted(named)[: self.rank_limit]
        base = [self.run, self.host]
        exported = self._family("mstop_ranks_exported")
        exported.add_metric(base, float(len(chosen)))
        step = self._family("mstop_rank_step", ("rank",))
        head = self._family("mstop_rank_memory_headroom_ratio", ("rank",))
        status = self._family("mstop_rank_status", ("rank",))
        for r in chosen:
            mine = ranks.get(r, {})
            if mine.get("step") is not None and math.isfinite(mine["step"]):
                step.add_metric([*base, str(r)], float(mine["step"]))
            if mine.get("headroom") is not None and math.isfinite(mine["headroom"]):
                head.add_metric([*base, str(r)], float(mine["headroom"]))
            status.add_metric([*base, str(r)], {"status": statuses.get(r, "running")})
        return [exported, step, head, status]


def rank_figures(snap: Any) -> dict[int, dict[str, float | None]]:
    """Each rank's newest step and its memory headroom (as the ranks view shows them)."""
    from ..engine import figures
    from ..engine.reader import RunReader

    run = RunReader(snap)
    out: dict[int, dict[str, float | None]] = {r: {"step": run.last(r, "step"), "headroom": None} for r in run.ranks}
    w = figures.window(snap)
    for r, h in zip(w.ranks, figures.rank_headrooms(snap)):
        out.setdefault(int(r), {"step": None})["headroom"] = float(h) if math.isfinite(h) else None
    return out


def export(args: argparse.Namespace) -> int:
    """``mstop export SOURCE... --openmetrics DIR [--every S] [--listen HOST:PORT] [--once]``."""
    from ..engine.figures import Options
    from ..engine.health import Health
    from ..live.routing import AlertRouting, local_dir
    from ..sources import SourceError, Sources
    from .arguments import alert_rules, peak_flops, rules

    if not args.openmetrics and not args.listen:
        print("mstop export: say where: --openmetrics DIR (node_exporter's textfile folder) and/or --listen "
              "HOST:PORT", file=sys.stderr)
        return 2
    health_rules, routes = rules(args, args.source), alert_rules(args)
    if health_rules is None or routes is False:
        return 2
    try:
        sources = Sources(args.source, connection=args.connection)
        sources.read_all()
    except SourceError as e:
        print(f"mstop export: {e}", file=sys.stderr)
        return 2
    exporter = Exporter(args.source, sources.label, args.openmetrics, args.listen, args.rank_limit)
    if exporter.error is not None:
        print(f"mstop export: {exporter.error}", file=sys.stderr)
        return 2
    routing = AlertRouting(routes, local_dir(args.source)) if routes is not None else None
    opts = Options(peak_flops=peak_flops(args), clock=sources.clock)
    if not args.once:
        sources.follow()
    try:
        return _loop(args, sources, exporter, opts, Health(health_rules), routing)
    finally:
        sources.stop()
        if routing is not None:
            routing.close()
        exporter.close(remove=not args.once and not args.keep)


def _loop(args: argparse.Namespace, sources: Any, exporter: Exporter, opts: Any, health: Any,
          routing: Any) -> int:
    """Export every ``--every`` seconds (once with ``--once``), routing the alerts when rules were given."""
    while True:
        t = time.monotonic()
        error = exporter.once(sources.store, opts, health)
        if error is not None:
            print(f"mstop export: {error}", file=sys.stderr)
        if not exporter.written:
            return 2
        if routing is not None and exporter.fig is not None:
            routing.look_at(time.time(), exporter.fig)
            for sink_error in routing.sinks.errors():
                print(f"mstop export: {sink_error}", file=sys.stderr)
        if args.once:
            return 0
        time.sleep(max(0.0, args.every - (time.monotonic() - t)))


class Exporter:
    """A followed run's export: its file and its endpoint, made by :meth:`once` from the follow's own store
    (``mstop export``'s loop, and the monitor's ``--openmetrics``/``--listen``)."""

    def __init__(self, specs: list[str], label: str, openmetrics: str | None, listen: str | None,
                 rank_limit: int = RANK_LIMIT) -> None:
        self.specs = specs
        self.ex = Export(run_label(label), _host(specs[0]) if specs else "", rank_limit)
        self.fig: dict[str, Any] | None = None  # the last export's summary (None: it could not be read)
        self.written = True  # whether the last export's file could be written
        self.path = os.path.join(openmetrics, file_name(self.ex.run)) if openmetrics else None
        self.label = label
        got = _serve(self.ex, listen) if listen else None
        self.server = None if isinstance(got, str) else got
        self.error: str | None = got if isinstance(got, str) else None

    def once(self, store: Any, opts: Any, health: Any) -> str | None:
        """One export of the store as it is now (a run that cannot be read exports ``mstop_up 0``); what went
        wrong, else None."""
        from ..engine import figures
        from .summary import summarize

        error = None
        try:
            snap = store.snapshot()  # one moment for the summary and the ranks' own figures
            self.fig = summarize(snap, self.label, opts, health, specs=list(self.specs))
            self.ex.update(self.fig, rank_figures(snap), figures.seconds_since_last_row(snap, opts))
        except Exception as e:  # noqa: BLE001 - said as mstop_up 0, and to the user
            self.fig = None
            self.ex.update(None, {})
            error = f"{type(e).__name__}: {e}"
        if self.path is not None:
            cannot = _write(self.path, self.ex)
            self.written = cannot is None
            error = "; ".join(e for e in (error, cannot) if e) or None  # neither failure hides the other
        return error

    def close(self, remove: bool = True) -> None:
        """The follow ended: the endpoint closed, the file removed (its figures are no longer current) unless
        told to keep it."""
        if self.server:
            try:
                self.server[0].shutdown()  # (prometheus_client gives the server and its thread)
                self.server[0].server_close()
            except Exception:  # noqa: BLE001 - closing an endpoint never fails the quit
                pass
        if self.path is not None and remove:
            try:
                os.unlink(self.path)
            except OSError:
                pass


def _host(spec: str) -> str:
    """The host a source names (``host:/path``), else this machine's name."""
    import socket

    head, sep, _ = spec.partition(":")
    return head.rsplit("@", 1)[-1] if sep and "/" not in head else socket.gethostname()


def _write(path: str, ex: Export) -> str | None:
    """The families written to ``path`` atomically; why they could not be, else None."""
    from prometheus_client import CollectorRegistry, write_to_textfile

    reg = CollectorRegistry(auto_describe=False)
    reg.register(ex)
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        write_to_textfile(path, reg)
    except OSError as e:
        return f"cannot write {path}: {e}"
    return None


def _serve(ex: Export, listen: str) -> Any:
    """The HTTP endpoint on ``HOST:PORT`` (a bare port: 127.0.0.1), serving the same text: prometheus_client's
    (server, thread); or why it cannot listen (a string)."""
    from prometheus_client import CollectorRegistry, start_http_server

    host, _, port = listen.rpartition(":")
    reg = CollectorRegistry(auto_describe=False)
    reg.register(ex)
    try:
        return start_http_server(int(port), addr=host or "127.0.0.1", registry=reg)
    except (OSError, ValueError) as e:
        return f"cannot listen on {listen}: {e}"
