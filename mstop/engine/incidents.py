"""Incidents: every alert that fired, kept with its history (an alert is only what holds now).

A loss spike 200 steps ago in a running job is no active alert any more, but it happened. The rules
that a run's rows can answer after the fact (NaN loss, loss and grad-norm spikes, overflows, data
starvation, throughput drops, memory under the critical headroom, stalls between rows) are scanned
over the whole current timeline here, the same way ``summary`` and the monitor see them. The rules
that only the present can answer (dead and lagging ranks, stragglers, a missing checkpoint, a dead or
failed job) become incidents when they fire live (:class:`~mstop.engine.health.Health` records them; a
one-shot ``summary`` records those active at its moment).

An incident is ``{kind, rank, first_step, last_step, first_time, last_time, worst, message, active}``;
firings of the same rule on the same rank less than ``GAP`` rows apart are one incident.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from .. import fmt
from . import figures
from .store import RankData, Store

#: firings of one rule on one rank at most this many rows apart belong to one incident
GAP = 20
#: kinds the history scan answers; the others come from live alerts
SCANNED = ("nan_loss", "loss_spike", "grad_spike", "overflow", "oom_risk", "data_starvation", "throughput_drop",
           "stalled", "job_dead", "job_failed")


@dataclass
class Incident:
    kind: str
    rank: int | None
    first_step: int | None
    last_step: int | None
    first_time: float | None
    last_time: float | None
    worst: float | None  # the rule's own measure at its worst (the loss of a spike, a data-wait share, ...)
    message: str
    active: bool = False

    def public(self) -> dict[str, Any]:
        """As ``summary --json`` shows it (non-finite numbers as strings)."""
        d = asdict(self)
        w = d["worst"]
        if isinstance(w, float) and not math.isfinite(w):
            d["worst"] = "nan" if math.isnan(w) else ("inf" if w > 0 else "-inf")
        return d

    def steps(self) -> str:
        """``step 300`` or ``steps 484-535``, for people."""
        return steps_text(self.first_step, self.last_step)

    def overlaps(self, kind: str, rank: int | None, step: int | None) -> bool:
        return self.kind == kind and self.rank == rank and step is not None and self.first_step is not None \
            and self.last_step is not None and self.first_step - GAP <= step <= self.last_step + GAP


def steps_text(first: int | None, last: int | None) -> str:
    """``step 300`` or ``steps 484-535``: an incident's steps for people (screen, summary table, report)."""
    return f"step {first}" if first == last else f"steps {first}-{last}"


def _groups(pos: np.ndarray) -> list[tuple[int, int]]:
    """Runs of positions with gaps of at most GAP: (first, last) index pairs into ``pos``."""
    if not len(pos):
        return []
    breaks = np.flatnonzero(np.diff(pos) > GAP)
    starts = np.concatenate([[0], breaks + 1])
    ends = np.concatenate([breaks, [len(pos) - 1]])
    return list(zip(starts.tolist(), ends.tolist()))


def _incidents(kind: str, rank: int | None, d: RankData, rows: np.ndarray, fire: np.ndarray, measure: np.ndarray,
               describe, worst_high: bool = True) -> list[Incident]:
    """One incident per group of firing rows; ``describe(i)`` words the worst row ``i`` (into ``rows``)."""
    pos = np.flatnonzero(fire)
    out = []
    step, t = d.col("step"), d.col("time")
    for a, b in _groups(pos):
        sel = pos[a:b + 1]
        m = measure[sel]
        score = np.where(np.isfinite(m), m if worst_high else -m, -np.inf)
        k = sel[int(np.argmax(score))]  # the worst finite row; the first when none is finite
        r0, r1 = rows[sel[0]], rows[sel[-1]]
        out.append(Incident(kind, rank, int(step[r0]), int(step[r1]), float(t[r0]), float(t[r1]),
                            float(measure[k]), describe(k)))
    return out


def _rolling_sum(x: np.ndarray, n: int) -> np.ndarray:
    """Sum of the last ``n`` values at each position (fewer at the start)."""
    c = np.concatenate([[0.0], np.cumsum(x)])
    idx = np.arange(1, len(x) + 1)
    return c[idx] - c[np.maximum(0, idx - n)]


