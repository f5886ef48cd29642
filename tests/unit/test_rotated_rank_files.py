"""Rank files renamed away by a rotation (``mv rank0.csv rank0.csv.1``, logrotate's numbers): their rows are
read, in the order they were written, by a first read and while following; none is counted lost."""

from __future__ import annotations

import json
import os

from hypothesis import example, given
from hypothesis import strategies as st

import mstop_writer._files as writer_files
from mstop.engine.reader import RunReader
from mstop.engine.store import Store
from mstop.sources.local import LocalSource
from mstop.sources.rankfiles import rank_part, read_order
from mstop_writer import MetricsWriter
from tests.helpers.cli import mstop


class Job:
    """A real writer whose file checks happen when the test says (its clock is the test's)."""

    def __init__(self, run_dir, rank: int = 0, world: int = 1) -> None:
        self.now = 0.0
        self.w = MetricsWriter(run_dir, rank=rank, world_size=world, witness=False, clock=lambda: self.now)
        self.step = 0

    def log(self, n: int) -> None:
        for _ in range(n):
            self.step += 1
            self.now += 0.1
            self.w.log(self.step, loss=10.0 / self.step)

    def look(self) -> None:
        """Let the writer look at its files at its next row (it does every CHECK_INTERVAL seconds)."""
        self.now += writer_files.CHECK_INTERVAL + 1


def rotate(run_dir, name: str, keep: int = 3) -> None:
    """What logrotate does without copytruncate: name.K -> name.K+1 ..., name -> name.1."""
    for k in range(keep, 0, -1):
        if os.path.exists(run_dir / f"{name}.{k}"):
            os.rename(run_dir / f"{name}.{k}", run_dir / f"{name}.{k + 1}")
    os.rename(run_dir / name, run_dir / f"{name}.1")


def test_a_first_read_takes_every_older_part_in_order(tmp_path):
    job, other = Job(tmp_path, 0, 2), Job(tmp_path, 1, 2)
    for _ in range(2):
        job.log(3)
        rotate(tmp_path, "rank0.csv")
        job.log(2)  # into the moved file: the writer has not looked yet
        job.look()
    job.log(3)
    other.log(13)
    job.w.close()
    other.w.close()
    (tmp_path / "rank0.csv.4.gz").write_bytes(b"\x1f\x8b")  # compressed by logrotate: said, not read
    assert sorted(os.listdir(tmp_path))[:3] == ["rank0.csv", "rank0.csv.1", "rank0.csv.2"]
    got = mstop("summary", "--json", tmp_path)
    assert got.returncode == 0, got.stderr
    s = json.loads(got.stdout)
    assert (s["rows"], s["step"], s["resets"], s["segments"], s["repeated_steps"]) == (26, 13, 0, 1, 0)
    assert s["dropped_rows"] == 0
    text = mstop("summary", tmp_path).stdout
    assert "rank0.csv.4.gz" in text and "repeated" not in text


def test_following_reads_on_through_two_rotations(tmp_path):
    job = Job(tmp_path)
    job.log(4)
    store = Store()
    src = LocalSource(os.fspath(tmp_path), store)
    src.keep_open()
    src.read_all()
    for _ in range(2):
        rotate(tmp_path, "rank0.csv")
        job.log(2)  # the moved file still grows
        src.round(check=True)
        job.look()
        job.log(3)  # a new rank0.csv
        src.round(check=True)
    job.w.close()
    src.round(check=True)
    reader = RunReader(store)
    steps = reader.column(0, "step")
    assert (store.rows, store.resets, list(steps)) == (14, 0, list(range(1, 15)))
    assert sorted(src.files) == ["rank0.csv", "rank0.csv.1", "rank0.csv.2", "rank0.events.jsonl"]
    s = json.loads(mstop("summary", "--json", tmp_path).stdout)
    assert (s["rows"], s["repeated_steps"], s["dropped_rows"]) == (14, 0, 0)


def test_an_older_part_deleted_keeps_its_rows_read(tmp_path):
    job = Job(tmp_path)
    job.log(3)
    rotate(tmp_path, "rank0.csv")
    job.look()
    job.log(3)
    store = Store()
    src = LocalSource(os.fspath(tmp_path), store)
    src.keep_open()
    src.read_all()
    os.remove(tmp_path / "rank0.csv.1")
    job.log(1)
    src.round(["rank0.csv"], check=True)  # an event names the file written
    job.w.close()
    assert (store.rows, store.resets) == (7, 0) and "rank0.csv.1" not in src.files


@given(st.text(max_size=40))
@example("rank0.csv.1")
@example("rank12.events.jsonl.9999")
@example("rank0.csv.01")
@example("rank0.csv.10000")
@example("rank0.csv.1.gz")
@example("rank0.csv.٣")
@example("rank0.devices.csv.1")
def test_rank_part_reads_only_what_the_writer_and_logrotate_name(name):
    part = rank_part(name)
    if part is None:
        return
    rank, kind, k = part
    base = f"rank{rank}.csv" if kind == "csv" else f"rank{rank}.events.jsonl"
    if kind == "devices":
        assert k == 0
        return
    assert name == (base if k == 0 else f"{base}.{k}") and 0 <= k < 10_000
    assert read_order(name) < read_order(base) or k == 0


def test_older_parts_come_first():
    names = ["rank0.events.jsonl", "rank0.csv", "rank0.csv.10", "rank0.csv.2", "rank0.csv.1", "rank1.csv"]
    assert sorted(names, key=read_order) == [
        "rank0.csv.10", "rank0.csv.2", "rank0.csv.1", "rank0.csv", "rank1.csv", "rank0.events.jsonl"]
