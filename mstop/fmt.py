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
    return NA if v is None or math.isnan(v) else f"{100 * v:,.1f} %"


def gib(v: float | None) -> str:
    if v is not None and math.isinf(v):
        return num(v) + " GiB"
    return NA if v is None or math.isnan(v) else f"{v / 2**30:,.1f} GiB"


#: the longest duration shown as a number: anything longer (clocks years apart, times near 1.7e308) is
#: shown as "over 10 years", never as a 300-digit count of days
LONGEST = 10 * 365.25 * 86400
LONGEST_TEXT = "over 10 years"


def duration(seconds: float | None) -> str:
    """``42 s``, ``3 m 05 s``, ``2 h 07 m``, ``3 d 04 h``."""
    if seconds is None or math.isnan(seconds):
        return NA
    if math.isinf(seconds):
        return "forever" if seconds > 0 else "0 s"
    if seconds >= LONGEST:
        return LONGEST_TEXT
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} m {s % 60:02d} s"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60:02d} m"
    return f"{s // 86400} d {s % 86400 // 3600:02d} h"


def span(seconds: float | None) -> str:
    """A time span a short run is made of: ``0.4 s``, ``2.5 s`` under ten seconds (``0 s`` said nothing of a
    0.4 s compile in a 2.5 s run), else :func:`duration`'s."""
    if seconds is not None and not math.isnan(seconds) and 0 <= seconds < 9.95:
        return f"{seconds:.1f} s"
    return duration(seconds)


def coarse(seconds: float | None) -> str:
    """The largest unit only (``42 s``, ``6 m``, ``2 h``, ``3 d``): an age in a narrow column."""
    if seconds is None or math.isnan(seconds) or math.isinf(seconds) or seconds >= LONGEST:
        return duration(seconds)
    s = max(0, int(round(seconds)))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size} {unit}"
    return f"{s} s"


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


def flops(v: float | None) -> str:
    """A FLOP/s figure with its prefix: ``313 TFLOP/s``, ``100 GFLOP/s`` (a CPU's 1e11 read as 0 TFLOP/s)."""
    if v is None or not math.isfinite(v):
        return NA
    for unit, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if abs(v) >= scale:
            return f"{v / scale:,.3g} {unit}FLOP/s"
    return f"{v:,.3g} FLOP/s"


def with_unit(v: float | None, unit: str) -> str:
    """A value in the unit the writer's schema gives its column (``mstop_writer.schema.UNITS``): bytes as
    GiB, seconds as ms or s, a fraction as %, tokens/s with an SI prefix; unitless as a plain number."""
    if v is None or not math.isfinite(v):
        return num(v)
    if unit == "bytes":
        return tick(v, "B")
    if unit == "s":
        return ms(v)
    if unit == "fraction":
        return pct(v)
    if unit in ("tokens/s", "tokens", "samples"):
        return f"{si(v)} {unit}"
    return num(v, 6)


def axis_unit(column: str, unit: str) -> str:
    """The y-axis unit of a column's chart (for fmt.tick): B, s, %, tok/s, or none."""
    return {"bytes": "B", "s": "s", "fraction": "", "tokens/s": "tok/s"}.get(unit, "")


def bar(fraction: float | None, width: int = 20) -> str:
    """A text bar that reads without colour: ``[#######.............]``."""
    if fraction is None or not math.isfinite(fraction):
        return "[" + "?" * width + "]"
    k = max(0, min(width, round(fraction * width)))
    return "[" + "#" * k + "." * (width - k) + "]"