def scan(store: Store, rules: Any) -> list[Incident]:
    """Every incident the rows of the run's current timeline show, oldest first."""
    out: list[Incident] = []
    # the lock is taken a rank at a time: a scan of a long history on the monitor's worker thread must not
    # hold up the screen or the reading thread for all of it
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with store.lock:
            w = figures.window(store)  # every rank's recent rows in one table: new rows checked all at once
            starving = np.any(w.cols["data_wait"] > rules.data_wait * w.cols["step_time"], axis=1)
            pressed = np.any(w.cols["mem_peak"] > (1.0 - rules.oom_critical) * w.cols["mem_total"], axis=1)
            recent = {r: (bool(s), bool(p)) for r, s, p in zip(w.ranks, starving, pressed)}
            ranks = sorted(r for r, d in store.ranks.items() if d.rows)
        for r in ranks:
            with store.lock:
                d = store.ranks[r]
                hit = recent.get(r, (None, None))
                out += _nan(r, d)
                out += _starvation(r, d, rules, hit[0])
                out += _oom(r, d, rules, hit[1])
        with store.lock:
            out += _sessions(store)
        d = figures.job_rank(store)
        if d is not None:
            for part in (lambda: _spikes(d, "loss", "loss_spike", rules),
                         lambda: _spikes(d, "grad_norm", "grad_spike", rules),
                         lambda: _overflows(d, rules), lambda: _throughput(d, rules), lambda: _stalls(store, d)):
                with store.lock:
                    out += part()
    return sorted(out, key=order)


def order(i: Incident) -> tuple:
    return (i.first_time if i.first_time is not None else math.inf,
            i.first_step if i.first_step is not None else -1, i.kind, -1 if i.rank is None else i.rank)


def _nan(r: int, d: RankData) -> list[Incident]:
    if not d.nonfinite:
        return []
    eff = d.effective()
    rows = np.array(sorted(i for i, c, _ in d.nonfinite if c == "loss" and eff[i]), dtype=np.int64)
    if not len(rows):
        return []
    loss = d.col("loss")[rows].astype(np.float64)
    step = d.col("step")
    return _incidents("nan_loss", r, d, rows, np.ones(len(rows), bool), np.zeros(len(rows)),
                      lambda k: f"loss {loss[k]} at step {int(step[rows[k]])} on rank {r}"
                      + (f" ({len(rows)} rows until step {int(step[rows[-1]])})" if len(rows) > 1 else ""))


def _spikes(d: RankData, column: str, kind: str, rules: Any) -> list[Incident]:
    rows = np.flatnonzero(d.effective())
    w = rules.spike_window
    start = max(rules.warmup_steps, w)
    if len(rows) < start + 1:
        return []
    x = d.col(column)[rows].astype(np.float64)
    js, mean_at, z_at = figures.spike_rows(x, w, rules.spike_k, start)
    fire = np.zeros(len(rows), bool)
    fire[js] = True
    mean, z = np.full(len(rows), np.nan), np.full(len(rows), np.nan)
    mean[js], z[js] = mean_at, z_at
    name = "loss" if column == "loss" else "grad norm"
    step = d.col("step")
    return _incidents(kind, None, d, rows, fire, np.where(np.isfinite(x), x, np.nan),
                      lambda k: f"{name} {x[k]:.4g} at step {int(step[rows[k]])}: {z[k]:.1f} standard deviations "
                                f"above the mean {mean[k]:.4g} of the previous {w} steps")


def _overflows(d: RankData, rules: Any) -> list[Incident]:
    rows = np.flatnonzero(d.effective())
    ov = (d.col("overflow")[rows] > 0.5).astype(np.float64)
    count = _rolling_sum(ov, rules.overflow_m)
    fire = (count >= rules.overflow_n) & (ov > 0)
    return _incidents("overflow", None, d, rows, fire, count,
                      lambda k: f"{int(count[k])} overflows in {rules.overflow_m} steps up to step "
                                f"{int(d.col('step')[rows[k]])}")


def _quiet(d: RankData, key: str, candidate, recent_hit: bool | None) -> bool:
    """Whether no row can make a rule fire: ``candidate(lo, hi)`` says whether rows lo..hi hold one (a row
    over the limit on its own: a 20-row share over a limit needs one). Rows found quiet are remembered, so
    only new rows are read next time; ``recent_hit`` answers for the recent window (all ranks at once),
    which holds every new row when there are at most WINDOW of them."""
    done = d.quiet.get(key, 0)
    if done > d.rows:
        done = 0
    new = d.rows - done
    if new and (recent_hit is None or recent_hit or new > figures.WINDOW) and candidate(done, d.rows):
        return False
    d.quiet[key] = d.rows
    return True


