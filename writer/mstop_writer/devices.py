"""The host's Ascend NPUs, sampled with ``npu-smi`` into ``host_<name>.devices.csv``.

Standard library only: this module runs inside training jobs. One process per host samples (the writer of
the lowest local rank tries first; a lock on the file decides, and another rank takes over when that process
ends). It never blocks training: the sampling runs on a daemon thread, every ``npu-smi`` call has a timeout
and is killed after it, each kind of failure is warned about once, and nothing at all happens where
``npu-smi`` is not installed (CPU, GPU).

What is read, per sample (Ascend's "npu-smi command reference", Atlas training products):

- ``npu-smi info``: one call for every device: name, health, power, temperature, AICore %, memory and HBM
  used / total, and the processes on each chip. Most of a row comes from it.
- ``npu-smi info -t usages -i ID``: one device per sample, in turn (AICPU, control CPU, vector core and HBM
  bandwidth use), so a host of 8 NPUs costs two calls a sample, not nine.
- ``npu-smi info -t health -i ID``: only for a device whose health is not OK, for its error code.

``-t temp`` and ``-t power`` print what the table already holds (their parser is the same key-value one).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ._cells import cells as csv_cells
from .schema import DEVICE_COLUMNS, devices_name, host_key

#: Seconds one ``npu-smi`` call may take before it is killed (a busy driver answers in well under a second).
CALL_TIMEOUT = 5.0
#: The most output of one ``npu-smi`` call read into the training process (a 16-NPU table is ~10 KB): a
#: call that prints more is killed and its output not used
MAX_OUTPUT = 4 << 20
MB = 1 << 20  # npu-smi's MB are mebibytes (a 64 GB HBM reads 65536)
_SLASH = re.compile(r"\s*/\s*")


@dataclass
class Chip:
    """One chip (one logical device) as ``npu-smi info`` and its detail commands describe it."""

    npu: int
    chip: int
    name: str | None = None
    health: str | None = None
    power: float | None = None
    temperature: float | None = None
    aicore: float | None = None  # fraction of the AI cores busy (npu-smi prints a percentage)
    memory_used: int | None = None  # bytes
    memory_total: int | None = None
    hbm_used: int | None = None
    hbm_total: int | None = None
    bus_id: str | None = None
    device: int | None = None  # the logical device id ranks are joined with (see device_id_of)
    pids: list[int] = field(default_factory=list)
    aivector: float | None = None
    aicpu: float | None = None
    ctrlcpu: float | None = None
    hbm_bandwidth: float | None = None
    error_code: str | None = None
    source: str = "info"

    def row(self, t: float, host: str) -> list[Any]:
        """The chip as one row of ``host_<name>.devices.csv`` (DEVICE_COLUMNS' order)."""
        v = {"time": t, "host": host, "pids": " ".join(map(str, self.pids[:16]))}
        return [v[c] if c in v else getattr(self, c) for c in DEVICE_COLUMNS]


def _number(text: str) -> float | None:
    """A number of npu-smi's output; None for ``NA``, ``-`` and anything else that is not one."""
    try:
        f = float(text)
    except ValueError:
        return None
    return f if f == f and abs(f) != float("inf") else None


def _pair(text: str) -> tuple[int | None, int | None]:
    """``"3318/65536"`` (MB) as (used, total) bytes."""
    a, _, b = text.partition("/")
    used, total = _number(a), _number(b)
    if not total:  # "0 / 0": the table has no such memory on this chip
        return None, None
    return (None if used is None else int(used * MB)), (None if total is None else int(total * MB))


def _split_row(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _tokens(cell: str) -> list[str]:
    """A cell's values: ``"0    / 0          58626/ 65536"`` -> ``["0/0", "58626/65536"]``."""
    return _SLASH.sub("/", cell).split()


def _key(name: str) -> str:
    """A column's name as the table's readers match it: lower case, its unit left out (``Power(W)`` ->
    ``power``, ``NPU Util(%)`` -> ``npu util``, ``Chip  Phy-ID`` -> ``chip phy-id``)."""
    return " ".join(re.sub(r"\([^)]*\)", " ", name).lower().split())


def _set(chip: Chip, name: str, value: str) -> None:
    """One value of the table by its column's name; a name mstop does not use is left alone."""
    k = _key(name)
    if k in ("npu", "npu id", "chip", "chip id", "name"):
        return  # read where the chip is made
    if k == "health":
        chip.health = value if value not in ("", "-", "NA") else None
    elif k.startswith("power"):
        chip.power = _number(value)
    elif k.startswith("temp"):
        chip.temperature = _number(value)
    elif k in ("aicore", "aicore util", "aicore usage"):
        f = _number(value)
        chip.aicore = None if f is None else f / 100.0
    elif k in ("npu util", "util", "npu usage") and chip.aicore is None:  # newer tables' one busy figure
        f = _number(value)
        chip.aicore = None if f is None else f / 100.0
    elif k in ("memory-usage", "memory usage", "memory"):
        chip.memory_used, chip.memory_total = _pair(value)
    elif k in ("hbm-usage", "hbm usage", "hbm"):
        chip.hbm_used, chip.hbm_total = _pair(value)
    elif k in ("bus-id", "bus id"):
        chip.bus_id = value if value not in ("", "NA", "-") else None
    elif k in ("phy-id", "device", "device id", "logic id", "logicid") and value.isdigit():
        chip.device = int(value)


def _names(cell: str) -> list[str]:
    """A header cell's column names: apart where two or more spaces stand between them (``NPU Util(%)`` is
    one name, ``Power(W)    Temp(C)`` two), else at every space."""
    return [n for n in re.split(r"\s{2,}", cell.strip()) if n]


def _pairs(head: list[str], data: list[str]) -> list[tuple[str, str]] | None:
    """A line's (name, value) pairs by its header line: cell by cell, a cell's values by its names. None
    when a cell's values cannot be told apart by its names (a layout mstop does not know)."""
    out: list[tuple[str, str]] = []
    for h, d in zip(head, data):
        values = _tokens(d)
        if not h.strip():
            if values:
                return None
            continue
        names = _names(h)
        if len(names) != len(values):
            words = h.split()
            if len(words) == len(values):
                names = words
            elif values and len(values) > len(names) and _key(names[-1]) == "name":
                values = values[:len(names) - 1] + [" ".join(values[len(names) - 1:])]  # a name of words
            elif not values:
                continue  # an empty cell: its columns have no value here
            else:
                return None
        out += zip(names, values)
    return out


def _respace(rows: list[list[str]]) -> list[list[str]]:
    """A header's rows of names (cells as printed, spaces kept), each name two spaces from the next: a name
    begins where a name of another row of the header begins, as the table stacks its columns (``NPU Util(%)
    Memory-Usage(MB)`` under ``Power(W)    Temp(C)``: Ascend 950's one space apart). Rows of other widths are
    left as printed."""
    if len({len(r) for r in rows}) != 1:
        return [[c.strip() for c in r] for r in rows]
    out: list[list[str]] = [[] for _ in rows]
    for i in range(len(rows[0])):
        words = [[(m.start(), m.group()) for m in re.finditer(r"\S+", r[i])] for r in rows]
        stops = {w[0][0] for w in words if w}
        for ws in words:  # where each row's own names begin: its first word, and any after two spaces
            stops.update(at for (at, word), (before, prev) in zip(ws[1:], ws) if at - before - len(prev) >= 2)
        for row, ws in zip(out, words):
            names: list[list[str]] = []
            for at, word in ws:
                if not names or at in stops:
                    names.append([])
                names[-1].append(word)
            row.append("  ".join(" ".join(n) for n in names))
    return out


def _merge(lines: list[list[str]]) -> list[list[str]]:
    """Lines whose first cell is empty continue the line before them (a name or a value too long for its
    cell, a header's second row of names): their cells are joined to its cells, two spaces apart."""
    out: list[list[str]] = []
    for cells in lines:
        if out and not cells[0] and len(cells) == len(out[-1]):
            out[-1] = [f"{a}  {b}".strip() for a, b in zip(out[-1], cells)]
        elif any(cells):
            out.append(list(cells))
    return out


@dataclass
class InfoTable:
    """What ``npu-smi info`` printed, read: its chips, and the lines of its device table that no layout
    mstop knows could read (the warning quotes the first)."""

    chips: list[Chip]
    unread: list[str]


def read_info(text: str) -> InfoTable:
    """The chips of ``npu-smi info``'s table (every layout npu-smi has printed: a header of one or more lines
    naming the columns, ``| NPU  Name |`` or ``| NPU ID | Name |``, lines continued by lines that begin with
    an empty cell, a chip's lines in one block between border lines or several chips' lines after one NPU
    line), with the processes of its second table. Columns are read by their names; a line that cannot be
    read by them is kept in ``unread``, never guessed."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()[:1] in ("|", "+")]
    chips: list[Chip] = []
    unread: list[str] = []
    head: list[list[str]] = []  # the header's rows, their cells as printed (spaces kept: see _respace)
    reading_head = procs = False
    block: list[list[str]] = []
    raw_block: list[str] = []

    def flush() -> None:
        if head and block:
            got = _block_chips(_merge(_respace(head)), _merge(block))
            if got is None:
                unread.extend(raw_block)
            else:
                chips.extend(got)
        block.clear()
        raw_block.clear()

    for line in lines:
        if line.startswith("+"):
            flush()
            reading_head = False
            continue
        cells = _split_row(line)
        if cells[0].startswith("No running processes"):  # a line of its own after an NPU's block (950)
            continue
        if "Process id" in line:
            flush()
            procs, head = True, []
            continue
        words = cells[0].split()
        if words[:1] == ["NPU"] and any("Name" in c.split() or c.startswith("Name") for c in cells):
            flush()
            head, procs, reading_head = [line.strip("|").split("|")], False, True
            continue
        if reading_head:
            head.append(line.strip("|").split("|"))
        elif procs:
            _process(chips, cells)
        elif head:
            block.append(cells)
            raw_block.append(line)
    flush()
    _device_ids(chips)
    return InfoTable(chips, unread)


def parse_info(text: str) -> list[Chip]:
    """The chips of ``npu-smi info``'s table, with the processes of its second table; [] when the text holds
    no such table (a message, an error). Lines it cannot read are skipped, never guessed (:func:`read_info`
    keeps them)."""
    return read_info(text).chips


def _health_at(head: list[str]) -> int | None:
    return next((i for i, c in enumerate(head) if any(_key(n) == "health" for n in _names(c))), None)


def _is_npu_line(cells: list[str], at: int | None) -> bool:
    """A device block's NPU line (its health: ``OK``, ``Alarm``) rather than a chip's (its bus id there)."""
    if at is None or at >= len(cells):
        return True
    v = (cells[at].split() or [""])[0]  # its first value: a continued line joins the chip's bus id to it (950)
    return v.isalpha() and v.upper() != "NA"


def _block_chips(head: list[list[str]], block: list[list[str]]) -> list[Chip] | None:
    """The chips of one block of the device table: after each NPU line, the lines of the header's next
    rows; more lines than rows: one chip each, of the header's last row (several chips under one NPU line).
    None when a line cannot be read by its header row."""
    k = len(head)
    at = _health_at(head[0])
    chips: list[Chip] = []
    npu_part: list[list[tuple[str, str]]] | None = None
    row = 0
    for cells in block:
        if _is_npu_line(cells, at) and (npu_part is None or row >= k - 1 or k == 1):
            pairs = _pairs(head[0], cells)
            if pairs is None:
                return None
            npu_part, row = [pairs], 1
            if k == 1:
                chip = _make_chip(npu_part, [])
                if chip is None:
                    return None
                chips.append(chip)
            continue
        if npu_part is None:
            return None
        r = min(row, k - 1)
        pairs = _pairs(head[r], cells)
        if pairs is None:
            return None
        if r < k - 1:
            npu_part.append(pairs)
        else:
            chip = _make_chip(npu_part, pairs)
            if chip is None:
                return None
            chips.append(chip)
        row += 1
    return chips


def _make_chip(npu_part: list[list[tuple[str, str]]], chip_line: list[tuple[str, str]]) -> Chip | None:
    """A chip from its NPU's lines and its own line: the NPU id (``NPU``/``NPU ID``) and the chip id (``Chip``,
    ``Chip ID``; 0 without one) from the first cell of each."""
    first = dict((_key(n), v) for n, v in npu_part[0])
    npu = first.get("npu", first.get("npu id", ""))
    if not npu.isdigit():
        return None
    line = dict((_key(n), v) for n, v in chip_line)
    chip_id = line.get("chip", line.get("chip id", "0"))
    if not chip_id.isdigit():
        return None
    chip = Chip(npu=int(npu), chip=int(chip_id), name=first.get("name") or None)
    for pairs in (*npu_part, chip_line):
        for n, v in pairs:
            _set(chip, n, v)
    return chip


def _process(chips: list[Chip], cells: list[str]) -> None:
    """One line of the processes table: ``| 0  0 | 3755936 | python | 114 |``, or ``| 0 | 3755936 | ... |``
    (Ascend 950: an NPU id alone, for an NPU of one chip)."""
    if len(cells) < 2 or not cells[1].isdigit():
        return
    ids = cells[0].split()
    if not (1 <= len(ids) <= 2 and all(i.isdigit() for i in ids)):
        return
    npu = [c for c in chips if c.npu == int(ids[0])]
    for c in npu:
        if (c.chip == int(ids[1])) if len(ids) == 2 else len(npu) == 1:
            c.pids.append(int(cells[1]))


def _device_ids(chips: list[Chip]) -> None:
    """The logical device id of each chip, as ``DEVICE_ID`` and ``ASCEND_RT_VISIBLE_DEVICES`` count them: the
    table's own number (Phy-ID) when it gives one, else the NPU id of a one-chip NPU (910B: one chip per
    NPU). An NPU of several chips with no number given keeps None (joined by process id only)."""
    per_npu: dict[int, int] = {}
    for c in chips:
        per_npu[c.npu] = per_npu.get(c.npu, 0) + 1
    for c in chips:
        if c.device is None and per_npu[c.npu] == 1:
            c.device = c.npu


_CHIP_KEY = re.compile(r"^\s*Chip ID\s*:\s*(\d+)\s*$")
_KEY_VALUE = re.compile(r"^\s*([^:]+?)\s*:\s*(.*?)\s*$")


def parse_details(text: str) -> dict[int, dict[str, str]]:
    """``npu-smi info -t usages|health|temp|power|common -i ID``: each chip's ``Key : value`` lines, by chip
    id. A paragraph (blank-line separated) that names its ``Chip ID`` is that chip's, whether the id heads
    its values (Atlas 200I A2) or follows them (910C/A3's ``-t usages``); several ids in one paragraph cut
    it where they stand, the same way round. A paragraph without one belongs to the chip last named (chip 0
    before any: the output of ``-c 0`` has none); one naming ``Chip Name : MCU`` is the board's MCU and is
    dropped."""
    out: dict[int, dict[str, str]] = {}
    chip = 0
    for para in re.split(r"\n[ \t]*\n", text):
        pairs = [(m.group(1), m.group(2)) for m in map(_KEY_VALUE.match, para.splitlines()) if m]
        if any(k == "Chip Name" and v.upper() == "MCU" for k, v in pairs):
            continue
        ids = [i for i, (k, v) in enumerate(pairs) if _CHIP_KEY.match(f"{k} : {v}")]
        if not ids:
            parts = [(chip, pairs)]
        else:
            numbers = [int(pairs[i][1]) for i in ids]
            board = {"NPU ID", "Chip Count"}
            heads = all(k in board for k, _ in pairs[:ids[0]])  # nothing but the board's lines before the id
            bounds = [*ids, len(pairs)]
            if heads:
                parts = [(chip, pairs[:ids[0]])] + [(n, pairs[a + 1:b]) for n, a, b in zip(numbers, ids, bounds[1:])]
            else:
                starts = [0, *(i + 1 for i in ids)]
                parts = [(n, pairs[a:b]) for n, a, b in zip(numbers, starts, ids)]
                parts.append((numbers[-1], pairs[ids[-1] + 1:]))
            chip = numbers[-1]
        for owner, got in parts:
            for key, value in got:
                out.setdefault(owner, {}).setdefault(key, value)
    return out


def _rate(block: dict[str, str], *keys: str) -> float | None:
    for k in keys:
        f = _number(block.get(k, ""))
        if f is not None:
            return f / 100.0
    return None


def apply_usages(chips: list[Chip], npu: int, details: dict[int, dict[str, str]]) -> None:
    """What ``-t usages -i npu`` adds to that NPU's chips: AICPU, control CPU, vector core, HBM bandwidth
    (and the AICore rate when the table had none)."""
    for c in chips:
        block = details.get(c.chip) if c.npu == npu else None
        if not block:
            continue
        c.aicpu = _rate(block, "Aicpu Usage Rate(%)")
        c.ctrlcpu = _rate(block, "Ctrlcpu Usage Rate(%)")
        c.aivector = _rate(block, "Aivector Usage Rate(%)")
        c.hbm_bandwidth = _rate(block, "HBM Bandwidth Usage Rate(%)", "Memory Bandwidth Usage Rate(%)")
        if c.aicore is None:
            c.aicore = _rate(block, "Aicore Usage Rate(%)")
        c.source = "info+usages"


def apply_health(chips: list[Chip], npu: int, details: dict[int, dict[str, str]]) -> None:
    """What ``-t health -i npu`` adds: each chip's error code (``NA`` when none) and its health."""
    for c in chips:
        block = details.get(c.chip) if c.npu == npu else None
        if not block:
            continue
        code = block.get("Error Code")
        c.error_code = code if code and code.upper() != "NA" else None
        c.health = block.get("Health Status") or block.get("Health") or c.health


def device_id_of(env: dict[str, str] | None = None) -> int | None:
    """This process's logical device on its host: ``DEVICE_ID`` (msrun sets it to the local rank) mapped
    through ``ASCEND_RT_VISIBLE_DEVICES`` (on a GPU: ``CUDA_VISIBLE_DEVICES``) when that narrows the devices a
    process sees."""
    env = os.environ if env is None else env
    try:
        local = int(env.get("DEVICE_ID", ""))
    except ValueError:
        return None
    visible = [v.strip() for v in (env.get("ASCEND_RT_VISIBLE_DEVICES") or env.get("CUDA_VISIBLE_DEVICES")
                                   or "").split(",") if v.strip()]
    if visible:
        return int(visible[local]) if local < len(visible) and visible[local].isdigit() else None
    return local


def host_name() -> str:
    """This host's name as file names carry it (mstop_writer.schema.host_key)."""
    return host_key(socket.gethostname())


class Call:
    """One ``npu-smi`` run with a timeout: its output, or why there is none (``kind`` names the failure for
    the once-per-kind warning). A call that outlives its timeout is killed with its process group; one that
    does not end even then (a driver stuck in the kernel) is left behind and ``stuck`` is set."""

    def __init__(self, argv: list[str], timeout: float) -> None:
        self.out = ""
        self.kind: str | None = None
        self.message = ""
        self.stuck = False
        what = " ".join([os.path.basename(argv[0])] + argv[1:])  # "npu-smi info -t usages -i 3"
        try:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 start_new_session=True)
        except OSError as e:
            self.kind, self.message = "start", f"{argv[0]} could not be started: {e}"
            return
        out, err, why = _read_bounded(p, timeout, MAX_OUTPUT)
        if why is not None:
            self.kind = why
            self.message = f"{what} took over {timeout:g} s: killed" if why == "timeout" else \
                f"{what} printed over {MAX_OUTPUT // MB} MB: killed (its output is not read)"
            self._kill(p)
            return
        try:
            p.wait(timeout=max(0.1, timeout))
        except subprocess.TimeoutExpired:  # its output ended, the process did not
            self.kind, self.message = "timeout", f"{what} took over {timeout:g} s: killed"
            self._kill(p)
            return
        if p.returncode != 0:
            first = (err or out).decode("utf-8", "replace").strip().splitlines()[:1]
            self.kind = "exit"
            self.message = f"{what} failed (exit {p.returncode}){': ' + first[0][:200] if first else ''}"
            return
        self.out = out.decode("utf-8", "replace")

    def _kill(self, p: subprocess.Popen) -> None:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        # its output's end and its exit, within a second: what is left is read and dropped a chunk at a time
        # (a child that kept the output open, or a process that does not die, is stuck)
        ended = _read_bounded(p, 1.0, None)[2] is None
        for f in (p.stdout, p.stderr):
            try:
                f.close()  # type: ignore[union-attr]
            except OSError:
                pass
        try:
            p.wait(timeout=0.1 if not ended else 1.0)
        except subprocess.TimeoutExpired:
            ended = False
        self.stuck = not ended


