"""One short function per part of the frame: each selects the engine's figures for its panel.

No figure is computed here: they come from :mod:`mstop.engine.figures` (the same functions ``summary``
and ``compare`` use), so the screen and the commands cannot disagree. Every function reads a snapshot.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import fmt
from ..engine import devices, figures
from ..engine.figures import Options, Window
from ..engine.reader import RunReader
from ..engine.smoothing import ema_series, evenly
from ..engine.store import Progress, Snapshot
from . import charts
from .frame import DataPart, DeviceCell, HeaderPart, LossPart, MemoryPart, RankTable, Series, ThroughputPart


def _f(v: Any) -> float | None:
    """A number from an event field, or None."""
    try:
        return None if v is None else float(v)
    except (TypeError, ValueError):
        return None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) else None


def file_notes(store: Snapshot, opts: Options) -> list[str]:
    """What the header must say about the files: refused ones, cut events, the store's notes, clocks."""
    notes = []
    src = figures.source(store)
    if src is not None:
        peak = opts.peak_flops or _f(figures.run_meta(store).get("peak_flops"))
        notes.append(f"{src['kind']}: no {', '.join(src['cannot_give'])}" + ("" if peak else "; MFU: --peak-tflops"))
    notes += [f"{name} not followed: {why}" for name, why in sorted(store.refused.items())[:3]]
    if len(store.refused) > 3:
        notes.append(f"{len(store.refused) - 3} more files not followed (mstop summary lists them)")
    if store.cut_events:
        notes.append(f"{store.cut_events} events had text or lists cut short")
    notes += store.notes[:3]
    notes += devices.sampling_notes(store)[:2]
    ahead = figures.future_skew(store, opts)
    if ahead is not None and not figures.rank_clocks(store, opts).job:
        notes.append(f"row times are {fmt.duration(ahead)} ahead of this clock: ages use file times")
    return notes


def header(store: Snapshot, opts: Options, now: float) -> HeaderPart:
    """The run's name and progress, its times, and what is wrong with its files."""
    meta = figures.run_meta(store)
    h = HeaderPart(run_name=meta.get("run_name"), device=meta.get("device"), world_size=_int(meta.get("world_size")),
                   total_steps=_int(meta.get("total_steps")), ranks_seen=len(store.rank_files),
                   status=figures.status(store, opts), step=figures.step(store), bad_rows=store.bad_rows,
                   bad_events=store.bad_events,
                   writer_errors=figures.writer_failures(store),
                   notes=file_notes(store, opts), elapsed=figures.elapsed(store, opts, now),
                   compile_s=figures.compile_seconds(store), last_checkpoint=figures.last_checkpoint(store))
    h.refused_rows, h.refused = figures.refused_rows(store)
    h.refused_cells, h.refused_cells_why = figures.refused_cells(store)
    h.dropped_rows = max(0, figures.dropped_rows(store) - RunReader(store).rejected())
    h.since_last_row = figures.seconds_since_last_row(store, opts) if store.rows else None
    src = figures.source(store)
    if src is not None:
        h.source, h.cannot_give = src["kind"], src["cannot_give"]
    h.skew_note = _skew_note(store, opts)
    if h.last_checkpoint is not None:
        h.checkpoint_age = now - h.last_checkpoint["time"]
    _pace(h, store, opts)
    d = figures.job_rank(store)
    if d is not None:
        h.tokens_seen = figures.tokens_seen(store, d.rank)
    n, seconds, rank, differ = figures.repeated(store, figures.REPEATED_RANKS)  # summary's count too
    if n:
        h.repeated_steps, h.repeated_seconds = n, seconds
        if differ:
            h.repeated_whose = (f"rank {rank}'s" if len(store.ranks_with("resumed")) > figures.REPEATED_RANKS
                                else f"rank {rank}, the most of any rank")
    return h


def reading_header(got: Progress, opts: Options, now: float) -> HeaderPart:
    """The header while the first read of what is written goes on: the run's account of itself and how far
    the read has come (rows, ranks, the step reached, the newest row's age on its own clock), from
    :meth:`Store.progress`: no figure of a part of the files (it is no state of the job), no rank frozen."""
    meta = got.start
    h = HeaderPart(run_name=meta.get("run_name"), device=meta.get("device"), world_size=_int(meta.get("world_size")),
                   total_steps=_int(meta.get("total_steps")), ranks_seen=got.ranks, step=got.step,
                   bad_rows=got.bad_rows, bad_events=got.bad_events)
    if got.newest is not None and now - got.newest > -figures.FUTURE_S:  # a time from the future: no age
        h.since_last_row = max(0.0, now - got.newest)
    return h


def _skew_note(store: Snapshot, opts: Options) -> str | None:
    """What the header says of clocks that disagree (mstop.engine.clocks), or None."""
    clock_notes = figures.rank_clocks(store, opts).notes()
    if clock_notes:
        return "; ".join(clock_notes)
    spread = figures.clock_spread(store)
    if spread is not None and spread > 60:
        return (f"clocks differ by {spread:.0f} s between ranks at the same step"
                + ("; ages use arrival times" if opts.arrival_clock else ""))
    return None


