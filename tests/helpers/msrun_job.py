"""A real data-parallel MindSpore job for msrun (tests/test_what_happened.py): init(), DATA_PARALLEL, a real
AllReduce of the gradients every step, MstopCallback last, 0.1 s a step, a checkpoint every 50 steps.

    msrun --worker_num=4 --local_worker_num=4 --master_addr=127.0.0.1 --master_port=P --log_dir=L \\
        --join=True tests/helpers/msrun_job.py RUN_DIR STEPS [--resume] [--stall=RANK:STEP] [--stack-after=S]

``--stall=2:60``: rank 2 blocks for good at the start of step 60, in its own Python code (``wait_for_input``:
a callback that never returns); the other ranks wait for it in their AllReduce. (A GeneratorDataset whose
generator blocks was tried first: under msrun here that rank never reached its first step.)
``--segv=1:50``: rank 1 reads a NULL pointer through ctypes at the start of step 50 (SIGSEGV).
``--stack-after``: the writer's ``stack_after`` option.

Graph mode needs this source in a file. Each rank prints ``STEP <n>`` lines to its own log as it trains."""

import os
import sys
import time

import mindspore as ms
import numpy as np
from mindspore import dataset as ds
from mindspore import nn
from mindspore.communication import get_group_size, get_rank, init
from mindspore.train import Callback, CheckpointConfig, Model, ModelCheckpoint

from mstop_writer import MstopCallback

ms.set_device("CPU")
ms.set_context(mode=ms.GRAPH_MODE)
init()
ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)
run_dir, steps = sys.argv[1], int(sys.argv[2])
resume = "--resume" in sys.argv
opts = dict(a[2:].split("=", 1) for a in sys.argv[3:] if a.startswith("--") and "=" in a)
stall = tuple(int(v) for v in opts["stall"].split(":")) if "stall" in opts else None
segv = tuple(int(v) for v in opts["segv"].split(":")) if "segv" in opts else None
stack_after = float(opts["stack-after"]) if "stack-after" in opts else None
rank, world = get_rank(), get_group_size()


def wait_for_input():
    """The input that never comes."""
    while True:
        time.sleep(1)


def read_null():
    """A fault in native code: a NULL pointer read (SIGSEGV)."""
    import ctypes

    ctypes.string_at(0)


class Stall(Callback):
    """``--stall=RANK:STEP``: this rank blocks at the start of that step; ``--segv=RANK:STEP``: it crashes."""

    def on_train_step_begin(self, run_context):
        step = run_context.original_args().cur_step_num + 1
        if stall is not None and stall[0] == rank and step >= stall[1]:
            wait_for_input()
        if segv is not None and segv[0] == rank and step >= segv[1]:
            read_null()


class Slow(Callback):
    """0.1 s a step, and the step on stdout (the worker's log), so a test can kill a rank at a step."""

    def on_train_step_end(self, run_context):
        time.sleep(0.1)
        print(f"STEP {run_context.original_args().cur_step_num}", flush=True)


net = nn.SequentialCell(nn.Dense(16, 32), nn.ReLU(), nn.Dense(32, 1))
ckpt_dir = os.path.join(run_dir, "ckpt", f"rank{rank}")
initial = 0
if resume and os.path.isdir(ckpt_dir):
    files = sorted((f for f in os.listdir(ckpt_dir) if f.endswith(".ckpt")),
                   key=lambda f: os.path.getmtime(os.path.join(ckpt_dir, f)))
    if files:
        ms.load_param_into_net(net, ms.load_checkpoint(os.path.join(ckpt_dir, files[-1])))
        initial = int(files[-1].rsplit("_", 1)[1].split(".")[0])  # net-1_50.ckpt: step 50
rng = np.random.default_rng(rank)
x = rng.standard_normal((steps * 8, 16)).astype(np.float32)
y = rng.standard_normal((steps * 8, 1)).astype(np.float32)
data = ds.NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(8).skip(initial)
ckpt = ModelCheckpoint(prefix="net", directory=ckpt_dir, config=CheckpointConfig(save_checkpoint_steps=50))
monitor = MstopCallback(run_dir, run_name="msrun-dp", step_offset=initial, stack_after=stack_after)
Model(net, nn.MSELoss(), nn.Adam(net.trainable_params(), 1e-3)).train(
    1, data, callbacks=[Stall(), Slow(), ckpt, monitor], dataset_sink_mode=False)
monitor.close()
print("DONE", flush=True)
