"""The tests of tests/unit/test_inotify.py that take over a second each here: out of the developer's loop."""

from __future__ import annotations

import pytest

from mstop.sources.watchers import InotifyWatcher


@pytest.mark.parametrize("way", ["inotify", "watchdog", "poll"])
def test_every_watcher_tells_a_new_file_and_its_growth(tmp_path, way):
    """Issue 29: one watcher interface (mstop.sources.watchers), chosen by get_watcher: our own inotify
    reader, watchdog's native observer, its polling observer. Each wakes its waiter and names a created
    rank file, then its growth; none touches its source."""
    import time

    from mstop.sources.watchers import WatchdogWatcher, get_watcher

    w = get_watcher(str(tmp_path), polling=way == "poll", modifications=True, poll=0.1, direct=way == "inotify",
                    names=lambda n: n.startswith("rank"))
    assert isinstance(w, InotifyWatcher if way == "inotify" else WatchdogWatcher) and w.cheap == (way == "inotify")
    try:
        (tmp_path / "rank0.csv").write_text("time,step\n")
        (tmp_path / "other.txt").write_text("x\n")

        def seen(*attrs: str) -> set[str]:
            got: set[str] = set()
            deadline = time.monotonic() + 10
            while "rank0.csv" not in got and time.monotonic() < deadline:
                w.wait(0.5)
                took = w.take()
                for attr in attrs:
                    got |= getattr(took, attr)
            return got

        first = seen("changed", "modified")
        assert "rank0.csv" in first and (way == "inotify" or "other.txt" not in first)
        time.sleep(0.3)
        w.take()  # the creation's own modification, if it came apart
        with open(tmp_path / "rank0.csv", "a") as f:
            f.write("1,1\n")
        assert "rank0.csv" in seen("modified")
        w.wake()
        assert w.wait(5)
    finally:
        w.close()


