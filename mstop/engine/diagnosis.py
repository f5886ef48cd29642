"""What is slowing the job, in one line, with its evidence (issue 59): verdicts over the ranks' recent steps.

A verdict is ``{kind, ranks, words, evidence, since}``. The kinds, worst first as :func:`diagnose` orders
them (docs/health.md, "Diagnosis"):

- ``input_bound``: every rank waits on its input a large share of each step (the job is input-bound);
- ``input_straggler``: one or a few ranks wait on their input while the others wait for them in their
  collective (their in-step time is longer than the straggler's by about its input wait);
- ``compute_straggler``: a rank busy longer than its peers (its process's CPU seconds a second, from its exit
  witness's ``proc`` events): "the slowest rank is the one that waits least";
- ``host_straggler``: a rank whose process is runnable but not running a larger share of the time than its
  peers' (``run_delay_s``, from ``/proc/PID/schedstat``): its host is busy with something else;
- ``wait_heavy``: every profiled rank spends a large share of each step in communication not overlapped
  and idle (the profiler's step breakdown), with no one rank to blame;
- ``memory_creep``: memory grows with steps: the slope per 1,000 steps, when it reaches the limit at this pace;
- ``mismatch``: a rank whose versions, parallel settings or chosen environment (``HCCL_*``, ``ASCEND_*``,
  ``MS_*``, ``GLOG_*``) differ from its peers';
- ``healthy``: none of these, saying what could not be told and why (no CPU times without the witness, no
  wait shares without a profile).

Ranks are compared with their peers: within their pipeline stage where the job has stages (a last stage is
slower by design). The window is each rank's recent rows (the screen's: :data:`figures.WINDOW` steady rows)
and its process's samples of the last :data:`TRAIL_S` seconds. A verdict that holds keeps holding under
thresholds :data:`RELAX` lower (:class:`Diagnosis` remembers): it does not flicker at its edge.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .. import fmt
from ..formats.waits import Wait
from . import devices, figures, processes, rankstate
from .endings import first_line, ranks_text
from .rules import Rules
from .store import RankData, Snapshot

#: the kinds, in the order they are shown (worst first)
KINDS = ("hang", "relaunch_loop", "root_cause", "input_bound", "input_straggler", "compute_straggler", "host_straggler",
         "wait_heavy", "memory_creep", "mismatch", "healthy")
#: a rank's input wait share of its step at which the job (its median rank) is input-bound, or a rank waits:
#: the data_starvation alert's limit (Rules.data_wait), so the alert, the input panel and the verdict agree
INPUT_SHARE = Rules().data_wait
#: a straggler's figure at least this many times the median rank's, and above it by this share of the step
SKEW = 1.5
MARGIN = 0.1
#: the share of the time a process is runnable but not running at which its host is busy with something else
DELAY_SHARE = 0.1
#: ... and above its peers' median by this share of the time: ranks sharing a loaded host wait unevenly by
#: the scheduler's turns (a healthy 4-rank job on a 2-core machine under CI's load: 29 % against 18 %)
HOST_MARGIN = 0.15
#: a device busier than its peers' by this share of the time (npu-smi's AICore): on an NPU the graph computes on
#: the device, and the host process's CPU seconds say little of it
DEVICE_MARGIN = 0.15
#: a profile's communication not overlapped + idle share at which every rank waits heavily
WAIT_SHARE = 0.4
#: memory creep: steps the fit needs at least, the fit's R², the growth it needs (of the limit, or bytes)
CREEP_STEPS, CREEP_R2, CREEP_GROWTH, CREEP_BYTES = 50, 0.9, 0.02, 32 << 20
#: rows of a rank's current session the memory fit reads at most, and every how many new rows it is fitted again
CREEP_ROWS, CREEP_EVERY = 4000, 25
#: seconds of process samples a rate is measured over
TRAIL_S = 60.0
#: a rank with no sign of life (row, heartbeat, event) for this long behind the newest, while others dumped their
#: stacks stuck in a step, is silent (three of the writer's heartbeats)
SILENT_S = 15.0
#: a stack dump of a rank stuck in its step: at the step's limit (faulthandler's timer), or the first look its
#: witness asked for a few steps' time into a silence (mstop_writer.stacks)
STUCK_REASONS = ("timeout", "asked")
#: an active verdict holds under its thresholds times this (hysteresis)
RELAX = 0.8
#: environment variables that differ from rank to rank by design (ids, ports, the rank's own device)
#: and from host to host (its address)
PER_RANK = re.compile(r"(^|_)(RANK_ID|NODE_ID|ROLE|DEVICE_ID|LOCAL_RANK|PORT|VISIBLE_DEVICES|IF_IP|IP|ADDR|HOSTNAME)$"
                      r"|^RANK_TABLE")


@dataclass
class Verdict:
    """One thing slowing the job: its kind, the ranks it names (empty: the job), words, the figures a person
    checks it by, and since when it holds (step and time)."""

    kind: str
    ranks: list[int]
    words: str
    evidence: dict[str, Any] = field(default_factory=dict)
    since: dict[str, Any] | None = None

    def public(self) -> dict[str, Any]:
        return {"kind": self.kind, "ranks": list(self.ranks), "words": self.words, "evidence": self.evidence,
                "since": self.since}

    def told(self) -> dict[str, Any]:
        """As ``--on-alert`` is told it: an alert's keys (kind, rank, step, message) and the verdict's own."""
        return {**self.public(), "rank": self.ranks[0] if len(self.ranks) == 1 else None,
                "step": (self.since or {}).get("step"), "message": self.words, "source": "diagnosis"}


@dataclass
class Peers:
    """The figures of one group of ranks compared with each other (a pipeline stage, or the job), in the
    order of :attr:`ranks`; NaN where a rank has no such figure."""

    ranks: list[int]
    step: np.ndarray  # mean step time over the window (s)
    wait: np.ndarray  # mean input wait a step (s)
    cpu: np.ndarray  # CPU seconds a second (its process, all threads)
    delay: np.ndarray  # share of the time its main thread was runnable but not running
    steps: tuple[int, int] | None  # the window's first and last step (over the group)
    #: the rank's device's busy share (npu-smi's AICore, mean over TRAIL_S of its samples); NaN: no device
    busy: np.ndarray | None = None
    #: each rank's device, as the screen names it (``h1 NPU 3``); None where it has none
    device: list[str | None] | None = None
    #: whether the ranks wait for each other (a collective): False when every start event says MindSpore ran
    #: them stand-alone (separate processes, no communication: nobody waits for a busier rank)
    together: bool = True

    def window(self) -> dict[str, Any]:
        first, last = self.steps or (None, None)
        return {"first_step": first, "last_step": last, "rows_per_rank": figures.WINDOW,
                "process_seconds": TRAIL_S}

    def device_busy(self) -> np.ndarray:
        return np.full(len(self.ranks), np.nan) if self.busy is None else self.busy


def _median(x: np.ndarray) -> float:
    x = x[np.isfinite(x)]
    return float(np.median(x)) if len(x) else math.nan


def _stage(rank: int, start: dict[str, Any] | None) -> int:
    """The rank's pipeline stage by its start event's parallel settings (0 without stages)."""
    s = start or {}
    par = s.get("parallel") if isinstance(s.get("parallel"), dict) else {}
    stages, world = par.get("pipeline_stages"), s.get("world_size")
    if type(stages) is int and stages > 1 and type(world) is int and world % stages == 0:
        return rank // (world // stages)
    return 0


def peer_groups(store: Snapshot, warmup: int = 0) -> list[Peers]:
    """The ranks with recent rows, grouped by pipeline stage, each group's figures (read as columns: the
    recent window, and each rank's kept answers, rankstate: no rank's record is made). A rank of at most
    ``warmup`` rows has no input wait yet (its pipeline fills after compilation: the data_starvation alert's
    data_wait_warmup)."""
    w = figures.window(store)
    if not w.ranks:
        return []
    st = rankstate.states(store)
    at = np.searchsorted(np.asarray(st.ranks), np.asarray(w.ranks))
    with np.errstate(all="ignore"):
        ok = np.isfinite(w.cols["step_time"])
        n = np.sum(ok, axis=1)
        step = np.nansum(w.cols["step_time"], axis=1) / np.maximum(n, 1)
        wait = np.nansum(np.where(ok, w.cols["data_wait"], np.nan), axis=1) / np.maximum(n, 1)
    step[n == 0] = np.nan
    wait[st.rows[at] <= warmup] = np.nan
    rates = np.array([st.one[k].rates for k in at.tolist()], dtype=np.float64).reshape(-1, 2)
    groups: dict[int, list[int]] = {}
    alone = True
    for i, r in enumerate(w.ranks):
        start = st.one[int(at[i])].start
        groups.setdefault(_stage(r, start), []).append(i)
        par = (start or {}).get("parallel")
        mode = (start or {}).get("parallel_mode") or (par.get("parallel_mode") if isinstance(par, dict) else None)
        alone = alone and mode == "stand_alone"  # (the writer's given mode first, else MindSpore's context)
    busy, names = _device_busy(store, w.ranks)
    out = []
    for idx in groups.values():
        s = w.cols["step"][idx]
        span = (int(np.nanmin(s)), int(np.nanmax(s))) if np.isfinite(s).any() else None
        out.append(Peers([w.ranks[i] for i in idx], step[idx], wait[idx], rates[idx, 0], rates[idx, 1], span,
                         together=not alone, busy=busy[idx], device=[names[i] for i in idx]))
    return out


def _device_busy(store: Snapshot, ranks: list[int]) -> tuple[np.ndarray, list[str | None]]:
    """Each rank's device busy share (the mean AICore of its device's samples over the last TRAIL_S seconds of
    them) and the device's name: NaN and None where the job samples no devices or the rank has none (no
    rank's record is read without devices: the join is the device strip's, once a store version)."""
    busy, names = np.full(len(ranks), np.nan), [None] * len(ranks)
    if not store.devices:
        return busy, names
    on = devices.rank_devices(store)
    for i, r in enumerate(ranks):
        got = [s.aicore for s in devices.recent(store, on[r], TRAIL_S) if s.aicore is not None] if r in on else []
        if got:
            busy[i], names[i] = sum(got) / len(got), store.devices[on[r]][-1].label
    return busy, names


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def input_verdicts(g: Peers, relax: float = 1.0, limit: float = INPUT_SHARE) -> list[Verdict]:
    """``input_bound`` when the median rank waits on its input ``limit`` of its step and every rank at least
    half that; else ``input_straggler`` for the few ranks that wait while the others wait for them."""
    share = g.wait / g.step
    med = _median(share)
    if not math.isfinite(med):
        return []
    lo = float(np.nanmin(share))
    ev = {"median_wait_share": round(med, 4), "least_wait_share": round(lo, 4), "window": g.window()}
    if med >= limit * relax and lo >= limit * relax / 2:
        return [Verdict("input_bound", [], f"the job waits on its input: {_pct(med)} of each step on the median "
                        f"rank, {_pct(lo)} on the least", ev)]
    if len(g.ranks) < 2 or not g.together:  # ranks run stand-alone wait for nobody: a starving one is its alert
        return []
    got = _straggler(g.wait, MARGIN * _median(g.step), relax)
    if got is None or share[got[0]] < limit * relax:
        return []
    i, med_wait, odd = got
    odd = [k for k in odd if share[k] >= limit * relax]
    med_in = _median(np.delete(g.step - g.wait, i))  # the others' time inside their step
    held = med_in - (g.step[i] - g.wait[i])  # how much longer the others are inside their step than it
    if not held >= 0.5 * relax * (g.wait[i] - med_wait):
        return []  # the others do not wait for it: a starving rank alone (the data_starvation alert)
    ranks = [g.ranks[k] for k in odd]
    ev.update(rank=g.ranks[i], rank_wait_s=round(float(g.wait[i]), 4), median_wait_s=round(med_wait, 4),
              skew=round(float(g.wait[i] / med_wait), 2) if med_wait > 0 else None,
              rank_wait_share=round(float(share[i]), 4), others_wait_s=round(float(held), 4),
              others_wait_share=round(float(held / med_in), 4) if med_in > 0 else None)
    return [Verdict("input_straggler", ranks, f"{ranks_text(ranks)} waits on its input "
                    f"{fmt.ms(float(g.wait[i]))} a step ({_pct(float(share[i]))}), the median rank "
                    f"{fmt.ms(med_wait)}; the others wait about {fmt.ms(float(held))} a step for it", ev)]


def _straggler(x: np.ndarray, floor: float, relax: float) -> tuple[int, float, list[int]] | None:
    """The rank (its index) whose figure ``x`` stands out most, the median of the others' (its peers'), and
    every rank that stands out as much: SKEW times that median and above it by ``floor``. None when none
    does, or more than a quarter of the group do (then no one rank is to blame)."""
    ok = np.isfinite(x)
    if ok.sum() < 2:
        return None
    i = int(np.nanargmax(x))
    med = _median(np.delete(x, i))
    odd = [k for k in range(len(x)) if ok[k] and x[k] >= SKEW * relax * med and x[k] - med >= floor * relax]
    if i not in odd or len(odd) > max(1, len(x) // 4):
        return None
    return i, med, odd


def compute_verdicts(g: Peers, relax: float = 1.0, limit: float = INPUT_SHARE) -> list[Verdict]:
    """``compute_straggler``: the rank busier than its peers by its process's CPU seconds a step (its peers
    wait for it in their collective: in data parallel every rank's step time is the same)."""
    if len(g.ranks) < 2 or not g.together:  # ranks that never wait for each other hold nobody up
        return []
    per_step = g.cpu * g.step  # CPU seconds a step
    med_step = _median(g.step)
    # the time a step its process wanted a CPU (ran, or was runnable): on a loaded host the busier rank also
    # waits for a CPU by its own demand (CI: 0.094 s a second running, 82 % of the time waiting, its peers 1 %
    # and 4 %), and its peers wait for both
    got = _straggler((g.cpu + np.nan_to_num(g.delay)) * g.step, MARGIN * med_step, relax)
    if got is None or not _own_demand(g, got[0], relax) or g.wait[got[0]] / g.step[got[0]] >= limit:
        return _device_straggler(g, relax, limit)  # (it waits on input, or on a CPU only: not its compute)
    i = got[0]
    med = _median(np.delete(per_step, i))
    extra = float(per_step[i] - med)
    ev = {"rank": g.ranks[i], "rank_cpu_s_per_step": round(float(per_step[i]), 4),
          "median_cpu_s_per_step": round(med, 4), "skew": round(float(per_step[i] / med), 2) if med > 0 else None,
          "others_wait_s": round(min(extra, med_step), 4), "others_wait_share": round(min(1.0, extra / med_step), 4),
          "rank_run_delay_share": round(float(g.delay[i]), 4) if math.isfinite(g.delay[i]) else None,
          "step_s": round(med_step, 4), **_device_evidence(g, i), "window": g.window()}
    loaded = (f"; it also waited for a CPU {_pct(float(g.delay[i]))} of the time (its host is loaded)"
              if math.isfinite(g.delay[i]) and g.delay[i] >= DELAY_SHARE else "")
    return [Verdict("compute_straggler", [g.ranks[i]], f"rank {g.ranks[i]} computes longer than its peers: "
                    f"{fmt.ms(float(per_step[i]))} of CPU a step, the median rank {fmt.ms(med)}; the others wait "
                    f"about {fmt.ms(min(extra, med_step))} a step ({_pct(min(1.0, extra / med_step))}) for "
                    f"it{loaded}", ev)]


