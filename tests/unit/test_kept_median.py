"""The throughput rule's median pace, kept between frames and extended as rows arrive (issue 39: it was the
median of every row's pace at every frame, 30 ms at 1.25 M rows), equals the median worked out afresh from the
columns, however the rows came: in pieces, resumed from an earlier step, with tokens appearing late, profiled,
read again."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from mstop.engine.rules import Rules
from mstop.engine.ruletable import THROUGHPUT_DROP
from mstop.engine.store import FLOAT_INDEX, Batch, Store
from mstop.formats.parse import NUMERIC, Rows

N_EXACT = 2


def _rows(first_step: float, n: int, session: str, tokens: bool, seed: int) -> Rows:
    rng = np.random.default_rng(seed)
    steps = first_step + np.arange(n, dtype=float)
    exact = np.column_stack([1000.0 + steps, steps])
    floats = np.full((n, len(NUMERIC) - N_EXACT), np.nan, np.float32)
    floats[:, FLOAT_INDEX["step_time"]] = rng.uniform(0.5, 2.0, n)
    floats[:, FLOAT_INDEX["samples"]] = 8
    if tokens:
        floats[:, FLOAT_INDEX["tokens"]] = rng.integers(1000, 5000, n)
    return Rows(exact, floats, {}, np.zeros(n, np.int32), [session], [], 0)


plans = st.lists(st.tuples(st.integers(1, 40),  # rows in the batch
                           st.integers(0, 2),  # its session (a new one resumes 10 steps back)
                           st.booleans(),  # the batch gives tokens
                           st.sampled_from(["", "", "", "profile", "reset"])), min_size=1, max_size=25)


@given(plans, st.integers(0, 12))
def test_the_kept_median_equals_the_median_of_every_pace(plan, warmup):
    rules = Rules(warmup_steps=warmup)
    store = Store()
    step = 0.0
    for k, (n, sess, tokens, then) in enumerate(plan):
        d = store.ranks.get(0)
        if sess and d is not None and d.segments and d.segments[-1].session != f"s{sess}":
            step = max(0.0, step - 10)  # a resume from an earlier checkpoint
        store.append(Batch.of(0, _rows(step + 1, n, f"s{sess}", tokens, k)))
        step += n
        if then == "profile":
            store.ingest_events(0, [{"time": 1000.0 + step, "kind": "profile", "first_step": int(step) - 3,
                                     "last_step": int(step) - 1}])
        elif then == "reset":
            store.reset_rank(0)
            step = 0.0
        d = store.snapshot().ranks[0]
        if not d.rows:
            continue
        _, got = THROUGHPUT_DROP.kept_median(d, rules)
        unit, _, _, want = THROUGHPUT_DROP.median(d, np.flatnonzero(d.steady()), rules)
        assert (got is None and want is None) or got == want, (got, want)
        assert THROUGHPUT_DROP.kept_median(d, rules)[0] == unit


def _ema_afresh(d, weight: float) -> tuple[list[int], list[float]]:
    """The debiased EMA over the rank's effective rows with a finite loss, row by row."""
    idx, out, acc, norm = [], [], 0.0, 0.0
    loss = d.col("loss").astype(np.float64)
    for i in np.flatnonzero(d.effective() & np.isfinite(loss)).tolist():
        acc, norm = weight * acc + (1 - weight) * loss[i], weight * norm + (1 - weight)
        idx.append(i)
        out.append(acc / norm)
    return idx, out


@given(plans)
def test_the_kept_loss_ema_equals_the_ema_worked_out_afresh(plan):
    """The smoothed loss is a fold on the rank (shared by its snapshots): extended as rows come, worked out
    again after a resume, an older session's rows or a reset; an older snapshot reads its own rows' part."""
    from mstop.engine.smoothing import ema_series

    store = Store()
    step, older = 0.0, []
    for k, (n, sess, _tokens, then) in enumerate(plan):
        d = store.ranks.get(0)
        if sess and d is not None and d.segments and d.segments[-1].session != f"s{sess}":
            step = max(0.0, step - 10)
        rows = _rows(step + 1, n, f"s{sess}", False, k)
        rows.floats[:, FLOAT_INDEX["loss"]] = np.where(np.arange(n) % 5 == 3, np.nan, 2.0 / (step + 1 + np.arange(n)))
        store.append(Batch.of(0, rows))
        step += n
        if then == "reset":
            store.reset_rank(0)
            step = 0.0
        snap = store.snapshot()
        older.append(snap)
        for s in (snap, older[len(older) // 2]):  # this moment's, and an older snapshot's again
            if not s.ranks[0].rows:
                continue
            idx, ema = ema_series(s, 0, 0.9)
            want_idx, want = _ema_afresh(s.ranks[0], 0.9)
            assert idx.tolist() == want_idx
            np.testing.assert_allclose(ema, want, rtol=1e-9)
