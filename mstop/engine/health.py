"""Health rules: what a person must see in time, evaluated on the store (never in widgets).

Each rule has a documented default (README, "Health"), configurable by CLI
flags and a TOML file (``mstop.toml`` in the run directory, then
``~/.config/mstop/config.toml``; flags win). Job-wide rules watch the job's
figures and raise one alert with ``rank`` None; per-rank rules raise one alert
per rank, worst first. An alert is active while its condition holds (and, when
``hold_s`` is set, for that many seconds after); it says since when it holds (a
:class:`Health` object remembers); ``nan_loss`` stays active for the rest of the run.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .. import fmt
from ..formats.logstate import SOURCE_PLAIN
from . import devices, endings, figures, processes, rankstate
from . import ruletable as table
from .figures import Options
from .incidents import from_alert, merge, scan
from .rules import KINDS, Alert, Incident, Rules
from .store import Snapshot

__all__ = ["KINDS", "Alert", "Health", "Rules", "evaluate"]

#: statuses of a run that is no longer running: only its history's alerts (and job_dead/job_failed) hold
ENDED = figures.ENDED


@dataclass
class Health:
    """Evaluates the rules; remembers when each alert last held, for the hold time and stickiness."""

    rules: Rules = field(default_factory=Rules)
    _last: dict[tuple[str, int | None], tuple[float, Alert]] = field(default_factory=dict)
    _sticky: dict[tuple[str, int | None], Alert] = field(default_factory=dict)
    #: incidents of the rules the rows cannot answer afterwards (dead ranks, stragglers, ...), as they fired
    _live: list[Incident] = field(default_factory=list)
    _open: dict[tuple[str, int | None], Incident] = field(default_factory=dict)
    #: (kind, rank) -> (step, time) since each active alert holds
    _since: dict[tuple[str, int | None], tuple[int | None, float]] = field(default_factory=dict)

    def incidents(self, store: Snapshot, opts: Options, alerts: list[Alert] | None = None) -> list[Incident]:
        """Every alert that fired in the run's history, oldest first, the active ones marked (mstop.engine.incidents).
        With ``alerts`` given (the ones just evaluated) this only reads: safe on another thread."""
        if alerts is None:
            alerts = self.alerts(store, opts)
        return merge(scan(store, self.rules), list(self._live), alerts)

    def _record(self, current: list[Alert], now: float) -> None:
        """Keep live-only alerts as incidents: one per stretch of time an alert of that kind and rank held."""
        held = set()
        for a in current:
            if table.scanned(a.kind):
                continue
            key = (a.kind, a.rank)
            held.add(key)
            inc = self._open.get(key)
            if inc is None:
                inc = self._open[key] = from_alert(a, now)
                self._live.append(inc)
            else:
                inc.last_step, inc.last_time, inc.message = a.step, now, a.message
                if a.severity and (inc.worst is None or a.severity > inc.worst):
                    inc.worst = a.severity
        for key in list(self._open):
            if key not in held:
                del self._open[key]

    def alerts(self, store: Snapshot, opts: Options) -> list[Alert]:
        opts = self.rules.options(opts)
        now = opts.clock()
        current = evaluate(store, self.rules, opts)
        ended = figures.status(store, opts) in ENDED
        self._record(current, now)
        self._mark_since(store, current, now)
        for a in current:
            self._last[(a.kind, a.rank)] = (now, a)
            if a.kind == "nan_loss":
                self._sticky.setdefault((a.kind, a.rank), a)
        out = {k: a for k, a in self._sticky.items()}
        out.update(((a.kind, a.rank), a) for a in current)
        for key, (t, a) in self._last.items():
            # a run that ended is no longer starving or lagging: only held alerts of its history stay
            # (an alert that holds now is itself, not a copy marked cleared: 1,024 of them cost 2 ms a frame)
            if key not in out and now - t <= self.rules.hold_s and (not ended or table.after_end(a.kind)):
                out[key] = replace(a, cleared=t)
        return sorted(out.values(), key=_order)

    def _mark_since(self, store: Snapshot, current: list[Alert], now: float) -> None:
        """Say on each alert since when it holds: the step it was first seen at in this stretch, and that
        step's row time (a NaN found in the history began then, not when mstop was opened)."""
        held = set()
        for a in current:
            key = (a.kind, a.rank)
            held.add(key)
            if key not in self._since:
                t = _began(store, a)
                self._since[key] = (a.step, min(now, t) if t is not None else now)
            a.since_step, a.since_time = self._since[key]
        for key in list(self._since):
            if key not in held and key not in self._sticky:
                del self._since[key]


