"""``MetricsWriter``: one rank's metric rows and events, written as plain files.

Standard library only. MindSpore is used when the job has already imported it
(rank, device and device memory), never imported here.
"""

from __future__ import annotations

import json
import logging
import math
import os
import platform
import socket
import stat
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Callable

from ._cells import NEEDS_QUOTES
from ._cells import cell as _cell
from ._cells import cells as _cells
from ._files import LifeLock, LineFile, read_regular
from ._version import __version__
from .devices import device_id_of
from .hardware import flops_per_token as _flops_formula
from .hardware import host_memory_limit, host_peak_rss, host_rss, lookup_peak
from .schema import (
    COLUMNS,
    DEVICE_INTERVAL,
    HEARTBEAT_INTERVAL,
    SCHEMA_VERSION,
    csv_name,
    events_name,
    mfu_too_high,
    stacks_name,
    wait_too_long,
)

log = logging.getLogger("mstop_writer")

_BASE = set(COLUMNS)
def _num(v: Any) -> float | None:
    """``v`` as a float, or None when it is unknown or not a number."""
    if v is None:
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _jsonable(v: Any) -> Any:
    """Make ``v`` strict JSON: non-finite floats become the strings ``nan``/``inf``/``-inf``."""
    if isinstance(v, bool) or v is None or isinstance(v, (int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else repr(v)
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    f = _num(v)
    return _jsonable(f) if f is not None else str(v)


def check_name(name: str) -> str:
    if not isinstance(name, str) or not name or name != name.strip() or NEEDS_QUOTES.intersection(name):
        raise ValueError(f"extra column name {name!r}: use a non-empty name without commas, quotes or line breaks")
    if name in _BASE:
        raise ValueError(f"extra column {name!r} is a base column: log it through its own argument")
    return name


def _number(name: str, v: Any) -> float:
    """``v`` as a finite-or-not float: numbers, numpy scalars and numeric strings (PyYAML reads ``1.0e12``
    as a string) are taken; anything else is a ``ValueError`` naming the option."""
    if isinstance(v, bool):
        raise ValueError(f"{name} must be a number, got {v!r}")
    if isinstance(v, str):
        try:
            return float(v.strip().replace("_", ""))
        except ValueError:
            raise ValueError(f"{name} must be a number, got the text {v!r}") from None
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be a number, got {v!r}") from None


def _positive(name: str, v: Any, *, integer: bool = False, allow_zero: bool = False) -> Any:
    """A checked option value (None stays None): a positive number, or a whole one for counts.

    A count given as an integral float (``n_params=540.35e9``, ``7e9``) is taken as that whole number."""
    if v is None:
        return None
    f = _number(name, v)
    if not math.isfinite(f) or f < 0 or (f == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'zero or more' if allow_zero else 'positive'}, got {v!r}")
    if integer:
        if f != int(f):
            raise ValueError(f"{name} must be a whole number, got {v!r}")
        if isinstance(v, int):
            return v
        return int(f)
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else f


def check_keywords(owner: str, given: Iterable[str], valid: Iterable[str]) -> None:
    """Raise ``TypeError`` for a keyword that is not an option, naming the nearest valid one: a misspelled
    option must stop the job before training, not leave it running with no metrics."""
    import difflib

    valid = sorted(valid)
    for name in given:
        if name not in valid:
            near = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
            hint = f"; did you mean {near[0]!r}?" if near else f"; valid options: {', '.join(valid)}"
            raise TypeError(f"{owner}() got an unexpected keyword argument {name!r}{hint}")


#: the environment variables a start event records (the framework's, its launcher's, the collective library's,
#: the device runtime's, its logging): only these, never others (they may hold secrets)
ENV_PREFIXES = ("MS_", "RANK_", "HCCL_", "ASCEND_", "GLOG_")
#: where a CANN toolkit and an Ascend driver say their version (the first file found; ``ASCEND_HOME_PATH`` or
#: ``ASCEND_TOOLKIT_HOME`` first when set)
CANN_VERSION_FILES = ("compiler/version.info", "runtime/version.info", "version.cfg")
CANN_HOMES = ("/usr/local/Ascend/ascend-toolkit/latest", "/usr/local/Ascend/latest")
DRIVER_VERSION_FILE = "/usr/local/Ascend/driver/version.info"


def _version_in(path: str) -> str | None:
    """The version a CANN or driver version file holds (a ``Version=8.0.RC2`` line; a ``version.cfg``'s
    ``runtime_running_version=[...]`` as written), or None when absent or unreadable."""
    try:
        with open(path, "rb") as f:
            text = f.read(8192).decode("utf-8", "replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        key, value = key.strip().lower(), value.strip().strip("[]")
        if key in ("version", "package_version", "runtime_running_version") and value:
            return value[:64]
    return None


def versions(ms: Any) -> dict[str, str | None]:
    """What the rank runs on, to tell a rank that differs from its peers: Python, MindSpore, the CANN toolkit
    and the Ascend driver (None where absent: a CPU machine has neither)."""
    homes = [os.environ.get(k) for k in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME")] + list(CANN_HOMES)
    cann = next((v for h in homes if h for v in (_version_in(os.path.join(h, f)) for f in CANN_VERSION_FILES)
                 if v), None)
    return {"python": platform.python_version(), "mindspore": getattr(ms, "__version__", None) if ms else None,
            "cann": cann, "driver": _version_in(DRIVER_VERSION_FILE)}


def parallel_settings(ms: Any) -> dict[str, Any]:
    """MindSpore's parallel context as the job set it (its mode, device count, pipeline stages, gradient
    accumulation, ...): a rank is compared with the ranks of its own pipeline stage. Empty without MindSpore."""
    out: dict[str, Any] = {}
    if ms is None:
        return out
    for key in ("parallel_mode", "device_num", "pipeline_stages", "full_batch", "gradients_mean",
                "enable_parallel_optimizer", "grad_accumulation_step"):
        try:
            value = ms.get_auto_parallel_context(key)
        except Exception:  # noqa: BLE001, S112 - a key an older MindSpore lacks: left out
            continue
        if isinstance(value, (bool, int, float, str)) or value is None:
            out[key] = value
    return out


def _mindspore() -> Any:
    """The mindspore module if the job imported it, else None (never imports it)."""
    return sys.modules.get("mindspore")


def resolve_rank(rank: int | None, world_size: int | None) -> tuple[int, int, str]:
    """(rank, world size, where they came from): the given values, else MindSpore's communication when it is
    initialised, else ``RANK_ID``/``RANK_SIZE`` as msrun sets them, else 0 and 1."""
    if rank is not None and world_size is not None:
        return rank, world_size, "given"
    ms = _mindspore()
    if ms is not None:
        try:
            from mindspore.communication import get_group_size, get_rank
            from mindspore.communication.management import GlobalComm

            if GlobalComm.INITED:
                return (get_rank() if rank is None else rank,
                        get_group_size() if world_size is None else world_size, "mindspore.communication")
        except Exception:  # noqa: BLE001 - any failure means: not initialised
            pass
    env_rank, env_size = os.environ.get("RANK_ID"), os.environ.get("RANK_SIZE")
    try:
        r = int(env_rank) if rank is None and env_rank is not None else rank
        w = int(env_size) if world_size is None and env_size is not None else world_size
    except ValueError:
        raise ValueError(f"RANK_ID={env_rank!r} / RANK_SIZE={env_size!r} are not whole numbers") from None
    source = "environment" if (env_rank is not None or env_size is not None) else "default"
    return (0 if r is None else r), (1 if w is None else w), source


def _detect_device() -> tuple[str | None, str | None]:
    """(device name, device target) from MindSpore's context when it is imported."""
    ms = _mindspore()
    if ms is None:
        return None, None
    try:
        target = ms.get_context("device_target")
    except Exception:  # noqa: BLE001
        return None, None
    if target == "CPU":
        return "CPU", target
    try:
        import mindspore.hal as hal

        return str(hal.get_device_name(int(os.environ.get("DEVICE_ID", "0")))), target
    except Exception:  # noqa: BLE001
        return target, target


def log_files() -> list[str]:
    """Where this process's standard output and error go when they are regular files (msrun's
    ``worker_<N>.log``, ``nohup``'s ``nohup.out``, ``> train.log 2>&1``): the rank's own log, which the monitor
    opens beside its figures (its ``L`` key). Read from ``/proc/self/fd`` (Linux); nothing elsewhere, nor
    for a terminal, a pipe or a deleted file. Never opens anything."""
    out: list[str] = []
    for fd in (1, 2):
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if os.path.isabs(path) and not path.endswith(" (deleted)") and path not in out:
            out.append(path)
    return out


def _git_commit(start: str) -> str | None:
    """The commit checked out in the working directory's repository, read from ``.git`` directly."""
    d = os.path.abspath(start)
    while True:
        git = os.path.join(d, ".git")
        if os.path.isdir(git):
            break
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent
    def text(name: str) -> str:  # a regular file only: a FIFO planted in .git must not block the job
        return read_regular(os.path.join(git, name), 1 << 20).decode("utf-8", "replace")

    try:
        head = text("HEAD").strip()
        if not head.startswith("ref: "):
            return head or None
        ref = head[5:]
        try:
            return text(ref).strip() or None
        except OSError:
            for line in text("packed-refs").splitlines():
                if line.rstrip().endswith(" " + ref):
                    return line.split()[0]
    except OSError:
        return None
    return None


#: Options that are counts (whole numbers) and amounts (numbers) of :class:`MetricsWriter`.
_COUNTS = ("n_params", "n_layers", "n_heads", "head_dim", "seq_len", "total_steps")
_AMOUNTS = {"tokens_per_step": True, "samples_per_step": True, "flops_per_token": False, "peak_flops": False,
            "heartbeat_interval": False, "memory_interval": True, "device_interval": True,
            "stack_after": True}  # name -> zero allowed


#: seconds close() waits for a profile being summarised (training is over by then; the analysis takes
#: seconds on CPU, more for a long Ascend window)
PROFILE_WAIT = 120.0


def _profile_steps(v: Any) -> tuple[int, int] | None:
    """``profile_steps`` as (first, last) whole steps, first >= 2 (the step before starts the profiler)."""
    if v is None:
        return None
    try:
        first, last = (int(x) for x in v)
    except (TypeError, ValueError):
        raise ValueError(f"profile_steps must be (first, last) steps, got {v!r}") from None
    if first < 2 or last < first:
        raise ValueError(f"profile_steps must be (first, last) with 2 <= first <= last, got {v!r}")
    return first, last


def _normalised(options: dict[str, Any]) -> dict[str, Any]:
    """Every option (all of WriterOptions' fields) with numbers normalised (numeric strings and integral
    floats taken), or ``ValueError`` for options that cannot describe a training job (before it starts)."""
    out = dict(options)
    for name, zero in _AMOUNTS.items():
        out[name] = _positive(name, out[name], allow_zero=zero)
    for name in _COUNTS:
        out[name] = _positive(name, out[name], integer=True)
    for name in ("rank", "world_size"):
        out[name] = _positive(name, out[name], integer=True, allow_zero=name == "rank")
    out["profile_steps"] = _profile_steps(out["profile_steps"])
    v = _positive("step_offset", out["step_offset"], integer=True, allow_zero=True)
    out["step_offset"] = 0 if v is None else v
    extra = out["extra_columns"]
    if isinstance(extra, str):
        raise ValueError(f"extra_columns must be a list of names, got the string {extra!r}")
    if extra:
        extras = [check_name(c) for c in extra]
        if len(set(extras)) != len(extras):
            raise ValueError(f"extra_columns has duplicates: {extras}")
        out["extra_columns"] = tuple(extras)  # a tuple even when given as a generator (read once, here)
    else:
        out["extra_columns"] = ()
    for name in ("run_name", "note", "device", "parallel_mode"):
        if out.get(name) is not None and not isinstance(out[name], str):
            out[name] = str(out[name])
    return out


@dataclass(frozen=True)
class WriterOptions:
    """Every option of :class:`MetricsWriter` (``MstopCallback`` takes the same ones), checked and
    normalised once, here: numbers may be numeric strings (YAML reads ``1.0e12`` as one) and counts
    integral floats (``7e9``); an option that cannot describe a training job is a ``ValueError`` before
    training starts. Build it with :meth:`of` for a misspelled name's ``TypeError`` naming the nearest
    option. Adding an option is adding a field here."""

    rank: int | None = None
    world_size: int | None = None
    run_name: str | None = None
    note: str | None = None
    tokens_per_step: float | None = None
    samples_per_step: float | None = None
    flops_per_token: float | None = None
    n_params: int | None = None
    n_layers: int | None = None
    n_heads: int | None = None
    head_dim: int | None = None
    seq_len: int | None = None
    peak_flops: float | None = None
    device: str | None = None
    extra_columns: Iterable[str] = ()
    step_offset: int = 0
    total_steps: int | None = None
    parallel_mode: str | None = None
    heartbeat_interval: float = HEARTBEAT_INTERVAL
    memory_interval: float = 1.0
    #: seconds between two samples of the host's NPUs with npu-smi (one process per host; 0: never)
    device_interval: float = DEVICE_INTERVAL
    #: the unix time written in ``time`` columns (injectable for tests; durations use perf_counter)
    clock: Callable[[], float] = time.time
    #: for options the caller filled in itself (``MstopCallback``), where each came from
    detected_from: Mapping[str, str] | None = None
    profile_steps: tuple[int, int] | None = None
    #: seconds a step may run before every thread's stack is written to ``rank<R>.stacks.txt``
    #: (mstop_writer.stacks); None: max(60 s, 20 x the median step); 0: never (fatal stacks still are)
    stack_after: float | None = None
    #: start the exit witness beside the rank (mstop_writer.witness): its exit, process facts and stacks
    witness: bool = True

    def __post_init__(self) -> None:
        for name, value in _normalised(self.as_dict()).items():
            object.__setattr__(self, name, value)

    @classmethod
    def of(cls, owner: str, keywords: Mapping[str, Any]) -> WriterOptions:
        """The options from keywords, a name that is no option a ``TypeError`` naming ``owner`` and the
        nearest option."""
        check_keywords(owner, keywords, WRITER_OPTIONS)
        return cls(**keywords)

    def as_dict(self) -> dict[str, Any]:
        """Every option by name."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


#: The keyword options of :class:`MetricsWriter` (``MstopCallback`` takes the same ones).
WRITER_OPTIONS = frozenset(f.name for f in fields(WriterOptions))


class MetricsWriter:
    """Write one rank's metric rows (``rank<R>.csv``) and events (``rank<R>.events.jsonl``).

    Never raises into the training job once constructed: I/O errors are logged
    once (``logging`` logger ``mstop_writer``), rows are counted as dropped and
    a ``dropped`` event is written when writing works again. Wrong options raise
    ``ValueError`` at construction, before training starts.

    Its options are the fields of :class:`WriterOptions`, given as keywords
    (``MetricsWriter(run, rank=0, tokens_per_step=4096)``) or as one
    ``WriterOptions``; a misspelled keyword is a ``TypeError`` naming the
    nearest option. The ``start`` event records them, and ``detected_from``
    (where options the caller filled in itself came from).
    """

    def __init__(self, run_dir: str | os.PathLike[str], options: WriterOptions | None = None,
                 **keywords: Any) -> None:
        if options is not None and keywords:
            raise TypeError("MetricsWriter() takes options or keywords, not both")
        o = options if options is not None else WriterOptions.of(type(self).__name__, keywords)
        self.rank, self.world_size, rank_source = resolve_rank(o.rank, o.world_size)
        if self.rank < 0 or self.world_size < 1 or self.rank >= self.world_size:
            raise ValueError(f"rank {self.rank} is not in a world of {self.world_size}")
        self.run_dir = os.fspath(run_dir)
        self.session = uuid.uuid4().hex[:12]
        self.tokens_per_step = o.tokens_per_step
        self.samples_per_step = o.samples_per_step
        self.step_offset = o.step_offset
        self._clock = o.clock
        self._warned: set[str] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._last_step: int | None = None
        self._ended_at = -1
        self._rejected = 0  # rows refused for bad input since the last dropped event
        self._told: set[str] = set()  # writer_error kinds already written
        self._next_report = 0.0
        start = self._hardware(o)
        self._open_files(list(o.extra_columns), o.memory_interval)
        steps = o.profile_steps
        watch = self._watch_process(o)
        # the life lock on the events file, made by the first write (the start event says whether it is held);
        # as the witness, only for a writer on the system's clock (a given clock replays times: no live process)
        self._life = LifeLock(self.events_path)
        with self._lock:
            if o.clock is time.time and self._events.opened():
                self._life.keep()
        self.event("start", **self._start_fields(o, start, rank_source, o.detected_from or {}), profile_steps=steps,
                   life_lock=self._life.held, **watch)
        self.profile = self._profile_window(steps)
        self.devices = self._device_sampler(o.device_interval)
        self._hb_stop = threading.Event()
        self._hb = threading.Thread(target=self._heartbeat, args=(o.heartbeat_interval,),
                                    name=f"mstop-heartbeat-{self.rank}", daemon=True)
        self._hb.start()

    def _hardware(self, o: WriterOptions) -> dict[str, Any]:
        """FLOPs per token, the device and its peak, the memory total: what MFU and headroom are measured
        against. Returns the start event's fields that say where each came from."""
        fpt, fpt_source = (o.flops_per_token, "given") if o.flops_per_token else _flops_formula(
            n_params=o.n_params, n_layers=o.n_layers, n_heads=o.n_heads, head_dim=o.head_dim,
            seq_len=o.seq_len)
        self.flops_per_token: float | None = fpt
        detected, self._target = _detect_device()
        self.device = o.device or detected
        if o.peak_flops:
            self.peak_flops: float | None = float(o.peak_flops)
            peak_source = "given"
        else:
            peak = lookup_peak(self.device)
            self.peak_flops, peak_source = (peak.flops, peak.source) if peak else (None, None)
            if peak is None and o.device is not None and o.device.upper() != "CPU":
                self._warn(f"unknown device {o.device!r}: no MFU is written; pass peak_flops=FLOP/s of one "
                           "device", key="device")
        self._mfu_scale = (fpt / (self.world_size * self.peak_flops)) if fpt and self.peak_flops else None
        self._mem_device = self._target in ("Ascend", "GPU")
        self._mem_total, mem_detail = self._memory_total()
        return {"peak_flops_source": peak_source, "flops_per_token": fpt, "flops_per_token_source": fpt_source,
                "memory_detail": mem_detail}

    def _open_files(self, extras: list[str], memory_interval: float) -> None:
        """The rank's two files (opened at the first write) and the row state."""
        self._mem_interval = memory_interval
        self._mem_next = 0.0
        self._look_next = 0.0
        self._mem_cache: tuple[Any, Any, Any] = (None, None, self._mem_total)
        self._mem_cells = ",".join(map(_cell, self._mem_cache))
        self._extra = extras
        self._extra_set = frozenset(extras)
        self._columns_fixed = False
        self._row_count = 0
        self._t_prev = time.perf_counter()
        self.csv_path = os.path.join(self.run_dir, csv_name(self.rank))
        self.events_path = os.path.join(self.run_dir, events_name(self.rank))
        # the files are looked at (still ours? renamed away?) on the writer's clock: a replay's or a test's
        # clock (clock=) decides when, as it decides the rows' times
        clock = time.monotonic if self._clock is time.time else self._clock
        self._csv = LineFile(self.csv_path, self._csv_opened, self._warn, clock)
        self._events = LineFile(self.events_path, lambda _h: b"", self._warn, clock)

    def _watch_process(self, o: WriterOptions) -> dict[str, Any]:
        """The stacks file (mstop_writer.stacks) and the exit witness (mstop_writer.witness); the start
        event's fields that say what runs and the process's identity (host, boot, pid namespace, start)."""
        from . import stacks, witness

        self._stacks: Any = None
        self._witness_pid: int | None = None
        path = os.path.join(self.run_dir, stacks_name(self.rank))
        stacks_said = "not written"
        try:  # fatal stacks are written even when timed dumps are off (stack_after=0)
            os.makedirs(self.run_dir, exist_ok=True)
            made = True
        except OSError as e:  # the rank files' own warning says it once: no second one for the same cause
            stacks_said, made = f"not written: {e}", False
        try:
            if made:
                self._stacks = stacks.StackDumps(path, o.stack_after, self._warn, self._clock)
        except Exception as e:  # noqa: BLE001 - no stacks rather than no training
            self._warn(f"stacks not written: {type(e).__name__}: {e}", key="stacks:start")
            stacks_said = f"not written: {type(e).__name__}: {e}"
        said = "off (witness=False)" if not o.witness else "off: the writer's clock is not the system's (clock=)"
        if o.witness and o.clock is time.time:  # its times are the system clock's: a given clock is not shared
            try:
                self._witness_pid, said = witness.start(
                    self.events_path, path if self._stacks is not None and self._stacks.fd is not None else None,
                    self._stacks.start_at if self._stacks is not None else 0, self.rank, o.heartbeat_interval)
            except Exception as e:  # noqa: BLE001
                self._witness_pid, said = None, f"not started: {type(e).__name__}: {e}"
            if self._witness_pid is None:
                self._warn(f"the exit witness was {said}: a death is told by missing heartbeats only",
                           key="witness:start")
        return {"witness_pid": self._witness_pid, "witness": said,
                "fatal_stacks": self._stacks.fatal if self._stacks is not None else stacks_said,
                "stack_after": o.stack_after, "ppid": os.getppid(), **process_identity()}

    def _profile_window(self, steps: tuple[int, int] | None) -> Any:
        """MindSpore's Profiler for ``profile_steps`` (first, last), or the steps a profile.request asks for;
        its events carry this session."""
        from .profiling import ProfileWindow

        return ProfileWindow(self.run_dir, self.rank, lambda kind, **f: self.event(kind, session=self.session, **f),
                             steps=steps, world_size=self.world_size)

    def _device_sampler(self, interval: float) -> Any:
        """The host's NPU sampler (mstop_writer.devices), else its GPU sampler (mstop_writer.gpus), or None where
        there is neither ``npu-smi`` nor ``nvidia-smi``. The lowest local rank tries to take the host first;
        the others one interval later (and on, in case it ends)."""
        from .devices import DeviceSampler
        from .gpus import GpuSampler

        try:
            local = int(os.environ.get("DEVICE_ID") or os.environ.get("LOCAL_RANK") or 0)
        except ValueError:
            local = 0
        try:
            kw = dict(warn=self._warn, event=self.event, clock=self._clock, first_try=interval if local > 0 else 0.0)
            return (DeviceSampler.start_if_present(self.run_dir, interval, **kw)  # NPUs, else NVIDIA GPUs
                    or GpuSampler.start_if_present(self.run_dir, interval, **kw))
        except Exception as e:  # noqa: BLE001 - no sampling rather than no training
            self._warn(f"device sampling not started: {type(e).__name__}: {e}", key="devices:start")
            return None

    def _start_fields(self, o: WriterOptions, hardware: dict[str, Any], rank_source: str,
                      detected_from: Mapping[str, str]) -> dict[str, Any]:
        """The ``start`` event: who, where, what, and the source of every figure MFU is computed from."""
        ms = _mindspore()
        return dict(
            schema=SCHEMA_VERSION, session=self.session, run_name=o.run_name, note=o.note,
            host=socket.gethostname(), pid=os.getpid(), rank=self.rank, world_size=self.world_size,
            rank_source=rank_source, device=self.device, peak_flops=self.peak_flops,
            peak_flops_source=hardware["peak_flops_source"], flops_per_token=hardware["flops_per_token"],
            flops_per_token_source=hardware["flops_per_token_source"], n_params=o.n_params,
            n_params_source=detected_from.get("n_params", "given" if o.n_params is not None else None),
            n_layers=o.n_layers, n_heads=o.n_heads, head_dim=o.head_dim, seq_len=o.seq_len,
            detected=dict(detected_from), heartbeat_interval=o.heartbeat_interval,
            tokens_per_step=self.tokens_per_step, samples_per_step=self.samples_per_step,
            memory_source="device" if self._mem_device else "host", memory_detail=hardware["memory_detail"],
            mindspore_version=getattr(ms, "__version__", None) if ms else None, mstop_version=__version__,
            parallel_mode=o.parallel_mode, total_steps=o.total_steps, step_offset=self.step_offset,
            argv=list(sys.argv), env={k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES)},
            versions=versions(ms), parallel=parallel_settings(ms),
            git_commit=_git_commit(os.getcwd()), cwd=os.getcwd(), logs=log_files(),
            device_id=device_id_of(), device_interval=o.device_interval,
        )

    # -- public API ----------------------------------------------------------

    @property
    def rows_dropped(self) -> int:
        """Rows lost at the CSV file (I/O errors, a file that is no regular file) and not yet told of in a
        ``dropped`` event."""
        return self._csv.dropped

    def log(
        self,
        step: int,
        *,
        epoch: int | None = None,
        loss: float | None = None,
        lr: float | None = None,
        grad_norm: float | None = None,
        step_time: float | None = None,
        data_wait: float | None = None,
        queue_depth: float | None = None,
        tokens: float | None = None,
        samples: float | None = None,
        overflow: bool | int | None = None,
        loss_scale: float | None = None,
        **extra: Any,
    ) -> None:
        """Write one row for optimizer step ``step`` (plus ``step_offset``).

        ``step_time`` is the whole wall time of the step in seconds, data wait
        included; by default the time since the previous ``log()`` (or since the
        writer was made). ``tokens``/``samples`` default to the per-step
        configuration and are global counts for the step (all ranks together).
        Extra keyword arguments fill the declared extra columns; a key neither
        declared nor present in the first ``log()`` is dropped with one warning.
        """
        try:
            now = time.perf_counter()
            if step_time is None:
                step_time = now - self._t_prev
            self._t_prev = now
            self._row((step if type(step) is int else _step(step)) + self.step_offset, epoch, loss, lr, grad_norm,
                      step_time, data_wait, queue_depth, tokens, samples, overflow, loss_scale, extra, now)
        except Exception as e:  # noqa: BLE001 - the job must never die of its monitor
            self.reject(f"row for step {step!r} not written: {type(e).__name__}: {e}", type(e).__name__)

    def reject(self, message: str, kind: str = "row") -> None:
        """Count a row that could not be built (bad input) as dropped, and warn once per kind: the
        ``dropped`` event tells readers, so no row vanishes unseen."""
        self._warn(message, key=f"rejected:{kind}")
        with self._lock:
            self._rejected += 1
            self._report_dropped(soon=True)
        self._error_event(message, kind=f"rejected:{kind}")

    def checkpoint(self, step: int, path: str | os.PathLike[str]) -> None:
        """Record that a checkpoint of step ``step`` (plus ``step_offset``) was saved at ``path``."""
        self.event("checkpoint", step=step + self.step_offset, path=os.fspath(path))

    def event(self, kind: str, **fields: Any) -> None:
        """Append one event line ``{"time", "kind", **fields}`` (e.g. ``eval`` with ``step`` and ``metrics``)."""
        try:
            obj = {"time": self._clock(), "kind": str(kind)}
            obj.update(fields)
            line = (json.dumps(_jsonable(obj), ensure_ascii=False, separators=(",", ":")) + "\n").encode()
            with self._lock:
                if self._events.write(line):
                    self._report_dropped()
                    life = getattr(self, "_life", None)
                    if life is not None and life.held:
                        life.keep()  # a rotation made a new events file: the lock goes with it at once
        except Exception as e:  # noqa: BLE001
            self._warn(f"event {kind!r} not written: {type(e).__name__}: {e}", key=f"event:{type(e).__name__}")

    def _error_event(self, message: str, kind: str) -> None:
        """Say in the run directory, once per kind, that the writer failed at something (readers show
        "writer failed: ..." instead of a run that seems not to have started), or refused a row it was given
        (``reason`` "rejected": readers show "1 row refused by the writer")."""
        if kind in self._told:
            return
        self._told.add(kind)
        self.event("writer_error", message=message, session=self.session, step=self._last_step,
                   reason=kind.split(":", 1)[0])

    def close(self, *, clean: bool = True) -> None:
        """Stop the heartbeat, write an ``end`` event (when ``clean``) and close the files."""
        if self._closed:
            return
        self.profile.wait(PROFILE_WAIT)  # a profile being summarised: its event is written before the end
        self._closed = True
        if self._stacks is not None:
            self._stacks.pause()
        from . import witness

        witness.stop(self.events_path)
        if self.devices is not None:
            self.devices.stop()
        self._hb_stop.set()
        if self._hb is not threading.current_thread():
            self._hb.join(timeout=5)
        if clean:
            self.end()
        with self._lock:
            self._report_dropped()
            self._csv.close()
            self._events.close()
            self._life.release()

    def end(self) -> None:
        """Write an ``end`` event (a clean finish) unless one was written since the last row."""
        if self._ended_at != self._row_count:
            self._ended_at = self._row_count
            self.event("end", step=self._last_step, rows=self._row_count, session=self.session)

    def __enter__(self) -> MetricsWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self.event("abort", step=self._last_step, error=f"{exc_type.__name__}: {exc}", session=self.session)
        self.close(clean=exc_type is None)

    @property
    def last_step(self) -> int | None:
        """The step of the last row written (offset included), or None."""
        return self._last_step

    def write_row(self, step: int, *, step_time: float, epoch: Any = None, loss: Any = None, lr: Any = None,
                  grad_norm: Any = None, data_wait: Any = None, queue_depth: Any = None, tokens: Any = None,
                  samples: Any = None, overflow: Any = None, loss_scale: Any = None,
                  extra: Mapping[str, Any] | None = None) -> None:
        """Write one row exactly as given, for callers that measure the step themselves (``MstopCallback``):
        ``step`` already holds ``step_offset``, ``step_time`` is required, extra columns come as a mapping.
        Unlike :meth:`log`, a value that cannot be written raises (``ValueError``/``TypeError``): the
        caller decides (the callback counts it with :meth:`reject`). I/O errors never raise."""
        self._row(step, epoch, loss, lr, grad_norm, step_time, data_wait, queue_depth, tokens, samples, overflow,
                  loss_scale, extra or {}, time.perf_counter())

    # -- internals -----------------------------------------------------------

    def _row(self, step, epoch, loss, lr, grad_norm, step_time, data_wait, queue_depth,  # noqa: PLR0913
             tokens, samples, overflow, loss_scale, extra, now) -> None:
        """Write one row (``now``: perf_counter at the step's end, for the periodic work's clocks)."""
        if not self._columns_fixed:
            self._fix_columns(extra)
        if tokens is None:
            tokens = self.tokens_per_step
        if samples is None:
            samples = self.samples_per_step
        tps = mfu = None
        if tokens is not None and step_time:
            tps = tokens / step_time
            if self._mfu_scale is not None:
                mfu = tps * self._mfu_scale
        if data_wait is not None or (mfu is not None and mfu > 1):
            self._flag_impossible(step, step_time, data_wait, mfu)
        if now >= self._mem_next:
            self._mem_next = now + self._mem_interval
            self._mem_cache = self._memory_sample()
            self._mem_cells = ",".join(map(_cell, self._mem_cache))
        with self._lock:
            csv = self._csv
            if not csv.ready():  # opening may adopt an existing file's extra columns
                return
            row_time = self._clock()
            line = ",".join(_cells((row_time, step, epoch, loss, lr, grad_norm, step_time, data_wait, queue_depth,
                                    tokens, samples, tps, mfu)))
            if overflow is None and loss_scale is None:
                line = f"{line},{self._mem_cells},,,{self.session}"
            else:
                line = f"{line},{self._mem_cells},{','.join(_cells((overflow, loss_scale)))},{self.session}"
            if self._extra:
                line += "," + ",".join(_cells([extra.get(k) for k in self._extra]))
            written = csv.append(f"{line}\n".encode())
            if written:
                self._row_count += 1  # rows that reached the file: the end event's count
                if csv.dropped or self._events.dropped or self._rejected:
                    self._report_dropped()
        if extra and not self._extra_set.issuperset(extra):
            self._warn_undeclared(extra)
        self._last_step = step
        self._after_row(step, step_time, row_time, now)

    def _after_row(self, step: int, step_time: Any, row_time: float, now: float) -> None:
        """A step ended: the profiler's window and requests, the stacks watchdog."""
        profile = self.profile
        profile.pace(step_time)
        if now >= self._look_next:  # a profile.request is looked for every few seconds, not every row
            self._look_next = now + 1.0
            profile.check_request(step, step_time)
        if profile.window is not None:
            profile.after_step(step, row_time)
        if self._stacks is not None:
            self._stacks.step_end(step, step_time)

    def _fix_columns(self, extra: Mapping[str, Any]) -> None:
        """At the first row: the extra columns are the declared ones and then the first row's keys."""
        self._extra += [check_name(k) for k in extra if k not in self._extra]
        self._extra_set = frozenset(self._extra)
        self._columns_fixed = True

    def _flag_impossible(self, step: Any, step_time: Any, data_wait: Any, mfu: float | None) -> None:
        """Warn once per kind of a value no real step has, as readers will refuse it (docs/files.md, "Cells
        readers refuse"): the row is written as given (the file keeps what the job said)."""
        try:
            if mfu is not None and mfu_too_high(mfu):
                self._warn(f"step {step}: MFU {mfu:.4g} (tokens / step_time x flops_per_token / (world_size x "
                           "peak_flops)) is above 1: readers refuse it; flops_per_token or peak_flops is wrong",
                           key="impossible:mfu")
            if data_wait is not None and step_time is not None:
                wait, st = float(data_wait), float(step_time)
                if wait_too_long(wait, st):
                    self._warn(f"step {step}: data_wait {wait:.6g} s is longer than its step_time {st:.6g} s "
                               "(which includes it): readers refuse it; are both in seconds?",
                               key="impossible:data_wait")
        except (TypeError, ValueError, OverflowError):  # a value that is no number: written as _cells writes it
            pass

    def _warn_undeclared(self, extra: Mapping[str, Any]) -> None:
        for k in extra.keys() - self._extra_set:
            self._warn(f"column {k!r} was not declared in extra_columns nor in the first log(): dropped",
                       key=f"column:{k}")

    def _report_dropped(self, soon: bool = False) -> None:
        """Tell readers how many lines were lost (I/O errors) or refused (bad input) since the last report
        (caller holds the lock). ``soon``: at most once a second (a job rejecting every row must not write
        an event per row); heartbeats and close report the rest."""
        rows, events, rejected = self._csv.dropped, self._events.dropped, self._rejected
        if not rows and not events and not rejected:
            return
        now = time.monotonic()
        if soon and now < self._next_report:
            return
        self._next_report = now + 1.0
        line = json.dumps({"time": self._clock(), "kind": "dropped", "rows": rows + rejected, "events": events,
                           "rejected": rejected, "session": self.session}) + "\n"
        if self._events.write(line.encode()):
            self._csv.take_dropped()
            self._events.take_dropped()
            self._rejected = 0
            if rows or events:
                log.info("mstop_writer: writing works again; %d rows and %d events were lost", rows, events)

    def _csv_opened(self, header: bytes | None) -> bytes:
        """Decide the columns of ``rank<R>.csv`` when it is (re)opened; return the header to write, if any."""
        ours = list(COLUMNS) + self._extra
        if header is None:
            return (",".join(ours) + "\n").encode()
        theirs = header.decode("utf-8", "replace").lstrip("\ufeff").rstrip("\r\n").split(",")
        if theirs == ours:
            return b""
        if theirs[: len(COLUMNS)] != list(COLUMNS):
            raise OSError(f"{self.csv_path} has another header ({header[:200]!r}): not appending to it")
        missing = [c for c in self._extra if c not in theirs]
        if missing:
            self._warn(f"{self.csv_path} was started with extra columns {theirs[len(COLUMNS):]}: "
                       f"the file keeps them; {missing} are not written", key="columns")
        self._extra = theirs[len(COLUMNS):]
        self._extra_set = frozenset(self._extra)
        return b""

    def _memory_total(self) -> tuple[int | None, str]:
        if not self._mem_device:
            total, source = host_memory_limit()
            return total, f"host RSS of this process; total = {source} of host {socket.gethostname()}"
        ms = _mindspore()
        total = None
        try:
            import mindspore.hal as hal

            props = hal.get_device_properties(int(os.environ.get("DEVICE_ID", "0")))
            total = int(getattr(props, "total_memory", 0)) or None
        except Exception:  # noqa: BLE001
            pass
        try:
            limit = float(ms.get_context("max_device_memory")) * (1 << 30)
            if limit > 0 and (total is None or limit < total):
                return int(limit), "device pool; total = max_device_memory"
        except Exception:  # noqa: BLE001
            pass
        return total, "device pool; total = device memory"

    def _memory_sample(self) -> tuple[Any, Any, Any]:
        """(used, peak since the previous sample, total) in bytes; None where unknown."""
        if self._mem_device:
            try:
                rt = _mindspore().runtime
                used, peak = rt.memory_allocated(), rt.max_memory_allocated()
                rt.reset_peak_memory_stats()
                return used, peak, self._mem_total
            except Exception:  # noqa: BLE001
                self._mem_device = False
        rss = host_rss()
        peak = host_peak_rss(reset=True)
        if peak is not None and rss is not None and peak < rss:
            peak = rss
        return rss, peak, self._mem_total

    def _heartbeat(self, interval: float) -> None:
        while not self._hb_stop.wait(interval):
            self.event("heartbeat", step=self._last_step, session=self.session)
            with self._lock:
                self._report_dropped()

    def _warn(self, message: str, key: str) -> None:
        """Log ``message`` as a warning the first time ``key`` is seen, at debug level after."""
        if key in self._warned:
            log.debug("mstop_writer: %s", message)
            return
        self._warned.add(key)
        log.warning("mstop_writer: %s (training continues; further such messages at debug level)", message)


def process_identity() -> dict[str, Any]:
    """This process's identity for readers: boot id, pid namespace, start time (mstop_writer.witness.identity)."""
    from .witness import identity

    return identity()


def _step(step: Any) -> int:
    """A step as a whole number: ints, integral floats, numpy and 0-d MindSpore values; anything else raises."""
    if isinstance(step, bool):
        raise TypeError(f"step must be a whole number, got {step!r}")
    if isinstance(step, int):
        return step
    f = float(step)  # TypeError/ValueError for text such as "abc"
    if not f.is_integer():
        raise ValueError(f"step must be a whole number, got {step!r}")
    return int(f)
