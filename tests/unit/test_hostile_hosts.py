"""Hosts that misbehave (issue 40 item 11): what the other end of ``host:/path`` sends is never trusted. Here,
in this process: any frame header is the follower's shape or a reason. Hosts played by a stand-in ``ssh`` and
a real sshd: tests/system/test_hostile_hosts_ssh.py."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

_json = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=6), inner,
                                                                                  max_size=5), max_leaves=20)


@given(st.one_of(_json, st.fixed_dictionaries({"n": _json, "files": _json}),
                 st.fixed_dictionaries({"n": st.integers(-5, 2**31), "files": st.lists(st.lists(_json, max_size=6),
                                                                                        max_size=4)})),
       st.booleans())
def test_any_frame_header_is_the_followers_shape_or_a_reason(header, ended):
    """Every field from the other side is type-checked: whatever JSON a host sends as a frame's header, the
    check answers None (the shape the follower sends: an object, a length in [0, 1 GiB], files entries of
    [str, int >= 0, int >= 0, bool, ...]) or a reason in words; it never raises."""
    import json

    from mstop.sources.remote import MAX_PAYLOAD, entry_ok, frame_problem

    line = json.dumps(header).encode() + (b"\n" if ended else b"")
    n = header.get("n", 0) if isinstance(header, dict) else 0
    n = n if type(n) is int and 0 <= n <= MAX_PAYLOAD else None
    why = frame_problem(line, header, n)
    files = header.get("files", []) if isinstance(header, dict) else None
    good = (ended and isinstance(header, dict) and n is not None and isinstance(files, list)
            and all(entry_ok(e) for e in files))
    assert (why is None) == good, (header, why)
    assert why is None or (isinstance(why, str) and why and "\x1b" not in why)
    for e in files if isinstance(files, list) else []:
        if entry_ok(e):
            assert isinstance(e[0], str) and type(e[1]) is int and e[1] >= 0 and type(e[2]) is int and e[2] >= 0