def _began(store: Snapshot, a: Alert) -> float | None:
    """When alert ``a``'s condition began, on the run's clock: a job's death or failure when its last sign of
    life came (a run dead for 4 minutes said ``since step 335 (3 s ago)``: when it was opened); any other
    alert the time of the row at its step."""
    if a.kind in ("job_dead", "job_failed"):
        lives = figures.lives(store)
        return max(lives.values()) if lives else None
    return figures.time_at_step(store, a.rank, a.step) if a.step is not None else None


def evaluate(store: Snapshot, rules: Rules, opts: Options) -> list[Alert]:
    """Alerts whose condition holds now (no memory: see :class:`Health` for the hold time)."""
    opts = rules.options(opts)
    ask = table.Ask(store, rules)
    status = figures.status(store, opts)
    # a job that ended is not starving, slowing down or dying: only what its history shows (NaN, spikes,
    # overflows: the rules that hold after the end) is still worth an alert, and how it ended when that
    # was not cleanly
    out: list[Alert] = [a for rule in table.TABLE if rule.after_end or status not in ENDED
                        for a in table.quietly(lambda rule=rule: rule.alerts(ask))]
    if status in ENDED:
        if status in ("dead", "failed"):
            culprit = endings.ending(store, opts).culprit
        if status == "dead":
            out.append(Alert("job_dead", culprit, figures.step(store), endings.dead_message(store, opts)))
        elif status == "failed":
            message, error = endings.failure_message(store, opts)
            out.append(Alert("job_failed", culprit, figures.step(store), message, detail=error))
        return sorted(out, key=_order)
    out += _device_alerts(store, rules)
    out += _stragglers(store, rules)
    alive, dead, basis = _liveness(store, rules, opts)
    out += dead
    out += _held(store)
    out += _stuck(store)
    out += _lagging(store, rules, alive, opts)
    if status == "stalled":
        age = figures.seconds_since_last_row(store, opts)
        hint = ""
        if alive and not dead and basis == "heartbeats":
            hint = _alive_hint(store, opts, alive)
        elif basis == "rows":
            hint = "; no heartbeats to tell dead from hung"
        out.append(Alert("stalled", None, figures.step(store),
                         f"no new row for {fmt.duration(age)} (limit {fmt.duration(figures.stall_after(store))})"
                         f"{hint}"))
    if status in ("running", "stalled"):
        out += _no_checkpoint(store, rules, opts)
    return sorted(out, key=_order)


def _alive_hint(store: Snapshot, opts: Options, alive: list[int]) -> str:
    """What the heartbeats say of a stalled job: alive ranks are those whose heartbeat came after their last
    row (evidence newer than the stall); several of them wait in a collective, one is stuck in its step."""
    clocks = figures.rank_clocks(store, opts)
    beating = [r for r in alive if (d := store.ranks[r]).last_heartbeat is not None and d.rows
               and d.last_heartbeat > d.last("time")]
    if not beating:
        return ""
    newest = max(clocks.local(r, store.ranks[r].last_heartbeat) for r in beating)  # type: ignore[arg-type]
    ago = fmt.duration(max(0.0, opts.clock() - newest))
    if len(store.rank_files) <= 1 and len(beating) == 1:
        return (f"; the process is alive (a heartbeat {ago} ago) but writes no rows: stuck in a step, or in a long "
                "pause (evaluation, a checkpoint)")
    if len(beating) == len([d for d in store.ranks.values() if d.rows]):
        return f"; all ranks alive: likely waiting in a collective (heartbeats, the newest {ago} ago)"
    return (f"; {endings.ranks_text(beating)} alive (heartbeats, the newest {ago} ago), the others silent: "
            "likely waiting in a collective for them")


def _order(a: Alert) -> tuple:
    """Rules in their documented order (a kind KINDS does not list after them); within a per-rank rule, the
    worst first."""
    return KINDS.index(a.kind) if a.kind in KINDS else len(KINDS), -a.severity, -1 if a.rank is None else a.rank


