"""Folds (issue 39 step 3): state that advances with the rows equals the same state computed from all the
rows, however the rows arrive (in pieces, rank by rank, interleaved, resumed, profiled, with a rank's file
read again, with snapshots taken between)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mstop.engine.figures import ACHIEVED, WINDOW, lasts, tokens_seen, window
from mstop.engine.store import FLOAT_INDEX, Batch, Store
from mstop.formats.parse import NUMERIC, Rows

N_EXACT = 2
COLS = ("step_time", "data_wait", "tokens", "samples", "mfu", "mem_peak", "mem_total")


def _rows(times: list[float], steps: list[float], session: str, achieved: bool) -> Rows:
    n = len(times)
    exact = np.column_stack([np.array(times, float), np.array(steps, float)]).reshape(n, N_EXACT)
    floats = np.full((n, len(NUMERIC) - N_EXACT), np.nan, np.float32)
    for c in COLS:
        floats[:, FLOAT_INDEX[c]] = np.arange(n, dtype=np.float32) + times[0] % 97
    extra = {ACHIEVED: np.array(times, np.float32) % 13} if achieved else {}
    return Rows(exact, floats, extra, np.zeros(n, np.int32), [session], [], 0)


def _truth_lasts(store: Store) -> dict[int, tuple[float, float]]:
    return {r: (float(d.col("time")[-1]), float(d.col("step")[-1])) for r, d in store.ranks.items() if d.rows}


def _truth_window(store: Store) -> dict[int, dict[str, list]]:
    """Each rank's last WINDOW rows by the rule's definition: its steady rows (one session: its rows less its
    first while it has more; several: the timeline's rows less each session's first and profiled steps)."""
    out = {}
    for r, d in sorted(store.ranks.items()):
        if not d.rows:
            continue
        n = d.rows
        if len(d.segments) > 1:
            idx = np.flatnonzero(d.steady())[-WINDOW:]
        else:
            idx = np.arange(max(1 if n > 1 else 0, n - WINDOW), n)
        got = {"time": d.col("time")[idx], "step": d.col("step")[idx]}
        for c in COLS:
            got[c] = d.col(c)[idx].astype(np.float64)
        got[ACHIEVED] = d.col(ACHIEVED)[idx].astype(np.float64) if ACHIEVED in d.extras else \
            np.full(len(idx), np.nan)
        out[r] = {c: [None if np.isnan(x) else float(x) for x in v] for c, v in got.items()}
    return out


def _window_of(store: Store) -> dict[int, dict[str, list]]:
    w = window(store)
    out = {}
    for i, r in enumerate(w.ranks):
        keep = ~np.isnan(w.cols["time"][i])
        out[r] = {c: [None if np.isnan(x) else float(x) for x in w.cols[c][i][keep]]
                  for c in ("time", "step", *COLS, ACHIEVED)}
    return out


batches = st.lists(st.tuples(st.integers(0, 12),  # rank
                             st.one_of(st.integers(1, 30), st.just(-1)),  # rows in the batch; -1: read again
                             st.integers(0, 3),  # its session (a new one resumes from an earlier step)
                             st.booleans(),  # the file has the ACHIEVED column
                             st.booleans(),  # a profile event for the rank's steps so far
                             st.booleans()),  # read in one round with the batches before it (one Batch)
                   max_size=40)


@given(batches)
@example([(0, 1, 0, False, True, False), (0, -1, 0, False, False, False), (0, 1, 0, False, False, False),
          (0, 21, 1, False, False, False)])  # a profile, the rank's file read again, a resume: its window
# still leaves out the profiled steps (an example a fresh clone's run found)
def test_the_folds_equal_each_ranks_last_rows_however_the_rows_came(plan):
    store = Store()
    step_of: dict[int, float] = {}
    snaps = []
    pending: list = []  # one read round's batches, appended at once (one Batch: Store.append)

    def flush() -> None:
        if pending:
            store.append(Batch.round(list(pending)))
            pending.clear()

    for k, (r, n, sess, achieved, profile, together) in enumerate(plan):
        if not together:
            flush()
        if n == -1:
            flush()
            store.reset_rank(r)
            step_of.pop(r, None)
            continue
        first = step_of.get(r, 0.0) + 1
        if sess and r in step_of:  # a resume: back to an earlier step
            first = max(1.0, first - 5 * sess)
        steps = [first + i for i in range(n)]
        step_of[r] = steps[-1]
        rows = _rows([1000.0 + k + i / 100 for i in range(n)], steps, f"s{sess}", achieved)
        if together:
            pending.append((r, rows))
        else:
            store.append(Batch.of(r, rows))
        if profile:
            flush()
            store.ingest_events(r, [{"time": 1000.0 + k, "kind": "profile", "rank": r,
                                     "first_step": int(first), "last_step": int(first) + 2}])
        if k % 5 == 0:  # a snapshot keeps what the folds held when it was taken
            flush()
            s = store.snapshot()
            snaps.append((s, _truth_lasts(s), _truth_window(s)))
    flush()
    s = store.snapshot()
    for snap, t_lasts, t_window in [*snaps, (s, _truth_lasts(s), _truth_window(s))]:
        assert snap.rows == sum(d.rows for d in snap.ranks.values())
        ring = snap.folds.ring()  # each rank's latest session's first row (the starvation rule's warm-up)
        assert ring.latest_first.tolist() == [snap.ranks[r].segments[-1].first_row for r in ring.ranks]
        got = lasts(snap)
        assert {r: (float(a), float(b)) for r, a, b in zip(got.ranks, got.time, got.step)} == t_lasts
        assert got.ranks == sorted(t_lasts)
        assert _window_of(snap) == t_window
        for r, d in snap.ranks.items():  # Σtokens over the timeline: a resume takes the rows it ran again out
            want = float(np.nansum(d.col("tokens")[d.effective()].astype(np.float64))) if d.rows else 0.0
            got_t = tokens_seen(snap, r)
            assert (got_t or 0.0) == pytest.approx(want, rel=1e-9), (r, got_t, want)


def test_rows_of_an_older_session_written_after_a_resume_stay_out_of_the_window():
    """A process of the old session still writing after the job resumed (its rows are cut by the resume):
    the window holds the resumed session's last rows only, as the columns say."""
    store = Store()
    store.append(Batch.of(0, _rows([100.0 + i for i in range(30)], [1.0 + i for i in range(30)], "old", False)))
    store.append(Batch.of(0, _rows([200.0 + i for i in range(30)], [20.0 + i for i in range(30)], "new", False)))
    store.append(Batch.of(0, _rows([300.0 + i for i in range(5)], [31.0 + i for i in range(5)], "old", False)))
    s = store.snapshot()
    assert _window_of(s) == _truth_window(s)
    assert _window_of(s)[0]["step"] == [30.0 + i for i in range(20)]