def _read_bounded(p: subprocess.Popen, timeout: float, cap: int | None) -> tuple[bytes, bytes, str | None]:
    """A process's standard output and error, read as they come until both end: (out, err, None); or what
    stops the read: ``"timeout"`` past ``timeout`` seconds, ``"too much output"`` past ``cap`` bytes in all
    (``cap`` None: everything is read and dropped, as after a kill). A chunk at a time (64 KB), so the
    training process never holds more than ``cap`` of it, and the sampling thread lets the others run between
    chunks (a read of 1 GB at once blocked ``log()`` for 2.5 s)."""
    import selectors

    end = time.monotonic() + timeout
    got: dict[int, list[bytes]] = {}
    total = 0
    with selectors.DefaultSelector() as sel:
        for f in (p.stdout, p.stderr):
            if f is not None and not f.closed:
                sel.register(f.fileno(), selectors.EVENT_READ)
                got[f.fileno()] = []
        while sel.get_map():
            left = end - time.monotonic()
            if left <= 0:
                return b"", b"", "timeout"
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fd)
                elif cap is not None:
                    total += len(chunk)
                    if total > cap:
                        return b"", b"", "too much output"
                    got[key.fd].append(chunk)
    out = b"".join(got.get(p.stdout.fileno(), [])) if p.stdout is not None else b""  # type: ignore[union-attr]
    err = b"".join(got.get(p.stderr.fileno(), [])) if p.stderr is not None else b""  # type: ignore[union-attr]
    return out, err, None