def _no_checkpoint(store: Snapshot, rules: Rules, opts: Options) -> list[Alert]:
    cks = figures.checkpoint_times(store)
    limit = rules.no_checkpoint_s
    if limit is None:
        if not cks:
            return []  # the run never saved one and no threshold was set: nothing to expect
        gaps = np.diff(cks)
        limit = max(600.0, 3 * float(np.median(gaps))) if len(gaps) else 6 * 3600.0
    # since the last checkpoint, else since the run started (its first start event, or first row)
    first = figures.first_start(store)
    starts = [t for t in (first, figures.first_row_time(store)) if t is not None]
    last = cks[-1] if cks else min(starts, default=None)
    if last is None:
        return []
    age = opts.clock() - last
    if age <= limit:
        return []
    what = "no checkpoint" if not cks else "no new checkpoint"
    return [Alert("no_checkpoint", None, figures.step(store),
                  f"{what} for {age / 3600:.1f} h (limit {limit / 3600:.1f} h)")]


def _stragglers(store: Snapshot, rules: Rules) -> list[Alert]:
    """Ranks whose data-wait share stands out from the median over ranks, persistently.

    With synchronous data parallelism every rank's step time equals the slowest
    rank's, so step time hides the culprit; the data side shows it. Per row
    (the ranks' last ``straggler_n`` rows, aligned from the end), a rank is out
    when its share exceeds the median over ranks by ``straggler_m`` scaled MADs
    and by ``straggler_margin``; it is a straggler when out in ``straggler_k`` of them.
    """
    w = figures.window(store)
    if len(w.ranks) < 3:
        return []
    n = rules.straggler_n
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # ranks or rows without data wait
        share = w.cols["data_wait"][:, -n:] / w.cols["step_time"][:, -n:]
        med = figures.row_medians(share.T)  # numpy's nanmedian(axis=0), without its masked-array cost
        mad = 1.4826 * figures.row_medians(np.abs(share - med).T)
        out_ = (share > med + rules.straggler_m * mad) & (share - med > rules.straggler_margin)
    count = out_.sum(axis=1)
    alerts = []
    for i in np.flatnonzero(count >= rules.straggler_k):
        r = w.ranks[i]
        d = store.ranks[r]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            factor = float(np.nanmedian(share[i]) / max(float(np.nanmedian(med)), 1e-9))
        run = 0  # since which step: the current unbroken run of outlying rows
        for flag in out_[i][::-1]:
            if not flag:
                break
            run += 1
        since = int(d.at("step", -run)) if run else int(d.last("step"))
        alerts.append(Alert("straggler", r, since,
                            f"rank {r} waits on input {np.nanmedian(share[i]):.0%} of its step time, "
                            f"{factor:.1f}x the median rank, in {int(count[i]):,} of its last {n:,} rows",
                            severity=factor))  # since which step: the alert's step, shown beside it
    return alerts


