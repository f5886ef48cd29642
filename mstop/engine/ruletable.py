"""The health rules a run's rows answer, each written once: its measure over rows, its condition, its words.

A rule is asked two questions. :meth:`alerts`: does it hold now, over the recent window (what
:mod:`mstop.engine.health` shows as alerts)? :meth:`incidents`: where did it hold in the history (what
:mod:`mstop.engine.incidents` keeps)? Both answers come from the same measure, the same condition and the
same words: a spike is the same z over the previous ``spike_window`` steps whether it is the last row or row
40,000; a starving rank is the same share of its step time, over the window the screen shows, or over each
stretch of the history as long as that window. Where the live answer is a figure the screen also shows (the
data-wait share, the headroom, the recent pace) the alert reads that figure, so they agree.

The rules over the whole job (the lowest rank's rows stand for it: spikes, overflows, throughput) give alerts
and incidents with ``rank`` None; the others one per rank.

:data:`TABLE` drives both readers: :func:`mstop.engine.health.evaluate` asks each of its rules for alerts and
:func:`mstop.engine.incidents.scan` for incidents, in a loop, each with one :class:`Ask` (the rows, the
settings, and what several rules read, worked out once). A rule is a :class:`Rule`: adding one is a class
and an entry of :data:`TABLE`, nothing else.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace
from functools import cached_property
from typing import Callable

import numpy as np

from .. import fmt
from . import figures
from .rules import GAP, Alert, Incident, Rules, groups
from .store import RankData, Snapshot


def _step(d: RankData, i: int | np.integer) -> int:
    """Row ``i``'s step."""
    return int(d.at("step", int(i)))


def incidents_of(kind: str, rank: int | None, d: RankData, rows: np.ndarray, fire: np.ndarray, measure: np.ndarray,
                 describe: Callable[[int], str], worst_high: bool = True) -> list[Incident]:
    """One incident per group of firing rows; ``describe(i)`` words the worst row ``i`` (into ``rows``)."""
    pos = np.flatnonzero(fire)
    out = []
    for a, b in groups(pos):
        sel = pos[a:b + 1]
        m = measure[sel]
        score = np.where(np.isfinite(m), m if worst_high else -m, -np.inf)
        k = sel[int(np.argmax(score))]  # the worst finite row; the first when none is finite
        r0, r1 = rows[sel[0]], rows[sel[-1]]
        out.append(Incident(kind, rank, int(d.at("step", r0)), int(d.at("step", r1)), d.at("time", r0),
                            d.at("time", r1),
                            float(measure[k]), describe(k)))
    return out


def rolling_sum(x: np.ndarray, n: int) -> np.ndarray:
    """Sum of the last ``n`` values at each position (fewer at the start)."""
    c = np.concatenate([[0.0], np.cumsum(x)])
    idx = np.arange(1, len(x) + 1)
    return c[idx] - c[np.maximum(0, idx - n)]


class Ask:
    """What a rule is asked over: the run's rows (``store``, read under its lock), the settings, and what
    several rules read, worked out once for all of them (the job's rank, the recent window, which ranks' recent
    rows a rule's row condition holds on)."""

    def __init__(self, store: Snapshot, rules: Rules) -> None:
        self.store, self.rules = store, rules
        self._hits: dict[str, dict[int, bool]] = {}

    @cached_property
    def job(self) -> RankData | None:
        """The job's rank's rows (the lowest rank: its rows stand for the job), None without rows."""
        return figures.job_rank(self.store)

    @cached_property
    def window(self) -> figures.Window:
        """Every rank's recent rows in one table (figures.window)."""
        return figures.window(self.store)

    def recent_hit(self, rule: Rule, r: int) -> bool | None:
        """Whether ``rule``'s row condition holds on a row of rank ``r``'s recent window (None: the rank has no
        row there, or the rule no row condition): new rows are screened for all ranks at once."""
        if rule.columns is None:
            return None
        hits = self._hits.get(rule.kind)
        if hits is None:
            w = self.window
            fire = np.any(rule.row_hit({c: w.cols[c] for c in rule.columns}, self.rules), axis=1)
            hits = self._hits[rule.kind] = dict(zip(w.ranks, fire.tolist()))
        return hits.get(r)


