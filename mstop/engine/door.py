"""Cells no real step can have, refused where rows enter the store.

A data wait longer than its own step (the step's time includes its wait: ``data wait 31887.5 %``), a
written MFU above 1 (more than the device can do: ``MFU 358,865 %``), a negative duration, count or amount
of memory: each is a file's mistake (a hand-written loop passing milliseconds for seconds, a wrong peak),
never a figure. The store keeps the row (its step, loss and every other cell count as usual) and makes the
one cell missing (NaN), counting it by reason with the first example, so every figure, chart and command
reads the same rows and the header, ``summary`` and ``report`` say how many cells were refused and why.
The check is array work over a batch (a read round's rows, a cold read's millions) and refusing is
idempotent: a refused cell is NaN, which no rule matches again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mstop_writer.schema import mfu_too_high, wait_too_long

from ..formats.parse import N_EXACT, NUMERIC

_AT = {n: j for j, n in enumerate(NUMERIC[N_EXACT:])}  # a column's place among a batch's floats

#: columns that can never be below zero: durations, counts, rates, shares and amounts of memory (a loss,
#: a learning rate or a loss scale is left as given)
NEVER_NEGATIVE = ("step_time", "data_wait", "queue_depth", "tokens", "samples", "tokens_per_s", "mfu",
                  "grad_norm", "mem_used", "mem_peak", "mem_total")
_NEG = np.array([_AT[n] for n in NEVER_NEGATIVE], np.int64)

#: the reasons, public words (the header, ``summary --json``'s ``refused_cells`` keys, the docs)
LONGER_WAIT = "data_wait longer than step_time"
OVER_ONE = "mfu above 1 (over 100 %)"


def column_at(name: str) -> int:
    """Where column ``name`` is among a batch's floats."""
    return _AT[name]


def step_text(step: float) -> str:
    return f"{int(step):,}" if np.isfinite(step) and step == int(step) else f"{step:.6g}"


def negative(column: str) -> str:
    return f"negative {column}"


@dataclass
class Refused:
    """One refusal: its reason, the column made missing and the rows (of the batch) refused."""

    reason: str
    column: str
    rows: np.ndarray


def impossible(floats: np.ndarray) -> list[Refused]:
    """The refusals of a batch's float cells (rows x NUMERIC[N_EXACT:]); empty for the usual batch, at the
    cost of four array passes."""
    if not len(floats):
        return []
    st, dw, mfu = floats[:, _AT["step_time"]], floats[:, _AT["data_wait"]], floats[:, _AT["mfu"]]
    with np.errstate(invalid="ignore", over="ignore"):  # hostile cells: inf - inf, max - -max
        neg = floats[:, _NEG] < 0
        longer = wait_too_long(dw, st)
        over = mfu_too_high(mfu)
    any_neg = neg.any()
    if not (any_neg or longer.any() or over.any()):
        return []
    out: list[Refused] = []
    if any_neg:
        for k in np.flatnonzero(neg.any(axis=0)):
            name = NEVER_NEGATIVE[int(k)]
            out.append(Refused(negative(name), name, np.flatnonzero(neg[:, k])))
    longer &= ~(st < 0)  # a negative step time is its own refusal; its wait is judged against nothing
    if longer.any():
        out.append(Refused(LONGER_WAIT, "data_wait", np.flatnonzero(longer)))
    if over.any():
        out.append(Refused(OVER_ONE, "mfu", np.flatnonzero(over)))
    return out


def example(column: str, value: float, step_time: float) -> str:
    """The first refused cell as the header and summary quote it: ``data_wait 31.9 s, step_time 0.001 s``."""
    unit = {"step_time": " s", "data_wait": " s", "mem_used": " B", "mem_peak": " B", "mem_total": " B"}.get(column, "")
    said = f"{column} {value:.6g}{unit}"
    if column == "data_wait" and np.isfinite(step_time):
        said += f" in a step_time of {step_time:.6g} s"
    return said
