"""``MstopCallback``: MindSpore ``Model.train``/``Model.fit`` callback writing mstop's files.

This is the only module of ``mstop_writer`` that imports MindSpore.
"""

from __future__ import annotations

import atexit
import logging
import math
import time
from collections.abc import Sequence
from typing import Any

import mindspore as ms
from mindspore import nn, ops
from mindspore.train import Callback, ModelCheckpoint

from .metrics import MetricsWriter, validate_options

log = logging.getLogger("mstop_writer")

_LOSS_SCALE_OUTPUTS = ("loss", "overflow", "loss_scale")
#: Largest share of the step time spent reading a learning rate that is not a list schedule.
LR_BUDGET = 0.01


def _scalar(v: Any) -> Any:
    """A 0-d (or one-element) Tensor, numpy value or number as a Python number; None if not one."""
    if v is None:
        return None
    item = getattr(v, "item", None)
    if item is not None:
        try:
            return item()
        except (TypeError, ValueError, RuntimeError):
            try:
                return v.asnumpy().reshape(-1)[0].item()
            except Exception:  # noqa: BLE001
                return None
    if isinstance(v, (int, float, bool)):
        return v
    return None


class GradNormTrainOneStepCell(nn.TrainOneStepCell):
    """``TrainOneStepCell`` that also returns the global gradient norm: ``(loss, grad_norm)``.

    ``Model.train`` does not expose gradients; returning every gradient to the
    host (``return_grad=True``) is expensive. This cell computes
    ``sqrt(sum of squared gradients)`` on the device after the gradient
    reduction (so data-parallel ranks agree) and returns one scalar.
    ``MstopCallback`` recognises it and fills the ``grad_norm`` column.
    """

    def construct(self, *inputs: Any) -> tuple[Any, Any]:
        loss = self.network(*inputs)
        grads = self.grad_no_sens(self.network, self.weights)(*inputs)
        grads = self.grad_reducer(grads)
        square_sum = ops.zeros((), ms.float32)
        for g in grads:
            square_sum = square_sum + ops.reduce_sum(ops.square(g.astype(ms.float32)))
        loss = ops.depend(loss, self.optimizer(grads))
        return loss, ops.sqrt(square_sum)


