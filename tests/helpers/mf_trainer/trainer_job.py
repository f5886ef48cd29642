"""MindFormers' own Trainer on CPU with the yaml beside this file (tests/test_mindformers.py).

Usage: REGISTER_PATH=$(python -m mstop_writer.mindformers --register-path) python trainer_job.py STEPS
in the folder the job should write to (output/ and mstop_run/ appear there). Nothing here names
MstopCallback: the yaml's entry and REGISTER_PATH bring it. The one change to MindFormers is the kit's CPU
work-around: its train cell's overflow check takes MindSpore's IsFinite path (CPU has no NPU status ops).
"""

import os
import sys

import numpy as np
from mindformers import MindFormerConfig, Trainer, build_context
from mindformers.models.llama import LlamaConfig, LlamaForCausalLM
from mindformers.tools.register import MindFormerModuleType, MindFormerRegister
from mindformers.wrapper import MFTrainOneStepCell
from mindspore import dataset as ds


class CpuMFTrainOneStepCell(MFTrainOneStepCell):
    """MFTrainOneStepCell whose overflow check uses IsFinite (the NPU status ops do not exist on CPU)."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.ascend_910b_target, self._ascend_check_overflow_mode, self.enable_allfinite = True, None, False


MindFormerRegister.register_cls(CpuMFTrainOneStepCell, module_type=MindFormerModuleType.WRAPPER)

steps = int(sys.argv[1])
cfg = MindFormerConfig(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny_llama.yaml"))
cfg.runner_wrapper.type = "CpuMFTrainOneStepCell"
build_context(cfg)
mc = cfg.model.model_config
bare = LlamaForCausalLM(LlamaConfig(**{k: v for k, v in mc.items() if k != "type"}))
print("BARE_N_PARAMS", int(sum(p.size for p in bare.trainable_params())), flush=True)
batch, seq, vocab = 4, 32, 256
ids = np.random.default_rng(0).integers(1, vocab, size=(steps * batch, seq + 1)).astype(np.int32)
data = ds.GeneratorDataset(lambda: ((row,) for row in ids), column_names=["input_ids"], shuffle=False)
Trainer(args=cfg, train_dataset=data.batch(batch, drop_remainder=True)).train()
print("TRAINED", flush=True)
