"""The held rows' table across ranks (issue 39 step 4): every rank's column reads back exactly what was
appended to it, bit for bit, however its rows came (a rank's batch, a round's one row each, rows dropped from
the front, a rank forgotten, an extra column added late), and a frozen view keeps what it saw while the table
grows, moves regions and makes new arrays after it."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from mstop.engine.store.table import Table

EXACT = ("time", "step")
FLOATS = ("a", "b", "c")
cell = st.sampled_from([np.nan, 0.0, -0.0, 1.0, 1.0, 1.0, 2.5, np.inf])

op = st.one_of(
    st.tuples(st.just("batch"), st.integers(0, 5), st.lists(st.lists(cell, min_size=3, max_size=3), min_size=1,
                                                               max_size=150), st.booleans()),
    st.tuples(st.just("round"), st.sets(st.integers(0, 5), min_size=1), st.lists(cell, min_size=3, max_size=3)),
    st.tuples(st.just("drop"), st.integers(0, 5), st.integers(1, 100)),
    st.tuples(st.just("forget"), st.integers(0, 5)),
    st.tuples(st.just("extra"),),
    st.tuples(st.just("freeze"), st.integers(0, 5)),
    st.tuples(st.just("trim"), st.integers(0, 5)),
)


def bits(v: np.ndarray) -> np.ndarray:
    return np.asarray(v, np.float32).view(np.uint32)


@given(st.lists(op, min_size=1, max_size=40))
def test_every_column_reads_back_what_was_appended(ops):
    t = Table(EXACT, FLOATS)
    model: list[dict[str, list[float]]] = []
    for _ in range(6):
        t.add_slot()
        model.append({c: [] for c in (*EXACT, *FLOATS, "session", "x")})
    counter = [0.0]
    frozen = []

    def rows_of(values: list[list[float]]) -> tuple[np.ndarray, np.ndarray]:
        k = len(values)
        ex = np.column_stack([counter[0] + np.arange(k, dtype=np.float64), np.arange(k, dtype=np.float64) * 0.5])
        counter[0] += k
        return ex, np.array(values, np.float32).reshape(k, 3)

    extra = False
    for o in ops:
        if o[0] == "batch":
            _, s, values, with_x = o
            ex, fl = rows_of(values)
            sess = np.full(len(values), s % 3, np.int32)
            xs = {"x": np.arange(len(values), dtype=np.float32)} if extra and with_x else {}
            t.append(s, ex, fl, sess, xs)
            m = model[s]
            for j, c in enumerate(EXACT):
                m[c] += ex[:, j].tolist()
            for j, c in enumerate(FLOATS):
                m[c] += fl[:, j].tolist()
            m["session"] += sess.tolist()
            m["x"] += xs["x"].tolist() if xs else [np.nan] * len(values)
        elif o[0] == "round":
            slots = np.array(sorted(o[1]), np.int64)
            ex, fl = rows_of([o[2]] * len(slots))
            sess = np.zeros(len(slots), np.int32)
            t.append_round(slots, ex, fl, sess)
            for i, s in enumerate(slots.tolist()):
                m = model[s]
                for j, c in enumerate(EXACT):
                    m[c].append(float(ex[i, j]))
                for j, c in enumerate(FLOATS):
                    m[c].append(float(fl[i, j]))
                m["session"].append(0)
                m["x"].append(np.nan)
        elif o[0] == "drop":
            _, s, k = o
            k = min(k, t.n(s))
            t.drop_front(s, k)
            for c in model[s]:
                del model[s][c][:k]
        elif o[0] == "forget":
            t.forget(o[1])
            for c in model[o[1]]:
                model[o[1]][c].clear()
        elif o[0] == "extra" and not extra:
            t.add_column("x")
            extra = True
        elif o[0] == "trim":  # a first read's rows spilled: the region cut to what is left, unless seen
            t.trim(o[1])
        elif o[0] == "freeze":
            s = o[1]
            frozen.append((t.frozen(s), {c: list(v) for c, v in model[s].items()}, extra))
        for s in range(6):
            assert t.n(s) == len(model[s]["time"])
    assert t.live == sum(len(m["time"]) for m in model)
    views = [(t.held(s), model[s], extra) for s in range(6)] + frozen
    for h, m, has_x in views:
        assert h.n == len(m["time"])
        for c in EXACT:
            np.testing.assert_array_equal(h.column(c), np.array(m[c]))
        for c in FLOATS:
            assert (bits(h.column(c)) == bits(m[c])).all(), c
        assert h.column("session").tolist() == m["session"]
        if has_x:
            assert (bits(h.column("x")) == bits(m["x"])).all()
    # a column is an array only once some rank's held value differs from its first (bit for bit)
    for c in FLOATS:
        if c in t.kcol:
            for s in range(6):
                v = bits(model[s][c])
                assert (v == v[:1]).all()


def test_memory_follows_the_rows_held():
    """A long follow that drops old rows holds about the rows it keeps, not every row it saw."""
    t = Table(EXACT, FLOATS)
    slots = np.array([t.add_slot() for _ in range(64)])
    most = 0
    rng, codes = np.random.default_rng(0), np.zeros(64, np.int32)  # (a generator made per round was half the time)
    for i in range(20_000):
        ex = np.column_stack([np.full(64, float(i)), np.full(64, float(i))])
        t.append_round(slots, ex, rng.random((64, 3), np.float32), codes)
        most = max(most, t.live)
        if i % 512 == 511:
            for s in slots.tolist():
                t.drop_front(s, t.n(s) - 300)
    assert most == 64 * 812
    cells = t.nbytes / (8 + 8 + 1 + 3 * 4)
    assert cells <= 2 * most, (cells, most)  # a region's room (1/8 and 64 rows), the arrays' free half


def test_a_first_read_cut_to_its_rows_gives_its_cells_back_unless_a_view_saw_them():
    """A rank's first read of 2,000 rows, 1,536 of them spilled at once: the region is cut to what is left
    and the next rank's rows take the cells after it (memory for the rows kept, not for every row read);
    a frozen view of the first rank taken before keeps its rows, so its region is then never cut."""
    for seen in (False, True):
        t = Table(EXACT, FLOATS)
        a, b = t.add_slot(), t.add_slot()
        k = 2000
        ex = np.column_stack([np.arange(k, dtype=np.float64), np.arange(k, dtype=np.float64)])
        t.append(a, ex, np.ones((k, 3), np.float32), np.zeros(k, np.int32), {})
        view = t.frozen(a) if seen else None
        t.drop_front(a, 1536)
        t.trim(a)
        end = t.end
        t.append(b, ex + 1e6, np.ones((k, 3), np.float32), np.zeros(k, np.int32), {})
        assert t.column(a, "time").tolist() == list(range(1536, 2000))
        if seen:
            assert view is not None and view.column("time").tolist() == list(range(2000))
            assert end > 2000  # not cut
        else:
            assert end < 700  # 464 rows, an eighth and 64 more


def test_a_view_keeps_its_rows_when_its_rank_moves_and_the_arrays_grow():
    """A frozen view of a rank, the rank then moved to a new region (its region full) and the arrays then
    grown: the view still reads its rows (the arrays it holds are let go of only by the last view)."""
    t = Table(EXACT, FLOATS)
    a = t.add_slot()
    ex = np.column_stack([np.arange(100, dtype=np.float64), np.arange(100, dtype=np.float64)])
    t.append(a, ex, np.ones((100, 3), np.float32), np.zeros(100, np.int32), {})
    view = t.frozen(a)
    for i in range(40):  # moves, then grows the arrays several times
        more = ex + 100 * (i + 1)
        t.append(a, more, np.ones((100, 3), np.float32), np.zeros(100, np.int32), {})
    assert t.size > 4096
    assert view.column("time").tolist() == list(range(100))
    assert (view.column("a") == 1).all()
