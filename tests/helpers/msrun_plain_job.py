"""A plain data-parallel MindSpore job for msrun with MindSpore's own LossMonitor and TimeMonitor and no mstop
code at all (tests/test_log_formats.py): mstop must watch it from msrun's worker logs alone.

    msrun --worker_num=2 --local_worker_num=2 --master_addr=127.0.0.1 --master_port=P --log_dir=L \\
        --join=True tests/helpers/msrun_plain_job.py STEPS EPOCHS [KILL_AT [PAUSE [RAISE_RANK]]]

KILL_AT: rank 1 kills itself (SIGKILL) at the end of that step, as a lost host or the OOM killer would.
PAUSE: seconds each step sleeps at its end (a pace a watcher can start following before the kill).
RAISE_RANK: that rank raises a RuntimeError before its first step (a job that dies while it starts).
Graph mode needs this source in a file."""

import os
import signal
import sys

import mindspore as ms
import numpy as np
from mindspore import dataset as ds
from mindspore import nn
from mindspore.communication import get_rank, init
from mindspore.train import Callback, LossMonitor, Model, TimeMonitor

ms.set_device("CPU")
ms.set_context(mode=ms.GRAPH_MODE)
init()
ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)
steps, epochs = int(sys.argv[1]), int(sys.argv[2])
kill_at = int(sys.argv[3]) if len(sys.argv) > 3 else None
pause = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
raise_rank = int(sys.argv[5]) if len(sys.argv) > 5 else None


class KillAt(Callback):
    """Rank 1 dies with no word at the end of step ``kill_at``."""

    def on_train_step_end(self, run_context):
        if pause:
            import time

            time.sleep(pause)
        if get_rank() == 1 and run_context.original_args().cur_step_num == kill_at:
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)



if get_rank() == raise_rank:
    raise RuntimeError(f"rank {raise_rank} cannot start: the device has no memory left (a test's own failure)")
rng = np.random.default_rng(get_rank())
x = rng.standard_normal((steps * 8, 16)).astype(np.float32)
y = rng.standard_normal((steps * 8, 1)).astype(np.float32)
data = ds.NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(8)
net = nn.SequentialCell(nn.Dense(16, 32), nn.ReLU(), nn.Dense(32, 1))
Model(net, nn.MSELoss(), nn.Adam(net.trainable_params(), 1e-3)).train(
    epochs, data, callbacks=[LossMonitor(), TimeMonitor(), KillAt()], dataset_sink_mode=False)