def _own_demand(g: Peers, i: int, relax: float = 1.0) -> bool:
    """Whether rank ``i`` runs SKEW times its peers' median CPU a step, and more than it by MARGIN of the step it
    would take without waiting for a CPU: slow by its own demand (a compute straggler, whatever it also waits
    for a CPU), not by its host's other work (idle peers' CPU is small and noisy: 1.5 times of little is none)."""
    per_step = g.cpu * g.step
    med = _median(np.delete(per_step, i))
    unloaded = max(0.0, float(g.step[i] * (1.0 - np.nan_to_num(g.delay[i]))))
    return bool(math.isfinite(per_step[i]) and per_step[i] >= SKEW * relax * med
                and per_step[i] - med >= MARGIN * relax * unloaded)


def _device_evidence(g: Peers, i: int) -> dict[str, Any]:
    """The rank's device busy share beside its peers' median, where the job samples its devices."""
    busy = g.device_busy()
    if not math.isfinite(busy[i]):
        return {}
    med = _median(np.delete(busy, i))
    return {"device": (g.device or [None] * len(g.ranks))[i], "rank_device_busy": round(float(busy[i]), 4),
            "median_device_busy": round(med, 4) if math.isfinite(med) else None}


def _device_straggler(g: Peers, relax: float, limit: float) -> list[Verdict]:
    """``compute_straggler`` by the devices (npu-smi's AICore over TRAIL_S): the rank whose device is busy
    longer than its peers' while they wait in their collective (on an NPU the graph runs on the device: the
    host process is no busier on the slow rank)."""
    busy = g.device_busy()
    got = _straggler(busy, DEVICE_MARGIN, relax)
    if got is None or g.wait[got[0]] / g.step[got[0]] >= limit:
        return []
    i, med, _ = got
    med_step = _median(g.step)
    extra = min(1.0, float(busy[i] - med)) * med_step  # the device time a step the others do not spend
    ev = {"rank": g.ranks[i], **_device_evidence(g, i), "skew": round(float(busy[i] / med), 2) if med > 0 else None,
          "others_wait_s": round(extra, 4), "others_wait_share": round(float(busy[i] - med), 4),
          "step_s": round(med_step, 4), "window": {**g.window(), "device_seconds": TRAIL_S}}
    return [Verdict("compute_straggler", [g.ranks[i]], f"rank {g.ranks[i]} computes longer than its peers: its "
                    f"device ({ev['device']}) busy {_pct(float(busy[i]))} of the time, the median rank's "
                    f"{_pct(med)}; the others wait about {fmt.ms(extra)} a step for it", ev)]


