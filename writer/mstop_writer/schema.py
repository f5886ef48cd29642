"""The file contract shared by the writer and every reader.

Both halves of mstop import this module (the viewer reads the same column
names and units), so the contract is written down once. Units: seconds for
every duration and for ``time`` (unix seconds), bytes for memory, FLOP/s for
peaks, fractions (0-1) for ``mfu``.

Changing the meaning of a column or an event field bumps ``SCHEMA_VERSION``
and the README in the same commit; adding a column or an event kind does not.
"""

from __future__ import annotations

SCHEMA_VERSION = 1

#: The base columns of ``rank<R>.csv``, always present and in this order.
#: Declared extra columns follow them.
COLUMNS: tuple[str, ...] = (
    "time",
    "step",
    "epoch",
    "loss",
    "lr",
    "grad_norm",
    "step_time",
    "data_wait",
    "queue_depth",
    "tokens",
    "samples",
    "tokens_per_s",
    "mfu",
    "mem_used",
    "mem_peak",
    "mem_total",
    "overflow",
    "loss_scale",
    "session",
)

#: Unit of each base column, as shown by readers ("" for plain numbers).
UNITS: dict[str, str] = {
    "time": "s (unix)",
    "step": "",
    "epoch": "",
    "loss": "",
    "lr": "",
    "grad_norm": "",
    "step_time": "s",
    "data_wait": "s",
    "queue_depth": "batches",
    "tokens": "tokens",
    "samples": "samples",
    "tokens_per_s": "tokens/s",
    "mfu": "fraction",
    "mem_used": "bytes",
    "mem_peak": "bytes",
    "mem_total": "bytes",
    "overflow": "0/1",
    "loss_scale": "",
    "session": "",
}

#: Event kinds written to ``rank<R>.events.jsonl``.
EVENT_KINDS: tuple[str, ...] = (
    "start",
    "heartbeat",
    "checkpoint",
    "eval",
    "dropped",
    "end",
    "abort",
    "writer_error",
    "profile",  # a profiler window's summary (mstop_writer.profiling)
    "profile_request",  # a profile.request taken: the steps it will profile
    "devices",  # the host's device sampling started, failed or works again (mstop_writer.devices)
    "proc",  # the rank's process facts from /proc (state, cpu_s, rss, threads, run_delay_s), by its exit witness
    "stack",  # every thread's stack of a rank whose step overran or that crashed (mstop_writer.stacks)
    "exit",  # the rank's process ended: when, how (signal or exit code), by its exit witness
)

#: Seconds between two ``heartbeat`` events of a live process: a reader calls a rank dead after 3 missed ones
#: (15 s). A heartbeat is one line written by a daemon thread: 14 us of CPU, 0.0003 % of a core at 5 s.
#: the slack a data wait may exceed its step time by, which includes it: both are float32 (7 digits) and a
#: job may take them from two clocks; 0.1 % and a microsecond are far below any real starving pipeline's share
WAIT_SLACK = 1e-3
WAIT_SLACK_S = 1e-6
#: the slack above 1 a written MFU may have (float32 rounding of a 100 % share)
MFU_SLACK = 1e-6


def wait_too_long(data_wait, step_time):  # noqa: ANN001, ANN201 (floats or numpy arrays alike)
    """Whether a data wait is longer than the step time that includes it (readers refuse such a cell;
    the writer warns of it): one rule for both sides of the files. Written as a difference so that a
    float32 step time near its largest value does not overflow (a hostile file's cell)."""
    return data_wait - step_time > step_time * WAIT_SLACK + WAIT_SLACK_S


def mfu_too_high(mfu):  # noqa: ANN001, ANN201 (floats or numpy arrays alike)
    """Whether an MFU is above 1 (over 100 % of the peak: the peak or the FLOPs per token is wrong)."""
    return mfu > 1 + MFU_SLACK


HEARTBEAT_INTERVAL = 5.0

#: Where the memory columns come from, as written in the ``start`` event.
MEMORY_SOURCES: tuple[str, ...] = ("device", "host", "none")


#: How a rank number is written in file names: no sign, no leading zeros, at most 7 digits.
RANK_DIGITS = "(0|[1-9][0-9]{0,6})"
#: The names of a rank's files, as regular expressions to match whole names (group 1: the rank). Readers use
#: these and nothing else: a file named otherwise is no rank file, and its name is never used as a path.
CSV_PATTERN = rf"rank{RANK_DIGITS}\.csv"
EVENTS_PATTERN = rf"rank{RANK_DIGITS}\.events\.jsonl"


#: The columns of ``host_<name>.devices.csv``: one row per chip per sample of the host's NPUs
#: (mstop_writer.devices), in this order.
DEVICE_COLUMNS: tuple[str, ...] = (
    "time",
    "host",
    "npu",
    "chip",
    "device",
    "name",
    "health",
    "aicore",
    "hbm_used",
    "hbm_total",
    "memory_used",
    "memory_total",
    "temperature",
    "power",
    "aivector",
    "aicpu",
    "ctrlcpu",
    "hbm_bandwidth",
    "bus_id",
    "pids",
    "error_code",
    "source",
)

#: Unit of each devices column.
DEVICE_UNITS: dict[str, str] = {
    "time": "s (unix)", "host": "", "npu": "npu-smi's NPU id", "chip": "npu-smi's chip id",
    "device": "logical device id (DEVICE_ID)", "name": "", "health": "OK/Warning/Alarm/Critical/UNKNOWN",
    "aicore": "fraction", "hbm_used": "bytes", "hbm_total": "bytes", "memory_used": "bytes",
    "memory_total": "bytes", "temperature": "degrees C", "power": "W", "aivector": "fraction",
    "aicpu": "fraction", "ctrlcpu": "fraction", "hbm_bandwidth": "fraction", "bus_id": "",
    "pids": "process ids, space-separated", "error_code": "", "source": "npu-smi commands read",
}

#: Seconds between two samples of the host's NPUs (``device_interval``): 0 turns sampling off.
DEVICE_INTERVAL = 10.0

#: A host name as devices file names carry it (mstop_writer.devices.host_name)
HOST_CHARS = "[A-Za-z0-9._-]{1,64}"
DEVICES_PATTERN = rf"host_({HOST_CHARS})\.devices\.csv"


def host_key(name: object) -> str:
    """A host name as devices files carry it (HOST_CHARS): other characters made ``_``, at most 64, no
    leading or trailing dot; ``host`` when nothing is left. The writer names its file with it, readers join
    a start event's ``host`` to the file's rows with it."""
    import re

    return re.sub(r"[^A-Za-z0-9._-]", "_", str(name))[:64].strip(".") or "host"


def devices_name(host: str) -> str:
    """Return the devices file name of ``host`` (already reduced to HOST_CHARS)."""
    return f"host_{host}.devices.csv"


def file_kind(mode: int) -> str:
    """What a file that is not a regular file is (from ``st_mode``), in words: rank and events files must be
    regular files, and the writer and the readers say so in the same words."""
    import stat

    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return name
    return "a special file"


def csv_name(rank: int) -> str:
    """Return the metrics file name of ``rank``."""
    return f"rank{rank}.csv"


def events_name(rank: int) -> str:
    """Return the events file name of ``rank``."""
    return f"rank{rank}.events.jsonl"


def stacks_name(rank: int) -> str:
    """Return the stacks file name of ``rank`` (faulthandler's dumps: mstop_writer.stacks)."""
    return f"rank{rank}.stacks.txt"