def _pace(h: HeaderPart, store: Snapshot, opts: Options) -> None:
    """steps/s and the ETA while rows arrive; far past the job's pace, how long none came instead."""
    pace = figures.seconds_per_step(store)  # the real pace: rows' times, not the step's own time
    # steps/s is the pace now: a stalled or ended run has none (its last pace is the step time's business)
    h.steps_per_s = 1.0 / pace if pace and h.status in ("running", "starting") else None
    h.eta = figures.eta(store, opts, pace)
    lasts = figures.lasts(store).step  # every rank's last step (the store's fold)
    if len(lasts) > 1 and lasts.min() != lasts.max():  # the header's step is the furthest rank's
        h.step_spread = (int(lasts.min()), int(lasts.max()))
    quiet = figures.quiet_for(store, opts) if h.status == "running" else None
    if quiet is not None:  # far past its pace: the last pace and its ETA are not live figures
        usual = figures.usual_interval(store)
        h.quiet = f"no row for {fmt.duration(quiet)}" + (f", usual step {fmt.ms(usual)}" if usual else "")
        h.steps_per_s = h.eta = None


def throughput(store: Snapshot, opts: Options) -> ThroughputPart:
    """Tokens/s, samples/s, step time and MFU over the recent window; the peak MFU is measured against."""
    meta = figures.run_meta(store)
    return ThroughputPart(tokens_per_s=figures.tokens_per_s(store), samples_per_s=figures.samples_per_s(store),
                          step_time=figures.step_time(store), mfu=figures.mfu(store, opts),
                          peak_flops=opts.peak_flops or _f(meta.get("peak_flops")),
                          peak_source="--peak-tflops" if opts.peak_flops else meta.get("peak_flops_source"),
                          profile=figures.latest_profile(store), mfu_missing=figures.mfu_missing(store, opts))


def memory(store: Snapshot) -> MemoryPart:
    """The worst headroom and whose it is (a rank, or a host), with its bytes."""
    heads = figures.headrooms(store)
    m = MemoryPart(headroom=figures.mem_headroom(store), source=figures.run_meta(store).get("memory_source"),
                   worst=min(heads, key=heads.get) if heads else None)
    r0 = figures.lowest_rank(store)
    if r0 is not None:
        m.used, m.peak, m.total = figures.memory_bytes(store, m.worst, r0)
    m.devices = devices.summary(store) if store.devices else None
    return m


def data(store: Snapshot) -> DataPart:
    """The input pipeline: the worst rank's share of step time spent waiting for data, and that rank's device
    queue (the starving rank's empty queue, not a healthy rank's full one); the lowest rank's without one."""
    p = DataPart(wait_frac=figures.data_wait_frac(store))
    w = figures.window(store)
    dwf = figures.rank_data_wait_frac(store)
    if w.ranks and not np.isnan(dwf).all():
        p.worst_rank = w.ranks[int(np.nanargmax(dwf))]
    r = p.worst_rank if p.worst_rank is not None else figures.lowest_rank(store)
    run = RunReader(store)
    if r is not None and run.has(r):
        p.queue_depth = run.last_value(r, "queue_depth")
        p.queue_rank = r
    return p


def device_cells(store: Snapshot) -> list[DeviceCell]:
    """Every current device (mstop.engine.devices), by host, NPU and chip, with the ranks joined to it."""
    on: dict[tuple[str, int, int], list[int]] = {}
    for r, k in devices.rank_devices(store).items():
        on.setdefault(k, []).append(r)
    return [DeviceCell(host=s.host, npu=s.npu, chip=s.chip, ranks=sorted(on.get(k, [])), aicore=s.aicore,
                       memory=s.memory_share, temperature=s.temperature, health=s.health)
            for k, s in sorted(devices.current(store).items())]


def _device_columns(store: Snapshot, ranks: list[int], cols: dict[str, Any]) -> None:
    """Each rank's device figures (its NPU's AICore, memory, degrees) in its columns."""
    if not store.devices:
        return
    now, of = devices.current(store), devices.rank_devices(store)
    aicore, memory, temperature = (np.full(len(ranks), np.nan) for _ in range(3))
    for i, r in enumerate(ranks):
        s = now.get(of.get(r))  # type: ignore[arg-type]
        if s is not None:
            aicore[i], memory[i], temperature[i] = (math.nan if x is None else x
                                                    for x in (s.aicore, s.memory_share, s.temperature))
    cols.update(aicore=aicore, device_memory=memory, temperature=temperature)


