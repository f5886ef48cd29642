"""MindFormers log lines CONSTRUCTED for tests, from MindFormers 2.0.0's own format strings.

``MFLossMonitor.print_output_info`` (mindformers/core/callback/callback.py) and the file handler's format
(mindformers/tools/logger.py) are copied below as they are there, and the lines are made with Python's
logging formatter, as MindFormers makes them. The kit's captured info.log has the plain non-sink, lr-known,
non-MoE variant only; these build the others (sink mode, no lr, MoE/MTP separate losses, no throughput).
"""

from __future__ import annotations

import logging
import re
import time
from datetime import timedelta

import numpy as np

# mindformers/tools/logger.py
FILE_FORMAT = "[%(levelname)s] %(asctime)s [%(filepath)s:%(lineno)d] %(funcName)s: %(message)s"
STDOUT_FORMAT = "%(asctime)s - %(name)s[%(filepath)s:%(lineno)d] - %(levelname)s - %(message)s"
# mindformers/core/callback/callback.py, print_output_info
WITH_LR = ("{ Epoch:[%3d/%3d], step:[%5d/%5d], {loss_info}{separate_loss}"
           "per_step_time: %dms, lr: %s, overflow cond: %s, loss_scale: %s, global_norm: %s%s")
WITHOUT_LR = ("{ Epoch:[%3d/%3d], step:[%5d/%5d], {loss_info}{separate_loss}"
              "per_step_time: %dms, overflow cond: %s, loss_scale: %s, global_norm: %s%s")
PROGRESS = "  %4.1f%% %s %.5f samples/s/p  %s }"


class Log:
    """Lines of one rank's info.log as MindFormers' logger writes them, at a clock the test moves."""

    def __init__(self, t0: float = 1_796_108_985.0, fmt: str = FILE_FORMAT) -> None:
        self.t = t0
        self.formatter = logging.Formatter(fmt)
        self.formatter.converter = time.localtime  # logging's default: the host's local time
        self.lines: list[str] = []
        self.losses: list[float] = []

    def record(self, msg: str, *args: object, level: int = logging.INFO, func: str = "print_output_info",
               path: str = "mindformers/core/callback/callback.py", lineno: int = 747) -> str:
        rec = logging.LogRecord("mindformers", level, path, lineno, msg, args, None, func)
        rec.created, rec.msecs = self.t, (self.t - int(self.t)) * 1000
        rec.filepath = path
        line = self.formatter.format(rec)
        self.lines.append(line)
        return line

    def info(self, msg: str, *args: object, **kw: object) -> str:
        return self.record(msg, *args, func=kw.pop("func", "training_process"),  # type: ignore[arg-type]
                           path="mindformers/trainer/base_trainer.py", lineno=1680, **kw)  # type: ignore[arg-type]

    def step(self, epoch: int, epochs: int, step: int, steps: int, loss: float, *, step_ms: float = 120.0,
             lr: float | None = 1e-4, sink: bool = False, overflow: bool = False, scale: object = 1.0,
             norm: float = 1.0, flops: float | None = 0.5, separate: dict[str, float] | None = None,
             samples_per_s: float | None = None) -> None:
        """A step line (and its progress line when ``samples_per_s``), ``step_ms`` after the last line."""
        self.t += step_ms / 1000.0
        self.losses.append(loss)
        loss_info = f"loss: {loss:5.6f}, " if sink else f"loss:[{loss:5.6f}/{np.mean(self.losses):5.6f}], "
        sep = "".join(f"{k}: {v:5.6f}, " for k, v in (separate or {}).items())
        tput = f", train_throughput_per_npu: {flops:.3f}T" if flops is not None else ""
        fmt = (WITH_LR if lr is not None else WITHOUT_LR).replace("{loss_info}", loss_info).replace(
            "{separate_loss}", sep)
        gn = np.array([norm], np.float32)
        args = (epoch, epochs, step, steps, int(step_ms)) + ((str(np.float32(lr)),) if lr is not None else ()) + (
            str(overflow), scale, gn, tput)
        self.record(fmt, *args)
        if samples_per_s is not None:
            pct = 100.0 * ((epoch - 1) * steps + step) / (epochs * steps)
            bar = f"|{int(50 * pct / 100) * '█':<50}|"
            self.record(PROGRESS, pct, bar, samples_per_s, timedelta(seconds=3), lineno=764)

    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines)


#: a step-looking line as the README defines it, written here apart from mstop's code: it names a step and a
#: loss, each with a number, or it is a MindFormers step record (``{ Epoch:[``, ``step:[..]`` with a loss)
_LOOKS = re.compile(r"\bstep\b\W{0,8}\d.*\bloss\b\W{0,12}(?:is\W{1,4})?[-+]?(?:\d|nan|inf)"
                    r"|\bloss\b\W{0,12}(?:is\W{1,4})?[-+]?(?:\d|nan|inf).*\bstep\b\W{0,8}\d", re.I)


def step_looking(text: str) -> int:
    """How many lines of ``text`` look like training steps: each must be a row or a counted bad row."""
    lines = [b.decode("utf-8", "replace") for b in text.encode("utf-8", "surrogatepass").splitlines()]  # \n, \r
    raised = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception): ")  # a failure, not a step
    return sum(1 for ln in lines if not raised.match(ln)
               and ("{ Epoch:[" in ln or ("step:[" in ln and "loss" in ln) or _LOOKS.search(ln)))
