"""A small real MindSpore job for tests/test_profile.py: MstopCallback with profile_steps, or a request file.

Usage: python profile_job.py RUN_DIR STEPS [FIRST LAST] (graph mode needs this source in a file).

With LOCKSTEP_DIR set (several processes of one run), each rank waits after its step until every other rank is
within a few steps of it, as the ranks of a data-parallel job wait in their gradient AllReduce: without it two
processes on a loaded machine drift seconds apart, which no real job of this kind does."""

import os
import sys
import time

import mindspore as ms
import numpy as np
from mindspore import dataset as ds
from mindspore import nn
from mindspore.train import Callback, Model

from mstop_writer import MstopCallback

ms.set_device("CPU")
ms.set_context(mode=ms.GRAPH_MODE)
run_dir, steps = sys.argv[1], int(sys.argv[2])
window = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 4 else None


class Slow(Callback):
    """A few ms a step, so a request file written during the run is seen while it runs; in lockstep with the
    other ranks when LOCKSTEP_DIR says where they say their steps."""

    def __init__(self) -> None:
        self.dir = os.environ.get("LOCKSTEP_DIR")
        self.rank, self.size = int(os.environ.get("RANK_ID", "0")), int(os.environ.get("RANK_SIZE", "1"))

    def on_train_step_end(self, run_context):
        time.sleep(0.02)
        if self.dir:
            step = run_context.original_args().cur_step_num
            mine = os.path.join(self.dir, f"step{self.rank}")
            with open(mine + ".tmp", "w") as f:
                f.write(str(step))
            os.replace(mine + ".tmp", mine)
            deadline = time.monotonic() + 120  # a rank that died ends the wait: the test then says so
            while time.monotonic() < deadline and any(self._step_of(r) < step - 3 for r in range(self.size)):
                time.sleep(0.005)

    def _step_of(self, rank: int) -> int:
        try:
            with open(os.path.join(self.dir, f"step{rank}")) as f:
                return int(f.read() or 0)
        except (OSError, ValueError):
            return 0


# a model whose MatMuls are most of its compute (64 x 512 x 1024: a few ms a step on CPU), so that the
# profile's top ops hold them however the machine's load times the small ops around them
net = nn.SequentialCell(nn.Dense(512, 1024), nn.ReLU(), nn.Dense(1024, 1))
x = np.random.default_rng(0).random((steps * 64, 512), dtype=np.float32)
y = np.random.default_rng(1).random((steps * 64, 1), dtype=np.float32)
data = ds.NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(64)
cb = MstopCallback(run_dir, run_name="profiled", profile_steps=window)
Model(net, nn.MSELoss(), nn.Adam(net.trainable_params())).train(1, data, callbacks=[Slow(), cb],
                                                                 dataset_sink_mode=False)
cb.writer.profile.wait()
cb.close()
print("DONE", flush=True)
