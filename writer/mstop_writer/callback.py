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

from .metrics import WRITER_OPTIONS, MetricsWriter, WriterOptions, check_keywords, check_name, resolve_rank
from .schema import COLUMNS

log = logging.getLogger("mstop_writer")

#: What the elements of a train cell's tuple output are, without configuration. The lengths follow
#: MindFormers' own reading of them (``MFLossMonitor``): 3, 4, 5 or 7 elements are ``(loss, overflow,
#: loss_scale[, lr[, global_norm[, local_norm, norm_size]]])`` -- MindSpore's ``TrainOneStepWithLossScaleCell``
#: (3) and MindFormers' ``MFTrainOneStepCell`` / ``MFPipelineWithLossScaleCell`` (5, or 7 with local norms).
#: A 2-tuple is named only for :class:`GradNormTrainOneStepCell`; any other tuple gives its first element as
#: the loss. ``None`` leaves an element out.
OUTPUTS_BY_LENGTH: dict[int, tuple[str | None, ...]] = {
    3: ("loss", "overflow", "loss_scale"),
    4: ("loss", "overflow", "loss_scale", "lr"),
    5: ("loss", "overflow", "loss_scale", "lr", "grad_norm"),
    7: ("loss", "overflow", "loss_scale", "lr", "grad_norm", None, None),
}
#: Base columns that ``output_names`` may fill from the cell's output (the rest the writer fills itself).
OUTPUT_COLUMNS = ("loss", "lr", "grad_norm", "overflow", "loss_scale", "tokens", "samples", "queue_depth")
#: Options of MstopCallback: the writer's, less what only the callback itself may set.
CALLBACK_OPTIONS = (WRITER_OPTIONS - {"detected_from"}) | {"output_names"}
#: Largest share of the step time spent reading a learning rate schedule (a ``LearningRateSchedule`` cell).
LR_BUDGET = 0.01
#: Seconds between two reads of a fixed learning rate (a Parameter only an assignment changes): rows in
#: between repeat the last value read.
LR_FIXED_EVERY = 1.0


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

    def __init__(self, run_dir: Any, *, output_names: Sequence[str | None] | None = None, **options: Any) -> None:
        super().__init__()
        check_keywords(type(self).__name__, options, CALLBACK_OPTIONS)
        self.run_dir = run_dir
        self._options = WriterOptions(**options)  # checked now, before training; filled in at the start
        self._output_names = _check_output_names(output_names)
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
        self._lr_due = 0.0
        self._step_ema = 0.0
        self._gstep = 0
        self._opt: Any = None
        self._ckpt: list[ModelCheckpoint] = []
        self._ckpt_seen: dict[int, str] = {}
        self._names: tuple[str | None, ...] = ("loss",)
        self._lr_out = False  # the cell returns the lr: used on every row, never read from the optimizer
        self._failed: set[str] = set()
        self._mf_monitor: Any = None  # MindFormers' MFLossMonitor in the same job: its batch and loss rules
        self._loss_divisor = 1.0
        atexit.register(self.close)

    # -- hooks -----------------------------------------------------------------


    @property
    def options(self) -> WriterOptions:
        """The writer options the callback was given, as checked when it was made (read-only)."""
        return self._options
    def on_train_begin(self, run_context: Any) -> None:
        """Remember where this ``Model.train`` call's step count starts."""
        try:
            cb = run_context.original_args()
            self._s0 = int(cb.cur_step_num or 0)
            self._call_first_epoch = True
            self._ckpt = [c for c in (cb.list_callback or []) if isinstance(c, ModelCheckpoint)]
            self._mf_monitor = next((c for c in (cb.list_callback or []) if type(c).__name__ == "MFLossMonitor"),
                                    None)
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
            if not self._lr_out:
                self._lr = self._read_lr()
        except Exception as e:  # noqa: BLE001
            self._lr = None
            self._warn("on_train_step_begin", e)

    def on_train_step_end(self, run_context: Any) -> None:
        """Write the step's row: the loss is fetched to the host before the time is taken."""
        if self.writer is None:
            return  # the writer could not start (said once, and in the run directory)
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
            lr = values.pop("lr", None) if self._lr_out else self._lr
            writer = self.writer
            # The row goes straight to write_row: log()'s step conversion and default step time are for
            # hand-written loops; the callback measured the step itself.
            try:
                writer.write_row(  # type: ignore[union-attr]
                    raw + writer.step_offset, step_time=step_time, epoch=cb.cur_epoch_num,  # type: ignore[union-attr]
                    loss=_divided(values.pop("loss", None), self._loss_divisor), lr=lr,
                    grad_norm=values.pop("grad_norm", None),
                    data_wait=data_wait, queue_depth=values.pop("queue_depth", queue_depth),
                    tokens=values.pop("tokens", None), samples=values.pop("samples", None), overflow=overflow,
                    loss_scale=values.pop("loss_scale", None), extra=values)
            except Exception as e:  # noqa: BLE001 - bad values from the cell: a counted, reported drop
                writer.reject(f"row for step {raw} not written: {type(e).__name__}: {e}",  # type: ignore[union-attr]
                              type(e).__name__)
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
            self.writer.event("abort", step=self.writer.last_step, error=f"{exc_type.__name__}: {exc}",
                              session=self.writer.session)
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
        self._opt = cb.optimizer if cb.optimizer is not None else _find_optimizer(cb.train_network)
        self._setup_lr()
        self._train_cell = cb.train_network
        self._names = self._output_names or ()
        self._lr_out = "lr" in self._names
        if self.writer is None:
            try:
                self.writer = MetricsWriter(self.run_dir,
                                            WriterOptions(**self._auto_options(cb, batch_num, e0 + cb.epoch_num)))
            except Exception as e:
                _report_failure(self.run_dir, self._options, e)
                raise
        self._t_prev = time.perf_counter()

    def _auto_options(self, cb: Any, batch_num: int, final_epoch: int) -> dict[str, Any]:
        """The options given, with what the job tells filled in where not given (and where each came from)."""
        opts = self._options.as_dict()
        found: dict[str, str] = {}
        if opts.get("n_params") is None:
            try:
                n, how = count_parameters(self._opt, cb.network if cb.network is not None else cb.train_network)
                if n:
                    opts["n_params"], found["n_params"] = n, how
            except Exception:  # noqa: BLE001
                pass
        self._fill_shape(opts, found, cb.network if cb.network is not None else cb.train_network)
        opts["detected_from"] = found
        mode = ms.get_auto_parallel_context("parallel_mode")
        if opts["parallel_mode"] is None:
            opts["parallel_mode"] = mode
        self._from_mindformers(opts, found)
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

    def _from_mindformers(self, opts: dict[str, Any], found: dict[str, str]) -> None:
        """With MindFormers' MFLossMonitor in the job: the global batch it divides by, and its loss rule (it
        prints the cell's loss divided by gradient accumulation steps, pipeline micro batches and interleave
        copies: the mean loss of a sample), so that rows and MindFormers' log say the same."""
        mon = self._mf_monitor
        if mon is None:
            return
        gbs = getattr(mon, "global_batch_size", None)
        if opts.get("samples_per_step") is None and isinstance(gbs, int) and gbs > 0:
            opts["samples_per_step"], found["samples_per_step"] = gbs, "MFLossMonitor.global_batch_size"
        div = 1.0
        per_token = bool(getattr(mon, "calculate_per_token_loss", False))
        if int(ms.get_auto_parallel_context("pipeline_stages") or 1) > 1 and not per_token:
            div *= max(1, int(getattr(mon, "mirco_size", 1) or 1))  # (sic) MindFormers' attribute name
        div *= max(1, int(getattr(mon, "micro_batch_interleave_num", 1) or 1))
        if not per_token:
            div *= max(1, int(getattr(mon, "gradient_accumulation_steps", 1) or 1))
        self._loss_divisor = div
        if div != 1.0:
            found["loss"] = f"the cell's loss / {div:g}, as MFLossMonitor prints it"

    @staticmethod
    def _fill_shape(opts: dict[str, Any], found: dict[str, str], network: Any) -> None:
        """The MFU formula's model shape from the network's config, for each of n_layers, n_heads, head_dim
        and seq_len the user did not give (a given flops_per_token needs none); ``found`` says where from."""
        if opts.get("flops_per_token") is not None or all(opts.get(k) is not None for k in SHAPE_KEYS):
            return
        try:
            shape, source = model_shape(network)
        except Exception:  # noqa: BLE001 - detection must never stop training
            return
        for key in SHAPE_KEYS:
            if opts.get(key) is None and key in shape:
                opts[key], found[key] = shape[key], source

    @staticmethod
    def _dp_size(mode: str, opts: dict[str, Any]) -> int:
        """How many ranks read distinct batches (pass ``samples_per_step`` when your layout differs)."""
        if mode == "stand_alone":
            return 1
        world = resolve_rank(opts.get("rank"), opts.get("world_size"))[1]
        if mode == "data_parallel":
            return world
        if ms.get_auto_parallel_context("full_batch"):
            return 1
        strategy = ms.get_auto_parallel_context("dataset_strategy")
        if isinstance(strategy, (tuple, list)) and strategy and isinstance(strategy[0], (tuple, list)) and \
                strategy[0] and isinstance(strategy[0][0], int) and strategy[0][0] > 0:
            return strategy[0][0]  # the batch dimension's split: the data-parallel ranks (MindFormers sets it)
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
        self._lr_due = 0.0
        self._lr_static = not getattr(opt, "dynamic_lr", False)

    def _read_lr(self) -> Any:
        if self._lr_kind == "list":
            lst = self._lr_list
            return float(lst[min(self._gstep, len(lst) - 1)])
        if self._lr_kind != "call":
            return None
        # Reading a Parameter or running a LearningRateSchedule cell costs 25-250 us on CPU. A fixed lr
        # changes only when the job assigns it: read once a second. A schedule: every k-th step, so that
        # reads take at most LR_BUDGET of the step time.
        if self._lr_static:
            now = time.perf_counter()
            if now < self._lr_due:
                return self._lr
            self._lr_due = now + LR_FIXED_EVERY
            return self._lr_now()
        self._lr_skip -= 1
        if self._lr_skip > 0:
            return None
        t0 = time.perf_counter()
        value = self._lr_now()
        cost = time.perf_counter() - t0
        self._lr_skip = max(1, math.ceil(cost / (LR_BUDGET * self._step_ema))) if self._step_ema else 1
        return value

    def _lr_now(self) -> float:
        """The optimizer's learning rate now (group learning rates: the first group's)."""
        lr = self._opt.get_lr()
        if isinstance(lr, tuple):
            lr = lr[0]
        return float(lr.asnumpy().reshape(-1)[0])

    def _outputs(self, out: Any) -> dict[str, Any]:
        if isinstance(out, (tuple, list)):
            names = self._names
            if not names:  # the first output: name its elements once
                names = self._names = self._default_names(len(out))
                self._lr_out = "lr" in names
            return {name: _scalar(v) for name, v in zip(names, out) if name}
        return {"loss": _scalar(out)}

    def _default_names(self, n: int) -> tuple[str | None, ...]:
        """The names of an n-element output when ``output_names`` is not given (see OUTPUTS_BY_LENGTH)."""
        if isinstance(self._train_cell, GradNormTrainOneStepCell) and n == 2:
            return ("loss", "grad_norm")
        return OUTPUTS_BY_LENGTH.get(n, ("loss",))

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
        if self.writer is not None:
            self.writer._error_event(f"{where} failed: {type(e).__name__}: {e}", kind=f"hook:{where}")
        self._log_failure(where, e)

    def _log_failure(self, where: str, e: BaseException) -> None:
        """Log a hook's failure once per hook (debug level after), never raise into MindSpore."""
        level = logging.DEBUG if where in self._failed else logging.WARNING
        self._failed.add(where)
        log.log(level, "mstop_writer: %s failed: %s: %s (training continues)", where, type(e).__name__, e)


