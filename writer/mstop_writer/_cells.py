"""CSV cells as the writer writes them: one home for the rank rows and the device rows.

Standard library only; imports nothing of the package, so any module of it may use these.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

NEEDS_QUOTES = frozenset(',"\r\n')


def cell(v: Any) -> str:
    """Format one CSV cell: empty for unknown, ``nan``/``inf``/``-inf`` kept, text quoted."""
    if v is None:
        return ""
    t = type(v)
    if t is float:
        return repr(v)
    if t is int:
        return str(v)
    if t is bool:
        return "1" if v else "0"
    if t is str:
        if NEEDS_QUOTES.isdisjoint(v):
            return v
        # One row is one line (readers follow files line by line): line breaks become spaces.
        v = v.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
        return '"' + v.replace('"', '""') + '"'
    try:
        return repr(float(v))  # numpy scalars, 0-d MindSpore Tensors
    except (TypeError, ValueError):
        return cell(str(v))


def cells(values: Iterable[Any]) -> list[str]:
    """``cell`` of each value, with unknowns, floats and ints done inline: a function call per cell was a
    third of a row's cost."""
    return ["" if v is None else repr(v) if type(v) is float else str(v) if type(v) is int else cell(v)
            for v in values]
