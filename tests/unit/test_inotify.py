"""Our own inotify reader (mstop.sources.inotify): the kernel's event records, and a real watch."""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mstop.engine.store import Store
from mstop.sources import inotify
from mstop.sources.inotify import Changes, DirectoryWatch
from mstop.sources.local import LocalSource
from mstop.sources.watchers import InotifyWatcher
from tests.helpers.runs import steps, write_rank

MASKS = [inotify.IN_MODIFY, inotify.IN_CREATE, inotify.IN_DELETE, inotify.IN_MOVED_FROM, inotify.IN_MOVED_TO,
         inotify.IN_Q_OVERFLOW, inotify.IN_IGNORED, inotify.IN_DELETE_SELF]

names = st.text(st.characters(blacklist_characters="\0/", blacklist_categories=("Cs",)), min_size=1, max_size=40)

def record(mask: int, name: str, pad: int) -> bytes:
    """One ``struct inotify_event`` as the kernel writes it: the name NUL-padded (to a multiple of 4 and
    beyond)."""
    raw = os.fsencode(name) if name else b""
    size = 0 if not raw else (len(raw) + 1 + 3) // 4 * 4 + 4 * pad
    return struct.pack("iIII", 1, mask, 0, size) + raw.ljust(size, b"\0")


@given(st.lists(st.tuples(st.sampled_from(MASKS), names, st.integers(0, 3)), max_size=30))
def test_event_records_give_the_names_by_kind(events):
    buf = b"".join(record(m, n if m not in (inotify.IN_Q_OVERFLOW, inotify.IN_DELETE_SELF, inotify.IN_IGNORED)
                          else "", p) for m, n, p in events)
    out = Changes()
    DirectoryWatch.parse(buf, out)
    assert out.events == len(events)
    assert out.modified == {n for m, n, _ in events if m == inotify.IN_MODIFY}
    assert out.changed == {n for m, n, _ in events
                           if m in (inotify.IN_CREATE, inotify.IN_DELETE, inotify.IN_MOVED_FROM, inotify.IN_MOVED_TO)}
    assert out.overflow == any(m == inotify.IN_Q_OVERFLOW for m, _, _ in events)
    assert out.gone == any(m in (inotify.IN_IGNORED, inotify.IN_DELETE_SELF) for m, _, _ in events)


def test_a_cut_record_at_the_end_is_not_read_past():
    buf = record(inotify.IN_MODIFY, "rank0.csv", 0) + record(inotify.IN_MODIFY, "rank1.csv", 0)[:10]
    out = Changes()
    DirectoryWatch.parse(buf, out)
    assert out.modified == {"rank0.csv"} and out.events == 1


def test_a_real_watch_sees_appends_creations_renames_and_deletions(tmp_path):
    (tmp_path / "rank0.csv").write_text("a\n")
    w = DirectoryWatch(str(tmp_path))
    try:
        assert not w.wait(0.05)
        with open(tmp_path / "rank0.csv", "a") as f:
            f.write("b\n")
        (tmp_path / "rank1.csv").write_text("x\n")
        os.replace(tmp_path / "rank1.csv", tmp_path / "rank2.csv")
        (tmp_path / "rank2.csv").unlink()
        assert w.wait(1.0)
        got = w.read()
        assert "rank0.csv" in got.modified and {"rank1.csv", "rank2.csv"} <= got.changed
        with open(tmp_path / "rank0.csv") as f:  # our own reads never come back as events
            f.read()
        assert not w.wait(0.05) and w.read().events == 0
        w.wake()
        assert w.wait(5.0)  # woken from another thread's side: wait returns at once
        assert w.read().events == 0 and not w.wait(0.05)  # the wake is consumed
    finally:
        w.close()


def test_a_queue_overflow_makes_every_file_read(tmp_path):
    """More events than the kernel queues (fs.inotify.max_queued_events): the lost events' files are
    not named, so the source reads every file."""
    with open("/proc/sys/fs/inotify/max_queued_events") as f:
        limit = int(f.read())
    if limit > 200_000:
        pytest.skip(f"fs.inotify.max_queued_events is {limit}: too many writes to overflow it here")
    for r in range(3):
        write_rank(tmp_path, r, steps(1, 1))
    store = Store()
    src = LocalSource(str(tmp_path), store)
    src.keep_open()
    src.read_all()
    src.watch_with(InotifyWatcher(str(tmp_path), modifications=True))
    try:
        fds = [os.open(tmp_path / name, os.O_WRONLY | os.O_CREAT | os.O_APPEND) for name in ("a.txt", "b.txt")]
        for i in range(limit + 10):  # alternating files: identical events in a row would be merged
            os.write(fds[i % 2], b"x")
        for fd in fds:
            os.close(fd)
        write_rank(tmp_path, 0, steps(2, 2))  # its modification is lost in the overflow
        src.take_events()
        assert src.pending >= {"rank0.csv", "rank1.csv", "rank2.csv"}  # each looked at by its path
        src.round()
        assert store.ranks[0].rows == 2
    finally:
        src.stop()