def host_verdicts(g: Peers, relax: float = 1.0) -> list[Verdict]:
    """``host_straggler``: the rank whose process waits for a CPU (runnable, not running) a larger share of the
    time than its peers': its host is busy with something else."""
    if len(g.ranks) < 2 or not (g.delay >= DELAY_SHARE * relax).any():
        return []
    got = _straggler(g.delay, HOST_MARGIN, relax)
    if got is None or g.delay[got[0]] < DELAY_SHARE * relax or _own_demand(g, got[0]):
        return []  # (a rank that runs SKEW times its peers' CPU waits by its own demand: compute_straggler; at
        # its full thresholds: relaxed, they would drop a held host straggler sooner, not keep it)
    i, med, _ = got
    ev = {"rank": g.ranks[i], "rank_run_delay_share": round(float(g.delay[i]), 4),
          "median_run_delay_share": round(med, 4), "skew": round(float(g.delay[i] / med), 2) if med > 0 else None,
          "rank_run_delay_s_per_step": round(float(g.delay[i] * g.step[i]), 4), "window": g.window()}
    return [Verdict("host_straggler", [g.ranks[i]], f"rank {g.ranks[i]}'s host is busy with something else: its "
                    f"process waited for a CPU {_pct(float(g.delay[i]))} of the time, the median rank "
                    f"{_pct(med)}", ev)]


