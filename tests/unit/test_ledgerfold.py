"""The goodput ledger's fold (issue 39 step 3, issue 40 item 3): each row classified once as it arrives.

Held to a plain row-by-row reading of the definition (docs/health.md, "Goodput"), whatever way the rows and
events arrive: all at once, in random pieces, a row a round (the following path), checkpoints before or
after their rows, snapshots taken between; and once a rank's first block is complete, ``productive`` never
falls as rows arrive."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mstop.engine.figures import Options
from mstop.engine.goodput import ledger
from mstop.engine.ledgerfold import BLOCK, STALL_MIN_S
from mstop.engine.store import FLOAT_INDEX, Batch, Store
from mstop.formats.parse import NUMERIC, Rows
from mstop_writer.schema import wait_too_long

N_EXACT = 2


def _rows(rows: list[tuple[float, float, float, float, str]]) -> Rows:
    """Rows of (time, step, step time, data wait, session); NaN: not given."""
    n = len(rows)
    names = list(dict.fromkeys(r[4] for r in rows))
    exact = np.array([[r[0], r[1]] for r in rows], float).reshape(n, N_EXACT)
    floats = np.full((n, len(NUMERIC) - N_EXACT), np.nan, np.float32)
    floats[:, FLOAT_INDEX["step_time"]] = [r[2] for r in rows]
    floats[:, FLOAT_INDEX["data_wait"]] = [r[3] for r in rows]
    codes = np.array([names.index(r[4]) for r in rows], np.int32)
    return Rows(exact, floats, {}, codes, names)


def _med(v: list[float]) -> float:
    return float(statistics.median(v))


def _at_the_door(st_: float, wait: float) -> float:
    """A data wait longer than its step is refused where rows enter the store (mstop.engine.door)."""
    return math.nan if wait_too_long(wait, st_) else wait


def oracle(rows: list[tuple[float, float, float, float, str]], cks: list[tuple[float, float]]) -> list[float]:
    """The five sums of the definition, read row by row in plain Python (rows as the store holds them:
    float32 step times and data waits)."""
    f32 = [(t, s, float(np.float32(a)), _at_the_door(float(np.float32(a)), float(np.float32(w))), ses)
           for t, s, a, w, ses in rows]
    n = len(f32)
    first_of: dict[str, int] = {}
    for i, r in enumerate(f32):
        first_of.setdefault(r[4], i)
    first = [first_of[r[4]] == i for i, r in enumerate(f32)]
    reached = {ses: max((f32[j][1] for j in range(i)), default=-math.inf) for ses, i in first_of.items()}

    def figures(a: int, b: int, before: tuple[float, float, float] | None) -> tuple[float, float, float]:
        m0, n0 = (before[0], before[1]) if before else (0.0, 0.0)
        steady = [f32[i][2] for i in range(a, b) if not first[i] and math.isfinite(f32[i][2]) and f32[i][2] > 0]
        gaps, excess = [], []
        for i in range(max(a, 1), b):
            if first[i] or f32[i - 1][4] != f32[i][4]:
                continue
            g = f32[i][0] - f32[i - 1][0]
            s = f32[i][2] if math.isfinite(f32[i][2]) else 0.0
            gaps.append(g)
            excess.append(g - min(s, g))
        m = _med(steady) if steady else m0
        normal = _med(excess) if len(excess) >= 2 else n0
        return m, normal, max(STALL_MIN_S, 10 * m, 3 * (_med(gaps) if gaps else 0.0))

    early = [figures(0, i + 1, None) for i in range(min(n, BLOCK))]  # the first block's rows: the rows so far
    blocks: list[tuple[float, float, float]] = []
    for j in range(n // BLOCK):
        blocks.append(figures(j * BLOCK, j * BLOCK + BLOCK, blocks[-1] if blocks else None))
    ck_steps = {s for s, _ in cks if math.isfinite(s)}
    ck_times = [t for _, t in cks]
    sums = [0.0] * 5
    run: dict[str, float] = {}
    for i, (t_raw, step, st_, dw, ses) in enumerate(f32):
        if first[i]:
            run[ses] = t_raw
            continue
        prev = run[ses]
        t = max(prev, t_raw)
        run[ses] = t
        m, normal, hang = early[i] if i < BLOCK else blocks[i // BLOCK - 1]
        saved = step in ck_steps or any(prev < c <= t + 1e-3 for c in ck_times)
        redo = step <= reached[ses]
        st0 = st_ if math.isfinite(st_) else 0.0
        dw0 = dw if math.isfinite(dw) else 0.0
        gap = t - prev
        own = min(st0, gap)
        own += min(gap - own, normal)
        extra = gap - own
        if redo:
            part = (0.0, 0.0, extra if saved else 0.0, 0.0 if saved else extra, own)
        else:
            wait = min(dw0, own)
            over = max(0.0, own - max(m, wait)) if (saved or own > hang) else 0.0
            part = (own - over - wait, wait, extra + over if saved else 0.0, 0.0 if saved else extra + over, 0.0)
        sums = [a + b for a, b in zip(sums, part)]
    return sums


#: the steps between two rows' times, a row's step time and its data wait, as a row draws them: index 0 the
#: simplest (what a byte shrinks to)
DTS = (1.0, 1.0, 0.5, 2.0, 40.0, -0.3, 0.0, 400.0)
TIMES = (math.nan, 1.0, 0.9, 3.0, 50.0, 0.0)
WAITS = (math.nan, 0.1, 0.0, 2.0)


def _choices(draw: st.DrawFn, n: int, dts: int = 7) -> list[tuple[float, float, float]]:
    """``n`` rows' (time step, step time, data wait), drawn as one byte string (three bytes a row) rather than
    three draws a row: a property of 450 rows spent 40 % of its time drawing them one by one. Bytes shrink
    toward zero, the rows toward the simplest choices, as the draws did."""
    b = draw(st.binary(min_size=3 * n, max_size=3 * n))
    return [(DTS[b[i] % dts], TIMES[b[i + 1] % len(TIMES)], WAITS[b[i + 2] % len(WAITS)]) for i in range(0, 3 * n, 3)]


@st.composite
def a_rank(draw: st.DrawFn) -> tuple[list, list]:
    """A rank's rows over one to three sessions (each resumed from a step at or before the last one's) and
    checkpoints by step, by time, or both."""
    rows: list[tuple[float, float, float, float, str]] = []
    t = 1000.0
    step = 0.0
    for k in range(draw(st.integers(1, 3))):
        if k:
            step = float(draw(st.integers(0, int(step))))
            t += draw(st.floats(0.0, 50.0))
        for dt, a, w in _choices(draw, draw(st.integers(1, 150))):
            step += 1
            t += dt
            rows.append((t, step, a, w, f"s{k}"))
    cks = draw(st.lists(st.tuples(st.one_of(st.just(math.nan), st.floats(1, 200).map(float.__floor__).map(float)),
                                  st.floats(990.0, 1400.0)), max_size=4))
    return rows, cks


def _feed(store: Store, rows: list, cks: list, cuts: list[int], ck_at: list[int]) -> None:
    """Rows in pieces at ``cuts`` (one-row pieces through the read round's path), each checkpoint event
    after the piece ``ck_at`` names (or before all), snapshots between."""
    bounds = sorted({0, len(rows), *[c for c in cuts if 0 < c < len(rows)]})
    pieces = [rows[a:b] for a, b in zip(bounds, bounds[1:])]
    events = {}
    for (s, t), at in zip(cks, ck_at):
        events.setdefault(min(at, len(pieces)), []).append(
            {"kind": "checkpoint", "time": t, "step": None if math.isnan(s) else s})
    store.ingest_events(0, events.get(0, []))
    for p, piece in enumerate(pieces, 1):
        if len(piece) == 1:
            store.append(Batch.round([(0, _rows(piece))]))
        else:
            store.append(Batch.of(0, _rows(piece)))
        store.snapshot()
        store.ingest_events(0, events.get(p, []))


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(a_rank(), st.lists(st.integers(0, 460), max_size=40), st.lists(st.integers(0, 60), max_size=4))
def test_the_fold_equals_the_definition_however_the_rows_arrive(rank, cuts, ck_at):
    rows, cks = rank
    ck_at = (ck_at + [0] * len(cks))[:len(cks)]
    truth = oracle(rows, cks)
    whole = Store()
    _feed(whole, rows, cks, [], [0] * len(cks))
    pieces = Store()
    _feed(pieces, rows, cks, cuts, ck_at)
    ones = Store()  # a row a round, as followed (RankLedger.settle_row, the first block's rows too)
    _feed(ones, rows, cks, list(range(len(rows))), ck_at)
    for store in (whole, pieces, pieces.snapshot(), ones):
        got = store.ranks[0].ledger.sums
        assert got == pytest.approx(truth, rel=1e-9, abs=1e-6)
    opts = Options(clock=lambda: 5000.0)
    a, b = ledger(whole, opts), ledger(pieces, opts)
    assert b.seconds == pytest.approx(a.seconds, rel=1e-9, abs=1e-6) and b.wall == a.wall
    assert math.fsum(a.seconds.values()) == pytest.approx(a.wall, rel=1e-9, abs=1e-6)


#: found by this test (issue 40 item 3): a resumed session's first row was measured against the median of
#: its next row, so productive fell by 0.5 s when that row came
_RESUME = ([(1000.0 + s, float(s), math.nan, math.nan, "s0") for s in range(1, 32)] + [
    (1032.0, 32.0, 50.0, math.nan, "s0"), (1059.0, 33.0, 50.0, math.nan, "s1"), (1060.0, 34.0, 1.0, math.nan, "s1")],
    [])


@given(a_rank(), st.sampled_from([17, 5, 1]))
@example(_RESUME, 1)
def test_productive_never_falls(rank, every):
    """Rows appended one round at a time, the checkpoints known first (as a writer's events come with their
    rows): the ledger's ``productive`` and ``recomputed`` only grow, from the first row. The fold's sums are
    read at every row; the whole ledger (a few milliseconds) at every row in a third of the examples, else
    at every ``every``-th row, each session's first two and the last."""
    rows, cks = rank
    firsts = {i + d for i in range(len(rows)) if i == 0 or rows[i][4] != rows[i - 1][4] for d in (0, 1)}
    store = Store()
    store.ingest_events(0, [{"kind": "checkpoint", "time": t, "step": None if math.isnan(s) else s}
                            for s, t in cks])
    seen = [-math.inf] * 5
    productive = -math.inf
    opts = Options(clock=lambda: 5000.0)
    for i in range(len(rows)):
        store.append(Batch.round([(0, _rows(rows[i:i + 1]))]))
        sums = store.ranks[0].ledger.sums
        assert sums[0] >= seen[0] - 1e-9 and sums[4] >= seen[4] - 1e-9
        seen = list(sums)  # a copy: the fold adds to its own list in place
        if i % every == 0 or i in firsts or i == len(rows) - 1:
            got = ledger(store, opts).seconds["productive"]  # each session's first row too
            assert got >= productive - 1e-9
            productive = got


def test_a_resumed_session_pays_for_the_steps_it_runs_again():
    """Session A runs steps 1-100 (1 s each); B resumes from step 81: its steps 81-100 are recomputed, A's
    stay productive, and B's later steps count again."""
    a = [(1000.0 + i, float(i), 1.0, 0.0, "A") for i in range(1, 101)]
    b = [(1200.0 + i, float(80 + i), 1.0, 0.0, "B") for i in range(1, 41)]
    store = Store()
    store.append(Batch.of(0, _rows(a)))
    before = list(store.ranks[0].ledger.sums)
    store.append(Batch.of(0, _rows(b)))
    after = store.ranks[0].ledger.sums
    assert after[0] >= before[0]
    assert after[4] == pytest.approx(19.0)  # B's 82-100 (its first row, 81, is read with its start-up)
    assert after[0] == pytest.approx(before[0] + 20.0)  # B's 101-120
    g = ledger(store, Options(clock=lambda: 2000.0))
    assert g.seconds["recomputed"] == pytest.approx(20.0)  # and B's first row: one step of its start-up


def test_a_late_checkpoint_moves_its_rows_exactly():
    """A checkpoint event read after its rows (another file, another read round) classifies its step again:
    the same ledger as when it came first."""
    rows = [(1000.0 + i + (5.0 if i >= 100 else 0.0), float(i), 6.0 if i == 100 else 1.0, 0.0, "A")
            for i in range(1, 200)]
    early, late = Store(), Store()
    early.ingest_events(0, [{"kind": "checkpoint", "time": 1105.0, "step": 100}])
    early.append(Batch.of(0, _rows(rows)))
    late.append(Batch.of(0, _rows(rows)))
    assert late.ranks[0].ledger.sums != early.ranks[0].ledger.sums
    late.ingest_events(0, [{"kind": "checkpoint", "time": 1105.0, "step": 100}])
    assert late.ranks[0].ledger.sums == pytest.approx(early.ranks[0].ledger.sums)
    assert late.ranks[0].ledger.sums[2] == pytest.approx(5.0)  # a 6 s step: 5 s over the median


def test_blocks_keep_their_figures():
    """A rank's figures change block by block: a slower second half is measured against its own pace after
    one block, not against the whole run's median."""
    rows = [(1000.0 + i, float(i), 1.0, 0.0, "A") for i in range(1, 129)]
    t = rows[-1][0]
    rows += [(t + 3.0 * i, float(128 + i), 3.0, 0.0, "A") for i in range(1, 129)]
    store = Store()
    store.append(Batch.of(0, _rows(rows)))
    fold = store.ranks[0].ledger
    assert [fold.blocks[j][0] for j in range(len(fold.blocks))] == [1.0, 1.0, 3.0, 3.0]
    assert store.ranks[0].ledger.sums[3] == 0.0  # nothing stalled


def test_the_wall_never_shrinks_at_the_dead_verdict():
    """Issue 40 item 3: a job killed (no heartbeat, row or event any more) read ``stalled`` with the wall
    growing, then at the ``dead`` verdict its wall fell back to its last sign of life (63 % -> 77 %). It now
    ends when it was known dead, read live at every second or afterwards."""
    from mstop.engine.figures import status

    store = Store()
    store.ingest_events(0, [{"kind": "start", "time": 1000.0, "session": "s0", "heartbeat_interval": 5.0}])
    store.append(Batch.of(0, _rows([(1001.0 + s, float(s), 1.0, math.nan, "s0") for s in range(1, 60)])))
    last_wall, seen = -math.inf, set()
    for now in np.arange(1060.0, 1200.0, 0.5):
        opts = Options(clock=lambda now=now: now)
        got = ledger(store, opts)
        seen.add(status(store, opts))
        assert got.wall >= last_wall - 1e-9, (now, got.wall, last_wall)
        last_wall = got.wall
    assert {"running", "dead"} <= seen
    later = ledger(store, Options(clock=lambda: 10_000_000.0))
    assert later.wall == pytest.approx(last_wall)  # read a long time afterwards: the same


def _read_at_once(snap, opts: Options) -> tuple[float, dict[str, float]]:
    """The ledger read from every rank's record over the job's [first, end] (no kept parts, nothing extended:
    each rank's buckets as :func:`mstop.engine.goodput._exact` reads them)."""
    from mstop.engine import figures
    from mstop.engine.goodput import BUCKETS, LIVE, _exact, _span, _taken, job_end

    c = figures.rank_clocks(snap, opts)
    live = figures.status(snap, opts) in LIVE
    end = job_end(snap, opts, c)
    ranks = [r for r in sorted(snap.ranks) if snap.ranks[r].rows]
    first = min(_span(snap.ranks[r], k, c.ranks.get(r, 0.0), None)[0] for r in ranks
                for k in range(len(snap.ranks[r].segments)))
    b = np.array([_taken(_exact(snap.ranks[r], c.ranks.get(r, 0.0), live, first, end), end - first) for r in ranks])
    return max(0.0, end - first), {k: math.fsum(b[:, i].tolist()) / len(ranks) for i, k in enumerate(BUCKETS)}


@st.composite
def rounds(draw: st.DrawFn) -> tuple[int, list[list[tuple]]]:
    """Read rounds of 1-4 ranks: each round a row of some ranks (their latest session's), and now and then
    an event: a heartbeat, a new session (a restart), an end."""
    n = draw(st.integers(1, 4))
    t, out = 1000.0, []
    for _ in range(draw(st.integers(1, 40))):
        t += draw(st.sampled_from([1.0, 1.0, 0.5, 3.0, 40.0]))
        ranks = draw(st.lists(st.integers(0, n - 1), unique=True, max_size=n))
        what = draw(st.sampled_from(["rows"] * 12 + ["heartbeat", "restart", "end"]))
        out.append((t, ranks, what, draw(st.sampled_from([1.0, 0.9, 3.0, math.nan])),
                    draw(st.sampled_from([0.0, 0.2, math.nan]))))
    return n, out


@given(rounds(), st.floats(0.0, 100.0))
@example((2, [(1001.0, [0, 1], "rows", 1.0, 0.0), (1002.0, [0, 1], "rows", 1.0, 0.0),
              (1003.0, [0, 1], "rows", 1.0, 0.0), (1004.0, [1], "rows", 1.0, 0.0)]), 10.0)
def test_the_kept_ledger_equals_it_read_at_once(job, later):
    """Issue 57 step 3: the ledger kept between readings (each rank's open form; a rank that only got rows
    brought up to date in arrays, no record made) equals the ledger read from every rank's record at once, at
    every snapshot of a job followed round by round, read then and ``later`` seconds after."""
    n, rs = job
    store = Store()
    session = dict.fromkeys(range(n), 0)
    step = dict.fromkeys(range(n), 0.0)
    for r in range(n):
        store.ingest_events(r, [{"kind": "start", "time": 999.0, "session": "s0", "heartbeat_interval": 5.0}])
    for t, ranks, what, st_, dw in rs:
        for r in ranks:
            if what == "heartbeat":
                store.ingest_events(r, [{"kind": "heartbeat", "time": t}])
            elif what == "end":
                store.ingest_events(r, [{"kind": "end", "time": t, "session": f"s{session[r]}"}])
            elif what == "restart":
                session[r] += 1
                step[r] = max(0.0, step[r] - 2)
                store.ingest_events(r, [{"kind": "start", "time": t - 0.5, "session": f"s{session[r]}"}])
        batch = []
        for r in ranks:
            step[r] += 1
            batch.append((r, _rows([(t, step[r], st_, dw, f"s{session[r]}")])))
        if batch:
            store.append(Batch.round(batch))
        _same(store.snapshot(), Options(clock=lambda t=t: t))  # followed: read at every round
    _same(store.snapshot(), Options(clock=lambda: rs[-1][0] + later))  # and read afterwards


def _same(snap, opts: Options) -> None:
    got = ledger(snap, opts)
    if got is None:
        assert not snap.rows
        return
    wall, seconds = _read_at_once(snap, opts)
    assert got.wall == pytest.approx(wall, rel=1e-9, abs=1e-6)
    assert got.seconds == pytest.approx(seconds, rel=1e-9, abs=1e-6)


@st.composite
def fresh_ranks(draw: st.DrawFn) -> list[list[tuple[float, float, float, float, str]]]:
    """1-5 ranks of the same count of rows (a first read's: from fewer than settle_fresh takes, through less
    than a block, to three blocks and more), one session each."""
    n = draw(st.one_of(st.integers(1, BLOCK - 1), st.integers(BLOCK, 3 * BLOCK + 5)))
    out = []
    for _ in range(draw(st.integers(1, 5))):
        t, rows = 1000.0, []
        for step, (dt, a, w) in enumerate(_choices(draw, n, len(DTS)), 1):
            t += dt
            rows.append((t, float(step), a, w, "s0"))
        out.append(rows)
    return out


def _warm(led) -> tuple | None:
    w = led.warm
    return None if w is None else (w.st, w.gap, w.excess, w.last)


@given(fresh_ranks())
def test_ranks_settled_together_equal_each_settled_row_by_row(ranks):
    """Issue 57: a first read's ranks are settled together in arrays (ledgerfold.settle_fresh): each rank's
    figures (its first block's, its blocks') and its five sums equal, to the bit, those of its first row and
    then the rest each settled on its own (RankLedger.settle), and those of the same rows arriving a row a
    round (RankLedger.settle_row, in plain Python: the figures to the bit, the sums summed in another order).
    The row-a-round reading, 0.4 ms a row, is done for one rank an example (``pick``): every rank is held to
    the rank read alone, and that one to it."""
    together = Store()
    together.append(Batch.round([(r, _rows(rows)) for r, rows in enumerate(ranks)]))
    pick = len(ranks) - 1
    for r, rows in enumerate(ranks):
        alone, ones, split = Store(), Store(), Store()
        alone.append(Batch.of(0, _rows(rows)))
        split.append(Batch.of(0, _rows(rows[:1])))  # a row, then the rest: each settled on its own (settle)
        split.append(Batch.of(0, _rows(rows[1:])))
        for i in range(len(rows) if r == pick else 0):
            ones.append(Batch.round([(0, _rows(rows[i:i + 1]))]))
        got, slow = together.ranks[r].ledger, alone.ranks[0].ledger
        want = ones.ranks[0].ledger if r == pick else slow
        assert got.early.a == slow.early.a and got.blocks.a == slow.blocks.a
        for other in (want, slow, split.ranks[0].ledger):  # the figures each row is measured against
            assert [got.figures_of(i) for i in range(len(rows))] == [other.figures_of(i) for i in range(len(rows))]
            assert (got.settled, got.top, got.sess_t, got.reached) == (other.settled, other.top, other.sess_t,
                                                                        other.reached)
            # fewer rows than a block: the first block's values so far, kept for the rows to come
            assert _warm(got) == _warm(other)
        assert got.sums == slow.sums == split.ranks[0].ledger.sums  # the same rows' classes: to the bit
        assert got.sums == pytest.approx(want.sums, rel=1e-9, abs=1e-6)
        assert got.sums == pytest.approx(oracle(rows, []), rel=1e-9, abs=1e-6)
