"""The redraw throttle (mstop.live.throttle): frames of their own come every ``every`` seconds, spaced to at
most ``share`` of the main thread when frames are costly, and every frame's cost counts (a key's too), so
cheap frames come every ``every`` seconds again. Time is the budget's clock, given here."""

from __future__ import annotations

import pytest

from mstop.live import RedrawBudget, Throttle


def _throttle(every: float = 1.0, share: float = 0.25) -> tuple[Throttle, list[float]]:
    """A throttle whose clocks read ``now[0]`` (the wall and the frame's work move together here)."""
    now = [100.0]
    return Throttle(RedrawBudget(every=every, share=share, clock=lambda: now[0], cost_clock=lambda: now[0])), now


def test_the_first_frame_is_due_at_once_and_the_next_after_every_seconds():
    t, now = _throttle()
    assert t.due()
    with t.frame():
        pass
    assert not t.due()
    now[0] += 0.99
    assert not t.due() and t.due(every=0.0)  # the tick asks with no gap of its own
    now[0] += 0.01
    assert t.due()


def test_a_costly_frame_spaces_the_next_to_its_share_and_a_cheap_one_ends_that():
    t, now = _throttle(every=1.0, share=0.25)
    with t.frame():
        now[0] += 10.0  # a frame of 10 s: at most a quarter of the time, the next of its own 40 s after it began
    assert t.cost == 10.0
    now[0] += 29.9
    assert not t.due() and not t.due(every=0.0)
    now[0] += 0.1
    assert t.due(every=0.0) and t.due()
    with t.frame():  # a key's frame, cheap: once a second again
        pass
    now[0] += 1.0
    assert t.due()


@pytest.mark.parametrize("every, share", [(-1.0, 0.25), (1.0, 0.0), (1.0, 1.5), (float("nan"), 0.25)])
def test_a_budget_that_cannot_hold_is_refused(every, share):
    with pytest.raises(ValueError, match="redraw budget"):
        RedrawBudget(every=every, share=share)


def test_a_frame_that_waited_for_the_cpu_is_not_counted_as_costly():
    """On a busy machine a frame took 3 s of wall time but 0.1 s of the drawing thread's CPU: its cost is the
    0.1 s, so the next frame of its own still comes a second later, not 12 s (the news is not held back)."""
    wall, cpu = [100.0], [5.0]
    t = Throttle(RedrawBudget(clock=lambda: wall[0], cost_clock=lambda: cpu[0]))
    with t.frame():
        wall[0] += 3.0
        cpu[0] += 0.1
    assert t.cost == pytest.approx(0.1)
    assert t.due()  # 3 s after it began: due (a cost of 3 s would hold the next frame to 12 s after it)
