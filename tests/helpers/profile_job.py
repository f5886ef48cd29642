"""A small real MindSpore job for tests/test_profile.py: MstopCallback with profile_steps, or a request file.

Usage: python profile_job.py RUN_DIR STEPS [FIRST LAST] (graph mode needs this source in a file)."""

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
    """A few ms a step, so a request file written during the run is seen while it runs."""

    def on_train_step_end(self, run_context):
        time.sleep(0.02)


net = nn.SequentialCell(nn.Dense(32, 256), nn.ReLU(), nn.Dense(256, 1))
x = np.random.default_rng(0).random((steps * 4, 32), dtype=np.float32)
y = np.random.default_rng(1).random((steps * 4, 1), dtype=np.float32)
data = ds.NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(4)
cb = MstopCallback(run_dir, run_name="profiled", profile_steps=window)
Model(net, nn.MSELoss(), nn.Adam(net.trainable_params())).train(1, data, callbacks=[Slow(), cb],
                                                                 dataset_sink_mode=False)
cb.writer.profile.wait()
cb.close()
print("DONE", flush=True)