def wait_verdicts(store: Snapshot, relax: float = 1.0) -> list[Verdict]:
    """``wait_heavy``: the newest profile of at least half the ranks with rows says every such rank spends
    WAIT_SHARE of its step in communication not overlapped and idle."""
    st = rankstate.states(store)
    got = [o.profile for o in st.one if o.profile is not None]
    if not got or len(got) * 2 < int((st.rows > 0).sum()):
        return []
    waits = np.array([p["comm_not_overlapped"] + p["idle"] for p in got])
    med, lo = float(np.median(waits)), float(waits.min())
    if lo < WAIT_SHARE * relax:
        return []
    steps = sorted({(int(p["first_step"]), int(p["last_step"])) for p in got})
    ev = {"median_wait_share": round(med, 4), "least_wait_share": round(lo, 4),
          "median_comm_not_overlapped": round(float(np.median([p["comm_not_overlapped"] for p in got])), 4),
          "median_idle": round(float(np.median([p["idle"] for p in got])), 4), "profiled_ranks": len(got),
          "window": {"profiled_steps": steps[:16]}}
    return [Verdict("wait_heavy", [], f"every rank waits {_pct(lo)} or more of each step (median {_pct(med)}: "
                    "communication not overlapped and idle, by the profile), no one rank to blame", ev)]


def creep_fit(step: np.ndarray, used: np.ndarray) -> tuple[float, float] | None:
    """Memory against step: the least-squares slope (bytes a step) and its R², over the finite samples; None
    with fewer than CREEP_STEPS distinct steps."""
    ok = np.isfinite(step) & np.isfinite(used)
    x, y = step[ok].astype(np.float64), used[ok].astype(np.float64)
    if len(np.unique(x)) < CREEP_STEPS:
        return None
    xm, ym = x - x.mean(), y - y.mean()
    sxx, syy = float(xm @ xm), float(ym @ ym)
    if sxx <= 0:
        return None
    slope = float(xm @ ym) / sxx
    r2 = 1.0 if syy <= 0 else float((xm @ ym) ** 2 / (sxx * syy))
    return slope, r2


