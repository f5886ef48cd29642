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

import warnings
from dataclasses import replace

import numpy as np

from .. import fmt
from . import figures, spill
from . import ruletable as table
from .endings import first_line
from .processes import End, first_end, how_words
from .rules import GAP, Alert, Incident, Rules, order, steps_text
from .store import RankData, Snapshot

__all__ = ["GAP", "Incident", "merge", "order", "scan", "steps_text"]

def scan(store: Snapshot, rules: Rules) -> list[Incident]:
    """Every incident the rows of the run's current timeline show, oldest first (read from a snapshot: a scan
    of a long history holds no lock the screen or the reading thread waits for). What it reads back of the
    spilled rows is kept only while it scans (spill.one_pass)."""
    with spill.one_pass():
        return _scan(store, rules)


def _scan(store: Snapshot, rules: Rules) -> list[Incident]:
    out: list[Incident] = []
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ask = table.Ask(store, rules)
        ranks = sorted(r for r, d in store.ranks.items() if d.rows)
        job = figures.lowest_rank(store)
        for rule in table.TABLE:
            for r in ranks if rule.per_rank else [job] if job is not None else []:
                out += rule.incidents(ask, r, store.ranks[r])
        out += _sessions(store)
        if job is not None:
            out += _stalls(store, store.ranks[job])
    return sorted(out, key=order)


def _stalls(store: Snapshot, d: RankData) -> list[Incident]:
    """Gaps between two rows of one session longer than the stall limit (a restart is no stall)."""
    limit = figures.stall_after(store)
    rows = np.flatnonzero(d.effective())
    if len(rows) < 2:
        return []
    t, sess, step = d.take("time", rows), d.take("session", rows), d.take("step", rows)
    gap = np.diff(t)
    at = np.flatnonzero((gap > limit) & (sess[1:] == sess[:-1]))
    return [Incident("stalled", None, int(step[i]), int(step[i + 1]), float(t[i]), float(t[i + 1]), float(gap[i]),
                     f"no new row for {fmt.duration(float(gap[i]))} after step {fmt.step(step[i])} "
                     f"(limit {fmt.duration(limit)})") for i in at]


def _sessions(store: Snapshot) -> list[Incident]:
    """How each process start of the job ended, from the files: a session with an ``abort`` is a
    ``job_failed`` incident (the first abort's rank and error); one that ended with no ``end`` event and was
    followed by another session is a ``job_dead`` incident at its last step (killed, or its host lost). The
    job's last session is the live alert's (dead or failed now), so every reader, live or not, agrees."""
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
        last = max(members, key=lambda m: m[1].at("step", m[3] - 1))
        r_last, d_last, _, hi = last
        step, t = int(d_last.at("step", hi - 1)), d_last.at("time", hi - 1)
        resumed = [int(m[1].segments[k + 1].first_step) for m in later
                   if m[1].segments[k + 1].first_row < m[1].rows]
        then = f"; it resumed at step {min(resumed)}" if resumed else ""
        if aborts:
            ta, r, a = aborts[0]
            err = first_line(str(a.get("error") or "no error given"))
            out.append(Incident("job_failed", r, step, step, t, ta,
                                None, f"rank {r} aborted after step {fmt.step(a.get('step', step))}: {err}{then}"))
        elif not any(m[1].segments[k].session in m[1].ends for m in later):
            first = _first_exit(k, members)
            who = (f"rank {first[0]}'s process ended first ({first[1]}); " if first is not None else "")
            out.append(Incident("job_dead", first[0] if first is not None else None, step, step, t, t, None,
                                f"{who}the job stopped at step {fmt.step(step)} with no end (killed, or its hosts "
                                f"lost){then}"))
    return out


def _first_exit(k: int, members: list[tuple[int, RankData, int, int]]) -> tuple[int, str] | None:
    """The rank whose process of session ``k`` ended first by its exit witness (mstop.engine.processes.first_end:
    seen while the others ran, or ahead by the margin of their clocks), with how it ended; None when no exit
    tells."""
    ends = []
    for r, d, _, _ in members:
        start = d.starts.get(d.segments[k].session) or {}
        pid = start.get("pid")
        got = [e for e in d.exits if pid is not None and e.get("pid") == pid]
        if got:
            ends.append(End(r, float(got[0]["time"]), got[0], start))
    found = first_end(ends, 0.0)
    return (found[0].rank, how_words(found[0].exit or {})) if found is not None else None


def merge(history: list[Incident], live: list[Incident], alerts: list[Alert]) -> list[Incident]:
    """The scanned incidents, the live-only ones, and each marked active when an alert of its kind and rank
    holds now (the newest of them); oldest first."""
    out = list(history) + [replace(i, active=False) for i in live if not table.scanned(i.kind)]  # copies: marked below
    by: dict[tuple[str, int | None], list[Incident]] = {}  # one look a kind and rank (2,000 alerts: 1 s)
    for i in out:
        by.setdefault((i.kind, i.rank), []).append(i)
    for a in alerts:
        same = by.get((a.kind, a.rank), [])
        if a.kind in ("job_dead", "job_failed"):  # the last session's end: the history holds only earlier ones
            same = []
        if same:
            newest = max(same, key=order)
            newest.active = True
        else:  # active now, not (yet) in the history: e.g. a spike among rows the scan's warm-up skipped
            out.append(from_alert(a, None))
            out[-1].active = True
            by.setdefault((a.kind, a.rank), []).append(out[-1])
    return sorted(out, key=order)


def from_alert(a: Alert, t: float | None) -> Incident:
    return Incident(a.kind, a.rank, a.step, a.step, t, t, a.severity or None, a.message)
