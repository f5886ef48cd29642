"""MetricsWriter on real files: the contract, the arithmetic and the faults (no MindSpore needed)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pandas as pd
import pytest

from mstop_writer import COLUMNS, MetricsWriter
from tests.helpers.common import ROOT, read_events, read_rows
from tests.helpers.writer_common import warnings_of


def test_import_uses_standard_library_only():
    code = textwrap.dedent("""
        import sys, mstop_writer
        mstop_writer.MetricsWriter
        print(sorted(m for m in ("textual", "pandas", "watchdog", "numpy", "mindspore", "mstop") if m in sys.modules))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_rank_from_msrun_environment(tmp_path, monkeypatch):
    """The rank from msrun's variables; the start event records the HCCL_*, ASCEND_*, MS_*, GLOG_* and RANK_*
    variables as they are (issue 59: a rank whose settings differ is told), never any other (a secret)."""
    for k in [k for k in os.environ if k.startswith(("MS_", "RANK_", "HCCL_", "ASCEND_", "GLOG_"))]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("RANK_ID", "5")
    monkeypatch.setenv("RANK_SIZE", "8")
    monkeypatch.setenv("HCCL_BUFFSIZE", "400")
    monkeypatch.setenv("GLOG_v", "2")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-to-be-recorded")
    with MetricsWriter(tmp_path) as w:
        w.log(1)
    start = read_events(tmp_path / "rank5.events.jsonl")[0]
    assert (start["rank"], start["world_size"], start["rank_source"]) == (5, 8, "environment")
    assert start["env"] == {"RANK_ID": "5", "RANK_SIZE": "8", "HCCL_BUFFSIZE": "400", "GLOG_v": "2"}
    assert "not-to-be-recorded" not in (tmp_path / "rank5.events.jsonl").read_text()
    assert set(start["versions"]) == {"python", "mindspore", "cann", "driver"} and start["versions"]["python"]


def _run_writer_process(run_dir, steps, extra=""):
    code = textwrap.dedent(f"""
        from mstop_writer import MetricsWriter
        with MetricsWriter({str(run_dir)!r}, run_name="restart") as w:
            for s in {steps!r}:
                w.log(s, loss=1.0 / s, step_time=0.1{extra})
    """)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_restart_appends_with_a_new_session(tmp_path):
    _run_writer_process(tmp_path, [1, 2, 3])
    _run_writer_process(tmp_path, [3, 4, 5])  # resumed from a checkpoint at step 2
    header, rows = read_rows(tmp_path / "rank0.csv")
    assert [r["step"] for r in rows] == ["1", "2", "3", "3", "4", "5"]
    sessions = [r["session"] for r in rows]
    assert sessions[0] == sessions[2] != sessions[3] == sessions[5]
    events = read_events(tmp_path / "rank0.events.jsonl")
    assert [e["kind"] for e in events] == ["start", "end", "start", "end"]
    assert [e["session"] for e in events if e["kind"] == "start"] == [sessions[0], sessions[3]]
    assert len(pd.read_csv(tmp_path / "rank0.csv")) == 6


def test_restart_with_other_extra_columns_keeps_the_file_readable(tmp_path, caplog):
    _run_writer_process(tmp_path, [1], extra=", acc=0.5")
    with MetricsWriter(tmp_path, extra_columns=["f1"]) as w:
        w.log(2, f1=0.7)
    header, rows = read_rows(tmp_path / "rank0.csv")
    assert header == list(COLUMNS) + ["acc"]
    assert rows[1]["acc"] == "" and len(rows) == 2
    assert any("extra columns ['acc']" in m and "['f1'] are not written" in m for m in warnings_of(caplog))
    assert len(pd.read_csv(tmp_path / "rank0.csv")) == 2


def test_options_are_one_dataclass_that_keywords_and_the_callback_build(tmp_path):
    """Issue 29: the writer's options live in one frozen dataclass: keywords or a WriterOptions give the same
    start event, the dataclass normalises (YAML's strings, integral floats) and refuses nonsense, a
    misspelled keyword names the nearest option, and the callback takes exactly the same names."""
    import dataclasses

    from mstop_writer import MetricsWriter
    from mstop_writer.callback import CALLBACK_OPTIONS
    from mstop_writer.metrics import WRITER_OPTIONS, WriterOptions
    from tests.helpers.common import read_events

    o = WriterOptions(rank=0, world_size=1, tokens_per_step="4096", n_params=7e9, extra_columns=iter(["a"]))
    assert (o.tokens_per_step, o.n_params, o.extra_columns) == (4096, 7_000_000_000, ("a",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.rank = 1  # type: ignore[misc]
    with pytest.raises(ValueError, match="tokens_per_step"):
        WriterOptions(tokens_per_step=-1)
    with pytest.raises(TypeError, match="did you mean 'tokens_per_step'"):
        MetricsWriter(tmp_path / "x", tokens_per_stp=1)
    starts = []
    for name, w in (("kw", lambda d: MetricsWriter(d, rank=0, world_size=1, tokens_per_step="4096", n_params=7e9,
                                                   extra_columns=["a"])),
                    ("dc", lambda d: MetricsWriter(d, o))):
        writer = w(tmp_path / name)
        writer.close()
        (start,) = [e for e in read_events(tmp_path / name / "rank0.events.jsonl") if e["kind"] == "start"]
        starts.append({k: v for k, v in start.items()
                       if k not in ("time", "session", "pid", "t_mono", "witness_pid")})  # each writer's own
    assert starts[0] == starts[1] and starts[0]["n_params"] == 7_000_000_000
    assert WRITER_OPTIONS == {f.name for f in dataclasses.fields(WriterOptions)}
    assert CALLBACK_OPTIONS == (WRITER_OPTIONS - {"detected_from"}) | {"output_names"}


_RACE = """
import sys
from mstop_writer import MetricsWriter
with MetricsWriter(sys.argv[1], rank=0, world_size=1, heartbeat_interval=3600, device_interval=0) as w:
    w.log(1, loss=1.0, step_time=0.1)
"""


def test_jobs_starting_together_on_one_run_dir_write_one_header(tmp_path):
    """Issue 40 item 12: two jobs starting at once on one run dir both found the new file empty and both
    wrote the header (a phantom bad row). Here the other job is caught between creating the file and
    writing its header (it holds the file's lock): the writer waits for it, finds its header, adds none."""
    import fcntl
    import json
    import os
    import subprocess
    import sys

    from mstop_writer.schema import COLUMNS
    from tests.helpers.common import ROOT

    run = tmp_path / "run"
    run.mkdir()
    fd = os.open(run / "rank0.csv", os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    fcntl.lockf(fd, fcntl.LOCK_EX)  # the other job: created the file, its header not written yet
    job = subprocess.Popen([sys.executable, "-c", _RACE, str(run)], cwd=ROOT)
    time.sleep(0.5)
    os.write(fd, (",".join(COLUMNS) + "\n").encode())
    fcntl.lockf(fd, fcntl.LOCK_UN)
    os.close(fd)
    assert job.wait(timeout=60) == 0
    lines = (run / "rank0.csv").read_text().splitlines()
    assert sum(1 for ln in lines if ln.startswith("time,")) == 1, lines[:3]
    js = json.loads(subprocess.run([sys.executable, "-m", "mstop", "summary", str(run), "--json"], cwd=ROOT,
                                   capture_output=True, text=True, timeout=120).stdout)
    assert js["bad_rows"] == 0 and js["rows"] == 1