class Rule:
    """One rule of the table: its kind, and its two answers over one :class:`Ask`."""

    kind = ""
    #: its incidents are asked rank by rank (each its rank's), else over the job's rank (``rank`` None)
    per_rank = False
    #: its alert still holds for a run that ended (finished, dead or failed): its history shows it
    after_end = False
    #: the columns a single row's condition reads (:meth:`row_hit`); None: no row is a candidate on its own
    columns: tuple[str, ...] | None = None
    #: the settings that condition reads (its watermark is kept under them: new thresholds, a new look)
    settings: tuple[str, ...] = ()

    def alerts(self, ask: Ask) -> list[Alert]:
        """Does it hold now, over the recent window?"""
        raise NotImplementedError

    def incidents(self, ask: Ask, r: int, d: RankData) -> list[Incident]:
        """Where did it hold in rank ``r``'s history (its rows ``d``)?"""
        raise NotImplementedError

    def row_hit(self, cols: dict[str, np.ndarray], rules: Rules) -> np.ndarray:
        """Rows (of ``cols``, its :attr:`columns`) that could make it fire on their own: rows none of which holds
        this are skipped by the history scan (its watermark)."""
        raise NotImplementedError

    def quiet(self, ask: Ask, r: int, d: RankData) -> bool:
        """Whether no new row of rank ``r`` can make it fire (:func:`quiet`, by :meth:`row_hit`)."""
        rules = ask.rules
        return quiet(d, f"{self.kind}:{[getattr(rules, f) for f in self.settings]}",
                     lambda lo, hi: bool(np.any(self.row_hit({c: d.span(c, lo, hi) for c in self.columns or ()},
                                                             rules))), ask.recent_hit(self, r))


def quiet(d: RankData, key: str, candidate: Callable[[int, int], bool], recent_hit: bool | None) -> bool:
    """Whether no row can make a rule fire: ``candidate(lo, hi)`` says whether rows lo..hi hold one (a row
    over the limit on its own: a 20-row share over a limit needs one). Rows found quiet are remembered (the
    rule's watermark), so only new rows are read next time; ``recent_hit`` answers for the recent window (all
    ranks at once), which holds every new row when there are at most WINDOW of them."""
    done = d.quiet.get(key, 0)
    if done > d.rows:
        done = 0
    new = d.rows - done
    if new and (recent_hit is None or recent_hit or new > figures.WINDOW) and candidate(done, d.rows):
        return False
    d.quiet[key] = d.rows
    return True


#: what a rule's firing over a rank's steady rows from position ``lo`` on is: whether each fires, its measure,
#: and the words of one (by its index from ``lo``)
Firing = tuple[np.ndarray, np.ndarray, Callable[[int], str]]


def _score(worst: float | None, worst_high: bool) -> float:
    """How bad an incident's worst value is, as incidents_of ranks its rows (a value that is no number: least)."""
    return -math.inf if worst is None or not math.isfinite(worst) else worst if worst_high else -worst


