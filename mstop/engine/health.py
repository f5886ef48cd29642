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

import warnings
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import numpy as np

from .. import fmt
from . import devices, endings, figures, processes
from .config import read_settings
from .figures import Options
from .store import RankData, Store

KINDS = ("nan_loss", "loss_spike", "grad_spike", "overflow", "oom_risk", "data_starvation", "throughput_drop",
         "stalled", "no_checkpoint", "straggler", "dead_rank", "lagging_rank", "job_dead", "job_failed",
         "device_unhealthy", "device_hot", "hbm_full", "aicore_idle",
         "stopped_rank", "stuck_rank")  # added by issue 38: after the others, whose order stays as it was
#: what a run's history shows: still true of a run that ended (finished, dead or failed)
HISTORY_KINDS = ("nan_loss", "loss_spike", "grad_spike", "overflow")
#: statuses of a run that is no longer running: only its history's alerts (and job_dead/job_failed) hold
ENDED = figures.ENDED


@dataclass
class Rules:
    """Thresholds of the health rules (defaults documented in the README)."""

    spike_k: float = 6.0  # a spike: above the running mean by k running standard deviations ...
    spike_window: int = 100  # ... over this many previous steps
    warmup_steps: int = 100  # no spike or throughput alert before this many rows
    recent_rows: int = 20  # a spike among the last rows keeps its alert active
    overflow_n: int = 5  # overflows in n ...
    overflow_m: int = 20  # ... of the last m steps
    oom_critical: float = 0.05  # memory headroom below this fraction
    data_wait: float = 0.10  # data-wait share of step time above this fraction ...
    data_wait_floor_s: float = 0.005  # ... and a mean wait per step of at least this (1 ms of a 2 ms step is no
    # starving pipeline worth an alert), never in a session's first data_wait_warmup rows (the pipeline fills)
    data_wait_warmup: int = 10
    throughput_fraction: float = 0.7  # recent tokens/s under this fraction of the run's median
    no_checkpoint_s: float | None = None  # None: 3 x the median interval between checkpoints (at least 10 min)
    hold_s: float = 0.0  # an alert stays active this long after its condition ends (0: it leaves at once)
    straggler_m: float = 5.0  # a straggler: data-wait share above the median over ranks by m scaled MADs ...
    straggler_margin: float = 0.05  # ... and by at least this absolute share ...
    straggler_k: int = 8  # ... in k ...
    straggler_n: int = 10  # ... of its last n rows
    heartbeat_s: float = 30.0  # heartbeat interval when no start event gives one (writers before it did)
    dead_after: float = 3.0  # a rank is dead after this many heartbeat intervals without a sign of life
    lag_steps: int = 10  # a lagging rank: its latest step this many steps behind the median
    device_temp_c: float = 85.0  # a device hotter than this (degrees C; mstop's default, not a device's spec)
    hbm_full: float = 0.97  # a device's HBM at least this full ...
    hbm_job_room: float = 0.20  # ... while its rank's own memory figure leaves it at least this much room
    aicore_idle: float = 0.05  # a device's AICore under this fraction ...
    aicore_idle_s: float = 60.0  # ... in every sample of this many seconds while its rank's steps run

    def __post_init__(self) -> None:
        """A setting out of its range is an error naming the range (``data_wait = 15`` would turn the rule off,
        ``oom_critical = 5`` would read as 500 %)."""
        for name in ("oom_critical", "data_wait", "throughput_fraction", "straggler_margin", "hbm_full",
                     "hbm_job_room", "aicore_idle"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1:
                raise ValueError(f"health setting {name} must be a fraction over 0 and under 1, got {v!r}")
        for name in ("spike_k", "straggler_m", "heartbeat_s", "dead_after", "device_temp_c", "aicore_idle_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise ValueError(f"health setting {name} must be a positive number, got {v!r}")
        for name in ("spike_window", "warmup_steps", "recent_rows", "overflow_n", "overflow_m", "straggler_k",
                     "straggler_n", "lag_steps", "data_wait_warmup"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"health setting {name} must be a whole number of 0 or more, got {v!r}")

    def options(self, opts: Options) -> Options:
        """``opts`` with this rule set's liveness settings, so the status and the rules judge death alike."""
        if (opts.dead_after, opts.heartbeat_s) == (self.dead_after, self.heartbeat_s):
            return opts
        return replace(opts, dead_after=self.dead_after, heartbeat_s=self.heartbeat_s)

    @classmethod
    def load(cls, run_dirs: list[str] = (), overrides: dict[str, Any] | None = None) -> Rules:
        """Defaults, then ``~/.config/mstop/config.toml``, then ``mstop.toml`` of the run, then ``overrides``."""
        values = read_settings(run_dirs, "health", {f.name for f in fields(cls)})
        values.update({k: v for k, v in (overrides or {}).items() if v is not None})
        return cls(**values)


@dataclass
class Alert:
    kind: str
    rank: int | None
    step: int | None
    message: str
    severity: float = 0.0  # orders per-rank alerts, worst first
    since_step: int | None = None  # the step at which it began to hold (this stretch of it)
    since_time: float | None = None  # and when, on the run's clock
    cleared: float | None = None  # a held alert (hold_s): when its condition ended
    #: the rest of a multi-line message (an error's call stack): the alerts list shows it, the header not
    detail: str = ""

    def public(self) -> dict[str, Any]:
        """The alert as ``summary --json`` shows it: ``{kind, rank, step, message}``."""
        d = asdict(self)
        for k in ("severity", "since_step", "since_time", "cleared", "detail"):
            d.pop(k)
        return d


@dataclass
class Health:
    """Evaluates the rules; remembers when each alert last held, for the hold time and stickiness."""

    rules: Rules = field(default_factory=Rules)
    _last: dict[tuple[str, int | None], tuple[float, Alert]] = field(default_factory=dict)
    _sticky: dict[tuple[str, int | None], Alert] = field(default_factory=dict)
    #: incidents of the rules the rows cannot answer afterwards (dead ranks, stragglers, ...), as they fired
    _live: list[Any] = field(default_factory=list)
    _open: dict[tuple[str, int | None], Any] = field(default_factory=dict)
    #: (kind, rank) -> (step, time) since each active alert holds
    _since: dict[tuple[str, int | None], tuple[int | None, float]] = field(default_factory=dict)

    def incidents(self, store: Store, opts: Options, alerts: list[Alert] | None = None) -> list[Any]:
        """Every alert that fired in the run's history, oldest first, the active ones marked (mstop.engine.incidents).
        With ``alerts`` given (the ones just evaluated) this only reads: safe on another thread."""
        from .incidents import merge, scan

        if alerts is None:
            alerts = self.alerts(store, opts)
        return merge(scan(store, self.rules), list(self._live), alerts)

    def _record(self, current: list[Alert], now: float) -> None:
        """Keep live-only alerts as incidents: one per stretch of time an alert of that kind and rank held."""
        from .incidents import SCANNED, from_alert

        held = set()
        for a in current:
            if a.kind in SCANNED:
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

    def alerts(self, store: Store, opts: Options) -> list[Alert]:
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
        for key, (t, a) in self._last.items():
            # a run that ended is no longer starving or lagging: only held alerts of its history stay
            if key not in out and now - t <= self.rules.hold_s and (not ended or a.kind in HISTORY_KINDS):
                out[key] = replace(a, cleared=t)
        for a in current:
            out[(a.kind, a.rank)] = a
        return sorted(out.values(), key=_order)

    def _mark_since(self, store: Store, current: list[Alert], now: float) -> None:
        """Say on each alert since when it holds: the step it was first seen at in this stretch, and that
        step's row time (a NaN found in the history began then, not when mstop was opened)."""
        held = set()
        for a in current:
            key = (a.kind, a.rank)
            held.add(key)
            if key not in self._since:
                t = figures.time_at_step(store, a.rank, a.step) if a.step is not None else None
                self._since[key] = (a.step, min(now, t) if t is not None else now)
            a.since_step, a.since_time = self._since[key]
        for key in list(self._since):
            if key not in held and key not in self._sticky:
                del self._since[key]


def evaluate(store: Store, rules: Rules, opts: Options) -> list[Alert]:
    """Alerts whose condition holds now (no memory: see :class:`Health` for the hold time)."""
    opts = rules.options(opts)
    with store.lock:
        out: list[Alert] = []
        out += _nan_loss(store)
        d = figures.job_rank(store)
        if d is not None:
            out += _spike(d, "loss", "loss_spike", rules)
            out += _spike(d, "grad_norm", "grad_spike", rules)
            out += _overflow(d, rules)
        status = figures.status(store, opts)
        if status in ENDED:
            # a job that ended is not starving, slowing down or dying: only what its history shows
            # (NaN, spikes, overflows) is still worth an alert, and how it ended when that was not cleanly
            if status in ("dead", "failed"):
                culprit = endings.ending(store, opts).culprit
            if status == "dead":
                out.append(Alert("job_dead", culprit, figures.step(store), endings.dead_message(store, opts)))
            elif status == "failed":
                message, error = endings.failure_message(store, opts)
                out.append(Alert("job_failed", culprit, figures.step(store), message, detail=error))
            return sorted(out, key=_order)
        if d is not None:
            out += _throughput_drop(store, d, rules)
        out += _oom(store, rules)
        out += _starvation(store, rules)
        out += _device_alerts(store, rules)
        out += _stragglers(store, rules)
        alive, dead, basis = _liveness(store, rules, opts)
        out += dead
        out += _held(store)
        out += _stuck(store)
        out += _lagging(store, rules, alive)
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


def _alive_hint(store: Store, opts: Options, alive: list[int]) -> str:
    """What the heartbeats say of a stalled job: alive ranks are those whose heartbeat came after their last
    row (evidence newer than the stall); several of them wait in a collective, one is stuck in its step."""
    clocks = figures.rank_clocks(store, opts)
    beating = [r for r in alive if (d := store.ranks[r]).last_heartbeat is not None and d.rows
               and d.last_heartbeat > float(d.col("time")[-1])]
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
    """Rules in their documented order; within a per-rank rule, the worst first."""
    return KINDS.index(a.kind), -a.severity, -1 if a.rank is None else a.rank


def _nan_loss(store: Store) -> list[Alert]:
    first: tuple[float, int, float] | None = None  # (step, rank, value)
    ranks = 0
    for r, d in store.ranks.items():
        eff = d.effective()
        rows = [i for i, c, _ in d.nonfinite if c == "loss" and eff[i]]
        if rows:
            ranks += 1
            i = min(rows)
            cand = (float(d.col("step")[i]), r, float(d.col("loss")[i]))
            if first is None or cand[:2] < first[:2]:
                first = cand
    if first is None:
        return []
    step, rank, value = first
    more = f" (and on {ranks - 1} more rank{'s' if ranks > 2 else ''})" if ranks > 1 else ""
    return [Alert("nan_loss", rank, int(step), f"loss {value} at step {int(step)} on rank {rank}{more}")]


def _spike(d: RankData, column: str, kind: str, rules: Rules) -> list[Alert]:
    idx = np.flatnonzero(d.effective())
    w, recent = rules.spike_window, rules.recent_rows
    if len(idx) < max(rules.warmup_steps, w) + 1:
        return []
    tail = idx[-(w + recent):]
    vals = d.col(column)[tail].astype(np.float64)
    steps = d.col("step")[tail]
    # each recent row against the mean and deviation of the finite values of the w rows before it, all rows
    # at once (a loop of numpy calls on 20-value windows cost 4 ms a run: the runs list reads thousands)
    js = np.arange(max(w, len(tail) - recent), len(tail))
    if not len(js):
        return []
    hits, mean, z = figures.spikes_at(vals, w, rules.spike_k, js)
    if not len(hits):
        return []
    best = int(np.argmax(z))  # the first of the highest, as a scan keeping the strictly greater would
    z, step, x, mean = float(z[best]), int(steps[hits[best]]), float(vals[hits[best]]), float(mean[best])
    name = "loss" if column == "loss" else "grad norm"
    return [Alert(kind, None, step, f"{name} {x:.4g} at step {step}: {z:.1f} standard deviations above the "
                                    f"mean {mean:.4g} of the previous {w} steps")]


def _overflow(d: RankData, rules: Rules) -> list[Alert]:
    idx = np.flatnonzero(d.effective())[-rules.overflow_m:]
    ov = d.col("overflow")[idx]
    n = int(np.nansum(ov > 0.5))
    if n < rules.overflow_n:
        return []
    scale = d.col("loss_scale")[idx]
    scale = scale[~np.isnan(scale)]
    tail = f"; loss scale now {scale[-1]:g}" if len(scale) else ""
    return [Alert("overflow", None, int(d.col("step")[idx[-1]]),
                  f"{n} overflows in the last {len(idx)} steps{tail}")]


def _throughput_drop(store: Store, d: RankData, rules: Rules) -> list[Alert]:
    """The job's recent pace under ``throughput_fraction`` of its median: in tokens/s, else samples/s, else
    steps/s (a job that gives neither tokens nor samples still slows down)."""
    if d.rows < rules.warmup_steps + figures.WINDOW:
        return []
    unit, per_step = figures.pace_basis(d)
    st = d.col("step_time").astype(np.float64)
    with np.errstate(all="ignore"):
        rate = (per_step / st)[d.steady()][rules.warmup_steps:]  # compilation steps are no throughput
    rate = rate[np.isfinite(rate)]
    recent = figures.recent_pace(store, unit)
    if recent is None or not len(rate):
        return []
    median = float(np.median(rate))
    if recent >= rules.throughput_fraction * median:
        return []
    return [Alert("throughput_drop", None, figures.step(store),
                  f"{unit} {fmt.rate(recent)} is {fmt.share_vs(recent / median, rules.throughput_fraction)[0]} of "
                  f"the run's median {fmt.rate(median)} (limit {fmt.share_vs(0, rules.throughput_fraction)[1]})")]


def _oom(store: Store, rules: Rules) -> list[Alert]:
    out = []
    for who, head in figures.headrooms(store).items():
        if head < rules.oom_critical:
            out.append(Alert("oom_risk", who.rank, figures.step(store),
                             f"{who}: memory headroom {fmt.share_vs(head, rules.oom_critical, 1)[0]} (critical "
                             f"under {fmt.share_vs(head, rules.oom_critical)[1]})",
                             severity=-head))
    return out


def _starvation(store: Store, rules: Rules) -> list[Alert]:
    w = figures.window(store)
    frac = figures.rank_data_wait_frac(store)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mean_wait = np.nanmean(w.cols["data_wait"], axis=1)
    out = []
    for r, f, mw in zip(w.ranks, frac, mean_wait):
        if np.isfinite(f) and f > rules.data_wait and mw >= rules.data_wait_floor_s:
            d = store.ranks[r]
            if d.rows - d.segments[-1].first_row <= rules.data_wait_warmup:
                continue  # the session's first steps: its input pipeline is filling
            out.append(Alert("data_starvation", r, int(d.col("step")[-1]),
                             "rank {} waits on input {} of its step time (limit {})".format(
                                 r, *fmt.share_vs(float(f), rules.data_wait)),
                             severity=float(f)))
    return out


def _no_checkpoint(store: Store, rules: Rules, opts: Options) -> list[Alert]:
    cks = figures.checkpoint_times(store)
    limit = rules.no_checkpoint_s
    if limit is None:
        if not cks:
            return []  # the run never saved one and no threshold was set: nothing to expect
        gaps = np.diff(cks)
        limit = max(600.0, 3 * float(np.median(gaps))) if len(gaps) else 6 * 3600.0
    # since the last checkpoint, else since the run started (its first start event, or first row)
    first = figures.first_start(store)
    starts = ([] if first is None else [first]) + [float(d.col("time")[0]) for d in store.ranks.values() if d.rows]
    last = cks[-1] if cks else min(starts, default=None)
    if last is None:
        return []
    age = opts.clock() - last
    if age <= limit:
        return []
    what = "no checkpoint" if not cks else "no new checkpoint"
    return [Alert("no_checkpoint", None, figures.step(store),
                  f"{what} for {age / 3600:.1f} h (limit {limit / 3600:.1f} h)")]


def _stragglers(store: Store, rules: Rules) -> list[Alert]:
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
        since = int(d.col("step")[-run]) if run else int(d.col("step")[-1])
        alerts.append(Alert("straggler", r, since,
                            f"rank {r} waits on input {np.nanmedian(share[i]):.0%} of its step time, "
                            f"{factor:.1f}x the median rank, in {int(count[i])} of its last {n} rows",
                            severity=factor))  # since which step: the alert's step, shown beside it
    return alerts


def _liveness(store: Store, rules: Rules, opts: Options) -> tuple[list[int], list[Alert], str]:
    """(ranks alive, dead_rank alerts, what was judged): a rank whose last sign of life (heartbeat, event or
    row) is older than ``dead_after`` heartbeat intervals while another rank's is recent is dead. While the
    job restarts (a rank's newest session has no row yet) every rank gets the start-up allowance from the
    newest start: ranks come back one by one, and one not back yet is not dead."""
    limit = figures.dead_after(store, opts)
    startup = figures.dead_after(store, opts, starting=True)
    now = opts.clock()
    basis = "heartbeats" if figures.heartbeats_seen(store) else "rows"
    clocks = figures.rank_clocks(store, opts)  # a rank whose clock is off its peers' is judged on theirs
    restarts = [clocks.local(r, float(d.last_start["time"])) for r, d in store.ranks.items()
                if d.last_start is not None and str(d.last_start.get("session")) not in d.segment_of]
    restart = max(restarts) if restarts else None  # the newest start of a session with no row yet
    age: dict[int, float] = {}
    allowed: dict[int, float] = {}
    for r, d in store.ranks.items():
        if figures.finished_cleanly(d) and d.rows:
            continue  # finished cleanly: not dead
        if basis == "rows" and not d.rows:
            continue  # without heartbeats a rank that never wrote a row cannot be judged
        t = figures.last_life(d)
        if t is None:
            continue
        t = clocks.local(r, t)
        if restart is not None and now - restart <= startup:
            age[r], allowed[r] = now - max(t, restart), startup  # restarting: judged from the restart
        else:
            age[r], allowed[r] = now - t, limit
    ended = {r: e for r in age if (e := processes.exited(store.ranks[r])) is not None
             and not (restart is not None and now - restart <= startup
                      and clocks.local(r, float(e["time"])) < restart)}  # ended before the job restarted: not
    # back yet (judged with the start-up allowance, as a rank with no exit is), not dead
    alive = [r for r in age if age[r] <= allowed[r] and r not in ended]
    if not alive:
        return [], [], basis  # nobody is alive: a stalled or finished job, not dead ranks
    dead = []
    for r in sorted(age):
        if r in ended:  # its witness saw the process end: dead now, not after the heartbeat deadline
            d, e = store.ranks[r], ended[r]
            others = len(alive)
            dead.append(Alert("dead_rank", r, int(d.col("step")[-1]) if d.rows else None,
                              f"rank {r}'s process ended at {fmt.clock_ms(float(e['time']))} "
                              f"({processes.how_words(e)}) while {others} other rank{'s are' if others != 1 else ' is'}"
                              " alive", severity=1e9))
        elif age[r] > allowed[r]:
            d = store.ranks[r]
            step = int(d.col("step")[-1]) if d.rows else None
            how = "heartbeat" if basis == "heartbeats" else "row (no heartbeats: judged by rows)"
            others = len(alive)
            dead.append(Alert("dead_rank", r, step, f"rank {r}: no {how} for {age[r]:.0f} s while "
                                                    f"{others} other rank{'s are' if others != 1 else ' is'} alive",
                              severity=age[r]))
    return alive, dead, basis


def _held(store: Store) -> list[Alert]:
    """``stopped_rank``: a rank whose process is stopped (SIGSTOP, Ctrl-Z), traced by a debugger or in
    uninterruptible sleep, named as soon as its witness sees it (not after the heartbeat deadline): it runs
    no step, and the other ranks wait for it at their next collective."""
    out = []
    for r, d in sorted(store.ranks.items()):
        p = processes.holding(d)
        if p is not None:
            since = float(p["since"])
            step = int(d.col("step")[-1]) if d.rows else None
            out.append(Alert("stopped_rank", r, step, f"rank {r}'s process is {processes.state_words(p)} since "
                                                      f"{fmt.clock_ms(since)}: the other ranks wait for it",
                             severity=-since))
    return out


def _stuck(store: Store) -> list[Alert]:
    """``stuck_rank``: in a hung job, the rank whose stack (dumped by its own faulthandler when its step
    overran) differs from every other rank's: in its input while the others wait in the collective."""
    odd = processes.odd_one(store)
    if odd is None:
        return []
    return [Alert("stuck_rank", odd.rank, odd.step, endings.stack_words(store, odd))]


def _lagging(store: Store, rules: Rules, alive: list[int]) -> list[Alert]:
    """Ranks alive but whose latest step trails the median latest step by more than ``lag_steps``; with two
    ranks (no median to speak of), the leader's."""
    lasts = {r: float(store.ranks[r].col("step")[-1]) for r in alive if store.ranks[r].rows}
    if len(lasts) < 2:
        return []
    if len(lasts) == 2:
        ref, what = max(lasts.values()), "the leading rank"
    else:
        ref, what = float(np.median(list(lasts.values()))), "the median rank"
    return [Alert("lagging_rank", r, int(s), f"rank {r} is at step {int(s)}, {ref - s:.0f} steps behind {what} "
                                              f"({int(ref)}) and alive", severity=ref - s)
            for r, s in lasts.items() if ref - s > rules.lag_steps]


def _device_alerts(store: Store, rules: Rules) -> list[Alert]:
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


def _device_conditions(store: Store, rules: Rules, s: Any, rank: int | None) -> list[tuple[str, float, str]]:
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


def _own_room(store: Store, rank: int | None) -> float | None:
    """The share of its device memory the rank's own last figure leaves free; None unless it measures device
    memory (a host-memory figure says nothing of the NPU)."""
    d = store.ranks.get(rank) if rank is not None else None
    if d is None or not d.rows or (d.last_start or {}).get("memory_source") != "device":
        return None
    used, total = float(d.col("mem_used")[-1]), float(d.col("mem_total")[-1])
    return 1.0 - used / total if np.isfinite(used) and np.isfinite(total) and total > 0 else None


def _idle(store: Store, rules: Rules, s: Any, rank: int | None) -> float | None:
    """The device's mean AICore when every sample of the last ``aicore_idle_s`` seconds (at least 3) is under
    ``aicore_idle`` while its rank wrote rows in that span (both on the host's clock); else None."""
    d = store.ranks.get(rank) if rank is not None else None
    got = [x.aicore for x in devices.recent(store, s.key, rules.aicore_idle_s) if x.aicore is not None]
    if d is None or d.rows < 2 or len(got) < 3 or max(got) >= rules.aicore_idle:
        return None
    times = d.col("time")
    if np.count_nonzero(times >= s.time - rules.aicore_idle_s) < 2:
        return None  # the rank's steps are not running either: a stall, not an idle device
    return sum(got) / len(got)


def _wait_note(store: Store, rank: int | None) -> str:
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