def _starvation(r: int, d: RankData, rules: Any, recent_hit: bool | None = None) -> list[Incident]:
    if _quiet(d, f"data_wait>{rules.data_wait}", lambda lo, hi: bool(np.any(
            d.col("data_wait")[lo:hi] > rules.data_wait * d.col("step_time")[lo:hi])), recent_hit):
        return []
    rows = np.flatnonzero(d.steady())
    dw, st = d.col("data_wait")[rows].astype(np.float64), d.col("step_time")[rows].astype(np.float64)
    ok = np.isfinite(dw) & np.isfinite(st)
    waited = _rolling_sum(np.where(ok, dw, 0.0), figures.WINDOW)
    share = waited / _rolling_sum(np.where(ok, st, 0.0), figures.WINDOW)
    mean_wait = waited / np.maximum(_rolling_sum(ok.astype(np.float64), figures.WINDOW), 1.0)
    # the live rule's conditions: a share over the limit, a wait that matters (the floor), past the warm-up
    # rows of the row's session (its input pipeline is filling)
    sess = d.session_idx.view()[rows]
    first = np.array([seg.first_row for seg in d.segments], dtype=np.int64)[sess]
    fire = np.isfinite(share) & (share > rules.data_wait) & (mean_wait >= rules.data_wait_floor_s) & \
        (rows - first > rules.data_wait_warmup)
    return _incidents("data_starvation", r, d, rows, fire, share,
                      lambda k: "rank {} waited on input {} of its step time around step {} (limit {})".format(
                          r, fmt.share_vs(share[k], rules.data_wait)[0], int(d.col('step')[rows[k]]),
                          fmt.share_vs(share[k], rules.data_wait)[1]))


def _oom(r: int, d: RankData, rules: Any, recent_hit: bool | None = None) -> list[Incident]:
    if d.last_start and d.last_start.get("memory_source") == "host":
        return []  # host memory is shared by a host's ranks: only the live rule adds them up
    if _quiet(d, f"headroom<{rules.oom_critical}", lambda lo, hi: bool(np.any(
            d.col("mem_peak")[lo:hi] > (1.0 - rules.oom_critical) * d.col("mem_total")[lo:hi])), recent_hit):
        return []
    rows = np.flatnonzero(d.steady())  # the rows the live rule's window reads
    head = 1.0 - d.col("mem_peak")[rows].astype(np.float64) / d.col("mem_total")[rows].astype(np.float64)
    fire = np.isfinite(head) & (head < rules.oom_critical)
    return _incidents("oom_risk", r, d, rows, fire, head,
                      lambda k: f"rank {r}: memory headroom {fmt.share_vs(head[k], rules.oom_critical, 1)[0]} at "
                                f"step {int(d.col('step')[rows[k]])} (critical under "
                                f"{fmt.share_vs(head[k], rules.oom_critical)[1]})", worst_high=False)


def _throughput(d: RankData, rules: Any) -> list[Incident]:
    rows = np.flatnonzero(d.steady())
    if len(rows) < rules.warmup_steps + figures.WINDOW:
        return []
    unit, per_step = figures.pace_basis(d)  # tokens, else samples, else steps
    tok, st = per_step[rows], d.col("step_time")[rows].astype(np.float64)
    ok = np.isfinite(tok) & np.isfinite(st) & (st > 0)
    rate = np.where(ok, tok / np.where(ok, st, 1.0), np.nan)
    base = rate[rules.warmup_steps:]
    base = base[np.isfinite(base)]
    if not len(base):
        return []
    med = float(np.median(base))
    recent = _rolling_sum(np.where(ok, tok, 0.0), figures.WINDOW) / _rolling_sum(np.where(ok, st, 0.0),
                                                                                figures.WINDOW)
    fire = (np.arange(len(rows)) >= rules.warmup_steps + figures.WINDOW) & np.isfinite(recent) & \
        (recent < rules.throughput_fraction * med)
    return _incidents("throughput_drop", None, d, rows, fire, recent,
                      lambda k: f"{unit} {fmt.rate(recent[k])} around step {int(d.col('step')[rows[k]])} was "
                                f"{fmt.share_vs(recent[k] / med, rules.throughput_fraction)[0]} of the run's median "
                                f"{fmt.rate(med)}", worst_high=False)


def _stalls(store: Store, d: RankData) -> list[Incident]:
    """Gaps between two rows of one session longer than the stall limit (a restart is no stall)."""
    limit = figures.stall_after(store)
    rows = np.flatnonzero(d.effective())
    if len(rows) < 2:
        return []
    t, sess, step = d.col("time")[rows], d.session_idx.view()[rows], d.col("step")[rows]
    gap = np.diff(t)
    at = np.flatnonzero((gap > limit) & (sess[1:] == sess[:-1]))
    return [Incident("stalled", None, int(step[i]), int(step[i + 1]), float(t[i]), float(t[i + 1]), float(gap[i]),
                     f"no new row for {fmt.duration(float(gap[i]))} after step {int(step[i])} "
                     f"(limit {fmt.duration(limit)})") for i in at]


