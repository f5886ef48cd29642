"""Each rank's kept answers (mstop.engine.rankstate) equal the same answers worked out afresh from the rank's
events and rows, however rows and events arrive: interleaved, a session ended, aborted, lost, its process
ended, a file read again, with snapshots taken between (issue 39: the status, the liveness rule and the
ranks table read them at every frame instead of walking every rank's events)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from mstop.engine import figures, processes, rankstate
from mstop.engine.store import FLOAT_INDEX, HAVING, Batch, Store
from mstop.formats.parse import NUMERIC, Rows
from mstop_writer.schema import mfu_too_high

N_EXACT = 2
RANKS = 2


def _rows(t0: float, step0: int, n: int, session: str) -> Rows:
    exact = np.column_stack([t0 + np.arange(n, dtype=float), step0 + np.arange(n, dtype=float)])
    floats = np.full((n, len(NUMERIC) - N_EXACT), np.nan, np.float32)
    return Rows(exact, floats, {}, np.zeros(n, np.int32), [session], [], 0)


op = st.one_of(
    # mostly one session: its rows after an abort or an end of it are what the answers must notice
    st.tuples(st.just("rows"), st.integers(0, RANKS - 1), st.integers(1, 4), st.sampled_from(["a", "a", "b", ""])),
    st.tuples(st.just("rows"), st.integers(0, RANKS - 1), st.integers(1, 4), st.sampled_from(["a", "a", "b", ""])),
    st.tuples(st.just("nan rows"), st.integers(0, RANKS - 1), st.integers(1, 3), st.sampled_from(["a", "b"])),
    st.tuples(st.just("event"), st.integers(0, RANKS - 1),
              st.sampled_from(["start", "end", "abort", "lost", "exit0", "exit9", "heartbeat", "proc", "profile",
                               "checkpoint", "checkpoint", "dropped", "writer_error", "stack", "devices"]),
              st.sampled_from(["a", "a", "b"])),
    st.tuples(st.just("reset_rows"), st.integers(0, RANKS - 1), st.just(0), st.just("")),
    st.tuples(st.just("reset_events"), st.integers(0, RANKS - 1), st.just(0), st.just("")),
    st.tuples(st.just("snapshot"), st.just(0), st.just(0), st.just("")),
)


def _event(kind: str, session: str, t: float, pid: int) -> dict:
    base = {"time": t, "session": session}
    if kind == "start":
        return {**base, "kind": "start", "pid": pid, "host": "h", "heartbeat_interval": 5}
    if kind in ("exit0", "exit9"):
        return {**base, "kind": "exit", "pid": pid, "how": "exit" if kind == "exit0" else "signal",
                "code": 0 if kind == "exit0" else None, "signal": None if kind == "exit0" else "SIGKILL"}
    if kind == "proc":
        return {**base, "kind": "proc", "pid": pid, "state": "ST"[int(t) % 2], "cpu_s": t / 10, "rss": 1000}
    if kind == "profile":
        return {**base, "kind": "profile", "first_step": 1, "last_step": 2,
                "shares": {"compute": 0.5, "comm_not_overlapped": 0.2, "overlapped": 0.1, "idle": 0.3}}
    if kind == "checkpoint":  # two ranks save the same step (one save); a save that names no step
        return {**base, "kind": "checkpoint", "step": int(t) // 4 * 4 if int(t) % 3 else None, "path": f"c{t}"}
    if kind == "dropped":
        return {**base, "kind": "dropped", "rows": int(t) % 7, "rejected": int(t) % 3}
    if kind == "abort":
        return {**base, "kind": "abort", "error": "boom", "step": 1}
    if kind == "writer_error":
        return {**base, "kind": "writer_error", "message": f"disk full {int(t) % 2}"}
    if kind == "devices":  # the host's device sampler failed (the header names the host)
        return {**base, "kind": "devices", "host": "h", "state": "failed", "message": "npu-smi timed out"}
    if kind == "stack":
        return {**base, "kind": "stack", "reason": "timeout", "step": 1,
                "threads": [{"name": "MainThread", "main": True, "frames": [["f.py", 3, "wait"]]}]}
    return {**base, "kind": kind}


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def _checkpoints(store: Store) -> tuple[list[float], dict | None]:
    """figures.checkpoint_times and last_checkpoint's rule, from every rank's checkpoint list."""
    by_step: dict[float, float] = {}
    other: list[float] = []
    best = None
    for d in store.ranks.values():
        for c in d.checkpoints:
            step = c.get("step")
            if isinstance(step, (int, float)):
                by_step[float(step)] = min(by_step.get(float(step), math.inf), float(c["time"]))
            else:
                other.append(float(c["time"]))
            key = (step if isinstance(step, (int, float)) else -1, c["time"])
            if best is None or key > best[0]:
                best = (key, c)
    return sorted(list(by_step.values()) + other), (dict(best[1]) if best else None)


def _check(store: Store) -> None:
    assert (figures.checkpoint_times(store), figures.last_checkpoint(store)) == _checkpoints(store)
    for name in HAVING:  # the store's indexes of the few ranks that have something, and a walk of all
        want = sorted(r for r, d in store.ranks.items() if (len(d.segments) > 1 if name == "resumed" else
                                                             getattr(d, name)))
        assert store.ranks_with(name) == want, name
    got = rankstate.states(store)
    assert got.ranks == sorted(store.ranks)
    for k, r in enumerate(got.ranks):
        d = store.ranks[r]
        assert got.aborted[k] == rankstate.aborted(d)
        assert got.lost[k] == (rankstate.lost(d) is not None)
        assert got.finished[k] == rankstate.finished_cleanly(d)
        assert got.restarting[k] == rankstate.restarting(d)
        assert got.exited[k] == (processes.exited(d) is not None)
        assert got.one[k].process == processes.facts(d)
        assert got.one[k].profile == (rankstate.rank_profile(d) if d.profiles else None)
        assert got.rows[k] == d.rows and (got.dropped[k], got.rejected[k]) == (d.dropped, d.rejected)
        assert got.one[k].holding == processes.holding(d) and got.one[k].start == d.last_start
        start = d.last_start or {}  # what the ranks view shows of it, kept as arrays
        assert got.host[k] == str(start.get("host") or "?")
        assert got.memory_host[k] == (str(start.get("host")) if start.get("memory_source") == "host" else None)
        facts = processes.facts(d) or {}
        assert _same(float(got.pid[k]), float(facts.get("pid") or math.nan)) and got.proc_state[k] == facts.get("state")
        assert _same(float(got.rss[k]), float(facts.get("rss") or math.nan))
        assert _same(float(got.first_row_time[k]), float(d.col("time")[0]) if d.rows else math.nan)
        starts = []
        for name, e in d.starts.items():  # figures.first_start's rule, rank by rank
            t = float(e["time"])
            seg = d.segment_of.get(name)
            if seg is not None and d.segments[seg].first_row < d.rows:
                row = float(d.col("time")[d.segments[seg].first_row])
                t = t if row - rankstate.MAX_STARTUP <= t <= row else row
            starts.append(t)
        assert _same(float(got.first_start[k]), min(starts) if starts else math.nan)
        life = [t for t in (d.last_heartbeat, d.last_event_time) if t is not None]
        if d.rows:
            life.append(float(d.col("time")[-1]))
            assert got.last_step[k] == float(d.col("step")[-1])
        if d.last_start is not None and str(d.last_start.get("session")) not in d.segment_of:
            life.append(float(d.last_start["time"]))
        assert _same(float(got.life[k]), max(life) if life else math.nan)


@given(st.lists(op, min_size=1, max_size=30))
def test_kept_answers_equal_the_answers_worked_out_afresh(ops):
    store = Store()
    t = 1000.0
    step = {r: 0 for r in range(RANKS)}
    snaps = []
    for kind, r, n, session in ops:
        t += 1.0
        if kind in ("rows", "nan rows"):
            rows = _rows(t, step[r] + 1, n, session)
            if kind == "nan rows":  # a literal NaN loss in its last row
                rows.floats[-1, FLOAT_INDEX["loss"]] = np.nan
                rows.nonfinite.append((n - 1, "loss", math.nan))
            store.append(Batch.of(r, rows))
            step[r] += n
            t += n
        elif kind == "event":
            store.ingest_events(r, [_event(n, session, t, 100 + r)])
        elif kind == "reset_rows":
            store.reset_rank(r)
            step[r] = 0
        elif kind == "reset_events":
            store.reset_events(r)
        else:
            snaps.append((store.snapshot(), None))
        _check(store.snapshot())
    for snap, _ in snaps:  # an older snapshot's answers are still its own (the kept ones are shared)
        _check(snap)


@given(st.lists(st.fixed_dictionaries({}, optional={
    "flops_per_token": st.one_of(st.integers(-5, 10**9), st.floats(allow_nan=True), st.text(max_size=2), st.booleans()),
    "world_size": st.one_of(st.integers(-2, 64), st.floats(0, 8), st.booleans(), st.none()),
    "peak_flops": st.one_of(st.integers(-5, 10**15), st.floats(allow_nan=True), st.text(max_size=2))}),
    min_size=1, max_size=4), st.one_of(st.none(), st.floats(-1.0, 1e15)))
def test_mfu_from_the_answers_equals_each_ranks_start_event(starts, peak):
    """rank_mfu derives MFU from every rank's start event at once (the answers' arrays); each rank's figure
    equals the one its own start event gives (figures._mfu_scale), whatever the event holds."""
    store = Store()
    for r, start in enumerate(starts):
        store.ingest_events(r, [{"kind": "start", "time": 1000.0, "session": "s", **start}])
        rows = _rows(1001.0, 1, 5, "s")
        rows.floats[:, FLOAT_INDEX["tokens"]] = 4096.0
        rows.floats[:, FLOAT_INDEX["step_time"]] = 0.5
        store.append(Batch.of(r, rows))
    opts = figures.Options(peak_flops=peak)
    snap = store.snapshot()
    got = figures.rank_mfu(snap, opts)
    tps = figures.rank_tokens_per_s(snap)
    with np.errstate(all="ignore"):
        want = np.array([tps[i] * figures._mfu_scale(snap.ranks[r].last_start, opts)
                         for i, r in enumerate(figures.window(snap).ranks)])
        want[mfu_too_high(want)] = np.nan  # more than the device can do: no figure
    np.testing.assert_array_equal(got, want)


@given(st.lists(st.tuples(st.one_of(st.none(), st.floats(0, 100)), st.one_of(st.none(), st.floats(-1, 100)),
                          st.sampled_from(["device", "host"]), st.sampled_from(["h1", "h2", None])),
                min_size=1, max_size=6))
def test_each_ranks_headroom_is_its_own_else_its_hosts(spec):
    """The ranks table's headroom per rank (figures.rank_headrooms, by arrays) is the one the headrooms name
    for it: its own ("rank 3"), else its host's ("host h1"), as looking each up by its label gave."""
    store = Store()
    for r, (peak, total, source, host) in enumerate(spec):
        start = {"kind": "start", "time": 1000.0, "session": "s", "memory_source": source}
        if host is not None:
            start["host"] = host
        store.ingest_events(r, [start])
        rows = _rows(1001.0, 1, 3, "s")
        rows.floats[:, FLOAT_INDEX["mem_peak"]] = np.nan if peak is None else peak
        rows.floats[:, FLOAT_INDEX["mem_total"]] = np.nan if total is None else total
        store.append(Batch.of(r, rows))
    snap = store.snapshot()
    w, heads = figures.window(snap), figures.headrooms(snap)
    by_label = {str(k): v for k, v in heads.items()}
    want = []
    for r, (_, _, _, host) in zip(w.ranks, spec):  # each rank's start event names its host (or none)
        h = by_label.get(f"rank {r}")
        h = h if h is not None else by_label.get(f"host {host or '?'}")
        want.append(math.nan if h is None else h)
    np.testing.assert_array_equal(figures.rank_headrooms(snap), np.array(want))
