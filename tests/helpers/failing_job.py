"""A small real MindSpore job that fails: tests/test_log_pane.py runs it with its output in a file.

Usage: python failing_job.py RUN_DIR FAIL_AT (graph mode needs this source in a file). Trains a tiny
network with MstopCallback; a callback raises at step FAIL_AT, so the process dies with a Python traceback
on its standard error, as a real job whose input pipeline hands it a bad batch would."""

import sys

import mindspore as ms
import numpy as np
from mindspore import dataset as ds
from mindspore import nn
from mindspore.train import Callback, Model

from mstop_writer import MstopCallback

ms.set_device("CPU")
ms.set_context(mode=ms.GRAPH_MODE)
run_dir, fail_at = sys.argv[1], int(sys.argv[2])


class BadBatch(Callback):
    def on_train_step_end(self, run_context):
        step = run_context.original_args().cur_step_num
        print(f"step {step} done", flush=True)
        if step == fail_at:
            raise ValueError(f"batch {step} holds a NaN label: the input pipeline is broken")


net = nn.SequentialCell(nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 1))
x = np.random.default_rng(0).random((400, 8), dtype=np.float32)
y = np.random.default_rng(1).random((400, 1), dtype=np.float32)
data = ds.NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(4)
cb = MstopCallback(run_dir, run_name="fails")
Model(net, nn.MSELoss(), nn.Adam(net.trainable_params())).train(1, data, callbacks=[cb, BadBatch()],
                                                                 dataset_sink_mode=False)