def _liveness(store: Snapshot, rules: Rules, opts: Options) -> tuple[list[int], list[Alert], str]:
    """(ranks alive, dead_rank alerts, what was judged): a rank whose last sign of life (heartbeat, event or
    row) is older than ``dead_after`` heartbeat intervals while another rank's is recent is dead. While the
    job restarts (a rank's newest session has no row yet) every rank gets the start-up allowance from the
    newest start: ranks come back one by one, and one not back yet is not dead."""
    limit = figures.dead_after(store, opts)
    startup = figures.dead_after(store, opts, starting=True)
    now = opts.clock()
    basis = "heartbeats" if figures.heartbeats_seen(store) else "rows"
    clocks = figures.rank_clocks(store, opts)  # a rank whose clock is off its peers' is judged on theirs
    st = rankstate.states(store)  # every rank's answers in arrays: no walk of 1,024 ranks' events a frame
    off = np.zeros(len(st.ranks))
    for r, o in clocks.own.items():
        k = st.index(r)
        if k is not None:
            off[k] = o
    restarts = st.restart_start - off
    restart = float(np.nanmax(restarts)) if (restarts == restarts).any() else None  # the newest start of a
    # session with no row yet
    judged = ~(st.finished & (st.rows > 0)) & (st.life == st.life)  # finished cleanly: not dead
    if basis == "rows":
        judged &= st.rows > 0  # without heartbeats a rank that never wrote a row cannot be judged
    life = st.life - off
    restarting = restart is not None and now - restart <= startup
    ages = now - (np.maximum(life, restart) if restarting else life)  # restarting: judged from the restart
    ks = np.flatnonzero(judged)
    age = dict(zip((st.ranks[k] for k in ks), ages[ks].tolist()))
    allowed = dict.fromkeys(age, startup if restarting else limit)
    ended = {st.ranks[k]: e for k in ks if (e := st.one[k].exit) is not None
             and not (restarting and clocks.local(st.ranks[k], float(e["time"])) < restart)}  # ended before the
    # job restarted: not back yet (judged with the start-up allowance, as a rank with no exit is), not dead
    alive = [r for r in age if age[r] <= allowed[r] and r not in ended]
    if not alive:
        return [], [], basis  # nobody is alive: a stalled or finished job, not dead ranks
    dead = []
    ran_on = _ran_on(dict(zip((st.ranks[k] for k in ks), life[ks].tolist())),
                     {r: clocks.local(r, float(e["time"])) for r, e in ended.items()})
    for r in sorted(age):
        if r in ended:  # its witness saw the process end: dead now, not after the heartbeat deadline
            d, e = store.ranks[r], ended[r]
            dead.append(Alert("dead_rank", r, int(d.last("step")) if d.rows else None,
                              f"rank {r}'s process ended at {fmt.clock_ms(float(e['time']))} "
                              f"({processes.how_words(e)}){ran_on[r]}", severity=1e9))
        elif age[r] > allowed[r]:
            d = store.ranks[r]
            step = int(d.last("step")) if d.rows else None
            how = "heartbeat" if basis == "heartbeats" else "row (no heartbeats: judged by rows)"
            others = len(alive)
            dead.append(Alert("dead_rank", r, step, f"rank {r}: no {how} for {age[r]:.0f} s while "
                                                    f"{others:,} other rank{'s are' if others != 1 else ' is'} alive",
                              severity=age[r]))
    return alive, dead, basis


def _ran_on(lives: dict[int, float], ends: dict[int, float]) -> dict[int, str]:
    """For each rank whose process ended (at ``ends[r]``, the viewer's clock), what is known of the other
    ranks after it: how many gave a sign of life, or ended, after it. Only what the files show: a rank whose
    end is not read yet is never said to be alive (it was, for seconds after every process was gone). One
    sort for all the ended ranks (a frame at 1,024 ranks with half of them ended)."""
    latest = {o: max(ends.get(o, -math.inf), t) for o, t in lives.items()}
    ordered = np.sort(np.fromiter(latest.values(), np.float64, len(latest)))
    out = {}
    for r, t in ends.items():
        after = len(ordered) - int(np.searchsorted(ordered, t, "right")) - (latest.get(r, -math.inf) > t)
        out[r] = (f", {after:,} other rank{'s' if after != 1 else ''} ran on after it" if after
                  else ", the other ranks' last signs of life are from before it")
    return out


def _held(store: Snapshot) -> list[Alert]:
    """``stopped_rank``: a rank whose process is stopped (SIGSTOP, Ctrl-Z), traced by a debugger or in
    uninterruptible sleep, named as soon as its witness sees it (not after the heartbeat deadline): it runs
    no step, and the other ranks wait for it at their next collective."""
    out = []
    st = rankstate.states(store)  # each rank's process facts, kept until its events change
    for k, o in enumerate(st.one):
        p = o.holding
        if p is None:
            continue
        r, since = st.ranks[k], float(p["since"])
        step = int(st.last_step[k]) if st.rows[k] else None
        out.append(Alert("stopped_rank", r, step, f"rank {r}'s process is {processes.state_words(p)} since "
                                                  f"{fmt.clock_ms(since)}: the other ranks wait for it",
                         severity=-since))
    return out


def _stuck(store: Snapshot) -> list[Alert]:
    """``stuck_rank``: in a hung job, the rank whose stack (dumped by its own faulthandler when its step
    overran) differs from every other rank's: in its input while the others wait in the collective."""
    odd = processes.odd_one(store)
    if odd is None:
        return []
    return [Alert("stuck_rank", odd.rank, odd.step, endings.stack_words(store, odd))]


