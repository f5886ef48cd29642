"""What the incident scan reads back of the spilled rows is kept only while it scans (spill.one_pass): the
cache frames share holds what frames read again, not a pass over every rank's history."""

from __future__ import annotations

import threading

import numpy as np

from mstop.engine import spill
from mstop.engine.incidents import scan
from mstop.engine.rules import Rules
from mstop.engine.store import FLOAT_INDEX, Batch, Store
from mstop.formats.parse import N_EXACT, NUMERIC, Rows


def _spilled_store(ranks: int = 8, rows: int = 3000) -> Store:
    store = Store()
    store.keep_rows = 64 * ranks  # most rows go to the spill file
    rng = np.random.default_rng(1)
    for r in range(ranks):
        exact = np.column_stack([1.7e9 + np.arange(rows, dtype=float), 1.0 + np.arange(rows)])
        floats = np.full((rows, len(NUMERIC) - N_EXACT), np.nan, np.float32)
        floats[:, FLOAT_INDEX["loss"]] = 2.0 + rng.random(rows)
        floats[:, FLOAT_INDEX["step_time"]] = 0.5 + rng.random(rows) / 10
        floats[:, FLOAT_INDEX["data_wait"]] = 0.4  # starving: its incidents read the history back
        store.append(Batch.of(r, Rows(exact.reshape(rows, N_EXACT), floats, {}, np.zeros(rows, np.int32), ["s"])))
    assert all(store.ranks[r].base for r in range(ranks))
    return store


def test_a_scan_leaves_the_shared_cache_as_it_was_and_finds_the_same():
    store = _spilled_store()
    snap = store.snapshot()
    before = snap.spill.cached_bytes
    got = scan(snap, Rules())
    assert got and snap.spill.cached_bytes == before  # read back while scanning, kept only for the scan
    with spill.one_pass():  # nested: the outer pass's own cache
        again = scan(snap, Rules())
    assert again == got and getattr(spill._local, "kept", None) is None
    snap.ranks[0].col("loss")  # a frame's read: kept for the next frame
    assert snap.spill.cached_bytes > before


def test_one_pass_is_a_threads_own():
    store = _spilled_store(ranks=2)
    snap = store.snapshot()
    seen = []

    def other() -> None:
        snap.ranks[1].col("step_time")  # another thread, outside any pass: the shared cache
        seen.append(snap.spill.cached_bytes)

    with spill.one_pass():
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert seen[0] > 0
