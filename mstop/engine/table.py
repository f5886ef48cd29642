"""Every rank's rows held in memory, by column across ranks (issue 39 step 4).

One growable 1-D array per column holds the rows of every rank: each rank (a *slot*) owns a region of it, and
its rows held are the cells ``lo..hi`` of that region, so a rank's column is a view, never a copy. A read
round's rows (one or a few per rank while following) land by one assignment per column for all the ranks at
once (:meth:`Table.append_round`), not by a call per rank and column; a rank's first read (thousands of rows)
lands by one slice per column (:meth:`Table.append`).

A float column whose every held value is one value in a rank (the tokens a step, the device's memory, an
empty ``queue_depth``) is not an array: each rank's value is kept in one small array across ranks, until some
rank's value changes (bit for bit); the column is then made an array, each rank's rows filled with its value.

Cells are never written twice in one array: rows spilled (mstop.engine.spill) or forgotten only move ``lo``
or ``hi`` on, a rank whose region is full moves to a new region past the end, and when the array is full a
new one is made holding only the live regions. So a frozen view (:meth:`Table.frozen`, what a snapshot's rank
holds) reads the same values however the store grows after it; its arrays are freed with the last view.
"""

from __future__ import annotations

import numpy as np

#: a region's room past its rows: 1/GROWTH of them and 64 more (a rank moves to a new region that rarely)
GROWTH = 8
#: cells the arrays hold at the least
MIN_SIZE = 4096


def _bits(v: np.ndarray) -> np.ndarray:
    """Float values as their bits: equal bits is one value (NaN as NaN, -0.0 not 0.0)."""
    return v.view(np.uint32 if v.dtype.itemsize == 4 else np.uint64)


class Held:
    """One rank's held rows as they were when frozen: views of the arrays of that moment."""

    __slots__ = ("arrays", "consts", "slot", "lo", "hi")

    def __init__(self, arrays: dict[str, np.ndarray], consts: dict[str, np.ndarray], slot: int, lo: int,
                 hi: int) -> None:
        self.arrays, self.consts, self.slot, self.lo, self.hi = arrays, consts, slot, lo, hi

    @property
    def n(self) -> int:
        return self.hi - self.lo

    def column(self, name: str) -> np.ndarray | None:
        """The rows of column ``name`` (a read-only view of one value while the column is one value); None
        when the table has no such column."""
        a = self.arrays.get(name)
        if a is not None:
            return a[self.lo:self.hi]
        c = self.consts.get(name)
        if c is None:
            return None
        out = np.ndarray((self.hi - self.lo,), c.dtype, c, self.slot * c.itemsize, (0,))
        out.flags.writeable = False
        return out

    def frozen(self) -> Held:
        return self


