"""Issue 58, item 6: MindSpore's own training lines in the spellings published logs show (no space after a
colon, a comma after the epoch, epochs counted from 0, TimeMonitor without units) are rows, not bad rows.
The lines and their sources: tests/data/mindspore-logs/SOURCES.md."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from mstop.engine.reader import RunReader
from tests.helpers.common import ROOT

DATA = ROOT / "tests" / "data" / "mindspore-logs"


@pytest.mark.parametrize("name, steps, losses, step_times", [
    ("inceptionv3-ascend-1.3.log", [1251, 2502], [5.7787247, 4.392868], [0.288378, 0.128631]),
    ("inceptionv3-cpu-1.3.log", [390, 780, 1170], [2.7072601, 2.5908582, 2.5612416],
     [16.242493, 15.943327, 16.3038]),
    ("swenet-parallel1-1.7.log", [1, 2, 3], [0.6925740242004395, 0.6916631460189819, 0.6910416483879089], None),
])
def test_a_published_log_is_read_row_by_row(tmp_path, name, steps, losses, step_times):
    from mstop.sources import read_once

    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(DATA / name, logs / "worker_0.log")  # as msrun's worker log holds the job's standard output
    store = read_once(str(logs))
    assert store.bad_rows == 0 and RunReader(store).ranks == [0], name
    d = store.ranks[0]
    assert d.col("step").tolist() == steps
    np.testing.assert_allclose(d.col("loss"), losses, rtol=1e-6)
    if step_times is not None:
        np.testing.assert_allclose(d.col("step_time"), step_times, rtol=1e-6)


def test_every_published_log_is_in_the_sources_table():
    listed = (DATA / "SOURCES.md").read_text()
    for f in DATA.glob("*.log"):
        assert f"`{f.name}`" in listed, f.name


HCCL_AT_START = ("[WARNING] DISTRIBUTED(2345,7f1e02dccb80,python):2026-12-06-14:02:21.189.895 [mindspore/ccsrc/"
                 "cluster/rpc/tcp/tcp_comm.cc:485] Connect] Connection 11 source: 127.0.0.1:42116, destination: "
                 "127.0.0.1:8129\n") + """\
Traceback (most recent call last):
  File "/job/train.py", line 40, in <module>
    model.train(1, data)
RuntimeError: Call HcclCommInitRootInfoConfig failed, ret: 9

----------------------------------------------------
- Ascend Error Message:
----------------------------------------------------
EI0006: Getting socket times out. Reason: 1. The remote does not initiate a connect request.

----------------------------------------------------
- C++ Call Stack: (For framework developers)
----------------------------------------------------
mindspore/ccsrc/plugin/device/ascend/hal/hccl_adapter/hccl_adapter.cc:300 InitHccl
"""


def test_a_job_that_dies_before_its_first_step_is_failed_with_its_error(tmp_path):
    """Issue 58, item 6: a job that dies before its first step (an HCCL socket timeout while the graph compiles,
    a device OOM at start) read ``waiting``: it is ``failed``, with that error and its Ascend cause."""
    from mstop.commands.summary import summarize
    from mstop.engine.figures import Options
    from mstop.sources import read_once

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "worker_0.log").write_text(HCCL_AT_START)
    js = summarize(read_once(str(logs)), str(logs), Options())
    assert js["status"] == "failed" and js["rows"] == 0, js["status"]
    (a,) = [a for a in js["alerts"] if a["kind"] == "job_failed"]
    assert "RuntimeError: Call HcclCommInitRootInfoConfig failed, ret: 9" in a["message"]
    assert "EI0006: Getting socket times out" in a["message"], a["message"]
    assert js["error_line"] == "RuntimeError: Call HcclCommInitRootInfoConfig failed, ret: 9"
