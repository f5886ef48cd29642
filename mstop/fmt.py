"""Formatting of figures for people: units shown, unknowns as n/a (formatting belongs to the screen and the
reports, not the store)."""

from __future__ import annotations

import math

NA = "n/a"


def num(v: float | None, digits: int = 4) -> str:
    if v is None:
        return NA
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v != 0 and (abs(v) >= 1e6 or abs(v) < 1e-3):
        return f"{v:.{digits - 1}e}"
    return f"{v:,.{digits}g}" if abs(v) < 1e4 else f"{v:,.0f}"


def pct(v: float | None) -> str:
    if v is not None and math.isinf(v):
        return num(v) + " %"
    return NA if v is None or math.isnan(v) else f"{100 * v:.1f} %"


def gib(v: float | None) -> str:
    if v is not None and math.isinf(v):
        return num(v) + " GiB"
    return NA if v is None or math.isnan(v) else f"{v / 2**30:,.1f} GiB"


def duration(seconds: float | None) -> str:
    """``42 s``, ``3 m 05 s``, ``2 h 07 m``, ``3 d 04 h``."""
    if seconds is None or math.isnan(seconds):
        return NA
    if math.isinf(seconds):
        return "forever" if seconds > 0 else "0 s"
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} m {s % 60:02d} s"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60:02d} m"
    return f"{s // 86400} d {s % 86400 // 3600:02d} h"


def ms(seconds: float | None) -> str:
    if seconds is None or math.isnan(seconds):
        return NA
    if math.isinf(seconds):
        return num(seconds)
    return f"{seconds * 1e3:,.1f} ms" if seconds < 1 else f"{seconds:,.2f} s"


def si(v: float | None) -> str:
    """12.3 k, 4.5 M, 1.2 G."""
    if v is None or math.isnan(v):
        return NA
    if math.isinf(v):
        return num(v)
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:,.1f} {unit}"
    return f"{v:,.0f}"


def bar(fraction: float | None, width: int = 20) -> str:
    """A text bar that reads without colour: ``[#######.............]``."""
    if fraction is None or not math.isfinite(fraction):
        return "[" + "?" * width + "]"
    k = max(0, min(width, round(fraction * width)))
    return "[" + "#" * k + "." * (width - k) + "]"