def _divided(loss: Any, by: float) -> Any:
    """The loss as MindFormers prints it (see MstopCallback._from_mindformers)."""
    return loss / by if by != 1.0 and isinstance(loss, (int, float)) and not isinstance(loss, bool) else loss


def _check_output_names(names: Sequence[str | None] | None) -> tuple[str | None, ...] | None:
    """``output_names`` checked before training: base columns a cell can return, or extra column names."""
    if names is None:
        return None
    if isinstance(names, str):
        raise ValueError(f"output_names must be a list of names, got the string {names!r}")
    out: list[str | None] = []
    for name in names:
        if name is None or name == "":
            out.append(None)  # leave this element out
        elif name in OUTPUT_COLUMNS:
            out.append(name)
        else:
            try:
                out.append(check_name(name))
            except ValueError:
                if isinstance(name, str) and name in COLUMNS:
                    raise ValueError(f"output_names: {name!r} is a column the writer fills itself; a cell's output "
                                     f"can fill {', '.join(OUTPUT_COLUMNS)} or extra columns") from None
                raise
    named = [n for n in out if n]
    if len(set(named)) != len(named):
        raise ValueError(f"output_names has duplicates: {list(names)}")
    return tuple(out)


#: the writer options that describe the model's shape (6N + 12 L H Q T needs them)
SHAPE_KEYS = ("n_layers", "n_heads", "head_dim", "seq_len")
#: a model config's names for the shape the MFU formula needs (MindFormers' first, then Hugging Face's)
SHAPE_NAMES = {"n_layers": ("num_layers", "num_hidden_layers", "n_layer"),
               "n_heads": ("num_heads", "num_attention_heads", "n_head"),
               "seq_len": ("seq_length", "seq_len")}


