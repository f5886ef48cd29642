"""Issue 58, items 11 and 12: what another host sends is bounded before it is parsed. JSON nested 200,000 deep
in a follower frame, a runs answer, a log pane's or a py-spy answer raised a RecursionError that ended the
monitor; a compressed payload of a few KB inflated to gigabytes before anything looked at it. Each is now a
reason naming the host, found in bounded time and memory."""

from __future__ import annotations

import base64
import json
import time
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mstop.engine.store import Store
from mstop.safe import MAX_INFLATED, inflate, loads
from mstop.sources.remote import RemoteError, RemoteSource, Target

DEEP = b"[" * 200_000 + b"]" * 200_000


def _bomb(size: int) -> bytes:
    """``size`` zero bytes compressed: a few KB for a gigabyte."""
    c = zlib.compressobj(9)
    block = bytes(1 << 20)
    parts = [c.compress(block) for _ in range(size >> 20)]
    return b"".join(parts) + c.flush()


def test_json_nested_too_deep_is_a_value_error():
    with pytest.raises(ValueError, match="nested too deep"):
        loads(DEEP)
    with pytest.raises(ValueError, match="nested too deep"):
        loads(b'{"a":' * 100_000 + b"1" + b"}" * 100_000)


def test_a_follower_frame_nested_too_deep_is_a_reason():
    src = RemoteSource(Target("node7", "/r"), Store())
    with pytest.raises(RemoteError, match="node7"):
        src.take_line(DEEP)


def test_a_payload_that_inflates_to_gigabytes_is_refused_at_the_cap():
    bomb = _bomb(96 << 20)  # 96 MiB of zeros in about 100 KB (a GiB is the same shape: the cap stops both)
    t0 = time.monotonic()
    with pytest.raises(zlib.error, match="inflates past"):
        inflate(bomb)
    assert time.monotonic() - t0 < 5.0
    src = RemoteSource(Target("node7", "/r"), Store())
    frame = {"files": [["rank0.csv", 0, 10, False]], "n": len(bomb), "z": base64.b64encode(bomb).decode(),
             "clock": 1.0}
    with pytest.raises(RemoteError, match="node7: a frame's payload cannot be read .*inflates past"):
        src.take_line(json.dumps(frame).encode())


def test_a_runs_answer_nested_too_deep_or_inflating_past_the_cap_is_a_reason():
    from mstop.sources.remote_runs import _answer

    with pytest.raises(RemoteError, match="gpu3: an answer that does not read"):
        _answer(DEEP + b"\n", "gpu3")
    bomb = _bomb(MAX_INFLATED + (1 << 20))
    with pytest.raises(RemoteError, match="inflates past"):
        _answer(json.dumps({"n": len(bomb)}).encode() + b"\n" + bomb, "gpu3")


def test_a_pyspy_or_log_answer_nested_too_deep_is_a_reason():
    from mstop.sources.logs import checked_answer

    with pytest.raises(ValueError):
        checked_answer(loads(DEEP), 0)


@given(st.binary(max_size=4000))
def test_inflate_agrees_with_zlib_within_the_cap(blob):
    z = zlib.compress(blob, 1)
    assert inflate(z) == blob
    with pytest.raises(zlib.error):
        inflate(z[: max(0, len(z) - 1)]) if len(z) > 1 else inflate(b"\x00")