def _lagging(store: Snapshot, rules: Rules, alive: list[int], opts: Options) -> list[Alert]:
    """Ranks alive whose latest step trails the median latest step by more than ``lag_steps``; with two
    ranks (no median to speak of), the leader's. Where the rows are timed by when their file was read (a
    plain MindSpore log: LossMonitor's lines carry no time), a rank whose file was read earlier than the
    reference's is owed the steps the job's pace makes in between: a slow read round saw one file seconds
    before another, and a plain job's ranks read 5 s apart were "lagging" by 60 steps. A rank's rows that
    carry their own time are not: an old last row is a rank that has not stepped since. Ranks that wait for
    no one (``parallel_mode`` ``stand_alone``: no collective, each rank its own pace, as the demo's) drift apart
    freely: a rank behind is not lagging when nothing waits for it, and none is said to be."""
    if figures.run_meta(store).get("parallel_mode") == "stand_alone":
        return []
    last = figures.lasts(store)
    c = figures.rank_clocks(store, opts)  # each rank's rows laid on the reference clock
    ranks = np.asarray(last.ranks, np.int64)
    want = np.asarray(list(dict.fromkeys(alive)), np.int64)  # alive ranks with a last row, in alive's order
    at = np.minimum(np.searchsorted(ranks, want), max(len(ranks) - 1, 0))
    have = ranks[at] == want if len(ranks) else np.zeros(len(want), bool)
    at, who = at[have], want[have]
    if len(at) < 2:
        return []
    steps = last.step[at]
    times = last.time[at] - (np.array([c.ranks.get(r, 0.0) for r in who.tolist()]) if c.ranks else 0.0)
    if len(at) == 2:
        ref, what = float(steps.max()), "the leading rank"
        ref_t = float(times[steps == ref].max())
    else:
        ref, what = float(np.median(steps)), "the median rank"
        ref_t = float(np.median(times))
    by_read = figures.run_meta(store).get("source") == SOURCE_PLAIN
    pace = figures.seconds_per_step(store) if by_read else None
    with np.errstate(invalid="ignore"):
        owed = (ref_t - times) / pace if pace else np.zeros(len(at))
        owed = np.where(np.isfinite(times) & (times < ref_t), owed, 0.0)
    behind = ref - steps - owed
    out: list[Alert] = []
    lives: dict[int, float] = {}
    for k in np.flatnonzero(behind > rules.lag_steps).tolist():
        r, s = int(who[k]), float(steps[k])
        lives = lives if out else figures.lives(store)  # read once, for a frame with a lagging rank only
        out.append(Alert("lagging_rank", r, int(s), f"rank {r} is at step {fmt.step(s)}, {ref - s:,.0f} steps "
                                                    f"behind {what} ({fmt.step(ref)}), "
                                                    f"{_lag_state(store, opts, c, r, lives)}",
                         severity=float(behind[k])))
    return out


def _lag_state(store: Snapshot, opts: Options, c: Any, r: int, lives: dict[int, float]) -> str:
    """How a lagging rank is: "and alive" was said of a rank killed 13 s before, and alive means only "not
    yet called dead"; a rank whose heartbeats stopped says for how long, and when it will be called dead."""
    if not figures.heartbeats_seen(store) or r not in lives:
        return "not yet called dead"
    silent = opts.clock() - c.local(r, lives[r])
    if silent > 2 * figures.heartbeat_interval(store, opts):
        return f"no heartbeat for {silent:.0f} s (dead after {figures.dead_after(store, opts):.0f} s)"
    return "not yet called dead"


def _device_alerts(store: Snapshot, rules: Rules) -> list[Alert]:
    """The NPUs' rules (mstop.engine.devices): a device not healthy, one too hot, HBM near full while the
    rank's own figure leaves room, AICore idle while the rank's steps run. Each alert is its rank's (the
    rank on that device); devices no rank is joined to share one alert per kind."""
    if not store.devices:
        return []
    now = devices.current(store)
    owner: dict[tuple[str, int, int], int] = {}
    for r, k in sorted(devices.rank_devices(store).items()):
        owner.setdefault(k, r)
    found: dict[str, list[tuple[int | None, float, str]]] = {}
    for k, s in sorted(now.items()):
        r = owner.get(k)
        for kind, severity, message in _device_conditions(store, rules, s, r):
            found.setdefault(kind, []).append((r, severity, message))
    out = []
    step = figures.step(store)
    for kind, items in found.items():
        lone = [m for r, _, m in items if r is None]
        out += [Alert(kind, r, step, m, severity=sev) for r, sev, m in items if r is not None]
        if lone:
            out.append(Alert(kind, None, step, lone[0] + (f" (and {len(lone) - 1} more devices)" if len(lone) > 1
                                                           else ""), detail="\n".join(lone[1:])))
    return out