class DeviceSampler:
    """Samples the host's NPUs every ``interval`` seconds into ``host_<name>.devices.csv`` of ``run_dir``, on
    a daemon thread, while this process holds the file's lock (one process per host). ``warn(message, key)``
    is the writer's once-per-kind warning; ``event(kind, **fields)`` writes a ``devices`` event saying the
    sampling started, failed or stopped, so the monitor can tell why a host has no device rows."""

    #: what it samples, in its words, and the tool it samples them with
    kind = "NPUs"
    tool = "npu-smi"

    def __init__(self, run_dir: str, interval: float, *, warn: Callable[[str, str], None],
                 event: Callable[..., None], clock: Callable[[], float] = time.time, command: str = "npu-smi",
                 timeout: float = CALL_TIMEOUT, first_try: float = 0.0) -> None:
        from ._files import LineFile

        self.interval = interval
        self.timeout = timeout
        self.command = command
        self.host = host_name()
        self.path = os.path.join(run_dir, devices_name(self.host))
        self.samples = 0  # samples written
        self._warn, self._event, self._clock = warn, event, clock
        self._first_try = first_try
        self._file = LineFile(self.path, lambda h: b"" if h else (",".join(DEVICE_COLUMNS) + "\n").encode(),
                              lambda m, k: warn(m, f"devices:{k}"))
        self._lock_fd: int | None = None
        self._turn = 0  # which NPU's usages the next sample asks for
        self._failed: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mstop-devices", daemon=True)

    @classmethod
    def start_if_present(cls, run_dir: str, interval: float, **kw: Any) -> DeviceSampler | None:
        """A started sampler, or None where there is nothing to sample (``interval`` 0, no ``npu-smi``; for
        mstop_writer.gpus.GpuSampler, no ``nvidia-smi``)."""
        command = kw.pop("command", None) or shutil.which(cls.tool)
        if not interval or not command:
            return None
        s = cls(run_dir, interval, command=command, **kw)
        s._thread.start()
        return s

    @property
    def running(self) -> bool:
        """Whether the sampling thread is alive."""
        return self._thread.is_alive()

    def stop(self, wait: float = 1.0) -> None:
        """Stop sampling (training is over); waits at most ``wait`` seconds for a call under way."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=wait)
        self._file.close()
        if self._lock_fd is not None:
            try:
                os.close(self._lock_fd)  # releases the lock: another process may take over
            except OSError:
                pass
            self._lock_fd = None

    # -- the thread ------------------------------------------------------------

    def _run(self) -> None:
        if self._stop.wait(self._first_try):
            return
        while not self._stop.is_set():
            if self._lock_fd is None and not self._take_lock():
                if self._stop.wait(self.interval):
                    return
                continue
            started = time.monotonic()
            delay = self.interval
            try:
                delay = self.sample_once()
            except Exception as e:  # noqa: BLE001 - the job must never die of its monitor
                self._fail("error", f"device sampling failed: {type(e).__name__}: {e}")
            if delay is None:
                return
            if self._stop.wait(max(0.0, delay - (time.monotonic() - started))):
                return

    def _take_lock(self) -> bool:
        """Whether this process now samples the host: it holds the devices file's lock (taken without
        waiting; released by the kernel when the process ends). A file system without locks: the lowest
        local rank samples (it is the one that tries first)."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0), 0o644)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except OSError:
            if self._first_try:  # not the first to try: leave it to the one that was
                os.close(fd)
                return False
        self._lock_fd = fd
        self._event("devices", state="sampling", host=self.host, path=os.path.basename(self.path),
                    interval=self.interval, message=f"sampling this host's {self.kind} with {self.command}")
        return True

    def sample_once(self) -> float | None:
        """Run the sample's calls and write its rows; the seconds until the next sample, or None to stop
        (``npu-smi`` hangs past being killed)."""
        info = Call([self.command, "info"], self.timeout)
        if info.kind is not None:
            return self._failed_call(info)
        table = read_info(info.out)
        chips = table.chips
        if not chips:
            first = table.unread[0] if table.unread else next(
                (ln.strip() for ln in info.out.splitlines() if ln.strip() and not ln.strip().startswith("+")),
                "nothing")
            self._fail("unreadable", f"npu-smi info printed no device table mstop can read (first line not "
                                     f"understood: {first[:120]!r})")
            return self.interval
        if table.unread:  # some devices' lines are of a layout not known: the others are still sampled
            self._warn(f"npu-smi info: {len(table.unread)} lines of its device table not understood (the first: "
                       f"{table.unread[0][:120]!r}): those devices have no rows", "devices:partly")
        t = self._clock()
        npus = sorted({c.npu for c in chips})
        npu = npus[self._turn % len(npus)]
        self._turn += 1
        usages = Call([self.command, "info", "-t", "usages", "-i", str(npu)], self.timeout)
        if usages.kind is None:
            apply_usages(chips, npu, parse_details(usages.out))
        elif usages.stuck:
            return self._failed_call(usages)
        sick = sorted({c.npu for c in chips if c.health and c.health.upper() != "OK"})
        if sick:
            health = Call([self.command, "info", "-t", "health", "-i", str(sick[self.samples % len(sick)])],
                          self.timeout)
            if health.kind is None:
                apply_health(chips, sick[self.samples % len(sick)], parse_details(health.out))
        self._write(chips, t)
        return self.interval

    def _write(self, chips: list[Chip], t: float) -> None:
        lines = b"".join((",".join(csv_cells(c.row(t, self.host))) + "\n").encode() for c in chips)
        if self._file.write(lines):
            self.samples += 1
            if self._failed:
                self._failed.clear()
                self._event("devices", state="sampling", host=self.host, message="device sampling works again")

    def _failed_call(self, call: Call) -> float | None:
        if call.stuck:
            self._fail("stuck", f"{call.message}, and it does not end even when killed: device sampling stopped")
            return None
        if call.kind == "timeout":
            self._fail("timeout", call.message)
            return max(self.interval, 6 * self.timeout)  # a slow driver is not asked again at once
        self._fail(call.kind or "error", call.message)
        return self.interval

    def _fail(self, kind: str, message: str) -> None:
        """Warn once per kind of failure; tell readers in a ``devices`` event (once per kind until a sample
        works again)."""
        self._warn(f"{message} (no device rows this time)", f"devices:{kind}")
        if kind not in self._failed:
            self._failed.add(kind)
            self._event("devices", state="failed", host=self.host, reason=kind, message=message)