def model_shape(network: Any) -> tuple[dict[str, int], str | None]:
    """The model's layers, heads, head size and sequence length from the ``config`` of the network or the
    first cell inside it that has one (a MindFormers model keeps its ``LlamaConfig`` there), and where they
    came from (``LlamaForCausalLM.config``); empty when no cell has a config with layers and heads."""
    cells = [("", network)]
    try:
        cells += list(network.cells_and_names())
    except Exception:  # noqa: BLE001 - not a Cell
        pass
    for _, cell in cells:
        cfg = getattr(cell, "config", None)
        if cfg is None:
            continue
        found = {}
        for key, names in SHAPE_NAMES.items():
            v = next((getattr(cfg, n) for n in names if isinstance(getattr(cfg, n, None), int)), None)
            if v is not None and not isinstance(v, bool) and v > 0:
                found[key] = v
        hidden = getattr(cfg, "hidden_size", None)
        if "n_layers" in found and "n_heads" in found:
            head_dim = getattr(cfg, "head_dim", None)
            if isinstance(head_dim, int) and head_dim > 0:
                found["head_dim"] = head_dim
            elif isinstance(hidden, int) and hidden % found["n_heads"] == 0:
                found["head_dim"] = hidden // found["n_heads"]
            return found, f"{type(cell).__name__}.config"
    return {}, None