def nice_ticks(lo: float, hi: float, count: int = 5, *, whole: bool = False) -> list[float]:
    """About ``count`` tick positions over [lo, hi] at a 1-2-5 step (10, 20, 50, 100, ...), as people read
    axes; ``whole`` keeps the step at least 1 (the step axis has no half steps)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi <= lo:
        return [lo]
    mag = 10 ** math.floor(math.log10((hi - lo) / max(1, count - 1)))
    steps = [m * mag for m in (0.5, 1, 2, 5, 10, 20)]
    if whole:
        steps = sorted({max(1.0, float(round(st))) for st in steps})

    def n_ticks(st: float) -> int:
        return math.floor(hi / st + 1e-9) - math.ceil(lo / st - 1e-9) + 1

    step = min(steps, key=lambda st: (abs(n_ticks(st) - count), st))  # the closest count; more ticks on a tie
    first = math.ceil(lo / step - 1e-9) * step
    out = []
    k = 0
    digits = 2 - math.floor(math.log10(step))  # the step's digits and two more: float dust off, tiny steps kept
    while first + k * step <= hi + step * 1e-9 and k < 100:
        out.append(round(first + k * step, digits))
        k += 1
    return out


def tick(v: float, unit: str = "", step: float | None = None) -> str:
    """An axis label: SI-prefixed with few digits (``35 k``, ``1.2 M``, ``0.25``) and the unit (``35 k tok/s``,
    ``1.2 GiB`` for bytes, ``97 %`` for a fraction given as percent)."""
    if unit == "B":
        for name, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
            if abs(v) >= scale:
                return f"{v / scale:.3g} {name}"
        return f"{v:.0f} B"
    for name, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {name} {unit}".rstrip()
    if v == 0:
        text = "0"
    elif abs(v) < 1e-3:
        text = f"{v:.1e}"
    else:
        text = f"{v:.3g}"
    return f"{text} {unit}" if unit else text


#: an axis's scales by unit, largest first: (name, factor); one is chosen for the whole axis
_AXIS_SCALES = {
    "B": (("TiB", 2.0**40), ("GiB", 2.0**30), ("MiB", 2.0**20), ("KiB", 2.0**10), ("B", 1.0)),
    "s": (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)),
}
_SI = (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3), ("", 1.0))


def binary_scale(v: float) -> float:
    """The factor of the binary unit ``v`` bytes is read in (2**20 for 528 MiB; 1 below 1 KiB)."""
    return next((f for _, f in _AXIS_SCALES["B"] if abs(v) >= f), 1.0)


def ticks(values: list[float], unit: str = "", *, log: bool = False) -> list[str]:
    """The labels of one axis, in one format: one scale for all (``1.5 k``, ``2.0 k``; ``528.2 MiB``,
    ``528.4 MiB``; ``5.0e-05``, ``1.0e-04``), with the fewest decimals that tell every label from its
    neighbours (a linear axis: the tick step's digits) and read each (round) value as it is. A per-label format
    mixes ``0.001 / 5.0e-04 / 0`` on one axis and labels 528.1 and 528.4 MiB both ``528 MiB``."""
    vals = [float(v) for v in values if math.isfinite(v)]
    if len(vals) != len(values) or not vals:
        return [tick(float(v), unit) for v in values]
    big = max(abs(v) for v in vals)
    small = min((abs(v) for v in vals if v), default=0.0)
    scales = _AXIS_SCALES.get(unit, _SI)

    def scale_of(v: float) -> tuple[str, float]:
        return next(((n, f) for n, f in scales if abs(v) >= f), scales[-1])

    # the scientific form: an axis of tiny values, or a log axis that reaches them (1e-02 … 1e-04), or values
    # past the T prefix (1e+20, not 100000000 T)
    sci = unit not in _AXIS_SCALES and (0 < big < 1e-3 or big >= 1e15 or (log and 0 < small < 1e-3))
    # one scale for a linear axis; a log axis over decades reads best with each label's own (1, 100, 10 k, 1 M)
    named = [("", 1.0)] * len(vals) if sci else [scale_of(v) for v in vals] if log else [scale_of(big)] * len(vals)
    xs = [v / f for v, (_, f) in zip(vals, named)]
    distinct = sorted(set(xs))
    gaps = [b - a for a, b in zip(distinct, distinct[1:])]
    # a linear axis: the tick step's digits (a step of 0.2 needs one decimal, of 0.05 two)
    first = 0 if sci or log or not gaps else max(0, -math.floor(math.log10(min(gaps)) + 1e-9))

    def label(x: float, d: int) -> str:
        if sci:
            return "0" if x == 0 else f"{x:.{d}e}"
        text = f"{x:.{d}f}"
        return text.lstrip("-") if float(text) == 0 else text

    # float64 holds 15 significant digits: decimals past them are dust (ticks of 1e17 + 1 apart)
    top = max(abs(x) for x in xs)
    most = max(0, 14 - math.floor(math.log10(top))) if top and not sci else 12
    first = min(first, most)
    if not gaps and not log and not sci and top:  # one label (a flat line): three significant digits
        first = most = min(most, max(0, 2 - math.floor(math.log10(top))))
    # where an inexact value stops getting digits: the step's three more, and four significant digits of the
    # smallest value (0.0565 of a narrow log axis is not 0.056)
    least = min((abs(x) for x in xs if x), default=0.0)
    enough = max(first + 3, 3 - math.floor(math.log10(least)) if least and not sci else 0)
    labels: list[str] = []
    for d in range(first, max(first, most) + 1):
        labels = [label(x, d) for x in xs]
        close = all(abs(float(lab) - x) <= 1e-6 * abs(x) for lab, x in zip(labels, xs))  # ticks are round
        if len({(lab, n) for lab, (n, _) in zip(labels, named)}) == len(set(vals)) and (close or d >= enough):
            break
    out = []
    for lab, (name, _) in zip(labels, named):
        suffix = " ".join(p for p in (name, unit if unit not in _AXIS_SCALES else "") if p)
        out.append(f"{lab} {suffix}" if suffix else lab)
    return out


def log_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Tick positions (log10 values) for a log axis over log10 values [lo, hi], at values people read: the
    decades inside (thinned to about ``count``), else the 1-2-5 values inside, else 1..9 times a power of
    ten, else (a range narrower than that) 1-2-5 steps of the values themselves."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi <= lo:
        return [lo]
    for mantissas in ((1,), (1, 2, 5), tuple(range(1, 10))):
        vals = [math.log10(m) + k for k in range(math.floor(lo) - 1, math.ceil(hi) + 1) for m in mantissas]
        inside = [v for v in vals if lo - 1e-9 <= v <= hi + 1e-9]
        if len(inside) >= 2:
            step = max(1, math.ceil(len(inside) / count))
            return inside[::step]
    linear = sorted({v for v in nice_ticks(10 ** lo, 10 ** hi, min(count, 3)) if v > 0})
    return [math.log10(v) for v in linear]


def clock_tick(t: float, *, elapsed_from: float | None = None) -> str:
    """A time axis label: elapsed ``m:ss`` / ``h:mm:ss`` from ``elapsed_from``, else the local clock ``14:05``."""
    import time as _time

    if elapsed_from is not None:
        if not t - elapsed_from < LONGEST:  # NaN too
            return "--:--"
        s = max(0, int(round(t - elapsed_from)))
        return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
    try:
        return _time.strftime("%H:%M", _time.localtime(t))
    except (OverflowError, OSError, ValueError):  # a time no calendar holds (rows stamped 1e17 s)
        return "--:--"


def step(n: float | None) -> str:
    """A step number as the header shows it (``2,881``): alert words and the screen say one step one way;
    ``n/a`` for none."""
    if n is None or n != n:
        return "n/a"
    return f"{int(n):,}"


def count(n: int, noun: str) -> str:
    """``1 bad row``, ``2 bad rows``, ``1,024 rows lost``: ``noun`` in the singular, ``{s}`` where the plural
    adds an s if not at its end."""
    s = "" if n == 1 else "s"
    return f"{n:,} " + (noun.replace("{s}", s) if "{s}" in noun else noun + s)


def rate(v: float) -> str:
    """A pace in words: ``12,345`` (whole units from 100 on), ``7.25`` below."""
    return f"{v:,.0f}" if abs(v) >= 100 else num(v, 3)


def share_vs(v: float, limit: float, digits: int = 0) -> tuple[str, str]:
    """``v`` and ``limit`` as percentages, ``v`` with as many decimals as it takes to differ from ``limit``
    (at most three): ``10%`` against a limit of ``10%`` would say a share over its limit equals it."""
    b = f"{100 * limit:.3f}".rstrip("0").rstrip(".") + "%"
    for d in range(digits, 4):
        a = f"{100 * v:.{d}f}"
        if float(a) != round(100 * limit, d) or d == 3:
            return a + "%", b
    return f"{100 * v:.0f}%", b


def exact(v: float | None, unit: str) -> str:
    """A value to the last digit the store keeps (time and step exact, the rest float32: 7 significant
    digits), then in its unit where that reads easier: ``553,648,128 B (528 MiB)``, ``0.0401 s (40.1 ms)``."""
    if v is None or not math.isfinite(v):
        return num(v)
    if unit == "bytes":
        return f"{v:,.0f} B ({tick(v, 'B')})"
    text = f"{v:,.0f}" if v == int(v) and abs(v) < 1e15 else f"{v:.7g}"
    if unit == "s":
        return f"{text} s ({ms(v)})"
    if unit == "fraction":
        return f"{text} ({pct(v)})"
    if unit in ("tokens/s", "tokens", "samples"):
        return f"{text} {unit}"
    return text


def clock_ms(t: float) -> str:
    """A unix time as the viewer's wall clock to the millisecond: ``09:02:39.300``."""
    import time as _time

    if not math.isfinite(t):
        return "n/a"
    ms = int(round(t * 1000))
    return _time.strftime("%H:%M:%S", _time.localtime(ms // 1000)) + f".{ms % 1000:03d}"


def hosts(names: list[str]) -> str:
    """Host names folded as ``nodeset -f`` prints them (``node[001-063,065]``, ClusterShell's NodeSet, the
    syntax a user pastes into ``clush -w``); names it cannot fold are listed as they are."""
    try:
        from ClusterShell.NodeSet import NodeSet, NodeSetException

        return str(NodeSet.fromlist(names))
    except (ImportError, NodeSetException, ValueError):
        return ",".join(names)