def ranks(store: Snapshot, opts: Options) -> RankTable:
    """A row per rank with rows in the recent window: its step, figures and the age of its last row, as
    columns (arrays over the ranks: a row object is built only for what is drawn)."""
    w: Window = figures.window(store)
    if not w.ranks:
        return RankTable()
    last_t = w.cols["time"][:, -1]
    # ages as the header's "last row ... ago" counts them (arrival while following, file times for clocks
    # set in the future): the newest rank's age is the header's, the others older by their row times
    newest = float(np.nanmax(last_t)) if not np.isnan(last_t).all() else math.nan
    base = figures.seconds_since_last_row(store, opts) if store.rows else math.nan
    hosts = w.hosts.tolist()
    cols: dict[str, Any] = {
        "rank": np.asarray(w.ranks, dtype=np.float64), "host": hosts,
        "step": figures.lasts(store).step,  # the window's ranks are these, in the same order
        "step_time": figures.rank_step_time(w),  # the window's median a step, as the panel's (NaN: none)
        "tokens_per_s": figures.rank_tokens_per_s(store), "data_wait": figures.rank_data_wait_frac(store),
        "headroom": figures.rank_headrooms(store), "age": base + (newest - last_t)}
    ranks = list(w.ranks)
    waiting = _process_only(store, ranks)
    if waiting:  # a rank whose process runs (or ran) but wrote no row yet: killed while it compiled
        ranks = sorted(ranks + waiting)
        order = np.argsort(np.asarray(list(w.ranks) + waiting), kind="stable")
        for name, v in list(cols.items()):
            if name == "host":
                answers = RunReader(store).answers()
                v = v + answers.host[np.asarray(answers.positions(waiting), np.int64)].tolist()
                cols[name] = [v[k] for k in order]
            else:
                cols[name] = np.concatenate([np.asarray(v, np.float64), np.full(len(waiting), np.nan)])[order]
        cols["rank"] = np.asarray(ranks, dtype=np.float64)
    _answer_columns(store, ranks, cols)
    _device_columns(store, ranks, cols)
    return RankTable(cols)


def _process_only(store: Snapshot, with_rows: list[int]) -> list[int]:
    """Ranks with a process (a start event's pid) and no row: listed with their pid and state. Only the ranks
    not in the window are looked at (none, in a frame of a run whose every rank has rows)."""
    run = RunReader(store)
    if len(run.ranks) == len(with_rows):
        return []
    have = set(with_rows)
    return [r for r in run.ranks if r not in have and isinstance((run.start(r) or {}).get("pid"), int)]


def _answer_columns(store: Snapshot, ranks: list[int], cols: dict[str, Any]) -> None:
    """Each rank's profile shares and process (pid, state, CPU, RSS, how it ended), as ``summary --json``'s
    ``processes`` has it, from the ranks' answers (kept in arrays until their events change)."""
    answers = RunReader(store).answers()
    at = np.asarray(answers.positions(ranks), np.int64)
    cols.update({name: getattr(answers, name)[at] for name in ("comm_share", "idle_share", "pid", "cpu", "rss")})
    cols.update(state=answers.proc_state[at].tolist(), ended=answers.ended[at].tolist())


def loss(store: Snapshot, opts: Options, *, points: int, steps: Any, xaxis: str) -> LossPart:
    """The lowest rank's loss: last, smoothed, min; its raw and smoothed curves with NaN, eval, restart and
    checkpoint marks. (Incident marks come from the app's incident scan.)"""
    r0 = figures.lowest_rank(store)
    p = LossPart(now=figures.loss(store), ema=figures.loss_ema(store, opts))
    if r0 is None:
        return p
    run = RunReader(store)
    p.min, p.raw = run.minimum(r0, "loss"), charts.series(store, r0, "loss", points, steps, xaxis)
    idx, smooth = charts.ema_in(run, r0, *ema_series(store, r0, opts.ema_weight), steps)
    if len(idx):
        sel = evenly(len(idx), points)
        p.smooth = Series(charts.x_at(run, r0, xaxis, idx[sel]), smooth[sel])
    st = run.column(r0, "step")

    def shown(step: float) -> bool:  # the w window: marks outside it would stretch the x axis back over the run
        return steps is None or steps[0] <= step <= steps[1]

    eff = run.timeline(r0)
    bad = [i for i, c, _ in run.nonfinite(r0) if c == "loss" and eff[i] and shown(st[i])]
    p.nan_steps = charts.x_at(run, r0, xaxis, np.asarray(bad, dtype=np.int64)).tolist() if bad else []
    p.nan_first_step = int(st[bad[0]]) if bad else None
    p.evals = [(float(e["step"]), str(k), f) for e in run.events(r0, "eval") if isinstance(e.get("step"), (int, float))
               and shown(e["step"]) for k, val in (e.get("metrics") or {}).items() if (f := _f(val)) is not None]
    firsts = np.array([seg.first_row for seg in run.segments(r0)[1:] if shown(st[seg.first_row])], dtype=np.int64)
    p.segment_starts = charts.x_at(run, r0, xaxis, firsts).tolist() if len(firsts) else []
    p.checkpoints = charts.loss_marks(run, r0, [c["step"] for c in run.events(r0, "checkpoint")[-50:]
                                                if isinstance(c.get("step"), (int, float)) and shown(c["step"])], xaxis)
    p.lr, p.grad_norm = (charts.series(store, r0, c, points, steps, xaxis) for c in ("lr", "grad_norm"))
    p.lr_now, p.grad_norm_now = run.last_value(r0, "lr"), run.last_value(r0, "grad_norm")
    return p
