"""Issue 58, item 11: an events file of a million heartbeat lines took 871 MB to summarise (2M lines: 1.66 GB):
every line was held as a dict although a reader keeps only the newest heartbeat's time and the latest sign of
life. A run of heartbeats is now held as at most two, and an events file is read in chunks: memory does not
grow with their count, and what the store keeps is what it kept from every line."""

from __future__ import annotations

import json
import tracemalloc

from hypothesis import given
from hypothesis import strategies as st

from mstop.engine.store import Store
from mstop.formats.parse import parse_events

KINDS = st.sampled_from(["heartbeat", "heartbeat", "heartbeat", "start", "eval", "checkpoint", "end"])


def _line(kind: str, t: float) -> dict:
    return {"time": t, "kind": kind, "session": "s1", "step": 3}


@given(st.lists(st.tuples(KINDS, st.floats(0, 1e6, allow_nan=False)), max_size=60))
def test_the_store_keeps_from_held_heartbeats_what_it_kept_from_every_line(events):
    blob = "".join(json.dumps(_line(k, t)) + "\n" for k, t in events).encode()
    parsed = parse_events(blob)
    assert parsed.bad == 0
    every, held = Store(), Store()
    every.ingest_events(0, [_line(k, float(t)) for k, t in events])
    held.ingest_events(0, parsed.items)
    if not events:
        return
    a, b = every.ranks[0], held.ranks[0]
    assert (a.last_heartbeat, a.last_event_time, a.ends, len(a.evals), len(a.checkpoints)) == \
        (b.last_heartbeat, b.last_event_time, b.ends, len(b.evals), len(b.checkpoints))
    assert [e["kind"] for e in parsed.items if e["kind"] != "heartbeat"] == \
        [k for k, _ in events if k != "heartbeat"]


def test_a_million_heartbeats_are_not_a_million_dicts():
    one = json.dumps({"time": 1000.5, "kind": "heartbeat", "step": 300, "session": "s1"}).encode() + b"\n"
    blob = one * 20_000
    tracemalloc.start()
    try:
        parsed = parse_events(blob)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(parsed.items) == 1 and parsed.bad == 0
    assert peak < 1 << 20, peak  # 20,000 dicts were about 10 MB