class MstopCallback(Callback):
    """Write one row per optimizer step (per sink in sink mode) and the job's events.

    Takes the options of :class:`~mstop_writer.MetricsWriter`; what it can find
    itself (rank, device, parameter count, samples per step, total steps) it
    fills in when not given. ``output_names`` names the elements of a tuple
    output of the train network (default: ``(loss, overflow, loss_scale)`` for
    three elements, ``(loss, grad_norm)`` for :class:`GradNormTrainOneStepCell`);
    names that are not base columns become extra columns.

    Put it last in the callback list: then checkpoint saving by an earlier
    ``ModelCheckpoint`` counts in the step's time, not as data wait.
    """

    def __init__(self, run_dir: Any, *, output_names: Sequence[str] | None = None, **options: Any) -> None:
        super().__init__()
        validate_options(**options)
        self.run_dir = run_dir
        self._options = options
        self._output_names = tuple(output_names) if output_names is not None else None
        self.writer: MetricsWriter | None = None
        self._last_raw = 0  # last global step written (without step_offset)
        self._base = 0
        self._call_first_epoch = True
        self._s0 = 0
        self._prev_cur = 0
        self._t_prev = 0.0
        self._t_begin = 0.0
        self._lr: Any = None
        self._lr_kind = "none"
        self._lr_list: Any = None
        self._lr_skip = 0
        self._lr_static = True
        self._step_ema = 0.0
        self._gstep = 0
        self._opt: Any = None
        self._ckpt: list[ModelCheckpoint] = []
        self._ckpt_seen: dict[int, str] = {}
        self._names: tuple[str, ...] = ("loss",)
        self._failed: set[str] = set()
        atexit.register(self.close)

    # -- hooks -----------------------------------------------------------------

    def on_train_begin(self, run_context: Any) -> None:
        """Remember where this ``Model.train`` call's step count starts."""
        try:
            cb = run_context.original_args()
            self._s0 = int(cb.cur_step_num or 0)
            self._call_first_epoch = True
            self._ckpt = [c for c in (cb.list_callback or []) if isinstance(c, ModelCheckpoint)]
            self._ckpt_seen = {id(c): c.latest_ckpt_file_name for c in self._ckpt}
        except Exception as e:  # noqa: BLE001
            self._warn("on_train_begin", e)

    def on_train_epoch_begin(self, run_context: Any) -> None:
        """Set up the writer (first time) and the step base of this call (first epoch of a call)."""
        try:
            cb = run_context.original_args()
            if self._call_first_epoch:
                self._call_first_epoch = False
                self._start_call(cb)
            # Time between epochs (evaluation, checkpoints at epoch end) is not data wait.
            self._t_prev = time.perf_counter()
        except Exception as e:  # noqa: BLE001
            self._warn("on_train_epoch_begin", e)

    def on_train_step_begin(self, run_context: Any) -> None:
        """Take the step's start time and its learning rate (``get_lr()`` at step end gives the next step's)."""
        self._t_begin = time.perf_counter()
        try:
            self._check_checkpoints(self._last_raw)
            self._lr = self._read_lr()
        except Exception as e:  # noqa: BLE001
            self._lr = None
            self._warn("on_train_step_begin", e)

    def on_train_step_end(self, run_context: Any) -> None:
        """Write the step's row: the loss is fetched to the host before the time is taken."""
        try:
            cb = run_context.original_args()
            values = self._outputs(cb.net_outputs)
            t_end = time.perf_counter()
            cur = cb.cur_step_num
            n = cur - self._prev_cur
            if n < 1:
                n = 1
            self._prev_cur = cur
            raw = cur + self._base
            step_time = (t_end - self._t_prev) / n
            self._step_ema = step_time if not self._step_ema else 0.9 * self._step_ema + 0.1 * step_time
            data_wait = max(0.0, self._t_begin - self._t_prev) / n
            queue_depth = None
            if cb.get("dataset_sink_mode") and cb.get("dataset_helper") is not None:
                queue_depth, fetch = self._sink_info(run_context, cb)
                if queue_depth == 0 and fetch is not None:
                    data_wait = min(fetch, step_time)  # device queue ran dry: the device waited on the host
                elif queue_depth is not None and queue_depth > 0:
                    data_wait = 0.0
            self._t_prev = t_end
            overflow = values.pop("overflow", None)
            if overflow is not None:
                overflow = bool(overflow)
            if self._lr_kind == "list" and not overflow:
                self._gstep += n
            # The row goes straight to the writer's row builder: log()'s keyword handling and
            # default step time are for hand-written loops and cost microseconds per step here.
            self.writer._row(  # type: ignore[union-attr]
                raw + self.writer.step_offset, cb.cur_epoch_num, values.pop("loss", None), self._lr,  # type: ignore[union-attr]
                values.pop("grad_norm", None), step_time, data_wait, queue_depth, None, None, overflow,
                values.pop("loss_scale", None), values,
            )
            self._last_raw = raw
            self._check_checkpoints(raw)
        except Exception as e:  # noqa: BLE001
            self._warn("on_train_step_end", e)

    def on_train_epoch_end(self, run_context: Any) -> None:
        """Record evaluation results that ``Model.fit`` set for this epoch."""
        try:
            cb = run_context.original_args()
            self._check_checkpoints(self._last_raw)
            metrics = cb.get("eval_results") or cb.get("metrics")
            if metrics and self.writer is not None:
                self.writer.event("eval", step=self._last_raw + self.writer.step_offset,
                                  epoch=cb.get("cur_epoch_num"), metrics=dict(metrics))
        except Exception as e:  # noqa: BLE001
            self._warn("on_train_epoch_end", e)

    def on_train_end(self, run_context: Any) -> None:
        """Record the clean end of this ``Model.train`` call."""
        try:
            self._check_checkpoints(self._last_raw)
            if self.writer is not None:
                self.writer.end()
        except Exception as e:  # noqa: BLE001
            self._warn("on_train_end", e)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None and self.writer is not None:
            self.writer.event("abort", step=self.writer.last_step, error=f"{exc_type.__name__}: {exc}")
            self.writer.close(clean=False)

    def close(self) -> None:
        """Stop the heartbeat and close the files (also run at interpreter exit)."""
        if self.writer is not None:
            self.writer.close()

    # -- internals ---------------------------------------------------------------

    def _start_call(self, cb: Any) -> None:
        batch_num = int(cb.batch_num or 0)
        e0 = int(cb.cur_epoch_num) - 1
        s0 = self._s0
        if e0 == 0 and s0 == 0 and self._last_raw:
            base = self._last_raw  # another Model.train call in this process: keep counting
        else:
            base = max(0, e0 * batch_num - s0)  # resume with initial_epoch: cur_step_num restarted
        self._base = base
        self._prev_cur = s0
        self._opt = cb.optimizer if cb.optimizer is not None else getattr(cb.train_network, "optimizer", None)
        self._setup_lr()
        if self._output_names is not None:
            self._names = self._output_names
        elif isinstance(cb.train_network, GradNormTrainOneStepCell):
            self._names = ("loss", "grad_norm")
        else:
            self._names = _LOSS_SCALE_OUTPUTS
        if self.writer is None:
            self.writer = MetricsWriter(self.run_dir, **self._auto_options(cb, batch_num, e0 + cb.epoch_num))
        self._t_prev = time.perf_counter()

    def _auto_options(self, cb: Any, batch_num: int, final_epoch: int) -> dict[str, Any]:
        opts = dict(self._options)
        if opts.get("n_params") is None and cb.network is not None:
            try:
                opts["n_params"] = int(sum(p.size for p in cb.network.trainable_params()))
            except Exception:  # noqa: BLE001
                pass
        mode = ms.get_auto_parallel_context("parallel_mode")
        opts.setdefault("parallel_mode", mode)
        if opts.get("samples_per_step") is None and cb.train_dataset is not None:
            try:
                opts["samples_per_step"] = cb.train_dataset.get_batch_size() * self._dp_size(mode, opts)
            except Exception:  # noqa: BLE001
                pass
        if opts.get("tokens_per_step") is None and opts.get("seq_len") and opts.get("samples_per_step"):
            opts["tokens_per_step"] = opts["samples_per_step"] * opts["seq_len"]
        if opts.get("total_steps") is None and batch_num > 0:
            opts["total_steps"] = final_epoch * batch_num + opts.get("step_offset", 0)
        return opts

    @staticmethod
    def _dp_size(mode: str, opts: dict[str, Any]) -> int:
        """How many ranks read distinct batches (pass ``samples_per_step`` when your layout differs)."""
        if mode == "stand_alone":
            return 1
        from .metrics import _resolve_rank

        world = _resolve_rank(opts.get("rank"), opts.get("world_size"))[1]
        if mode == "data_parallel":
            return world
        if ms.get_auto_parallel_context("full_batch"):
            return 1
        return max(1, world // max(1, int(ms.get_auto_parallel_context("pipeline_stages") or 1)))

    def _setup_lr(self) -> None:
        """Choose the cheapest exact way to read this optimizer's learning rate each step."""
        opt = self._opt
        self._lr_kind = "none"
        if opt is None or not hasattr(opt, "get_lr"):
            return
        if getattr(opt, "dynamic_lr", False) and not getattr(opt, "is_group_lr", False):
            inner = getattr(opt.learning_rate, "learning_rate", None)
            if inner is not None and hasattr(inner, "asnumpy") and inner.asnumpy().ndim == 1:
                # A list schedule: read the list once, index it by the optimizer's own step.
                self._lr_list = inner.asnumpy().astype(float)
                self._gstep = int(opt.global_step.asnumpy().reshape(-1)[0])
                self._lr_kind = "list"
                return
        self._lr_kind = "call"
        self._lr_skip = 0
        self._lr_static = not getattr(opt, "dynamic_lr", False)

    def _read_lr(self) -> Any:
        if self._lr_kind == "list":
            lst = self._lr_list
            return float(lst[min(self._gstep, len(lst) - 1)])
        if self._lr_kind != "call":
            return None
        # Reading a Parameter or running a LearningRateSchedule cell costs 25-250 us on
        # CPU: read it every k-th step so that reads take at most 1 % of the step time.
        self._lr_skip -= 1
        if self._lr_skip > 0:
            return self._lr if self._lr_static else None
        t0 = time.perf_counter()
        lr = self._opt.get_lr()
        if isinstance(lr, tuple):
            lr = lr[0]  # group learning rates: the first group's
        value = float(lr.asnumpy().reshape(-1)[0])
        cost = time.perf_counter() - t0
        self._lr_skip = max(1, math.ceil(cost / (LR_BUDGET * self._step_ema))) if self._step_ema else 1
        return value

    def _outputs(self, out: Any) -> dict[str, Any]:
        if isinstance(out, (tuple, list)):
            names = self._names
            return {name: _scalar(v) for name, v in zip(names, out)}
        return {"loss": _scalar(out)}

    def _sink_info(self, run_context: Any, cb: Any) -> tuple[Any, Any]:
        helper = cb["dataset_helper"]
        depth = fetch = None
        try:
            depth = int(helper.get_mbuf_queue_size())
        except Exception:  # noqa: BLE001 - only Ascend has the mbuf queue
            pass
        try:
            info = helper.get_send_info(run_context).epoch(cb.cur_epoch_num)
            ms_per_batch = float(info["fetch_data_time"])
            fetch = ms_per_batch / 1000.0 if math.isfinite(ms_per_batch) else None
        except Exception:  # noqa: BLE001
            pass
        return depth, fetch

    def _check_checkpoints(self, raw_step: int) -> None:
        if not self._ckpt or self.writer is None:
            return
        for c in self._ckpt:
            name = c.latest_ckpt_file_name
            if name and name != self._ckpt_seen.get(id(c)):
                self._ckpt_seen[id(c)] = name
                self.writer.checkpoint(raw_step, name)

    def _warn(self, where: str, e: BaseException) -> None:
        """Log a hook's failure once per hook (debug level after), never raise into MindSpore."""
        level = logging.DEBUG if where in self._failed else logging.WARNING
        self._failed.add(where)
        log.log(level, "mstop_writer: %s failed: %s: %s (training continues)", where, type(e).__name__, e)