def _sessions(store: Store) -> list[Incident]:
    """How each process start of the job ended, from the files: a session with an ``abort`` is a
    ``job_failed`` incident (the first abort's rank and error); one that ended with no ``end`` event and was
    followed by another session is a ``job_dead`` incident at its last step (killed, or its host lost). The
    job's last session is the live alert's (dead or failed now), so every reader, live or not, agrees."""
    from .endings import first_line

    by_k: dict[int, list[tuple[int, RankData, int, int]]] = {}  # session index -> (rank, data, lo, hi)
    for r, d in sorted(store.ranks.items()):
        for k in range(len(d.segments)):
            lo = d.segments[k].first_row
            hi = d.segments[k + 1].first_row if k + 1 < len(d.segments) else d.rows
            if hi > lo:
                by_k.setdefault(k, []).append((r, d, lo, hi))
    out = []
    for k in sorted(by_k):
        members = by_k[k]
        later = [m for m in members if k + 1 < len(m[1].segments)]
        if not later:
            continue  # the job's last session: what holds now (the live alerts) says how it ended
        aborts = sorted(((float(a["time"]), r, a) for r, d, _, _ in members for a in d.aborts
                         if str(a.get("session")) == d.segments[k].session), key=lambda x: (x[0], x[1]))
        last = max(members, key=lambda m: float(m[1].col("step")[m[3] - 1]))
        r_last, d_last, _, hi = last
        step, t = int(d_last.col("step")[hi - 1]), float(d_last.col("time")[hi - 1])
        resumed = [int(m[1].col("step")[m[1].segments[k + 1].first_row]) for m in later
                   if m[1].segments[k + 1].first_row < m[1].rows]
        then = f"; it resumed at step {min(resumed)}" if resumed else ""
        if aborts:
            ta, r, a = aborts[0]
            err = first_line(str(a.get("error") or "no error given"))
            out.append(Incident("job_failed", r, step, step, t, ta,
                                None, f"rank {r} aborted at step {a.get('step', step)}: {err}{then}"))
        elif not any(m[1].segments[k].session in m[1].ends for m in later):
            first = _first_exit(k, members)
            who = (f"rank {first[0]}'s process ended first ({first[1]}); " if first is not None else "")
            out.append(Incident("job_dead", first[0] if first is not None else None, step, step, t, t, None,
                                f"{who}the job stopped at step {step} with no end (killed, or its hosts lost){then}"))
    return out


def _first_exit(k: int, members: list[tuple[int, RankData, int, int]]) -> tuple[int, str] | None:
    """The rank whose process of session ``k`` ended first by its exit witness (mstop.engine.processes.first_end:
    seen while the others ran, or ahead by the margin of their clocks), with how it ended; None when no exit
    tells."""
    from .processes import End, first_end, how_words

    ends = []
    for r, d, _, _ in members:
        start = d.starts.get(d.segments[k].session) or {}
        pid = start.get("pid")
        got = [e for e in d.exits if pid is not None and e.get("pid") == pid]
        if got:
            ends.append(End(r, float(got[0]["time"]), got[0], start))
    found = first_end(ends, 0.0)
    return (found[0].rank, how_words(found[0].exit or {})) if found is not None else None


def merge(history: list[Incident], live: list[Incident], alerts: list[Any]) -> list[Incident]:
    """The scanned incidents, the live-only ones, and each marked active when an alert of its kind and rank
    holds now (the newest of them); oldest first."""
    out = list(history) + [replace(i, active=False) for i in live if i.kind not in SCANNED]  # copies: marked below
    for a in alerts:
        same = [i for i in out if i.kind == a.kind and i.rank == a.rank]
        if a.kind in ("job_dead", "job_failed"):  # the last session's end: the history holds only earlier ones
            same = []
        if same:
            newest = max(same, key=order)
            newest.active = True
        else:  # active now, not (yet) in the history: e.g. a spike among rows the scan's warm-up skipped
            out.append(from_alert(a, None))
            out[-1].active = True
    return sorted(out, key=order)


def from_alert(a: Any, t: float | None) -> Incident:
    return Incident(a.kind, a.rank, a.step, a.step, t, t, a.severity or None, a.message)