class Table:
    """Every rank's held rows by column (see the module's doc). Not thread-safe: the store's lock guards it."""

    def __init__(self, exact: tuple[str, ...], floats: tuple[str, ...]) -> None:
        self.exact, self.floats = exact, floats
        #: column -> its array over every region (replaced whole, never shrunk or rewritten: views keep theirs)
        self.arrays: dict[str, np.ndarray] = {c: np.empty(0, np.float64) for c in exact}
        self.arrays["session"] = np.empty(0, np.uint8)
        #: float column -> each slot's value while the column is one value in every slot
        self.consts: dict[str, np.ndarray] = {c: np.full(0, np.nan, np.float32) for c in floats}
        self.size = 0  # cells of every array
        self.end = 0  # cells handed out to regions
        self.slots = 0
        self.off = np.zeros(0, np.int64)  # each slot's region: first cell, room
        self.room = np.zeros(0, np.int64)
        self.lo = np.zeros(0, np.int64)  # its rows held: cells lo..hi
        self.hi = np.zeros(0, np.int64)
        self.fresh = np.zeros(0, bool)  # never held a row: its values of one-valued columns are still free
        self.live = 0  # rows held, all slots

    # -- slots -------------------------------------------------------------------------------------------

    def add_slot(self) -> int:
        s = self.slots
        if s == len(self.off):
            cap = s + s // 4 + 64
            self.off, self.room, self.lo, self.hi = (np.concatenate([a, np.zeros(cap - s, np.int64)])
                                                     for a in (self.off, self.room, self.lo, self.hi))
            self.fresh = np.concatenate([self.fresh, np.ones(cap - s, bool)])
            self.consts = {c: np.concatenate([v, np.full(cap - s, np.nan, v.dtype)]) for c, v in self.consts.items()}
        self.slots += 1
        return s

    def n(self, s: int) -> int:
        return int(self.hi[s] - self.lo[s])

    def held(self, s: int) -> Held:
        """Slot ``s``'s rows as they are now (read at once: a later append is not in it)."""
        return Held(self.arrays, self.consts, s, int(self.lo[s]), int(self.hi[s]))

    frozen = held

    def column(self, s: int, name: str) -> np.ndarray | None:
        """Slot ``s``'s rows of column ``name`` now (see Held.column)."""
        lo, hi = int(self.lo[s]), int(self.hi[s])
        a = self.arrays.get(name)
        if a is not None:
            return a[lo:hi]
        c = self.consts.get(name)
        if c is None:
            return None
        out = np.ndarray((hi - lo,), c.dtype, c, s * c.itemsize, (0,))
        out.flags.writeable = False
        return out

    def last(self, s: int, name: str) -> float:
        """Slot ``s``'s last held row's value of a column (it has one)."""
        a = self.arrays.get(name)
        if a is not None:
            return float(a[self.hi[s] - 1])
        c = self.consts.get(name)
        return float(c[s]) if c is not None else float("nan")

    # -- rows in -----------------------------------------------------------------------------------------

    def add_column(self, name: str) -> None:
        """A float column (an extra one) from now on: NaN in every row so far."""
        if name not in self.arrays and name not in self.consts:
            self.consts = {**self.consts, name: np.full(len(self.off), np.nan, np.float32)}

    def append(self, s: int, exact: np.ndarray, floats: np.ndarray, session: np.ndarray,
               extra: dict[str, np.ndarray]) -> None:
        """Append rows to slot ``s``: ``exact`` (k x len(exact)), ``floats`` (k x len(floats)), each row's
        session index, extra float columns by name (added first with :meth:`add_column`; an extra column not
        given is NaN)."""
        k = len(session)
        if not k:
            return
        self._make_room(np.array([s]), k)
        self._widen_session(session)
        cols: dict[str, np.ndarray] = {c: floats[:, j] for j, c in enumerate(self.floats)}
        cols.update(extra)
        self._settle_consts(np.array([s]), k, cols)
        hi = int(self.hi[s])
        arrays = self.arrays
        for j, c in enumerate(self.exact):
            arrays[c][hi:hi + k] = exact[:, j]
        arrays["session"][hi:hi + k] = session
        for c, a in arrays.items():
            if c in self.exact or c == "session":
                continue
            v = cols.get(c)
            a[hi:hi + k] = v if v is not None else np.nan
        self.hi[s] = hi + k
        self.fresh[s] = False
        self.live += k

    def append_round(self, slots: np.ndarray, exact: np.ndarray, floats: np.ndarray, session: np.ndarray) -> None:
        """Append one row to each of ``slots`` (no slot twice): one assignment per column for all of them.
        Extra columns are NaN in these rows."""
        k = len(slots)
        if not k:
            return
        self._make_room(slots, 1)
        self._widen_session(session)
        cols = {c: floats[:, j] for j, c in enumerate(self.floats)}
        self._settle_consts(slots, 1, cols, one_row=True)
        at = self.hi[slots]
        arrays = self.arrays
        for j, c in enumerate(self.exact):
            arrays[c][at] = exact[:, j]
        arrays["session"][at] = session
        for c, a in arrays.items():
            if c in self.exact or c == "session":
                continue
            v = cols.get(c)
            a[at] = v if v is not None else np.nan
        self.hi[slots] = at + 1
        self.fresh[slots] = False
        self.live += k

    def _widen_session(self, session: np.ndarray) -> None:
        a = self.arrays["session"]
        if a.dtype == np.uint8 and len(session) and int(session.max()) > 255:
            self.arrays = {**self.arrays, "session": a.astype(np.int32)}

    def _settle_consts(self, slots: np.ndarray, k: int, cols: dict[str, np.ndarray], one_row: bool = False) -> None:
        """Keep one-valued columns one-valued while every slot's new rows hold its value; make the others
        arrays. A fresh slot (never a row) takes its first row's values. ``one_row``: a row for each of
        ``slots``; else ``k`` rows of the one slot."""
        fresh = self.fresh[slots]
        some_fresh = bool(fresh.any())
        changed: list[str] = []
        for c, per in self.consts.items():
            v = cols.get(c)
            if v is None:
                v = np.full(len(slots) if one_row else k, np.nan, np.float32)
            elif v.dtype != np.float32:
                v = v.astype(np.float32)
            if some_fresh:  # in place: a fresh slot's old views hold no row
                per[slots[fresh]] = v[fresh] if one_row else v[0]
            now = per[slots]
            same = (_bits(v) == _bits(now)) if one_row else (_bits(v) == _bits(now)[0])
            if not same.all():
                changed.append(c)
        if changed:
            self._materialize(changed)

    def _materialize(self, names: list[str]) -> None:
        """Columns ``names`` become arrays, every slot's held rows filled with its value (new arrays)."""
        consts = dict(self.consts)
        arrays = dict(self.arrays)
        for c in names:
            per = consts.pop(c)
            a = np.empty(self.size, np.float32)
            for s in np.flatnonzero(self.hi[:self.slots] > self.lo[:self.slots]).tolist():
                a[self.lo[s]:self.hi[s]] = per[s]
            arrays[c] = a
        self.consts, self.arrays = consts, arrays

    def _make_room(self, slots: np.ndarray, k: int) -> None:
        """Room for ``k`` more rows in each of ``slots``: a slot whose region is full moves to a new one past
        the end, or, when the arrays are full, the arrays are made anew holding only the live regions."""
        full = self.hi[slots] + k > self.off[slots] + self.room[slots]
        if not full.any():
            return
        movers = slots[full]
        held = self.hi[movers] - self.lo[movers]
        want = held + k
        want = want + want // GROWTH + 64
        need = int(want.sum())
        if self.end + need > self.size:
            self._compact(movers, want)
            return
        start = self.end + np.concatenate([[0], np.cumsum(want)[:-1]])
        self._move(movers, start)
        self.off[movers], self.room[movers] = start, want
        self.end += need

    def _move(self, slots: np.ndarray, to: np.ndarray, into: dict[str, np.ndarray] | None = None) -> None:
        """Copy the held rows of ``slots`` to cells ``to``.. (of the arrays ``into``, else of the same arrays,
        past their end): every column in one gather; their ``lo``/``hi`` then say where they are."""
        held = self.hi[slots] - self.lo[slots]
        total = int(held.sum())
        if total:
            rep = np.repeat(np.arange(len(slots)), held)
            within = np.arange(total) - np.repeat(np.cumsum(held) - held, held)
            src = self.lo[slots][rep] + within
            dst = to[rep] + within
            for c, a in self.arrays.items():
                (into[c] if into is not None else a)[dst] = a[src]
        self.lo[slots], self.hi[slots] = to, to + held

    def _compact(self, movers: np.ndarray, want: np.ndarray) -> None:
        """New arrays holding the live regions (each with its room; ``movers`` with the room ``want``) and a
        quarter more free: made whole, so frozen views keep the old ones."""
        S = self.slots
        held = self.hi[:S] - self.lo[:S]
        room = np.where(self.room[:S] > 0, np.minimum(self.room[:S], held + held // GROWTH + 64), 0)
        room[movers] = want
        total = int(room.sum())
        size = max(MIN_SIZE, total + total // 4)
        off = np.concatenate([[0], np.cumsum(room)[:-1]]).astype(np.int64)
        arrays = {c: np.empty(size, a.dtype) for c, a in self.arrays.items()}
        self._move(np.arange(S), off, arrays)
        self.arrays = arrays
        self.off[:S], self.room[:S] = off, room
        self.size, self.end = size, total

    # -- rows out -----------------------------------------------------------------------------------------

    def drop_front(self, s: int, m: int) -> None:
        """Slot ``s``'s first ``m`` held rows are no longer held (spilled): their cells are left as they are."""
        self.lo[s] += m
        self.live -= m

    def forget(self, s: int) -> None:
        """Slot ``s`` holds no row any more (its file is read again): its cells are left as they are; its
        one-valued columns' values copied first (a frozen view of its old rows keeps reading them)."""
        self.live -= self.n(s)
        self.lo[s] = self.hi[s]
        self.consts = {c: v.copy() for c, v in self.consts.items()}
        self.fresh[s] = True

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays.values()) + sum(c.nbytes for c in self.consts.values())

    def spill_blocks(self, s: int, m: int, extras: tuple[str, ...]) -> tuple[list[tuple[tuple[str, ...], np.ndarray]],
                                                                       dict[str, float]]:
        """Slot ``s``'s first ``m`` held rows as mstop.engine.spill.SpillFile.write_chunks takes them: blocks
        of columns (the exact ones, the float ones held as arrays, the session, each extra one) and the
        one-valued columns' values."""
        lo = int(self.lo[s])
        a = self.arrays
        blocks: list[tuple[tuple[str, ...], np.ndarray]] = [
            (self.exact, np.stack([a[c][lo:lo + m] for c in self.exact], axis=1))]
        vary = tuple(c for c in self.floats if c in a)
        if vary:
            blocks.append((vary, np.stack([a[c][lo:lo + m] for c in vary], axis=1)))
        blocks.append((("session",), a["session"][lo:lo + m]))
        constant = {c: float(self.consts[c][s]) for c in self.floats if c not in a}
        for c in extras:
            if c in a:
                blocks.append(((c,), a[c][lo:lo + m]))
            else:
                constant[c] = float(self.consts[c][s])
        return blocks, constant