def memory_verdicts(store: Snapshot, relax: float = 1.0) -> list[Verdict]:
    """``memory_creep``: on the rank using the most memory, memory (the device's, else the host's) grows with
    steps over the current session's rows: a steady fit (R² at least CREEP_R2) that grew by at least
    CREEP_GROWTH of the limit (or CREEP_BYTES without one): its slope and when it reaches the limit. Fitted
    again every CREEP_EVERY rows of that rank (a frame makes no rank's record for it in between)."""
    w = figures.window(store)
    peaks = np.nanmax(w.cols["mem_peak"], axis=1) if w.ranks and np.isfinite(w.cols["mem_peak"]).any() else None
    if peaks is None:
        return []
    r = w.ranks[int(np.nanargmax(peaks))]
    st = rankstate.states(store)
    rows = int(st.rows[int(np.searchsorted(np.asarray(st.ranks), r))])
    key = (r, rows // CREEP_EVERY, relax)
    kept = store.answers.diagnosis.get("creep")
    if kept is None or kept[0] != key:
        kept = store.answers.diagnosis["creep"] = (key, _creep(store.ranks[r], relax))
    return [replace(kept[1])] if kept[1] is not None else []


def _creep(d: RankData, relax: float) -> Verdict | None:
    """Rank ``d``'s memory creep verdict, or None."""
    if not d.rows:
        return None
    # the current session's rows but its first (compilation: memory before the steady state)
    lo = max(d.segments[-1].first_row + 1 if d.segments else 0, d.rows - CREEP_ROWS)
    step, used = d.span("step", lo, d.rows).astype(np.float64), d.span("mem_used", lo, d.rows).astype(np.float64)
    fit = creep_fit(step, used)
    if fit is None:
        return None
    slope, r2 = fit
    total = d.last("mem_total")
    limit = float(total) if total is not None and math.isfinite(total) and total > 0 else None
    ok = np.isfinite(step) & np.isfinite(used)
    first, last = float(step[ok][0]), float(step[ok][-1])
    grown = slope * (last - first)
    need = CREEP_GROWTH * limit if limit else CREEP_BYTES
    if slope <= 0 or r2 < CREEP_R2 * relax or grown < need * relax:
        return None
    now = float(used[ok][-1])
    at = int(last + (limit - now) / slope) if limit and limit > now else None
    source = (d.last_start or {}).get("memory_source")
    what = "host memory" if source == "host" else "device memory" if source == "device" else "memory"
    ev = {"rank": d.rank, "slope_per_1000_steps": round(slope * 1000), "r2": round(r2, 3), "used": now,
          "limit": limit, "reaches_limit_at_step": at, "memory": what,
          "window": {"first_step": int(first), "last_step": int(last), "rows": int(ok.sum())}}
    until = f": the limit {fmt.gib(limit)} at step {fmt.step(at)} at this pace" if at is not None else ""
    return Verdict("memory_creep", [d.rank], f"{what} grows {fmt.gib(slope * 1000)} per 1,000 steps on rank "
                   f"{d.rank} (steps {fmt.step(first)}-{fmt.step(last)}, R² {r2:.2f}){until}", ev)


def _settings(start: dict[str, Any] | None) -> dict[str, Any]:
    """What a rank chose, from its newest start event: its environment (the recorded variables), versions and
    parallel settings, as ``name -> value`` (``versions.mindspore``, ``parallel.pipeline_stages``, ``HCCL_...``)."""
    s = start or {}
    out: dict[str, Any] = {}
    env = s.get("env")
    if isinstance(env, dict):
        out.update((str(k), v) for k, v in env.items() if not PER_RANK.search(str(k)))
    for part in ("versions", "parallel"):
        got = s.get(part)
        if isinstance(got, dict):
            out.update((f"{part}.{k}", v) for k, v in got.items())
    if "versions.mindspore" not in out and s.get("mindspore_version") is not None:
        out["versions.mindspore"] = s.get("mindspore_version")
    return out


def mismatch_verdicts(store: Snapshot) -> list[Verdict]:
    """``mismatch``: settings a few ranks hold other values of (or lack) than the most of the ranks hold; with
    no majority (two ranks that differ) every rank is named. Ids and ports each rank has its own are left out
    (:data:`PER_RANK`, and a setting whose values are mostly distinct)."""
    st = rankstate.states(store)
    # compared again only when a start event came (a rank started or restarted)
    key = tuple(id(o.start) for o in st.one)  # a start event is kept (RankData.starts): its id is its own
    kept = store.answers.diagnosis.get("mismatch")
    if kept is None or kept[0] != key:
        starts = {r: o.start for r, o in zip(st.ranks, st.one) if o.start}
        kept = store.answers.diagnosis["mismatch"] = (key, _mismatch(starts))
    return [replace(v) for v in kept[1]]


def _shown(v: Any) -> str:
    """A setting's value in words (None: not set)."""
    return "not set" if v is None else str(v)


def _mismatch(starts: dict[int, dict[str, Any]]) -> list[Verdict]:
    ranks = sorted(starts)
    if len(ranks) < 2:
        return []
    chosen = {r: _settings(starts[r]) for r in ranks}
    names = sorted(set().union(*chosen.values()))
    odd: dict[int, list[str]] = {}
    said: list[dict[str, Any]] = []
    for name in names:
        values = {r: chosen[r].get(name) for r in ranks}
        counts: dict[str, int] = {}
        for v in values.values():
            counts[repr(v)] = counts.get(repr(v), 0) + 1
        if len(counts) < 2 or len(counts) > max(2, len(ranks) // 2):
            continue  # all alike, or each its own (an id)
        common, n = max(counts.items(), key=lambda kv: kv[1])
        who = [r for r in ranks if repr(values[r]) != common] if n * 2 > len(ranks) else ranks
        for r in who:
            odd.setdefault(r, []).append(name)
        majority = n * 2 > len(ranks)
        said.append({"setting": name, "ranks": who, "values": {str(r): values[r] for r in who},
                     "majority": majority,
                     "others": next(values[r] for r in ranks if repr(values[r]) == common) if majority else None})
    if not said:
        return []
    first = said[0]
    more = f"; {len(said) - 1} more setting{'s' if len(said) > 2 else ''} differ" if len(said) > 1 else ""
    who = sorted(odd)
    if not first["majority"]:  # no majority: each rank's value
        shown = ", ".join(f"{_shown(v)} on rank {r}" for r, v in list(first["values"].items())[:3])
        words = f"the ranks differ in {first['setting']}: {shown}{more}"
    else:
        shown = ", ".join(sorted({f"{first['setting']}={_shown(first['values'][str(r)])}"
                                  for r in first["ranks"]})[:2])
        words = (f"{ranks_text(who)} differ{'s' if len(who) == 1 else ''} from the others: {shown} (the others "
                 f"{_shown(first['others'])}){more}")
    return [Verdict("mismatch", who, words, {"settings": said[:32]})]


def wait_edges(store: Snapshot) -> tuple[dict[int, set[int]], list[str]]:
    """rank -> the ranks its log says it waited for (a collective's timeout naming its peer: ``waits_for``
    events, mstop.formats.waits) in its current session; and what could not be joined (a peer numbered in a
    smaller communication group than the job's, which is no rank of the job by that number). Once a store
    version: the hang and the root cause both read it."""
    return store.memo("diagnosis.wait_edges", lambda: _wait_edges(store))


def _wait_edges(store: Snapshot) -> tuple[dict[int, set[int]], list[str]]:
    edges: dict[int, set[int]] = {}
    notes: list[str] = []
    world = max((int(d.last_start.get("world_size") or 0) for d in (store.ranks[r] for r in
                 store.ranks_with("waits")) if d.last_start), default=0) or len(store.ranks)
    for r in store.ranks_with("waits"):
        d = store.ranks[r]
        session = (d.last_start or {}).get("session")
        for e in d.waits:
            if session is not None and e.get("session") != session:
                continue  # an earlier session's (a restart waits anew)
            w = Wait(int(e["peer"]), e.get("group"), e.get("group_size"))
            peer = w.peer_in(world)
            if peer is None:
                notes.append(f"rank {r} waited for rank {w.peer} of group {w.group} ({w.group_size} ranks)")
            elif peer != r and 0 <= peer < max(world, len(store.ranks)):
                edges.setdefault(r, set()).add(peer)
    return edges, notes[:4]


def wait_sink(edges: dict[int, set[int]]) -> tuple[int | None, str]:
    """The rank every wait leads to (it waits for nobody, and each waiting rank reaches it through the
    waits), or None and why: the waits go round (each rank waits for another) or end at several ranks."""
    ends = sorted({p for ps in edges.values() for p in ps} - set(edges))
    if not edges:
        return None, "no rank said whom it waits for"
    if not ends:
        return None, f"the waits go round: {ranks_text(sorted(edges))} each wait for another"
    if len(ends) > 1:
        return None, f"the waits end at {ranks_text(ends)}, each waiting for nobody"
    lost = sorted(set(edges) - set(_hops(edges, ends[0])))
    if lost:
        return None, f"{ranks_text(lost)} wait in a round of their own, not on rank {ends[0]}"
    return ends[0], ""


def _hops(edges: dict[int, set[int]], sink: int) -> dict[int, int]:
    """Each rank whose waits lead to ``sink``, and in how many waits (the sink 0, who waited for it 1, ...)."""
    back: dict[int, list[int]] = {}
    for r, ps in edges.items():
        for p in ps:
            back.setdefault(p, []).append(r)
    hops, todo = {sink: 0}, [sink]
    for p in todo:  # breadth first: the list grows as it is walked
        for r in back.get(p, ()):
            if r not in hops:
                hops[r] = hops[p] + 1
                todo.append(r)
    return hops


def hang_verdicts(store: Snapshot) -> list[Verdict]:
    """``hang``: the ranks' logs say whom each waited for when its collective timed out; the sink of those
    waits (the rank they all lead to) is the one everyone waits on."""
    edges, notes = wait_edges(store)
    if not edges:
        return []
    by_peer: dict[int, list[int]] = {}
    for r, ps in edges.items():
        for p in ps:
            by_peer.setdefault(p, []).append(r)
    sink, why = wait_sink(edges)
    hops = _hops(edges, sink) if sink is not None else {}
    # the waits from the rank waited for outwards (who waited for it, who waited for them, ...), as the t view
    # lists them; by peer where no one rank is waited for
    waits = [{"peer": p, "ranks": sorted(rs)}
             for p, rs in sorted(by_peer.items(), key=lambda kv: (hops.get(kv[0], len(hops)), kv[0]))]
    ev = {"waits_for": waits, "sink": sink, "waiting_ranks": len(edges), "unjoined": notes}
    if sink is None:
        said = "; ".join(f"{ranks_text(w['ranks'])} wait{'s' if len(w['ranks']) == 1 else ''} for rank "
                         f"{w['peer']}" for w in sorted(waits, key=lambda w: -len(w["ranks"]))[:3])
        return [Verdict("hang", [], f"{said}: {why}; no one rank is to blame", ev)]
    waiting = sorted(edges)
    how = "" if by_peer.get(sink) == waiting else ", directly or through each other,"
    stacks = ": its stacks are in the stacks view (t)" if sink in store.ranks_with("stacks") else ""
    return [Verdict("hang", [sink], f"{ranks_text(waiting)} wait{'s' if len(waiting) == 1 else ''}{how} for rank "
                    f"{sink}; rank {sink} waits for nobody{stacks}", ev)]


#: what an error is, by its words, first match wins: a root cause, or the cascade of another rank's failure
ERROR_KINDS = (
    ("collective_timeout", re.compile(r"EI0002|EI0006|notify wait|HCCL.{0,40}time[sd]? ?out|timed out|"
                                      r"Timeout.{0,40}(collective|AllReduce|AllGather|Broadcast)", re.I)),
    ("peer_abort", re.compile(r"connection (closed|reset) by peer|peer .{0,20}(abort|exit)|remote .{0,20}abort", re.I)),
    ("launcher_teardown", re.compile(r"exit with exception|killed by (the )?(scheduler|launcher)|SIGTERM", re.I)),
    ("out_of_memory", re.compile(r"out of (device )?memory|\bOOM\b|EL0004|MemoryError|memory (is )?not enough|"
                                 r"Malloc.{0,40}fail", re.I)),
    ("nan_or_overflow", re.compile(r"\bnan\b|\binf\b|overflow", re.I)),
    ("device_error", re.compile(r"^\s*E[EHLZ]\d{4}|device (error|fault)|driver|aicore|AICPU|rtStream|ACL", re.I)),
    ("data_error", re.compile(r"dataset|GeneratorDataset|decode|corrupt|No such file|FileNotFound|MindRecord", re.I)),
)
#: the kinds that are another rank's failure seen from here, and how the root's verdict says them
CASCADE = ("collective_timeout", "peer_abort", "launcher_teardown")
CASCADE_WORDS = {"collective_timeout": "timed out waiting for it", "peer_abort": "lost their connection to it",
                 "launcher_teardown": "ended by the launcher"}


def error_kind(error: str) -> str:
    """An error's kind by its words: one of ERROR_KINDS, else ``exception`` (a Python exception of the user's
    or the framework's code) or ``error``."""
    for kind, pattern in ERROR_KINDS:
        if pattern.search(error):
            return kind
    return "exception" if re.search(r"(Error|Exception)\b", error) else "error"


def _first_error(d: RankData) -> tuple[float, str, Any] | None:
    """A rank's first abort of its current session (its session said, else after its last start): (time,
    error, step)."""
    session = (d.last_start or {}).get("session")
    begun = float((d.last_start or {}).get("time") or -math.inf)
    mine = [a for a in d.aborts if (a.get("session") == session if a.get("session") is not None
                                   else float(a["time"]) >= begun)]
    if not mine:
        return None
    a = min(mine, key=lambda a: float(a["time"]))
    return float(a["time"]), str(a.get("error") or ""), a.get("step")


#: the signals a process dies of by its own fault (a bad address, a bad instruction, an abort()): a root, as
#: an out-of-memory is, whatever its peers then say
CRASH_SIGNALS = ("SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT")


def _crash(store: Snapshot, rank: int, e: dict[str, Any] | None) -> tuple[float, str, Any] | None:
    """A rank whose current process died of a crash signal (CRASH_SIGNALS) without an abort, by its exit ``e``
    (rankstate's): (the exit's time, ``killed by SIGSEGV (Segmentation fault)``, its last step), as
    :func:`_first_error` gives an abort. The rank's record is taken only then (a snapshot makes one when
    asked)."""
    if e is None or e.get("how") != "signal" or e.get("signal") not in CRASH_SIGNALS:
        return None
    d = store.ranks[rank]
    w = processes.where(d, stuck_only=False)
    said = processes.how_words(e) + (f" ({w.error})" if w is not None and w.reason == "fatal" and w.error else "")
    return float(e["time"]), said, d.last("step") if d.rows else None


def root_verdicts(store: Snapshot) -> list[Verdict]:
    """``root_cause``: of the ranks whose current session aborted, each first error told a root (out of memory,
    NaN, a device, data or the user's exception; a process killed by a crash signal with no abort is a root of
    kind ``crash``) or a cascade of another rank's failure (a collective's timeout, a peer's abort, the
    launcher's teardown); the root named is the wait-for graph's sink where its
    error is a root, else the earliest root; the others counted by kind. With no root among them, no rank
    is named and the words say so."""
    st = rankstate.states(store)
    firsts = {r: f for r, a in zip(st.ranks, st.aborted.tolist()) if a and (f := _first_error(store.ranks[r]))}
    crashed = {r: f for r, one in zip(st.ranks, st.one) if r not in firsts and (f := _crash(store, r, one.exit))}
    firsts.update(crashed)
    if not firsts:
        return []
    edges = wait_edges(store)[0]  # a rank whose log says it waited for a peer failed by that wait
    kinds = {r: "crash" if r in crashed else "collective_timeout" if r in edges else error_kind(f[1])
             for r, f in firsts.items()}
    roots = sorted((f[0], r) for r, f in firsts.items() if kinds[r] not in CASCADE)
    sink = wait_sink(edges)[0]
    counts: dict[str, int] = {}
    if not roots:
        for k in kinds.values():
            counts[k] = counts.get(k, 0) + 1
        said = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1]))
        ev = {"rank": sink, "error_kind": None, "error": None, "cascades": counts, "by": "the wait-for graph"}
        if sink is not None and sink not in firsts:  # the rank they all waited for, silent
            return [Verdict("root_cause", [sink], f"rank {sink} wrote no error; {len(firsts)} ranks then failed "
                            f"waiting for it ({said})", ev)]
        return [Verdict("root_cause", [], f"no rank's error is a root cause: every one is another's failure seen "
                        f"from its side ({said}); the root is in no log read", {**ev, "by": None})]
    root = sink if sink in firsts and kinds[sink] not in CASCADE else roots[0][1]
    t, words, step = firsts[root]
    for r, k in kinds.items():
        if r != root:
            counts[k] = counts.get(k, 0) + 1
    ended = [r for r, x, one in zip(st.ranks, st.exited.tolist(), st.one) if x and r not in firsts and one.exit
             and not processes.clean_exit(one.exit) and float(one.exit["time"]) >= t]
    if ended:  # killed after it with no error of their own: the launcher ending the job (msrun does in ~1 s)
        counts["launcher_teardown"] = counts.get("launcher_teardown", 0) + len(ended)
    n = sum(counts.values())
    at = f" at step {fmt.step(step)}" if isinstance(step, (int, float)) and math.isfinite(step) else ""
    then = ""
    if n:
        alone = next(iter(counts)) if len(counts) == 1 else None
        how = CASCADE_WORDS.get(alone or "") or \
            "failed after it (" + ", ".join(f"{c} {k.replace('_', ' ')}" for k, c in counts.items()) + ")"
        then = f"; {n} rank{'s' if n > 1 else ''} then {how}"
    ev = {"rank": root, "error_kind": kinds[root], "error": first_line(words), "step": step, "time": t,
          "cascades": counts, "by": "the wait-for graph" if root == sink else "time"}
    return [Verdict("root_cause", [root], f"rank {root}: {first_line(words)}{at} ({kinds[root].replace('_', ' ')})"
                    f"{then}", ev)]


