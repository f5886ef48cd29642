"""MstopCallback in MindFormers jobs (issue 15): registered by one import, or by REGISTER_PATH and one yaml
entry. The MindFormers tests run where mindformers imports (an environment made as
../shared/mindformers/README.md shows: not yet built by .ci/run) and are skipped with the reason elsewhere."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.common import HELPERS, ROOT

_SPEC = importlib.util.find_spec("mindformers")
#: the real package (a folder named mindformers on the path without one is a namespace, not MindFormers)
HAS_MF = _SPEC is not None and _SPEC.origin not in (None, "namespace")
needs_mf = pytest.mark.skipif(not HAS_MF, reason="mindformers is not installed here: install it as "
                                                 "../shared/mindformers/README.md shows and run these tests there")


def run(code: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """Python code in a subprocess, in ``cwd``: importing MindFormers makes output/ and modules/ where it runs."""
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})


def test_register_path_names_a_folder_with_the_module_auto_register_loads():
    out = subprocess.run([sys.executable, "-m", "mstop_writer.mindformers", "--register-path"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    folder = Path(out.stdout.strip())
    module = folder / "mstop_mf.py"
    assert folder.is_dir() and module.is_file()
    assert "from mstop_writer.callback import MstopCallback" in module.read_text()
    usage = subprocess.run([sys.executable, "-m", "mstop_writer.mindformers"], cwd=ROOT, capture_output=True,
                           text=True, timeout=60)
    assert usage.returncode == 2 and "auto_register: mstop_mf.MstopCallback" in usage.stderr


@pytest.mark.skipif(HAS_MF, reason="mindformers is installed here: the message for its absence cannot be seen")
def test_without_mindformers_the_import_says_what_is_missing(tmp_path):
    out = run("import mstop_writer.mindformers", tmp_path)
    assert out.returncode != 0
    assert "mstop_writer.mindformers needs MindFormers" in out.stderr and "pip install mindformers" in out.stderr


@needs_mf
def test_one_import_registers_the_callback_for_a_yaml_entry(tmp_path):
    out = run("import sys\n"
              "import mstop_writer.mindformers\n"
              "from mindformers.core.callback.build_callback import build_callback\n"
              "from mstop_writer import MstopCallback\n"
              f"cb = build_callback({{'type': 'MstopCallback', 'run_dir': {str(tmp_path)!r}, 'rank': 0,"
              " 'world_size': 1})\n"
              "print(type(cb).__name__, isinstance(cb, MstopCallback))\n", tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-2:] == ["MstopCallback", "True"]


@needs_mf
def test_register_path_and_auto_register_need_no_import(tmp_path):
    folder = subprocess.run([sys.executable, "-m", "mstop_writer.mindformers", "--register-path"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60).stdout.strip()
    out = run("from mindformers.core.callback.build_callback import build_callback\n"
              f"cb = build_callback({{'type': 'MstopCallback', 'auto_register': 'mstop_mf.MstopCallback',"
              f" 'run_dir': {str(tmp_path)!r}, 'rank': 0, 'world_size': 1}})\n"
              "print(type(cb).__module__, type(cb).__name__)\n", tmp_path, REGISTER_PATH=folder)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-2:] == ["mstop_writer.callback", "MstopCallback"]


@needs_mf
def test_a_mindformers_job_gets_its_model_shape_and_parameters_from_the_network(tmp_path):
    """No shape given: layers, heads, head size and sequence length come from the Llama's config, each with
    its source in the start event; n_params is the bare model's (not the optimizer's moments); tokens per
    step = batch x seq length; a row per step."""
    import json

    run = tmp_path / "run"
    out = subprocess.run([sys.executable, str(HELPERS / "mindformers_job.py"), str(run), "6"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    bare = int(next(line.split()[1] for line in out.stdout.splitlines() if line.startswith("BARE_N_PARAMS")))
    start = json.loads((run / "rank0.events.jsonl").read_text().splitlines()[0])
    assert (start["n_layers"], start["n_heads"], start["head_dim"], start["seq_len"]) == (2, 2, 32, 32)
    assert start["detected"]["n_layers"] == start["detected"]["seq_len"] == "LlamaForCausalLM.config"
    assert start["n_params"] == bare
    assert start["tokens_per_step"] == 4 * 32 and start["flops_per_token_source"] != "given"
    rows = (run / "rank0.csv").read_text().splitlines()[1:]
    assert len(rows) == 6


def test_model_shape_is_read_from_a_config_inside_the_network():
    """Any MindSpore cell holding a config (MindFormers' or Hugging Face-style names), at the top or inside
    a wrapper; none without one. The user's own values win (see _fill_shape)."""
    pytest.importorskip("mindspore", reason="the callback needs MindSpore")
    from types import SimpleNamespace

    from mindspore import nn

    from mstop_writer.callback import MstopCallback, model_shape

    class Model(nn.Cell):
        def __init__(self):
            super().__init__()
            self.config = SimpleNamespace(num_hidden_layers=4, num_attention_heads=8, hidden_size=512,
                                          seq_length=128)
            self.dense = nn.Dense(4, 4)

    class Wrapper(nn.Cell):
        def __init__(self):
            super().__init__()
            self.inner = Model()

    assert model_shape(Wrapper()) == ({"n_layers": 4, "n_heads": 8, "head_dim": 64, "seq_len": 128}, "Model.config")
    assert model_shape(nn.Dense(2, 2)) == ({}, None)
    opts, found = {"n_layers": 40}, {}
    MstopCallback._fill_shape(opts, found, Wrapper())
    assert opts == {"n_layers": 40, "n_heads": 8, "head_dim": 64, "seq_len": 128}
    assert "n_layers" not in found and found["seq_len"] == "Model.config"


#: MFLossMonitor's step line (mindformers/core/callback/callback.py), read by the test itself
MF_STEP = re.compile(r"step:\[\s*(\d+)/\s*\d+\], loss:\[([-\d.e]+)/[-\d.e]+\], per_step_time: \d+ms, lr: ([-\d.e]+), "
                     r"overflow cond: (\w+), loss_scale: ([-\d.e]+), global_norm: \[([-\d.e]+)\]")


@needs_mf
def test_a_trainer_job_with_the_callback_from_its_yaml_agrees_with_mindformers_log(tmp_path):
    """MindFormers' own Trainer, MstopCallback given by the yaml alone (auto_register + REGISTER_PATH, no
    shape): every row equals MFLossMonitor's line of that step (loss, lr, global norm, overflow, loss scale);
    n_params is the bare model's; tokens per step = MindFormers' global batch x the model's seq_length; and
    the job's own log, followed while it is written, gives the same rows and losses."""
    import csv
    import json
    import threading

    from mstop.engine.figures import Options, status
    from mstop.engine.store import Store

    steps = 12
    folder = subprocess.run([sys.executable, "-m", "mstop_writer.mindformers", "--register-path"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60).stdout.strip()
    job = subprocess.Popen([sys.executable, str(HELPERS / "mf_trainer" / "trainer_job.py"), str(steps)],
                           cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env={**os.environ, "REGISTER_PATH": folder})
    (tmp_path / "output" / "log").mkdir(parents=True, exist_ok=True)
    live = Store()
    follow: list = []
    follower = threading.Thread(target=lambda: follow.append(_follow_until(tmp_path / "output", live, job)))
    follower.start()
    out, _ = job.communicate(timeout=600)
    follower.join(timeout=60)
    assert job.returncode == 0 and "TRAINED" in out, out[-3000:]
    bare = int(next(line.split()[1] for line in out.splitlines() if line.startswith("BARE_N_PARAMS")))

    log = (tmp_path / "output" / "log" / "rank_0" / "info.log").read_text()
    truth = [m.groups() for m in map(MF_STEP.search, log.splitlines()) if m is not None]
    run = tmp_path / "mstop_run"
    rows = list(csv.DictReader(open(run / "rank0.csv")))
    assert len(truth) == len(rows) == steps  # rows = steps
    for (step, loss, lr, over, scale, norm), row in zip(truth, rows):
        assert float(row["step"]) == float(step)
        assert float(row["loss"]) == pytest.approx(float(loss), abs=5e-7)  # MindFormers prints 6 decimals
        assert float(row["lr"]) == pytest.approx(float(lr), rel=1e-6, abs=1e-12)
        assert float(row["grad_norm"]) == pytest.approx(float(norm), rel=1e-6)
        assert int(row["overflow"]) == (over == "True") and float(row["loss_scale"]) == float(scale)
    start = json.loads((run / "rank0.events.jsonl").read_text().splitlines()[0])
    assert start["n_params"] == bare  # the bare model's, not the optimizer's moments
    assert start["samples_per_step"] == 4 and start["tokens_per_step"] == 4 * 32
    assert start["detected"]["samples_per_step"] == "MFLossMonitor.global_batch_size"
    assert start["detected"]["seq_len"] == "LlamaForCausalLM.config"
    # MindFormers' FLOPs (the compiled graph's, per step) beside mstop's 6N + 12 L H Q T, per token
    graph = float(re.search(r"Full model flops is (\d+)", log).group(1)) / start["tokens_per_step"]
    assert (start["flops_per_token"], graph) == (739_200, 638_976)

    # the log path: followed live while the job wrote it, and read again by `mstop summary`
    assert follow == [True], "the live store never held every step"
    d = live.ranks[0]
    assert d.rows == steps and status(live, Options()) == "finished"
    np.testing.assert_allclose(d.col("loss"), [float(t[1]) for t in truth], atol=5e-7)
    np.testing.assert_allclose(d.col("loss"), [float(r["loss"]) for r in rows], atol=5e-7)
    summary = json.loads(subprocess.run([sys.executable, "-m", "mstop", "summary", "--json", "output"], cwd=tmp_path,
                                        capture_output=True, text=True, timeout=120).stdout)
    assert (summary["rows"], summary["step"], summary["status"]) == (steps, steps, "finished")
    assert summary["loss"] == pytest.approx(float(truth[-1][1]), abs=5e-7)


def _follow_until(output: Path, store, job: subprocess.Popen) -> bool:
    """Follow a MindFormers output directory while ``job`` runs; True once the store holds its every step."""
    import time

    from mstop.sources import Sources

    sources = Sources([str(output)], store, poll=0.1)
    sources.follow()
    try:
        while job.poll() is None:
            time.sleep(0.1)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and store.rows < 12:
            time.sleep(0.1)
        return store.rows == 12
    finally:
        sources.stop()
