"""MindFormers' own lines of a training step (a format of mstop.formats.mflog's driver): MFLossMonitor's step
line in each of its shapes (r0.7 on, the PyNative trainer's, v0.6's), the progress line after it
(samples/s/p), and the lines that say what a step holds (the global batch and device count, the model's
FLOPs, the sink size) or that a checkpoint was saved.

The usual step line is read without decoding (a fast line: its numbers read with the others by one pandas
call when the rows are given out), and a long run of step and progress lines as arrays (RE2 over Arrow).
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable

import numpy as np

from .logstate import EXTRA, SEPARATE_LOSSES, LogState, is_number, number, real_step
from .logstate import FLOAT_BYTES as _FLOAT
from .logstate import FLOAT_TEXT as _F
from .parse import NUMERIC

#: MFLossMonitor's step line (r0.7 on: ``{ Epoch:[..], step:[..], loss...``) and the PyNative trainer's (r2.0:
#: ``{ step:[    1/   10], loss:  11.813965, per_step_time:  13570ms, ...}``, no epoch), wherever it stands
_STEP = re.compile(r"\{\s*(?:Epoch:\[\s*(?P<epoch>\d{1,15})/\s*(?P<epochs>\d{1,15})\],\s*)?"
                   r"step:\[\s*(?P<step>\d{1,15})/\s*(?P<steps>\d{1,15})\],\s*"
                   r"(?:loss:\[\s*(?P<loss>[^/\]]*)/[^\]]*\]|loss:\s*(?P<sink_loss>[^,\s\[]+))(?P<rest>.*)$")
#: MindFormers v0.6 and before: no braces, ``time:`` the step's (in sink mode the sink's) milliseconds
_STEP06 = re.compile(r"Epoch:\[\s*(?P<epoch>\d{1,15})/\s*(?P<epochs>\d{1,15})\],\s*"
                     r"step:\[\s*(?P<step>\d{1,15})/\s*(?P<steps>\d{1,15})\],\s*"
                     r"loss:\[\s*(?P<loss>[^/\]]*)/[^\]]*\],\s*time:\s*(?P<ms>[^,\s]+)\s*ms(?P<rest>.*)$")
_SINK_SIZE = re.compile(r"Will be Training epochs:\s*\d+, sink_size:\s*(?P<sink>-?\d+)")
_PROGRESS = re.compile(r"\|\s*(?P<sps>[-+0-9.eE]+|nan|inf) samples/s/p")
_FLOPS = re.compile(r"Full model flops is (?P<full>\d+)")
_CKPT = re.compile(r"Finish saving \w+ of epoch (?P<epoch>\d+) step (?P<step>\d+)")
#: the usual step line whole, as bytes (file format; non-sink loss; lr; no separate losses): read without
#: decoding or splitting into fields. Groups: hour, minute, second, ms, epoch, epochs, step, steps, loss,
#: per_step_time, lr, overflow, loss scale, global norm, TFLOP/s.
_FAST_STEP = re.compile(
    rb"\[INFO\] (\d{4}-\d\d-\d\d \d\d):([0-5]\d):([0-5]\d|60),(\d{3}) \[[^\]]*\] print_output_info: "
    rb"\{ Epoch:\[ *(\d{1,15})/ *(\d{1,15})\], step:\[ *(\d{1,15})/ *(\d{1,15})\], "
    rb"loss:\[ *(" + _FLOAT + rb")/ *" + _FLOAT + rb"\], per_step_time: (\d{1,15})ms, lr: (" + _FLOAT + rb"), "
    rb"overflow cond: (True|False), loss_scale: (" + _FLOAT + rb"), global_norm: \[?(" + _FLOAT + rb")\]?"
    rb"(?:, train_throughput_per_npu: (" + _FLOAT + rb")T)?\r?$")
#: a fast line's text from its epoch on, as whitespace-separated fields for pandas ("[", "]", "/", ":", ","
#: and the "T" of TFLOP/s become spaces; "m" too, so that "20ms" reads as 20): the columns kept of it
_FAST_TABLE = bytes.maketrans(b"[]/:,mT", b"       ")
_FAST_COLS = {"epoch": 0, "loss": 6, "step_ms": 10, "lr": 13, "loss_scale": 18, "grad_norm": 20, "tflops": 22}
_NO_TFLOPS = b", train_throughput_per_npu: nanT"
_FAST_PROGRESS = re.compile(rb"\| *([0-9.]+) samples/s/p")
#: the same two shapes for RE2 (pyarrow.compute), matched over whole arrays of lines at once: named groups
#: of the fast step line's fields, and the progress line's samples/s/p
_FAST_RE2 = (r"^\[INFO\] (?P<ts>\d{4}-\d\d-\d\d \d\d:[0-5]\d:(?:[0-5]\d|60),\d{3}) \[[^\]]*\] print_output_info: "
             r"\{ Epoch:\[ *(?P<epoch>\d{1,15})/ *(?P<epochs>\d{1,15})\], step:\[ *(?P<step>\d{1,15})/ *"
             r"(?P<steps>\d{1,15})\], loss:\[ *(?P<loss>" + _F + r")/ *" + _F + r"\], "
             r"per_step_time: (?P<ms>\d{1,15})ms, "
             r"lr: (?P<lr>" + _F + r"), overflow cond: (?P<over>True|False), loss_scale: (?P<scale>" + _F + r"), "
             r"global_norm: \[?(?P<norm>" + _F + r")\]?(?:, train_throughput_per_npu: (?P<tflops>" + _F + r")T)?\r?$")
_PROGRESS_RE2 = r"\| *(?P<sps>[0-9.]+) samples/s/p"
#: the fields of a line _FAST_RE2 matched, with unbounded numbers (the same captures there: each number
#: stands between fixed words), which RE2 extracts three times faster than the bounded ones
_FU = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_FIELDS_RE2 = _FAST_RE2.replace(_F, _FU).replace(r"\d{1,15}", r"\d+")
#: the words every fast step line holds (a cheap first sieve before the regular expression)
_FAST_WORDS = b"] print_output_info: { Epoch:["


class MindFormersSteps:
    """MindFormers' step, progress and job lines of one rank's log, into its :class:`LogState` (a
    :class:`~mstop.formats.mflog.LogFormat`)."""

    #: the kinds of line (:meth:`classify`'s) it reads as arrays: its usual step line, its progress line
    bulk_kinds = (1, 2)

    def __init__(self, st: LogState) -> None:
        self.st = st
        self._fast: list[tuple[bytes, bytes, float, float]] = []  # (timestamp, text, overflow, step)
        self.sink_size: int | None = None  # v0.6's "Will be Training epochs:1, sink_size:4" (-1: no sink)

    def info(self, t: float, msg: str) -> bool:
        """A line that says what the job's steps hold (sink size, global batch, FLOPs) or that a checkpoint
        was saved; False for any other."""
        if "sink_size:" in msg and (m := _SINK_SIZE.search(msg)) is not None:
            self.sink_size = int(m.group("sink"))
        elif "global_batch_size = " in msg:
            self.global_batch_line(msg)
        elif "Full model flops is" in msg:
            m = _FLOPS.search(msg)
            if m is not None:
                self.st.model_flops = float(m.group("full"))
        elif "Finish saving" in msg:
            m = _CKPT.search(msg)
            if m is not None and self.st.session is not None:
                step = int(m.group("step"))
                if self.st.steps_per_epoch and step <= self.st.steps_per_epoch:
                    step += (int(m.group("epoch")) - 1) * self.st.steps_per_epoch
                self.st.event({"kind": "checkpoint", "time": t, "session": self.st.session, "step": step,
                               "path": None})
        else:
            return False
        return True

    def rows(self, k: int) -> np.ndarray:
        """The first ``k`` fast rows not given out yet, as a table (and forgotten)."""
        got, self._fast = self._fast[:k], self._fast[k:]
        return self.fast_table(got)

    def fast(self, raw: bytes) -> bool:
        """A line of the usual shapes read without decoding: a step line (:data:`_FAST_STEP`), a progress line.
        False: any other line (a step line of another shape is read by :meth:`step`, decoded)."""
        if b"{ Epoch:[" in raw:
            m = _FAST_STEP.match(raw)
            if m is None:
                return False
            self.fast_step(m, raw)
            return True
        if b"samples/s/p" in raw and (m := _FAST_PROGRESS.search(raw)) is not None:
            self.st.sps(number(m.group(1).decode()))
            return True
        return False

    def step(self, t: float, msg: str) -> bool:
        """A step line of MindFormers' in ``msg`` (at ``t``): read as a row, or a bad row. False: none."""
        if "step:[" not in msg:
            return False
        m = _STEP.search(msg)
        if m is not None:
            self.step_line(t, m)
            return True
        m = _STEP06.search(msg)
        if m is not None:
            self.step06(t, m)
            return True
        return False

    def trailer(self, msg: str) -> bool:
        """The progress line after a step line (its samples/s/p); False for any other line."""
        if "samples/s/p" not in msg:
            return False
        m = _PROGRESS.search(msg)
        if m is not None:
            self.st.sps(number(m.group("sps")))
        return True

    def given_out(self) -> None:
        """Rows were taken: nothing of this format waits on them."""

    @staticmethod
    def classify(arr: Any, kinds: np.ndarray) -> None:
        """Mark in ``kinds`` the lines of ``arr`` (an Arrow array of lines) it reads as arrays: 1 its usual
        step line, 2 a progress line (no step record in it)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        cand = np.flatnonzero(pc.match_substring(arr, _FAST_WORDS).to_numpy(zero_copy_only=False))
        if len(cand):
            ok = pc.match_substring_regex(arr.take(pa.array(cand)), _FAST_RE2[:-1] + r"\n$")
            kinds[cand[ok.to_numpy(zero_copy_only=False)]] = 1
        rest = np.flatnonzero(kinds == 0)
        if len(rest):
            sub = arr.take(pa.array(rest))
            prog = rest[pc.match_substring(sub, b"samples/s/p").to_numpy(zero_copy_only=False)]
            if len(prog):
                prog = prog[~pc.match_substring(arr.take(pa.array(prog)), b"{ Epoch:[").to_numpy(zero_copy_only=False)]
            kinds[prog] = 2

    def step_line(self, t: float, m: re.Match[str]) -> None:
        """A row of MFLossMonitor's (or the PyNative trainer's) step line."""
        self.st.step_lines += 1
        loss_text = m.group("loss") if m.group("loss") is not None else m.group("sink_loss")
        if not is_number(loss_text):
            self.st.bad_row()  # a step line cut short, or not MindFormers'
            return
        epoch, epochs = int(m.group("epoch") or 1), int(m.group("epochs") or 1)
        if not real_step(epoch, epochs, int(m.group("step")), int(m.group("steps"))):
            self.st.bad_row()  # Epoch:[0/0], step:[0/0]: no step a job ran (it would start a phantom session)
            return
        self.st.formats.add("mindformers" if m.group("epoch") is not None else "mindformers pynative")
        f = _fields(m.group("rest"))
        over = f.get("overflow_cond")
        extra = [number(f.get(k)) for k in SEPARATE_LOSSES]
        extra.append(number((f.get("train_throughput_per_npu") or f.get("throughput") or "").removesuffix("T")))
        norm = f.get("global_norm", f.get("grad_norm"))
        self.st.row(t, epoch, epochs, int(m.group("step")), int(m.group("steps")),
                  float(loss_text), number(f.get("lr")), number(norm),
                  number(f.get("per_step_time", "").removesuffix("ms").strip()),
                  1.0 if over == "True" else 0.0 if over == "False" else math.nan, number(f.get("loss_scale")),
                  extra, norm_said=is_number(norm))

    def step06(self, t: float, m: re.Match[str]) -> None:
        """A row of MindFormers v0.6's step line: ``time`` is the step's milliseconds, in sink mode the whole
        sink's (``sink_size`` steps, as its "Will be Training" line said): the row's is per step."""
        self.st.step_lines += 1
        if not is_number(m.group("loss")) or not is_number(m.group("ms")):
            self.st.bad_row()
            return
        epoch, epochs, step, steps = (int(m.group(k)) for k in ("epoch", "epochs", "step", "steps"))
        if not real_step(epoch, epochs, step, steps):
            self.st.bad_row()
            return
        self.st.formats.add("mindformers v0.6")
        f = _fields(m.group("rest"))
        ms = float(m.group("ms")) / (self.sink_size if self.sink_size and self.sink_size > 1 else 1)
        over = f.get("overflow_cond")
        self.st.row(t, epoch, epochs, step, steps, float(m.group("loss")), number(f.get("lr")), math.nan, ms,
                  1.0 if over == "True" else 0.0 if over == "False" else math.nan, number(f.get("loss_scale")),
                  [math.nan] * (len(SEPARATE_LOSSES) + 1), norm_said=False)

    def fast_step(self, m: re.Match[bytes], raw: bytes) -> None:
        """A step line of the usual shape (:data:`_FAST_STEP`: file format, non-sink loss, lr, finite numbers,
        no separate losses). Only its step is read now; its numbers are read with the others at
        the rows' giving out (MfLogParser), by pandas, from the text kept."""
        self.st.step_lines += 1
        g = m.groups()
        base = self.st.hour_of(raw[7:20])
        if math.isnan(base) or not real_step(int(g[4]), int(g[5]), int(g[6]), int(g[7])):
            self.st.bad_row()  # a stamp that is no date, or a step no job ran (step 0 of 0): one bad row
            return
        gstep = self.st.begin_row(int(g[4]), int(g[5]), int(g[6]), int(g[7]), lambda: self.st.time(
            g[0].decode() + ":" + g[1].decode() + ":" + g[2].decode(), g[3].decode()))
        text = raw[m.start(5):]
        self._fast.append((raw[7:30], text if g[14] is not None else text + _NO_TFLOPS,
                           1.0 if g[11] == b"True" else 0.0, gstep))
        self.st.hold_deferred(self, raw[7:30])  # its numbers read by rows(); its time when needed (line_time)

    def bulk(self, lines: Any, arr: Any, kinds: np.ndarray, a: int, b: int, one: Callable[[bytes], None]) -> bool:
        """Lines ``a``..``b`` (each a fast step line or a progress line) as arrays: their fields by one RE2
        pass, their times by array arithmetic, sessions and progress lines by where the steps go back.
        The same rows and events as reading them one by one; False (nothing done) where that would differ
        (a step no job ran, a stamp that is no date, a number a progress line cannot be read as)."""
        k = kinds[a:b]
        step_at = np.flatnonzero(k == 1) + a
        prog_at = np.flatnonzero(k == 2) + a
        if len(step_at) < 2:
            return False
        got = self._bulk_fields(arr, step_at, prog_at)
        if got is None:
            return False
        c, sps = got
        self.st.step_lines += len(step_at)
        # progress lines before the segment's first step belong to the row held from before
        early = prog_at < step_at[0]
        for v in sps[early].tolist():
            self.st.sps(v)
        # each step's samples/s/p: the first progress line after it, before the next step
        row_sps = np.full(len(step_at), np.nan)
        late = np.flatnonzero(~early)
        if len(late):
            owner = np.searchsorted(step_at, prog_at[late], side="right") - 1
            first = np.unique(owner, return_index=True)[1]
            row_sps[owner[first]] = sps[late][first]
        self._bulk_rows_of(c, row_sps)
        self.st.stamped(lines[int(step_at[-1])][7:30])
        return True

    def _bulk_fields(self, arr: Any, step_at: np.ndarray,
                     prog_at: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray] | None:
        """The step lines' fields as float arrays (and ``time``), and the progress lines' samples/s/p; None
        where a line would read otherwise one by one."""
        import pyarrow as pa
        import pyarrow.compute as pc

        f = _extract(arr.take(pa.array(step_at)), _FIELDS_RE2[:-1] + r"\n$")
        if f.null_count:
            return None

        def number(field: Any) -> np.ndarray:
            return pc.cast(field.cast(pa.string()), pa.float64()).to_numpy(zero_copy_only=False)

        try:
            c = {n: number(f.field(n)) for n in ("epoch", "epochs", "step", "steps", "loss", "ms", "lr", "scale",
                                                 "norm")}
            tf = f.field("tflops")  # an optional group: empty where the line has none
            c["tflops"] = np.full(len(step_at), np.nan)
            said = pc.binary_length(tf).to_numpy(zero_copy_only=False) > 0
            if said.any():
                c["tflops"][said] = number(tf.filter(pa.array(said)))
            sps = np.full(0, np.nan)
            if len(prog_at):
                p = pc.extract_regex(arr.take(pa.array(prog_at)), _PROGRESS_RE2)
                if p.null_count:
                    return None
                sps = number(p.field("sps"))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None  # "1.2.3" samples/s/p, a field that is no number: line by line
        ts = f.field("ts")
        data = np.frombuffer(ts.buffers()[2], np.uint8)
        width = np.int64 if pa.types.is_large_binary(ts.type) else np.int32
        off = np.frombuffer(ts.buffers()[1], width)[ts.offset:ts.offset + len(ts) + 1]
        raw_ts = data[off[0]:off[-1]]
        if len(raw_ts) != 23 * len(ts):
            return None
        c["time"] = self.st.stamp_array(raw_ts.reshape(-1, 23))
        if not (np.isfinite(c["time"]).all() and all((c[n] >= 1).all() for n in ("epoch", "epochs", "step", "steps"))):
            return None
        c["over"] = (f.field("over").to_numpy(zero_copy_only=False) == b"True").astype(np.float64)
        return c, sps

    def _bulk_rows_of(self, c: dict[str, np.ndarray], row_sps: np.ndarray) -> None:
        """The rows of a run of step lines read as arrays: sessions cut where the step goes back (or the
        total changes), as :meth:`LogState.begin_row` does row by row, and one block of numbers."""
        gstep = (c["epoch"] - 1) * c["steps"] + c["step"]
        total = c["epochs"] * c["steps"]
        cuts = np.flatnonzero((gstep[1:] <= gstep[:-1]) | (total[1:] != total[:-1])) + 1
        m = len(gstep)
        for s0, e0 in zip([0, *cuts.tolist()], [*cuts.tolist(), m]):
            t0 = float(c["time"][s0])
            self.st.begin_row(int(c["epoch"][s0]), int(c["epochs"][s0]), int(c["step"][s0]), int(c["steps"][s0]),
                            lambda t=t0: t)
            n = e0 - s0 - 1
            if n:
                self.st.same_session(n)
                self.st.last_step = float(gstep[e0 - 1])
        table = np.full((m, len(NUMERIC) + len(EXTRA)), np.nan)
        table[:, 0], table[:, 1], table[:, 2] = c["time"], gstep, c["epoch"]
        table[:, 3], table[:, 4], table[:, 5] = c["loss"], c["lr"], c["norm"]
        table[:, 6] = np.where(c["ms"] > 0, c["ms"] / 1000.0, np.nan)
        table[:, 16], table[:, 17] = c["over"], c["scale"]
        table[:, len(NUMERIC) + EXTRA.index("train_throughput_per_npu")] = c["tflops"]
        self.st.hold_block(table, row_sps)

    def fast_table(self, fast: list[tuple[bytes, bytes, float, float]]) -> np.ndarray:
        """The rows of fast lines: their numbers read by one pandas call, their times by array arithmetic."""
        import io

        import pandas as pd

        stamps, texts, overflow, steps = zip(*fast)
        out = np.full((len(fast), len(NUMERIC) + len(EXTRA)), np.nan)
        blob = b"\n".join(texts).translate(_FAST_TABLE)
        df = pd.read_csv(io.BytesIO(blob), sep=r"\s+", header=None, usecols=list(_FAST_COLS.values()),
                         engine="c", dtype=np.float64)
        col = {name: df[j].to_numpy(dtype=np.float64) for name, j in _FAST_COLS.items()}
        out[:, 0] = self.st.stamps(stamps)
        out[:, 1] = steps
        out[:, 2], out[:, 3], out[:, 4], out[:, 5] = col["epoch"], col["loss"], col["lr"], col["grad_norm"]
        out[:, 6] = np.where(col["step_ms"] > 0, col["step_ms"] / 1000.0, np.nan)
        out[:, 16], out[:, 17] = overflow, col["loss_scale"]
        out[:, len(NUMERIC) + EXTRA.index("train_throughput_per_npu")] = col["tflops"]
        return out

    def global_batch_line(self, msg: str) -> None:
        """MindFormers' account of the global batch, in each of its forms: ``global_batch_size = batch_size_per_card
        * device_num * gradient_accumulation_steps = 4 = 4 * 1 * 1``, ``... = per_batch_size * data_parallel
        = 8 * 2 = 16``; the device count where the formula names it."""
        parts = [p.strip().rstrip(").") for p in msg.split("global_batch_size = ", 1)[1].split(" = ")]
        if len(parts) != 3:
            return
        formula, a, b = parts
        total, factors = (a, b) if a.isdigit() else (b, a)
        if not total.isdigit():
            return
        self.st.global_batch = int(total)
        names = [n.strip() for n in formula.split("*")]
        values = [v.strip() for v in factors.split("*")]
        devices = None
        if "device_num" in names and len(names) == len(values) and values[names.index("device_num")].isdigit():
            devices = float(values[names.index("device_num")])
            self.st.devices = int(devices)
        self.st.batch = (float(self.st.global_batch), devices if devices is not None else self.st.batch[1])


def _extract(arr: Any, pattern: str) -> Any:
    """pyarrow.compute.extract_regex over ``arr``, in pieces on two threads when long (it lets go of the
    GIL: a second core halves a long read)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(arr)
    if n < 20_000:
        return pc.extract_regex(arr, pattern)
    from concurrent.futures import ThreadPoolExecutor

    bounds = [n * i // 4 for i in range(5)]
    with ThreadPoolExecutor(2) as pool:
        parts = list(pool.map(lambda i: pc.extract_regex(arr.slice(bounds[i], bounds[i + 1] - bounds[i]), pattern),
                              range(4)))
    return pa.concat_arrays(parts)




def _fields(rest: str) -> dict[str, str]:
    """``, key: value`` pairs after the loss (``global_norm: [1.0]`` gives ``1.0``; ``lm loss`` is
    ``lm_loss``; the record's closing brace is not part of its last value)."""
    out = {}
    for part in rest.split(","):
        key, sep, value = part.partition(":")  # v0.6 prints "lr:[0.]", later ones "lr: 1e-05"
        if sep:
            out[key.strip().replace(" ", "_")] = value.strip().rstrip("}").strip().strip("[]").strip()
    return out
