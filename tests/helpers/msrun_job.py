"""A real data-parallel MindSpore job for msrun (tests/test_what_happened.py): init(), DATA_PARALLEL, a real
AllReduce of the gradients every step, MstopCallback last, 0.1 s a step, a checkpoint every 50 steps.

    msrun --worker_num=4 --local_worker_num=4 --master_addr=127.0.0.1 --master_port=P --log_dir=L \\
        --join=True tests/helpers/msrun_job.py RUN_DIR STEPS [--resume] [--stall=RANK:STEP] [--stack-after=S]

``--stall=2:60``: rank 2 blocks for good at the start of step 60, in its own Python code (``wait_for_input``:
a callback that never returns); the other ranks wait for it in their AllReduce. (A GeneratorDataset whose
generator blocks was tried first: under msrun here that rank never reached its first step.)
``--segv=1:50``: rank 1 reads a NULL pointer through ctypes at the start of step 50 (SIGSEGV).
``--fail=1:30``: rank 1 raises a RuntimeError at the start of step 30 (the writer writes its abort).
``--input-block=1:40``: rank 1's input pipeline (a map function, in the dataset's own thread) never gives
its 40th batch: the rank waits for its input, the others in their AllReduce.
``--stack-after``: the writer's ``stack_after`` option.
``--busy=2:0.15``: rank 2 computes 0.15 s more each step (a loop inside its step until its thread has used 0.15 s
of CPU: a compute straggler does more work, and a loaded machine stretches that work's wall time, never its size).
``--input-sleep=1:0.3`` (or ``all:0.3``): that rank's (every rank's) input pipeline takes 0.3 s a batch.
``--leak=2000000``: every rank keeps 2,000,000 bytes more each step (host memory creeping up).
``--steps-sleep=0.1``: the sleep a step (0.1 s by default).
``--count-to=all:200000``: that rank (every rank) counts to 200,000 each step: host work of a fixed size (a
loaded CPU stretches it), where ``--busy`` spins for a fixed CPU time.
``--env=3:HCCL_BUFFSIZE=400``: rank 3 starts with that variable set (the others without it, or as msrun set it).

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
fail = tuple(int(v) for v in opts["fail"].split(":")) if "fail" in opts else None
io_block = tuple(int(v) for v in opts["io-block"].split(":")) if "io-block" in opts else None
lock_block = tuple(int(v) for v in opts["lock-block"].split(":")) if "lock-block" in opts else None
stack_after = float(opts["stack-after"]) if "stack-after" in opts else None
rank, world = get_rank(), get_group_size()


def for_me(opt):
    """``RANK:VALUE`` (RANK may be ``all``): the value when it names this rank, else None."""
    if opt not in opts:
        return None
    who, value = opts[opt].split(":")
    return float(value) if who == "all" or int(who) == rank else None


busy, input_sleep, work = for_me("busy"), for_me("input-sleep"), for_me("count-to")
input_block = for_me("input-block")
if "env" in opts and int(opts["env"].split(":", 1)[0]) == rank:
    name, value = opts["env"].split(":", 1)[1].split("=", 1)
    os.environ[name] = value  # as if its launcher had set it for this rank alone
leak = int(opts.get("leak", 0))
step_sleep = float(opts.get("steps-sleep", 0.1))


def wait_for_input():
    """The input that never comes."""
    while True:
        time.sleep(1)


def read_shard():
    """``--io-block``: a read that never returns (a FIFO no one writes: as a hung network file system)."""
    path = os.path.join(run_dir, f"shard{rank}.fifo")
    if not os.path.exists(path):
        os.mkfifo(path)
    with open(path, "rb") as f:
        return f.read()


def wait_for_prefetch():
    """``--lock-block``: waiting on a condition a thread of the job's own never signals."""
    import threading

    ready = threading.Condition()
    with ready:
        ready.wait()


def read_null():
    """A fault in native code: a NULL pointer read (SIGSEGV)."""
    import ctypes

    ctypes.string_at(0)


class Stall(Callback):
    """``--stall=RANK:STEP``: this rank blocks at the start of that step; ``--segv=RANK:STEP``: it crashes;
    ``--fail=RANK:STEP``: it raises; ``--io-block`` and ``--lock-block``: it blocks in a read, on a condition."""

    def on_train_step_begin(self, run_context):
        step = run_context.original_args().cur_step_num + 1
        if stall is not None and stall[0] == rank and step >= stall[1]:
            wait_for_input()
        if segv is not None and segv[0] == rank and step >= segv[1]:
            read_null()
        if fail is not None and fail[0] == rank and step + initial >= fail[1]:
            raise RuntimeError(f"injected failure at step {step + initial}")
        if io_block is not None and io_block[0] == rank and step >= io_block[1]:
            read_shard()
        if lock_block is not None and lock_block[0] == rank and step >= lock_block[1]:
            wait_for_prefetch()


class Slow(Callback):
    """0.1 s a step, and the step on stdout (the worker's log), so a test can kill a rank at a step;
    ``--busy``'s loop and ``--leak``'s bytes."""

    kept = []

    def on_train_step_end(self, run_context):
        time.sleep(step_sleep)
        if busy:
            end = time.thread_time() + busy  # CPU time, not wall time: the same work however loaded
            while time.thread_time() < end:
                pass
        if work:
            n = 0
            for _ in range(int(work)):
                n += 1
        if leak:
            self.kept.append(b"\x01" * leak)
        print(f"STEP {run_context.original_args().cur_step_num}", flush=True)


def slow_input(x):
    """``--input-sleep``: the input pipeline's time a batch."""
    time.sleep(input_sleep)
    return x


batches = [0]


def blocking_input(x):
    """``--input-block``: the batch that never comes (a read that hangs, in the user's own map function)."""
    batches[0] += 1
    while batches[0] >= input_block:
        time.sleep(1)
    return x


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
if input_sleep:
    data = data.map(operations=slow_input, input_columns=["x"], num_parallel_workers=1, python_multiprocessing=False)
if input_block:
    data = data.map(operations=blocking_input, input_columns=["x"], num_parallel_workers=1,
                    python_multiprocessing=False)
ckpt = ModelCheckpoint(prefix="net", directory=ckpt_dir, config=CheckpointConfig(save_checkpoint_steps=50))
monitor = MstopCallback(run_dir, run_name="msrun-dp", step_offset=initial, stack_after=stack_after)
Model(net, nn.MSELoss(), nn.Adam(net.trainable_params(), 1e-3)).train(
    1, data, callbacks=[Stall(), Slow(), ckpt, monitor], dataset_sink_mode=False)
monitor.close()
print("DONE", flush=True)