def folded(rule: Rule, ask: Ask, r: int, d: RankData, firing: Callable[[np.ndarray, int], Firing],
           worst_high: bool = True) -> list[Incident]:
    """Rank ``r``'s incidents of a rule whose firing at a steady row reads only that row and the rows before it
    (a rolling window, a row's own headroom), folded: each scan reads the rows that arrived since the last one
    (and the window before them); a firing within GAP rows of the last incident extends it, keeping its worst
    unless a new row is worse, as a whole scan groups and ranks them. Found again from the first row when the
    rule's settings or the rank's steady rows changed (RankData.steady_key)."""
    got = d.kept.get(("incidents", rule.kind))
    if got is None and rule.quiet(ask, r, d):  # no row of it ever could fire (the usual rank): none is read
        return []
    rows = np.flatnonzero(d.steady())
    key = (tuple(getattr(ask.rules, f) for f in rule.settings), *d.steady_key())
    kept: list[tuple[int, Incident]] = []  # (its last position, the incident), oldest first
    lo = 0
    if got is not None and got[0] == key and got[1] <= len(rows):
        kept, lo = list(got[2]), got[1]
    elif got is not None and rule.quiet(ask, r, d):
        return []
    if lo == len(rows):
        return [replace(inc) for _, inc in kept]
    fire, measure, describe = firing(rows, lo)
    pos = np.flatnonzero(fire) + lo
    found = incidents_of(rule.kind, r if rule.per_rank else None, d, rows[lo:], fire, measure, describe, worst_high)
    for (a, b), inc in zip(groups(pos), found):
        if kept and pos[a] - kept[-1][0] <= GAP:  # the last incident goes on: one group, as a whole scan has it
            was = kept.pop()[1]
            worse = _score(inc.worst, worst_high) > _score(was.worst, worst_high)  # else the first worst stays
            inc = replace(inc, first_step=was.first_step, first_time=was.first_time,
                          worst=inc.worst if worse else was.worst, message=inc.message if worse else was.message)
        kept.append((int(pos[b]), inc))
    d.kept[("incidents", rule.kind)] = (key, len(rows), kept)
    return [replace(inc) for _, inc in kept]  # copies: a reader marks the active one


# -- NaN / Inf loss -----------------------------------------------------------------------------------------

class NanLoss(Rule):
    """A loss that is not a finite number. It stays active for the rest of the run: the first one found."""

    kind = "nan_loss"
    per_rank = after_end = True

    @staticmethod
    def rows(d: RankData) -> np.ndarray:
        """The rank's effective rows whose loss is NaN or infinite, in order."""
        if not d.nonfinite:
            return np.empty(0, np.int64)
        eff = d.effective()
        return np.array(sorted(i for i, c, _ in d.nonfinite if c == "loss" and eff[i]), dtype=np.int64)

    @staticmethod
    def words(value: float, step: int, rank: int) -> str:
        return f"loss {value} at step {fmt.step(step)} on rank {rank}"

    def alerts(self, ask: Ask) -> list[Alert]:
        """The first NaN of the run (by step, then rank), and on how many more ranks one is."""
        store = ask.store
        first: tuple[float, int, float] | None = None  # (step, rank, value)
        ranks = 0
        for r in store.ranks_with("nonfinite"):  # the usual rank has no literal NaN or Inf at all
            d = store.ranks[r]
            rows = self.rows(d)
            if len(rows):
                ranks += 1
                i = int(rows[0])
                cand = (d.at("step", i), r, d.at("loss", i))
                if first is None or cand[:2] < first[:2]:
                    first = cand
        if first is None:
            return []
        step, rank, value = first
        more = f" (and on {ranks - 1} more rank{'s' if ranks > 2 else ''})" if ranks > 1 else ""
        return [Alert(self.kind, rank, int(step), self.words(value, int(step), rank) + more)]

    def incidents(self, ask: Ask, r: int, d: RankData) -> list[Incident]:
        rows = self.rows(d)
        if not len(rows):
            return []
        loss = d.take("loss", rows).astype(np.float64)
        until = _step(d, rows[-1])
        last = f" ({len(rows)} rows until step {until})" if len(rows) > 1 else ""
        return incidents_of(self.kind, r, d, rows, np.ones(len(rows), bool), np.zeros(len(rows)),
                            lambda k: self.words(loss[k], _step(d, rows[k]), r) + last)


# -- spikes of the loss and the grad norm -------------------------------------------------------------------