def _device_conditions(store: Snapshot, rules: Rules, s: Any, rank: int | None) -> list[tuple[str, float, str]]:
    """What is wrong with one device now: (kind, severity, message) for each rule that holds."""
    who = s.label + (f" (rank {rank})" if rank is not None else "")
    out = []
    if not s.healthy:
        code = f", error code {s.error_code}" if s.error_code else ""
        out.append(("device_unhealthy", 1.0, f"{who}: health {s.health}{code} (npu-smi)"))
    if s.temperature is not None and s.temperature > rules.device_temp_c:
        out.append(("device_hot", s.temperature, f"{who}: {s.temperature:.0f} °C (limit {rules.device_temp_c:g} °C)"))
    share = s.memory_share
    if share is not None and share >= rules.hbm_full:
        room = _own_room(store, rank)
        if room is None or room >= rules.hbm_job_room:
            own = "" if room is None else (f" while the job's own figure leaves {fmt.pct(room)} free: memory held "
                                           "outside MindSpore's pool (another process?) or a pool reserved past "
                                           "what the job counts")
            out.append(("hbm_full", share, f"{who}: HBM {fmt.pct(share)} full{own}"))
    idle = _idle(store, rules, s, rank)
    if idle is not None:
        out.append(("aicore_idle", 1.0 - idle, f"{who}: AICore {fmt.pct(idle)} over the last "
                    f"{fmt.duration(rules.aicore_idle_s)} while its steps run: host-bound or starving"
                    f"{_wait_note(store, rank)}"))
    return out


def _own_room(store: Snapshot, rank: int | None) -> float | None:
    """The share of its device memory the rank's own last figure leaves free; None unless it measures device
    memory (a host-memory figure says nothing of the NPU)."""
    d = store.ranks.get(rank) if rank is not None else None
    if d is None or not d.rows or (d.last_start or {}).get("memory_source") != "device":
        return None
    used, total = d.last("mem_used"), d.last("mem_total")
    return 1.0 - used / total if np.isfinite(used) and np.isfinite(total) and total > 0 else None


def _idle(store: Snapshot, rules: Rules, s: Any, rank: int | None) -> float | None:
    """The device's mean AICore when every sample of the last ``aicore_idle_s`` seconds (at least 3, and
    spanning those seconds: 8 s of samples are not "the last 1 m 00 s") is under ``aicore_idle`` while its
    rank wrote rows in that span (both on the host's clock); else None."""
    d = store.ranks.get(rank) if rank is not None else None
    samples = [x for x in devices.recent(store, s.key, rules.aicore_idle_s) if x.aicore is not None]
    got = [x.aicore for x in samples]
    if d is None or d.rows < 2 or len(got) < 3 or max(got) >= rules.aicore_idle:
        return None
    times = np.array([x.time for x in samples], np.float64)
    first = store.devices[s.key][0].time  # the device's first sample kept
    if times[-1] - first + 1.5 * float(np.median(np.diff(times))) < rules.aicore_idle_s:
        return None  # sampled for less than the span the alert speaks of
    since = s.time - rules.aicore_idle_s
    recent = int(np.count_nonzero(d.held("time") >= since))  # the rows lately are held: the spilled are
    if recent < 2 and d.base:  # read back only when these are too few
        recent = int(np.count_nonzero(d.col("time") >= since))
    if recent < 2:
        return None  # the rank's steps are not running either: a stall, not an idle device
    return sum(got) / len(got)


def _wait_note(store: Snapshot, rank: int | None) -> str:
    d = store.ranks.get(rank) if rank is not None else None
    if d is None:
        return ""
    frac = figures.rank_data_wait_frac(store)
    w = figures.window(store)
    if rank in w.ranks:
        f = float(frac[w.ranks.index(rank)])
        if np.isfinite(f):
            return f" (rank {rank} waits on input {fmt.pct(f)} of its step time)"
    return ""
