"""A tiny MindFormers job for tests/test_mindformers.py: a legacy Llama (2 layers, hidden 64, 2 heads, seq 32,
batch 4) in MindFormers' own train cell, trained on CPU with MFLossMonitor and MstopCallback given no model
shape. Graph mode needs this source in a file. Usage: python mindformers_job.py RUN_DIR STEPS"""

import sys

import mindspore as ms
import numpy as np
from mindspore import dataset as ds
from mindspore.train import Model

ms.set_device("CPU")
ms.set_context(mode=ms.GRAPH_MODE)
ms.set_seed(0)

from mindformers.core.callback import MFLossMonitor  # noqa: E402
from mindformers.core.lr import CosineWithWarmUpLR  # noqa: E402
from mindformers.core.optim import AdamW  # noqa: E402
from mindformers.models.llama import LlamaConfig, LlamaForCausalLM  # noqa: E402
from mindformers.wrapper import MFTrainOneStepCell  # noqa: E402

from mstop_writer import MstopCallback  # noqa: E402

run_dir, steps = sys.argv[1], int(sys.argv[2])
batch, seq, vocab = 4, 32, 256
config = LlamaConfig(batch_size=batch, seq_length=seq, hidden_size=64, num_layers=2, num_heads=2, vocab_size=vocab,
                     intermediate_size=128, compute_dtype="float32", param_init_type="float32",
                     layernorm_compute_type="float32", softmax_compute_type="float32", rotary_dtype="float32",
                     use_flash_attention=False, use_rope_slice=True, fused_rms_norm=False)  # what runs on CPU
net = LlamaForCausalLM(config)
print("BARE_N_PARAMS", int(sum(p.size for p in net.trainable_params())), flush=True)
ids = np.random.default_rng(0).integers(1, vocab, size=(steps * batch, seq + 1)).astype(np.int32)
data = ds.NumpySlicesDataset({"input_ids": ids}, shuffle=False).batch(batch, drop_remainder=True)
lr = CosineWithWarmUpLR(learning_rate=1e-3, warmup_steps=2, total_steps=steps, lr_end=1e-5)
cell = MFTrainOneStepCell(net, AdamW(net.trainable_params(), learning_rate=lr, weight_decay=0.01),
                          use_clip_grad=True, max_grad_norm=1.0, scale_sense=1.0)
# CPU has no NPU overflow status op: take the IsFinite path (what the kit's README describes)
cell.ascend_910b_target, cell._ascend_check_overflow_mode, cell.enable_allfinite = True, None, False
monitor = MFLossMonitor(learning_rate=lr, per_print_times=1, origin_epochs=1, dataset_size=steps,
                        global_batch_size=batch)
mstop = MstopCallback(run_dir, run_name="mf-tiny-llama", peak_flops=1e12)
Model(cell).train(1, data, callbacks=[monitor, mstop], dataset_sink_mode=False)
mstop.close()
