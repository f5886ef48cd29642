"""Smoothing and thinning of series for charts and tables: the debiased EMA of the loss (kept between
frames, extended as rows arrive) and the even choice of points for lines the store does not bucket."""

from __future__ import annotations

from typing import Any

import numpy as np

from .store import Block, Snapshot

#: rows the EMA's recursion is vectorised over at a time
_CHUNK = 128


def ema_series(store: Snapshot, rank: int, weight: float) -> tuple[np.ndarray, np.ndarray]:
    """(row indices, EMA values): the debiased EMA of the rank's loss over its effective rows with a finite
    loss, extended as rows arrive and never recomputed, so a frame costs the same on a long run as on a short
    one. Its state is the rank's (RankData.kept: a fold shared with the rank's frozen copies, so every reader
    of a run, the screen's frames, a baseline's, a report, extends one EMA); it is worked out again when rows
    change which rows are on the timeline (a resume, an older session's rows) or the rows are read again from
    the start."""
    d = store.ranks[rank]
    n = d.rows
    with d.summary_lock:  # the state is shared with the rank's frozen copies, read on several threads
        key = (d.rows_epoch, d.retimes, len(d.segments))
        st = d.kept.get(("ema", weight))
        if st is None or st["key"] != key:
            st = d.kept[("ema", weight)] = {"key": key, "done": 0, "acc": 0.0, "norm": 0.0,
                                            "idx": Block(np.int64), "ema": Block(np.float64)}
        if n > st["done"]:
            _extend(d, st, weight)
        idx, ema = st["idx"].view(), st["ema"].view()
    if st["done"] > n:  # a frozen copy behind the rank: its own rows only
        cut = int(np.searchsorted(idx, n))
        return idx[:cut], ema[:cut]
    return idx, ema


def _extend(d: Any, st: dict[str, Any], weight: float) -> None:
    done = st["done"]
    new = np.arange(done, d.rows)
    loss = d.span("loss", done, d.rows)
    new = new[d.effective()[done:] & np.isfinite(loss)]
    vals = d.take("loss", new).astype(np.float64)
    out = np.empty(len(vals))
    acc, norm = st["acc"], st["norm"]
    for a in range(0, len(vals), _CHUNK):  # the recursion, vectorised a chunk at a time
        x = vals[a:a + _CHUNK]
        if weight <= 0:
            out[a:a + len(x)] = x
            continue
        k = np.arange(len(x))
        scaled = np.cumsum(x * weight ** -k) * weight ** k  # sum_j<=i w^(i-j) x_j
        accs = weight ** (k + 1) * acc + (1 - weight) * scaled
        norms = weight ** (k + 1) * norm + (1 - weight) * (1 - weight ** (k + 1)) / (1 - weight)
        out[a:a + len(x)] = accs / norms
        acc, norm = float(accs[-1]), float(norms[-1])
    st["idx"].extend(new)
    st["ema"].extend(out)
    st.update(done=d.rows, acc=acc, norm=norm)


def evenly(n: int, points: int) -> np.ndarray:
    """Indices of at most ``points`` of ``n`` rows, spread evenly, first and last included (for lines
    that are not min/max-bucketed by the store: smoothed curves, derived values)."""
    return np.unique(np.linspace(0, n - 1, min(points, n)).astype(np.int64))