def _find_optimizer(cell: Any) -> Any:
    """The optimizer a pre-built train cell holds (``TrainOneStepCell.optimizer``), or the first optimizer
    cell inside it; None when there is none."""
    if cell is None:
        return None
    opt = getattr(cell, "optimizer", None)
    if isinstance(opt, nn.Optimizer):
        return opt
    try:
        return next((c for _, c in cell.cells_and_names() if isinstance(c, nn.Optimizer)), None)
    except Exception:  # noqa: BLE001
        return None


def count_parameters(optimizer: Any, network: Any) -> tuple[int, str]:
    """The model's parameter count for FLOPs: the parameters the optimizer updates, each once; without an
    optimizer, the network's trainable parameters minus those that optimizer cells own (Adam's moments,
    ``global_step``) and the train cell's own (``scale_sense``). A pre-built train cell's
    ``trainable_params()`` hold all of those: 3x the model for Adam."""
    if optimizer is not None:
        params = getattr(optimizer, "_parameters", None) or getattr(optimizer, "parameters", None)
        if params is not None:
            seen: dict[int, Any] = {id(p): p for p in params}
            if seen:
                return int(sum(p.size for p in seen.values())), "parameters the optimizer updates"
    if network is None:
        return 0, "none"
    model = network
    inner = getattr(network, "network", None)  # TrainOneStepCell(WithLossCell(net), opt).network
    if isinstance(inner, nn.Cell) and isinstance(getattr(network, "optimizer", None), nn.Optimizer):
        model = inner
    owned: set[int] = set()  # what optimizer cells hold beside the parameters they update: their state
    for _, c in network.cells_and_names():
        if isinstance(c, nn.Optimizer):
            updated = {id(p) for p in (getattr(c, "_parameters", None) or ())}
            owned |= {id(p) for p in c.get_parameters()} - updated
    if model is not network:
        # the train cell's own, beside the model's (scale_sense)
        owned |= {id(p) for p in network.get_parameters(expand=False)} - {id(p) for p in model.get_parameters()}
    params = {id(p): p for p in model.trainable_params() if id(p) not in owned}
    return int(sum(p.size for p in params.values())), "trainable parameters of the network (optimizer state left out)"


def _report_failure(run_dir: Any, options: WriterOptions, e: BaseException) -> None:
    """The writer could not be made: say so in the rank's events file where we can, so readers show
    "writer failed: ..." instead of a run that never starts (never raises itself)."""
    import json
    import os

    from .schema import events_name

    try:
        try:
            rank = resolve_rank(options.rank, options.world_size)[0]
        except Exception:  # noqa: BLE001
            rank = 0
        path = os.path.join(os.fspath(run_dir), events_name(max(0, int(rank))))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        line = json.dumps({"time": time.time(), "kind": "writer_error", "message": f"{type(e).__name__}: {e}",
                           "session": None, "step": None}) + "\n"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0),
                     0o644)  # a link planted at the path is never followed (ELOOP: warned below)
        try:
            if os.path.isfile(path):
                os.write(fd, line.encode())
        finally:
            os.close(fd)
    except Exception as err:  # noqa: BLE001
        log.warning("mstop_writer: could not record the writer's failure: %s", err)
