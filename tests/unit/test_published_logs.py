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
