"""How often the monitor draws a frame of its own (new rows, the once-a-second tick): at most every
``every`` seconds, and spaced further when frames are costly, so keys are still answered between them.

At 10,000 ranks a frame takes about a second; frames drawn on their own may then take at most ``share`` of
the main thread (a frame of 1 s: the next one of its own 4 s later). A frame's cost is the main thread's CPU
time while it was built and shown (``cost_clock``), not the wall time: on a busy login node a frame waits for
the CPU longer than it works, and spacing the next one by that wait would only make the news later (a death
told seconds late). A key or a toggle draws at once regardless, and its frame's cost counts too: when frames
get cheap again, they come every ``every`` seconds again. The budget is a setting (MonitorOptions.redraw);
its clocks are the budget's, so a test or a benchmark gives its own instead of reaching into the screen.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class RedrawBudget:
    """``every``: fewest seconds between two frames drawn on their own (a burst of rows costs one frame);
    ``share``: most of the main thread such frames may take; ``clock``: the seconds frames are spaced by
    (monotonic); ``cost_clock``: the seconds a frame's cost is measured in (the drawing thread's CPU time)."""

    every: float = 1.0
    share: float = 0.25
    clock: Callable[[], float] = time.monotonic
    cost_clock: Callable[[], float] = time.thread_time

    def __post_init__(self) -> None:
        if not self.every >= 0 or not 0 < self.share <= 1:
            raise ValueError(f"a redraw budget needs every >= 0 and 0 < share <= 1: {self.every!r}, {self.share!r}")


class Throttle:
    """When the last frame began and what it cost, against a :class:`RedrawBudget`."""

    def __init__(self, budget: RedrawBudget | None = None) -> None:
        self.budget = budget or RedrawBudget()
        self.last = -float("inf")  # when the last frame began (never: the first is due at once)
        self.cost = 0.0  # seconds the last frame took to build and show

    def due(self, every: float | None = None) -> bool:
        """Whether a frame of its own may be drawn now: ``every`` (default: the budget's) seconds after the last
        one began, or longer when frames are costly."""
        b = self.budget
        gap = b.every if every is None else every
        return b.clock() - self.last >= max(gap, self.cost / b.share)

    @contextmanager
    def frame(self) -> Iterator[None]:
        """Time one frame (any frame: a key's too): its start spaces the next, its cost stretches the gap."""
        self.last = self.budget.clock()
        worked = self.budget.cost_clock()
        try:
            yield
        finally:
            self.cost = max(0.0, self.budget.cost_clock() - worked)
