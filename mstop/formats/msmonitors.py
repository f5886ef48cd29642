"""MindSpore's own callbacks' lines (a format of mstop.formats.mflog's driver): LossMonitor's ``epoch: E step: S,
loss is L`` (the step within its epoch: the global step adds the sizes of the epochs before) and TimeMonitor's
``epoch time: .. ms, per step time: .. ms`` (an epoch's size, and its steps' time). A plain MindSpore job's
log (an msrun worker log, a captured stdout) is read from these; long runs of bare LossMonitor lines as
arrays, an epoch at a time.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable

import numpy as np

from .logstate import EXTRA, FLOAT_TEXT, LogState, is_number, number
from .parse import NUMERIC

#: MindSpore's LossMonitor (``print("epoch: %s step: %s, loss is %s")``, the step within its epoch) and
#: TimeMonitor (2.x: ``"{} epoch time: {:5.3f} ms, per step time: {:5.3f} ms"``, mode.title() first; 1.x:
#: ``"epoch time: {:5.3f}, per step time: {:5.3f}"``, milliseconds with no unit)
#: The spellings published logs show (mindspore-ai/mindspore model_zoo READMEs, MindSpore 0.6-1.3: ``epoch:0
#: step:1251, loss is 5.7787247`` and ``Epoch time:360760.985, per step time:288.378``; the callbacks of
#: model-zoo scripts: ``epoch: 1, step: 20, loss is ...``) are read too: any spaces after a colon, a comma after
#: the epoch, epochs or steps counted from 0 (see MonitorLines.loss_monitor).
_LOSS_MONITOR = re.compile(r"\bepoch:[ \t]*(?P<epoch>\d{1,15}),?[ \t]*step:[ \t]*(?P<step>\d{1,15})[ \t]*,[ \t]*"
                           r"loss is (?P<loss>.+?)\s*$")
_TIME_MONITOR = re.compile(r"\b[Ee]poch time:[ \t]*(?P<epoch_ms>[-+0-9.eE]+|nan|inf)(?: ?ms)?, per step time:[ \t]*"
                           r"(?P<step_ms>[-+0-9.eE]+|nan|inf)(?: ?ms\b|(?![ \t]*[0-9A-Za-z.]))")
#: LossMonitor's line with nothing around it (as msrun's worker logs hold it) and a plain number for a loss
_LM_RE2 = (r"^epoch:[ \t]*(?P<epoch>\d{1,9}),?[ \t]*step:[ \t]*(?P<step>\d{1,9})[ \t]*,[ \t]*loss is (?P<loss>"
           + FLOAT_TEXT + r")\n$")


class MonitorLines:
    """LossMonitor's and TimeMonitor's lines of one rank's log, into its :class:`LogState` (a
    :class:`~mstop.formats.mflog.LogFormat`)."""

    #: the kinds of line (:meth:`classify`'s) it reads as arrays: LossMonitor's bare line
    bulk_kinds = (3,)

    def __init__(self, st: LogState) -> None:
        self.st = st
        # LossMonitor's step is within its epoch: the epoch's size (from TimeMonitor, else the last step seen)
        self._lm_epoch: int | None = None
        self._lm_size: dict[int, int] = {}
        self._lm_base: tuple[int, int] | None = None  # (epoch, global step before it) while the sizes hold
        self._lm_waiting: list[list[float]] = []  # this epoch's rows not given out, waiting for TimeMonitor
        self._from_zero = [0, 0]  # added to the epoch and the step a line says: 1 once it said a 0

    def given_out(self) -> None:
        """Rows given out are no longer filled in by a TimeMonitor line (the waiting rows are the newest: at
        most the rows still held are kept; a kept one given out is written to, read by no one)."""
        w, held = self._lm_waiting, self.st.rows_held
        self._lm_waiting = w[len(w) - min(len(w), held):]

    def fast(self, raw: bytes) -> bool:
        """No line of these is read without decoding."""
        return False

    def step(self, t: float, msg: str) -> bool:
        """LossMonitor's or TimeMonitor's line in ``msg`` (at ``t``): a row (or a bad row), or an epoch's step
        time. False: neither."""
        if "loss is" in msg and (m := _LOSS_MONITOR.search(msg)) is not None:
            self.loss_monitor(t, m)
            return True
        if "per step time" in msg and (m := _TIME_MONITOR.search(msg)) is not None:
            self.time_monitor(m)
            return True
        return False

    def trailer(self, msg: str) -> bool:
        """No line completes a LossMonitor line."""
        return False

    def info(self, t: float, msg: str) -> bool:
        """No other line says what these steps hold."""
        return False

    @staticmethod
    def classify(arr: Any, kinds: np.ndarray) -> None:
        """Mark in ``kinds`` the lines of ``arr`` it reads as arrays, among those no format marked yet: 3
        LossMonitor's bare line."""
        import pyarrow as pa
        import pyarrow.compute as pc

        rest = np.flatnonzero(kinds == 0)
        if len(rest):
            lm = rest[pc.match_substring(arr.take(pa.array(rest)), b"loss is").to_numpy(zero_copy_only=False)]
            if len(lm):
                ok = pc.match_substring_regex(arr.take(pa.array(lm)), _LM_RE2)
                kinds[lm[ok.to_numpy(zero_copy_only=False)]] = 3

    def loss_monitor(self, t: float, m: re.Match[str]) -> None:
        """A row of MindSpore's LossMonitor: its step is within the epoch; the global step adds the sizes
        of the epochs before (TimeMonitor's count, else the last step seen in each)."""
        self.st.step_lines += 1
        loss_text = m.group("loss").strip().strip("[]()").strip()
        epoch, step = int(m.group("epoch")), int(m.group("step"))
        # a log that says epoch 0 (or step 0) counts from 0 (a script's own callback, cur_epoch_num - 1): its
        # epochs (steps) are one more than it says, from then on
        if epoch == 0:
            self._from_zero[0] = 1
        if step == 0:
            self._from_zero[1] = 1
        epoch, step = epoch + self._from_zero[0], step + self._from_zero[1]
        if not is_number(loss_text) or epoch < 1 or step < 1:
            self.st.bad_row()
            return
        self.st.formats.add("mindspore LossMonitor")
        if self._lm_epoch is not None and epoch < self._lm_epoch:
            self._lm_size.clear()  # a new process from an earlier epoch: the sizes count again
            self._lm_base = None
        if epoch != self._lm_epoch:
            self._lm_waiting = []
        if self._lm_base is not None and self._lm_base[0] == epoch:
            base = self._lm_base[1]
        else:
            # an earlier epoch not seen (a log that begins at epoch 2: rotated, or a resumed job) is guessed
            # from the epochs before this one only: this epoch's own growing size would move its base with
            # every line (steps 1, 3, 5 ...); the base then holds for the epoch, guessed or not
            earlier = [v for e, v in self._lm_size.items() if e < epoch]
            size = self._lm_size.get(epoch - 1) or max(earlier, default=0)
            base = sum(self._lm_size.get(e, size) for e in range(1, epoch))
            self._lm_base = (epoch, base)
        self._lm_epoch = epoch
        self._lm_size[epoch] = max(self._lm_size.get(epoch, 0), step)
        gstep = base + step
        self.st.begin_row(1, 1, gstep, 0, lambda: t)
        row = [math.nan] * len(NUMERIC)
        row[0], row[1], row[2], row[3] = t, float(gstep), float(epoch), float(loss_text)
        self.st.hold_row(row, [math.nan] * len(EXTRA), arrival=self.st.timing_by_arrival)
        self._lm_waiting.append(row)

    def time_monitor(self, m: re.Match[str]) -> None:
        """TimeMonitor's epoch line: the epoch's size (epoch time / per step time), and its per-step time
        for the epoch's rows not given out yet (a log read afterwards: all of them)."""
        epoch_ms, step_ms = number(m.group("epoch_ms")), number(m.group("step_ms"))
        if not (step_ms > 0 and math.isfinite(epoch_ms)):
            return
        self.st.formats.add("mindspore TimeMonitor")
        if self._lm_epoch is not None:
            self._lm_size[self._lm_epoch] = max(1, round(epoch_ms / step_ms))
            self._lm_base = None  # an epoch's size changed: the next epoch's base is counted again
        for row in self._lm_waiting:  # the epoch's rows still here (not given out), each once
            if math.isnan(row[6]):
                row[6] = step_ms / 1000.0
        self._lm_waiting = []

    def bulk(self, lines: Any, arr: Any, kinds: np.ndarray, a: int, b: int, one: Callable[[bytes], None]) -> bool:
        """Lines ``a``..``b`` (each LossMonitor's bare line) as arrays, an epoch at a time: the first line of
        each epoch one by one (sessions, the epoch's base step), the rest as one block timed by the file,
        as one by one. False (nothing done) before the first line where that would differ (no file time,
        a step that goes back, a loss that is no finite number)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if self.st.arrived is None:
            return False
        f = pc.extract_regex(arr.slice(a, b - a), _LM_RE2)
        try:
            ep, st, loss = (pc.cast(f.field(n).cast(pa.string()), pa.float64()).to_numpy(zero_copy_only=False)
                            for n in ("epoch", "step", "loss"))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return False
        if f.null_count or not np.isfinite(loss).all():
            return False
        zero = np.flatnonzero(((ep == 0) & (self._from_zero[0] == 0)) | ((st == 0) & (self._from_zero[1] == 0)))
        if len(zero):  # a 0 not seen before: the lines to it one by one (the count from 0 is learnt there)
            k = a + int(zero[0]) + 1
            for i in range(a, k):
                one(lines[i])
            if k < b and not (b - k >= 2 and self.bulk(lines, arr, kinds, k, b, one)):
                for i in range(k, b):
                    one(lines[i])
            return True
        ep, st = ep + self._from_zero[0], st + self._from_zero[1]
        cuts = [0, *(np.flatnonzero(ep[1:] != ep[:-1]) + 1).tolist(), len(ep)]
        for s0, e0 in zip(cuts[:-1], cuts[1:]):
            rows = self.st.rows_held
            one(lines[a + s0])
            base = self._lm_base
            steps = st[s0 + 1:e0]
            if (self.st.rows_held != rows + 1 or base is None or base[0] != int(ep[s0]) or
                    (np.diff(st[s0:e0]) <= 0).any()):
                for k in range(s0 + 1, e0):  # as one by one would: the line does not fit a block
                    one(lines[a + k])
                continue
            if len(steps):
                self.lm_rows(int(ep[s0]), base[1], steps, loss[s0 + 1:e0])
        return True

    def lm_rows(self, epoch: int, base: int, steps: np.ndarray, loss: np.ndarray) -> None:
        """LossMonitor rows of one epoch after its first (which opened the session): one block, each row
        timed by the file and waiting for the epoch's TimeMonitor line."""
        m, gstep = len(steps), base + steps
        table = np.full((m, len(NUMERIC) + len(EXTRA)), np.nan)
        table[:, 0], table[:, 1], table[:, 2], table[:, 3] = self.st.arrived, gstep, float(epoch), loss
        self.st.same_session(m)
        # each row a view: TimeMonitor's step time and the spacing by it write through
        self._lm_waiting.extend(self.st.hold_block(table, arrival=True))
        self.st.last_step = float(gstep[-1])
        self._lm_size[epoch] = max(self._lm_size.get(epoch, 0), int(steps[-1]))
        self.st.step_lines += m
        self.st.untimed += m
