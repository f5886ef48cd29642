"""Text from files made safe to show anywhere: no control codes, bounded sizes.

Every string that comes out of a run directory (run names, notes, hosts, paths,
column names, event fields, file names) passes through :func:`clean` before any
reader sees it, so no output of mstop (the screen, tables, markdown, JSON, PNG
titles) can carry an escape sequence to a terminal, and no single field can make
a frame slow. Control characters are made visible (``\\x1b``), not dropped, so a
hostile name is still recognisable.
"""

from __future__ import annotations

import re
from typing import Any

#: Longest text kept from one field; longer text is cut and ends with an ellipsis.
MAX_TEXT = 512
#: Most items kept from one list or mapping in an event (eval metrics, argv, env).
MAX_ITEMS = 64
#: Deepest nesting kept in an event field.
MAX_DEPTH = 6

# C0 controls, DEL, C1 controls (CSI is \x9b), and the Unicode bidi overrides that reorder what a
# terminal shows (a name could otherwise display as another).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _visible(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def clean(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``) and cut to ``limit``."""
    if len(text) > limit:
        text = text[:limit] + "…"
    if _CONTROL.search(text) is None:
        return text
    out = _CONTROL.sub(_visible, text)
    return out if len(out) <= limit + 1 else out[:limit] + "…"


def clean_value(v: Any, depth: int = 0) -> tuple[Any, bool]:
    """A JSON value with its strings cleaned and its lists and mappings bounded; and whether anything was
    cut (a too long text, too many items, too deep)."""
    if isinstance(v, str):
        c = clean(v)
        return c, len(v) > MAX_TEXT
    if isinstance(v, dict):
        if depth >= MAX_DEPTH:
            return None, True
        out, cut = {}, len(v) > MAX_ITEMS
        for i, (k, x) in enumerate(v.items()):
            if i >= MAX_ITEMS:
                break
            x, c = clean_value(x, depth + 1)
            out[clean(str(k), 128)] = x
            cut = cut or c or len(str(k)) > 128
        return out, cut
    if isinstance(v, list):
        if depth >= MAX_DEPTH:
            return None, True
        out_l, cut = [], len(v) > MAX_ITEMS
        for x in v[:MAX_ITEMS]:
            x, c = clean_value(x, depth + 1)
            out_l.append(x)
            cut = cut or c
        return out_l, cut
    return v, False


#: the most bytes one compressed answer from another host may inflate to (a follower's frame carries at most
#: 4 MiB of file bytes; a runs answer the heads and tails of its runs' files)
MAX_INFLATED = 64 << 20


def loads(data: bytes | str) -> Any:
    """``json.loads`` for what another host or a file sends: nesting too deep for the parser (a line of
    200,000 ``[``) is a ValueError like any other line that is no JSON, never a RecursionError that ends the
    caller."""
    import json

    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deep") from None


def inflate(payload: bytes, limit: int = MAX_INFLATED) -> bytes:
    """``zlib.decompress`` that stops at ``limit`` bytes: a payload that would inflate past it (a few KB that
    become gigabytes) is a ``zlib.error`` saying so, found after ``limit`` bytes, not after a MemoryError."""
    import zlib

    d = zlib.decompressobj()
    out = d.decompress(payload, limit)
    if d.unconsumed_tail or (not d.eof and len(out) >= limit):
        raise zlib.error(f"it inflates past {limit:,} bytes")
    if not d.eof:
        raise zlib.error("incomplete or truncated stream")
    return out