def _launches(store: Snapshot) -> list[dict[str, Any]]:
    """The job's launches in order (the k-th session of every rank that ran several: they restart together),
    each with its first failure and, where the last launch failed, its furthest step: ``{"step", "failed": (time,
    rank, kind, words) | None}`` (the rows are read only then: a resumed job that runs costs a frame no column)."""
    resumed = [store.ranks[r] for r in store.ranks_with("resumed")]
    out: list[dict[str, Any]] = [{"step": -math.inf, "failed": None}
                                 for _ in range(max((len(d.segments) for d in resumed), default=0))]
    for d in resumed:
        begun = [float((d.starts.get(s.session) or {}).get("time", s.first_time)) for s in d.segments]
        for a in d.aborts:  # each in its session: said, else the last one begun before it (older writers)
            t = float(a["time"])
            k = d.segment_of.get(str(a.get("session")), int(np.searchsorted(begun, t, side="right")) - 1)
            if 0 <= k < len(d.segments):
                said = str(a.get("error") or "")
                got = (t, d.rank, error_kind(said), said)
                if out[k]["failed"] is None or got < out[k]["failed"]:
                    out[k]["failed"] = got
    if not out or out[-1]["failed"] is None:
        return out
    for d in resumed:
        steps = d.col("step")
        ends = [s.first_row for s in d.segments[1:]] + [len(steps)]
        for k, seg in enumerate(d.segments):
            part = steps[seg.first_row:ends[k]]
            if len(part) and np.isfinite(part).any():
                out[k]["step"] = max(out[k]["step"], float(np.nanmax(part)))
    return out