class Spike(Rule):
    """A value above the mean of the previous ``spike_window`` steps by ``spike_k`` standard deviations
    (figures.spike_rows: screened by running sums, decided by figures.spikes_at), after ``warmup_steps``."""

    after_end = True

    def __init__(self, column: str, kind: str) -> None:
        self.column, self.kind = column, kind
        self.name = "loss" if column == "loss" else "grad norm"

    def measure(self, d: RankData, rows: np.ndarray, start: int, rules: Rules
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Over the rank's ``rows``, positions ``>= start`` that spike: (positions, values, means, z)."""
        x = d.take(self.column, rows).astype(np.float64)
        js, mean, z = figures.spike_rows(x, rules.spike_window, rules.spike_k, start)
        return js, x, mean, z

    def words(self, x: float, step: int, z: float, mean: float, rules: Rules) -> str:
        return (f"{self.name} {x:.4g} at step {fmt.step(step)}: {z:.1f} standard deviations above the mean "
                f"{mean:.4g} of the previous {rules.spike_window} steps")

    def _ready(self, d: RankData, rules: Rules) -> np.ndarray | None:
        rows = np.flatnonzero(d.effective())
        return rows if len(rows) >= max(rules.warmup_steps, rules.spike_window) + 1 else None

    def alerts(self, ask: Ask) -> list[Alert]:
        """The highest spike among the last ``recent_rows`` rows."""
        d, rules = ask.job, ask.rules
        if d is None or d.effective_rows() < max(rules.warmup_steps, rules.spike_window) + 1:
            return []
        w, recent = rules.spike_window, rules.recent_rows
        tail = d.last_effective(w + recent)
        js, x, mean, z = self.measure(d, tail, max(w, len(tail) - recent), rules)
        if not len(js):
            return []
        best = int(np.argmax(z))  # the first of the highest, as a scan keeping the strictly greater would
        step = _step(d, tail[js[best]])
        return [Alert(self.kind, None, step, self.words(float(x[js[best]]), step, float(z[best]), float(mean[best]),
                                                        rules))]

    def incidents(self, ask: Ask, r: int, d: RankData) -> list[Incident]:
        rules = ask.rules
        rows = self._ready(d, rules)
        if rows is None:
            return []
        js, x, mean_at, z_at = self.measure(d, rows, max(rules.warmup_steps, rules.spike_window), rules)
        fire = np.zeros(len(rows), bool)
        fire[js] = True
        mean, z = np.full(len(rows), np.nan), np.full(len(rows), np.nan)
        mean[js], z[js] = mean_at, z_at
        return incidents_of(self.kind, None, d, rows, fire, np.where(np.isfinite(x), x, np.nan),
                            lambda k: self.words(x[k], _step(d, rows[k]), z[k], mean[k], rules))


# -- overflows ----------------------------------------------------------------------------------------------

class Overflow(Rule):
    """At least ``overflow_n`` overflows among the last ``overflow_m`` steps."""

    kind = "overflow"
    after_end = True

    @staticmethod
    def measure(d: RankData, rows: np.ndarray, rules: Rules) -> tuple[np.ndarray, np.ndarray]:
        """Per row: whether it overflowed, and the overflows among the ``overflow_m`` rows up to it."""
        ov = (d.take("overflow", rows) > 0.5).astype(np.float64)
        return ov, rolling_sum(ov, rules.overflow_m)

    @staticmethod
    def words(count: int, span: int, step: int, scale: float | None, *, live: bool) -> str:
        if live:
            now = f"; loss scale now {scale:g}" if scale is not None else ""
            return f"{count:,} overflows in the last {span:,} steps{now}"
        return f"{count:,} overflows in {span:,} steps up to step {fmt.step(step)}"

    def alerts(self, ask: Ask) -> list[Alert]:
        d, rules = ask.job, ask.rules
        if d is None:
            return []
        rows = d.last_effective(rules.overflow_m)
        if not len(rows):
            return []
        _, count = self.measure(d, rows, rules)
        n = int(count[-1])
        if n < rules.overflow_n:
            return []
        scale = d.take("loss_scale", rows)
        scale = scale[~np.isnan(scale)]
        step = _step(d, rows[-1])
        return [Alert(self.kind, None, step, self.words(n, len(rows), step, float(scale[-1]) if len(scale) else None,
                                                        live=True))]

    def incidents(self, ask: Ask, r: int, d: RankData) -> list[Incident]:
        rules = ask.rules
        rows = np.flatnonzero(d.effective())
        ov, count = self.measure(d, rows, rules)
        fire = (count >= rules.overflow_n) & (ov > 0)
        return incidents_of(self.kind, None, d, rows, fire, count,
                            lambda k: self.words(int(count[k]), rules.overflow_m, _step(d, rows[k]), None,
                                                 live=False))


# -- data starvation ----------------------------------------------------------------------------------------

class Starvation(Rule):
    """A rank waits on input more than ``data_wait`` of its step time over the recent window (figures.WINDOW
    rows where both are known), with a mean wait of at least ``data_wait_floor_s``, over a window past its
    session's first ``data_wait_warmup`` rows (its input pipeline fills)."""

    kind = "data_starvation"
    per_rank = True
    columns = ("data_wait", "step_time")
    settings = ("data_wait",)

    def row_hit(self, cols: dict[str, np.ndarray], rules: Rules) -> np.ndarray:
        """A row that waited more than the limit of its own step."""
        with np.errstate(invalid="ignore"):
            return cols["data_wait"] > rules.data_wait * cols["step_time"]

    @staticmethod
    def fires(share: np.ndarray, mean_wait: np.ndarray, rows_in_session: np.ndarray, rules: Rules) -> np.ndarray:
        """Over a window (the WINDOW rows up to the row) that holds none of the session's first
        ``data_wait_warmup`` rows: the pipeline's filling never counts (a real job's second and third steps
        waited 18 and 25 ms of 24 and 28 ms on a loaded machine, and fired at its eleventh row)."""
        with np.errstate(invalid="ignore"):
            return np.isfinite(share) & (share > rules.data_wait) & (mean_wait >= rules.data_wait_floor_s) & \
                (rows_in_session >= rules.data_wait_warmup + figures.WINDOW)

    @staticmethod
    def words(r: int, share: float, step: int, rules: Rules, *, live: bool) -> str:
        said, limit = fmt.share_vs(share, rules.data_wait)
        if live:
            return f"rank {r} waits on input {said} of its step time (limit {limit})"
        return f"rank {r} waited on input {said} of its step time around step {fmt.step(step)} (limit {limit})"

    def alerts(self, ask: Ask) -> list[Alert]:
        """Over the window the screen shows (its data-wait share is the same figure)."""
        store, rules, w = ask.store, ask.rules, ask.window
        frac = figures.rank_data_wait_frac(store)
        ok = ~np.isnan(w.cols["data_wait"]) & ~np.isnan(w.cols["step_time"])
        mean_wait = np.where(ok, w.cols["data_wait"], 0.0).sum(axis=1) / np.maximum(ok.sum(axis=1), 1)
        ring = store.folds.ring()  # the window's ranks, in the same order: rows, and the latest session's first
        in_session = ring.rows - ring.latest_first
        out = []
        for i in np.flatnonzero(self.fires(frac, mean_wait, in_session, rules)):
            r = w.ranks[i]
            step = int(store.ranks[r].last("step"))
            out.append(Alert(self.kind, r, step, self.words(r, float(frac[i]), step, rules, live=True),
                             severity=float(frac[i])))
        return out

    def incidents(self, ask: Ask, r: int, d: RankData) -> list[Incident]:
        rules = ask.rules

        def firing(rows: np.ndarray, lo: int) -> Firing:
            at = max(0, lo - figures.WINDOW + 1)  # the window before ``lo`` is read, its firing not
            rows = rows[at:]
            dw, st = d.take("data_wait", rows).astype(np.float64), d.take("step_time", rows).astype(np.float64)
            ok = ~np.isnan(dw) & ~np.isnan(st)
            waited = rolling_sum(np.where(ok, dw, 0.0), figures.WINDOW)[lo - at:]
            total = rolling_sum(np.where(ok, st, 0.0), figures.WINDOW)[lo - at:]
            with np.errstate(invalid="ignore", divide="ignore"):
                share = np.where(total > 0, waited / np.where(total > 0, total, 1.0), np.nan)
            mean_wait = waited / np.maximum(rolling_sum(ok.astype(np.float64), figures.WINDOW)[lo - at:], 1.0)
            rows = rows[lo - at:]
            first = np.array([seg.first_row for seg in d.segments], dtype=np.int64)[d.take("session", rows)]
            return (self.fires(share, mean_wait, rows - first + 1, rules), share,
                    lambda k: self.words(r, float(share[k]), _step(d, rows[k]), rules, live=False))
        return folded(self, ask, r, d, firing)


# -- memory headroom ----------------------------------------------------------------------------------------

class OomRisk(Rule):
    """Memory headroom (1 - peak / total) under ``oom_critical``: per rank, or per host when the ranks' memory
    is the host's RAM (its ranks' peaks added up: only the live rule can, a row has one rank's)."""

    kind = "oom_risk"
    per_rank = True
    columns = ("mem_peak", "mem_total")
    settings = ("oom_critical",)

    def row_hit(self, cols: dict[str, np.ndarray], rules: Rules) -> np.ndarray:
        """A row whose own headroom is under the critical one."""
        with np.errstate(invalid="ignore"):
            return cols["mem_peak"] > (1.0 - rules.oom_critical) * cols["mem_total"]

    @staticmethod
    def fires(head: np.ndarray, rules: Rules) -> np.ndarray:
        return np.isfinite(head) & (head < rules.oom_critical)

    @staticmethod
    def words(who: str, head: float, step: int | None, rules: Rules) -> str:
        at = f" at step {fmt.step(step)}" if step is not None else ""
        return (f"{who}: memory headroom {fmt.share_vs(head, rules.oom_critical, 1)[0]}{at} (critical under "
                f"{fmt.share_vs(head, rules.oom_critical)[1]})")

    def alerts(self, ask: Ask) -> list[Alert]:
        """Over the window the screen shows (the same headrooms as the header and the ranks table)."""
        store, rules = ask.store, ask.rules
        got = figures.headrooms(store)
        heads = np.fromiter(got.values(), np.float64, len(got))
        hit = np.flatnonzero(self.fires(heads, rules))
        if not len(hit):
            return []
        scopes, step = list(got), figures.step(store)
        return [Alert(self.kind, scopes[i].rank, step, self.words(str(scopes[i]), float(heads[i]), None, rules),
                      severity=-float(heads[i])) for i in hit.tolist()]

    def incidents(self, ask: Ask, r: int, d: RankData) -> list[Incident]:
        rules = ask.rules
        if d.last_start and d.last_start.get("memory_source") == "host":
            return []  # host memory is shared by a host's ranks: only the live rule adds them up

        def firing(rows: np.ndarray, lo: int) -> Firing:  # the rows the live rule's window reads
            rows = rows[lo:]
            with np.errstate(invalid="ignore", divide="ignore"):
                head = 1.0 - d.take("mem_peak", rows).astype(np.float64) / d.take("mem_total", rows).astype(np.float64)
            return (self.fires(head, rules), head,
                    lambda k: self.words(f"rank {r}", float(head[k]), _step(d, rows[k]), rules))
        return folded(self, ask, r, d, firing, worst_high=False)


# -- throughput ---------------------------------------------------------------------------------------------

#: the pace's units by the column that counts them, best first (figures.pace_basis)
_PACE_COLUMNS = {"tokens/s": "tokens", "samples/s": "samples"}
_PACE_ORDER = ("tokens", "samples")


class ThroughputDrop(Rule):
    """The job's pace over the recent window under ``throughput_fraction`` of the median of its rows' paces
    past ``warmup_steps``: in tokens/s, else samples/s, else steps/s (figures.pace_basis)."""

    kind = "throughput_drop"

    @staticmethod
    def median(d: RankData, rows: np.ndarray, rules: Rules) -> tuple[str, np.ndarray, np.ndarray, float | None]:
        """(unit, work per row, step time per row, the median pace of the rows past the warm-up) over
        ``rows``."""
        unit, per_step = figures.pace_basis(d)
        work, st = per_step[rows], d.take("step_time", rows).astype(np.float64)
        with np.errstate(all="ignore"):
            rate = work / st
        base = rate[rules.warmup_steps:]
        base = base[np.isfinite(base)]
        return unit, work, st, (float(np.median(base)) if len(base) else None)

    @staticmethod
    def fires(recent: np.ndarray, median: float, rules: Rules) -> np.ndarray:
        return np.isfinite(recent) & (recent < rules.throughput_fraction * median)

    @staticmethod
    def words(unit: str, recent: float, median: float, step: int, rules: Rules, *, live: bool) -> str:
        share, limit = fmt.share_vs(recent / median, rules.throughput_fraction)
        if live:
            return f"{unit} {fmt.rate(recent)} is {share} of the run's median {fmt.rate(median)} (limit {limit})"
        return (f"{unit} {fmt.rate(recent)} around step {fmt.step(step)} was {share} of the run's median "
                f"{fmt.rate(median)}")

    def kept_median(self, d: RankData, rules: Rules) -> tuple[str, float | None]:
        """:meth:`median` over the rank's steady rows, kept between frames: the rows' paces past the warm-up in
        order of size, extended by the rows that arrived since (a merge, not a sort of the run: at 1.25 M rows
        the median of every pace took 30 ms of every frame). Worked out again from the columns when rows
        change which rows are steady (a resume, an older session's rows, a profiled span, a reset) or the
        unit (tokens or samples appear)."""
        key = (*d.steady_key(), rules.warmup_steps)
        got = d.kept.get(self.kind)
        if got is None or got[0] != key or got[1] > d.rows:
            rows = np.flatnonzero(d.steady())
            unit, work, st, _ = self.median(d, rows, rules)
            with np.errstate(all="ignore"):
                rate = (work / st)[rules.warmup_steps:]
            got = (key, d.rows, unit, len(rows), np.sort(rate[np.isfinite(rate)]))
        elif got[1] < d.rows:
            _, done, unit, count, paces = got
            steady = np.flatnonzero(d.steady()[done:]) + done
            col = _PACE_COLUMNS.get(unit)
            better = _PACE_ORDER[:_PACE_ORDER.index(col)] if col is not None else _PACE_ORDER
            # tokens or samples appeared in any new row (figures.pace_basis reads every row, steady or not):
            if any(np.isfinite(d.span(c, done, d.rows)).any() for c in better):  # the pace is counted in them now
                d.kept.pop(self.kind, None)
                return self.kept_median(d, rules)
            per_step = d.take(col, steady).astype(np.float64) if col is not None else figures.row_weights(d, steady)
            skip = max(0, rules.warmup_steps - count)  # steady rows still in the warm-up
            with np.errstate(all="ignore"):
                rate = (per_step / d.take("step_time", steady).astype(np.float64))[skip:]
            rate = np.sort(rate[np.isfinite(rate)])
            got = (key, d.rows, unit, count + len(steady), np.insert(paces, np.searchsorted(paces, rate), rate))
        d.kept[self.kind] = got
        paces, m = got[4], len(got[4])  # in order: the median is read, not searched for
        if not m:
            return got[2], None
        return got[2], float(paces[m // 2]) if m % 2 else float((paces[m // 2 - 1] + paces[m // 2]) / 2)

    def alerts(self, ask: Ask) -> list[Alert]:
        """The recent pace the header shows (figures.recent_pace) against the median."""
        store, d, rules = ask.store, ask.job, ask.rules
        if d is None or d.rows < rules.warmup_steps + figures.WINDOW:
            return []
        if d.segments and d.rows - d.segments[-1].first_row < rules.warmup_steps + figures.WINDOW + 1:
            return []  # a resumed session warming up: its window holds its first, slower steps
        unit, med = self.kept_median(d, rules)  # compilation steps are no throughput
        recent = figures.recent_pace(store, unit)
        if recent is None or med is None or not self.fires(np.array([recent]), med, rules)[0]:
            return []
        step = figures.step(store)
        return [Alert(self.kind, None, step, self.words(unit, recent, med, step or 0, rules, live=True))]

    def incidents(self, ask: Ask, r: int, d: RankData) -> list[Incident]:
        rules = ask.rules
        rows = np.flatnonzero(d.steady())
        if len(rows) < rules.warmup_steps + figures.WINDOW:
            return []
        unit, work, st, med = self.median(d, rows, rules)
        if med is None:
            return []
        ok = np.isfinite(work) & np.isfinite(st) & (st > 0)
        with np.errstate(all="ignore"):
            recent = rolling_sum(np.where(ok, work, 0.0), figures.WINDOW) / rolling_sum(np.where(ok, st, 0.0),
                                                                                         figures.WINDOW)
        fire = (_in_session(d, rows) >= rules.warmup_steps + figures.WINDOW) & self.fires(recent, med, rules)
        return incidents_of(self.kind, None, d, rows, fire, recent,
                            lambda k: self.words(unit, float(recent[k]), med, _step(d, rows[k]), rules, live=False),
                            worst_high=False)


def _in_session(d: RankData, rows: np.ndarray) -> np.ndarray:
    """For each of ``rows`` (rank ``d``'s row indexes, ascending), how many of ``rows`` come before it in its
    own session: a window of a resumed session's first rows holds its warm-up (a false throughput_drop)."""
    if not len(rows) or not d.segments:
        return np.arange(len(rows))
    firsts = np.array([seg.first_row for seg in d.segments], np.int64)
    seg = np.searchsorted(firsts, rows, side="right") - 1
    starts = np.searchsorted(rows, firsts)
    return np.arange(len(rows)) - starts[np.maximum(seg, 0)]


NAN_LOSS = NanLoss()
LOSS_SPIKE = Spike("loss", "loss_spike")
GRAD_SPIKE = Spike("grad_norm", "grad_spike")
OVERFLOW = Overflow()
STARVATION = Starvation()
OOM_RISK = OomRisk()
THROUGHPUT_DROP = ThroughputDrop()
#: the rules the rows answer, in the documented order of their kinds (mstop.engine.rules.KINDS)
TABLE: tuple[Rule, ...] = (NAN_LOSS, LOSS_SPIKE, GRAD_SPIKE, OVERFLOW, OOM_RISK, STARVATION, THROUGHPUT_DROP)
#: what the history scan answers beside the table's rules: the gaps between rows, how each session ended
SCANNED_BESIDE = ("stalled", "job_dead", "job_failed")


def scanned(kind: str) -> bool:
    """Whether the history scan answers ``kind`` (else its incidents are the live alerts', as they fire)."""
    return kind in SCANNED_BESIDE or any(rule.kind == kind for rule in TABLE)


def after_end(kind: str) -> bool:
    """Whether an alert of ``kind`` still holds for a run that ended (its rule says so)."""
    return any(rule.kind == kind and rule.after_end for rule in TABLE)


def quietly(f: Callable[[], list]) -> list:
    """``f()`` with numpy's warnings of empty and NaN reductions silenced (a rank may have none yet)."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return f()