def relaunch_verdicts(store: Snapshot) -> list[Verdict]:
    """``relaunch_loop``: the job's last launches (two or more, the latest among them) each failed first on the
    same rank with the same kind of error, and none got further than the launches before it."""
    launches = _launches(store)
    if len(launches) < 2 or launches[-1]["failed"] is None:
        return []
    _, rank, kind, words = launches[-1]["failed"]
    n = 0
    for k in range(len(launches) - 1, -1, -1):
        f = launches[k]["failed"]
        before = max((x["step"] for x in launches[:k]), default=-math.inf)
        if f is None or (f[1], f[2]) != (rank, kind) or (k and launches[k]["step"] > before):
            break
        n += 1
    if n < 2:
        return []
    best = max(x["step"] for x in launches)
    ev = {"rank": rank, "error_kind": kind, "error": first_line(words), "launches": n, "of_launches": len(launches),
          "furthest_step": int(best) if math.isfinite(best) else None}
    return [Verdict("relaunch_loop", [rank], f"a relaunch loop: the last {n} launches failed the same way, rank {rank} "
                    f"first ({kind.replace('_', ' ')}: {first_line(words)}), none past step "
                    f"{ev['furthest_step']}", ev)]


def stack_verdicts(store: Snapshot) -> list[Verdict]:
    """``hang`` by the ranks' stack dumps: ranks stuck in a step (a dump no row came after) grouped by the
    frame that matters in each (every thread read: processes.stuck_at) and its kind; the ranks at a place of
    their own while most wait at another, or silent with no dump while the others wait (a stopped process
    cannot dump), are named. A dump taken after another rank's own death is that death's cascade, not read
    (_root_deaths)."""
    groups: dict[tuple[str, str], list[int]] = {}
    timed = False  # a dump at the step's full limit, not only first looks
    dumped_ranks = store.ranks_with("stacks")
    deaths = sorted((t, q) for q, t in _root_deaths(store).items()) if dumped_ranks else []
    first, second = (deaths + [(math.inf, -1)] * 2)[:2]  # (every dumped rank's bound from these two: a job of
    for r in dumped_ranks:  # 10,000 ranks dumped and then killed compares 10,000 times, not 10,000 squared)
        w = processes.where(store.ranks[r])
        before = second[0] if first[1] == r else first[0]  # the earliest death of another rank
        if w is not None and w.stack is not None and w.reason in STUCK_REASONS and w.time < before:
            frame, kind = processes.stuck_at(w.stack)
            groups.setdefault((processes.short_frame(frame), kind), []).append(r)
            timed = timed or w.reason == "timeout"
    if not groups:
        return _held_verdicts(store)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
    dumped = {r for _, rs in ordered for r in rs}
    st = rankstate.states(store)
    silent = _silent(store, st, dumped)
    stacks = [{"ranks": rs, "frame": f, "kind": k} for (f, k), rs in ordered]
    ev: dict[str, Any] = {"stacks": stacks, "silent_without_dump": silent}
    (place, kind), most = ordered[0]
    if len(ordered) == 1 and not silent and not timed:  # every rank at one place a few steps' time: a first
        return _held_verdicts(store)  # look, no hang yet (a checkpoint every rank writes looks the same)
    if len(ordered) == 1 and not silent:
        ev.update(kind=kind, frame=place)
        return [Verdict("hang", [], f"{ranks_text(most)} stuck in {place} ({kind.replace('_', ' ')}); no rank "
                        "stands apart", ev)]
    odd = sorted(silent + [r for _, rs in ordered[1:] for r in rs])
    ranked = int(np.count_nonzero(st.rows > 0))
    if len(dumped) + len(silent) < ranked or len(most) < 2:  # a rank not yet dumped could be the odd one
        return [Verdict("hang", [], f"{ranks_text(sorted(dumped))} stuck in a step, {ranked - len(dumped)} "
                        f"not yet dumped: " + "; ".join(f"{ranks_text(g['ranks'])} in {g['frame']} ({g['kind']})"
                                                         for g in stacks[:3]), ev)]
    if len(odd) > max(1, len(dumped | set(silent)) // 2):
        return [Verdict("hang", [], "the stuck ranks are at several places: " + "; ".join(
            f"{ranks_text(g['ranks'])} in {g['frame']} ({g['kind']})" for g in stacks[:3]), ev)]
    parts = [f"{ranks_text(rs)} in {f} ({k.replace('_', ' ')})" for (f, k), rs in ordered[1:]]
    if silent:
        parts.append(f"{ranks_text(silent)} silent with no dump (a stopped or lost process cannot write one)")
    first = ordered[1][0] if len(ordered) > 1 else (None, None)
    ev.update(kind=first[1], frame=first[0])
    return [Verdict("hang", odd, f"{'; '.join(parts)}, while {ranks_text(most)} wait in {place} "
                    f"({kind.replace('_', ' ')})", ev)]


def _root_deaths(store: Snapshot) -> dict[int, float]:
    """When each rank's current process failed of its own (its first error when that is a root, not a
    collective's timeout or a peer's abort; else its exit when not clean and with no error said). A rank's dump
    taken after another's such death waits for the dead rank: that is the death's cascade (root_cause says
    it), not a hang (msrun ends the others a second or more later: a first look can come before)."""
    st = rankstate.states(store)
    out = {}
    for r, one, aborted in zip(st.ranks, st.one, st.aborted.tolist()):
        first = _first_error(store.ranks[r]) if aborted else None
        if first is not None:
            if error_kind(first[1]) not in CASCADE:
                out[r] = first[0]
        elif one.exit is not None and not processes.clean_exit(one.exit):
            out[r] = float(one.exit["time"])
    return out


def _held_verdicts(store: Snapshot) -> list[Verdict]:
    """``hang`` before any dump: ranks whose process is stopped, traced or in D (as the ``stopped_rank`` alert
    says them, as soon as their witness sees it): they run no step, the others wait for them."""
    st = rankstate.states(store)
    held = [(r, o.holding) for r, o in zip(st.ranks, st.one) if o.holding is not None]
    if not held or len(st.ranks) < 2:
        return []
    ranks = [r for r, _ in held]
    words = "; ".join(f"rank {r}'s process is {processes.state_words(p)} since {fmt.clock_ms(float(p['since']))}"
                      for r, p in held[:3])
    ev = {"stacks": [], "silent_without_dump": ranks, "kind": None, "frame": None,
          "held": [{"rank": r, "state": p.get("state"), "since": p.get("since")} for r, p in held]}
    return [Verdict("hang", ranks, f"{words}: the other ranks wait for it at their next collective", ev)]


def _silent(store: Snapshot, st: rankstate.States, dumped: set[int]) -> list[int]:
    """Of the ranks with no stuck dump, those that cannot write one: their process stopped, traced or in D (its
    witness says), or no heartbeat of theirs for SILENT_S behind the newest heartbeat of a dumped rank (a lost
    process; the witness's own reports are no life of the rank)."""
    beats = [b for r in dumped if (b := store.ranks[r].last_heartbeat) is not None]
    newest = max(beats) if beats else math.nan
    out = []
    for k, (r, one) in enumerate(zip(st.ranks, st.one)):
        if r in dumped or not (one.started or st.rows[k]):
            continue
        if one.holding is not None:
            out.append(r)
        elif math.isfinite(newest):  # (a rank's record read only here: no heartbeat can tell otherwise)
            beat = store.ranks[r].last_heartbeat
            began = float((one.start or {}).get("time") or math.inf)  # no heartbeat yet: silent if old enough
            if (beat if beat is not None else began) < newest - SILENT_S:
                out.append(r)
    return out


def _verdicts(store: Snapshot, active: set[str], rules: Rules) -> list[Verdict]:
    """Every verdict that holds now (``active``: the kinds that held at the last look, under relaxed
    thresholds), worst first."""
    def relax(kind: str) -> float:
        return RELAX if kind in active else 1.0

    out: list[Verdict] = hang_verdicts(store) or stack_verdicts(store)
    limit = rules.data_wait
    for g in peer_groups(store, rules.data_wait_warmup):
        out += input_verdicts(g, min(relax("input_bound"), relax("input_straggler")), limit)
        out += compute_verdicts(g, relax("compute_straggler"), limit)
        out += host_verdicts(g, relax("host_straggler"))
    if not any(v.kind.endswith("straggler") for v in out):
        out += wait_verdicts(store, relax("wait_heavy"))
    out += memory_verdicts(store, relax("memory_creep"))
    out += mismatch_verdicts(store)
    out += relaunch_verdicts(store) + root_verdicts(store)
    return sorted(out, key=lambda v: KINDS.index(v.kind))


def missing(store: Snapshot) -> list[str]:
    """What the verdicts could not be told from, and why (said with ``healthy``)."""
    st = rankstate.states(store)
    out = []
    if int((st.rows > 0).sum()) > 1 and not any(math.isfinite(o.rates[0]) for o in st.one):
        out.append("no CPU times: the writer runs without its witness (compute and host stragglers untold)")
    if not any(o.profile is not None for o in st.one):
        out.append("no profile: the share of a step spent waiting is untold (P in the monitor profiles steps)")
    return out


def diagnose(store: Snapshot, active: set[str] | None = None, rules: Rules | None = None) -> list[Verdict]:
    """The verdicts over the recent window, worst first; ``healthy`` (with what could not be told) when none
    holds. ``active``: kinds that held at the previous look (they hold under relaxed thresholds); ``rules``:
    the health rules' settings (the input wait limit is theirs)."""
    rules = rules or Rules()
    if not figures.window(store).ranks:  # no rows yet: only the logs' waits and errors (a failure at the start)
        return hang_verdicts(store) + root_verdicts(store)
    key = ",".join(sorted(active or ()))
    memo = f"diagnosis:{key}:{rules.data_wait}:{rules.data_wait_warmup}"
    out = [replace(v) for v in store.memo(memo, lambda: _verdicts(store, active or set(), rules))]
    for v in out:  # read once: since the window's first step (the monitor's Diagnosis says when it was seen)
        v.since = {"step": (v.evidence.get("window") or {}).get("first_step"), "time": None}
    if out:
        return out
    gaps = missing(store)
    w = figures.window(store)
    steps = w.cols["step"]
    span = (int(np.nanmin(steps)), int(np.nanmax(steps))) if np.isfinite(steps).any() else (None, None)
    words = f"healthy: nothing slows the job over the last {figures.WINDOW} steps of each rank"
    if gaps:
        words += " (" + "; ".join(gaps) + ")"
    return [Verdict("healthy", [], words, {"missing": gaps, "window": {"first_step": span[0], "last_step": span[1]}},
                    {"step": span[0], "time": None})]


@dataclass
class Diagnosis:
    """The verdicts as a monitor follows a run: each kind keeps holding under relaxed thresholds once it held
    (hysteresis), and says since when (the step and time it was first seen in this stretch)."""

    rules: Rules = field(default_factory=Rules)
    _since: dict[tuple[str, tuple[int, ...]], dict[str, Any]] = field(default_factory=dict)

    def look(self, store: Snapshot) -> list[Verdict]:
        active = {k for k, _ in self._since}
        out = diagnose(store, active, self.rules)
        last = rankstate.states(store).last_time
        step = figures.step(store)
        now = float(np.nanmax(last)) if np.isfinite(last).any() else None
        held = set()
        for v in out:
            key = (v.kind, tuple(v.ranks))
            held.add(key)
            if key not in self._since:
                self._since[key] = {"step": step, "time": now}
            v.since = self._since[key]
        for key in list(self._since):
            if key not in held:
                del self._since[key]
        return out
