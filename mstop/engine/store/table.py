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

from typing import Callable

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

    __slots__ = ("arrays", "kmat", "kcol", "slot", "lo", "hi")

    def __init__(self, arrays: dict[str, np.ndarray], kmat: np.ndarray, kcol: dict[str, int], slot: int, lo: int,
                 hi: int) -> None:
        self.arrays, self.kmat, self.kcol, self.slot, self.lo, self.hi = arrays, kmat, kcol, slot, lo, hi

    @property
    def n(self) -> int:
        return self.hi - self.lo

    def column(self, name: str) -> np.ndarray | None:
        """The rows of column ``name`` (a read-only view of one value while the column is one value); None
        when the table has no such column."""
        a = self.arrays.get(name)
        if a is not None:
            return a[self.lo:self.hi]
        j = self.kcol.get(name)
        if j is None:
            return None
        return _one_value(self.kmat, self.slot, j, self.hi - self.lo)

    def frozen(self) -> Held:
        return self


def _one_value(kmat: np.ndarray, slot: int, j: int, n: int) -> np.ndarray:
    """``n`` times the value at ``kmat[slot, j]``, as a read-only view (no byte a row)."""
    out = np.ndarray((n,), kmat.dtype, kmat, (slot * kmat.shape[1] + j) * kmat.itemsize, (0,))
    out.flags.writeable = False
    return out


class Table:
    """Every rank's held rows by column (see the module's doc). Not thread-safe: the store's lock guards it."""

    def __init__(self, exact: tuple[str, ...], floats: tuple[str, ...]) -> None:
        self.exact, self.floats = exact, floats
        #: column -> its array over every region (replaced whole, never shrunk or rewritten: views keep theirs)
        self.arrays: dict[str, np.ndarray] = {c: np.empty(0, np.float64) for c in exact}
        self.arrays["session"] = np.empty(0, np.uint8)
        #: the float columns' values per slot (a row a slot, a column each: the base ones, then the extra ones
        #: in the order they came), read while a column is one value in every slot; kcol: those columns by
        #: name, to their place in kmat (replaced whole; kmat is written in place only in a fresh slot's row)
        self.kmat = np.full((0, len(floats)), np.nan, np.float32)
        self.knames: list[str] = list(floats)
        self.kcol: dict[str, int] = {c: j for j, c in enumerate(floats)}
        self.size = 0  # cells of every array
        self.end = 0  # cells handed out to regions
        self.slots = 0
        self.off = np.zeros(0, np.int64)  # each slot's region: first cell, room
        self.room = np.zeros(0, np.int64)
        self.lo = np.zeros(0, np.int64)  # its rows held: cells lo..hi
        self.hi = np.zeros(0, np.int64)
        self.fresh = np.zeros(0, bool)  # never held a row: its values of one-valued columns are still free
        self.viewed = np.zeros(0, bool)  # a frozen view was taken of its region (its cells are never reused)
        self.shared = False  # a frozen view holds the arrays (they are never changed in place, only replaced)
        self.live = 0  # rows held, all slots

    # -- slots -------------------------------------------------------------------------------------------

    def add_slot(self) -> int:
        s = self.slots
        if s == len(self.off):
            cap = s + s // 4 + 64
            self.off, self.room, self.lo, self.hi = (np.concatenate([a, np.zeros(cap - s, np.int64)])
                                                     for a in (self.off, self.room, self.lo, self.hi))
            self.fresh = np.concatenate([self.fresh, np.ones(cap - s, bool)])
            self.viewed = np.concatenate([self.viewed, np.zeros(cap - s, bool)])
            self.kmat = np.concatenate([self.kmat, np.full((cap - s, self.kmat.shape[1]), np.nan, np.float32)])
        self.slots += 1
        return s

    def n(self, s: int) -> int:
        return int(self.hi[s] - self.lo[s])

    def held(self, s: int) -> Held:
        """Slot ``s``'s rows as they are now (read at once: a later append is not in it)."""
        lo, hi = int(self.lo[s]), int(self.hi[s])
        if hi > lo:  # a view of no row sees no cell: a rank frozen before its first read may still be cut
            self.viewed[s] = True
        self.shared = True  # but it holds the arrays' dict
        return Held(self.arrays, self.kmat, self.kcol, s, lo, hi)

    frozen = held

    def trim(self, s: int) -> None:
        """After slot ``s`` dropped most of its rows (a first read spilled at once): its rows moved to its
        region's start and the region cut to them and its room, the cells after it handed out again, when
        its region is the last handed out and no frozen view has seen it (a first read of 10,000 ranks
        otherwise touched memory for every row read, not for the rows kept)."""
        off, lo, hi = int(self.off[s]), int(self.lo[s]), int(self.hi[s])
        if self.viewed[s] or off + int(self.room[s]) != self.end or lo == off:
            return
        h = hi - lo
        room = h + h // GROWTH + 64
        if room >= int(self.room[s]):
            return
        for a in self.arrays.values():
            a[off:off + h] = a[lo:hi]  # overlapping: numpy copies through a buffer
        self.lo[s], self.hi[s], self.room[s] = off, off + h, room
        self.end = off + room

    def column(self, s: int, name: str) -> np.ndarray | None:
        """Slot ``s``'s rows of column ``name`` now (see Held.column)."""
        lo, hi = int(self.lo[s]), int(self.hi[s])
        a = self.arrays.get(name)
        if a is not None:
            return a[lo:hi]
        j = self.kcol.get(name)
        return _one_value(self.kmat, s, j, hi - lo) if j is not None else None

    def last(self, s: int, name: str) -> float:
        """Slot ``s``'s last held row's value of a column (it has one)."""
        a = self.arrays.get(name)
        if a is not None:
            return float(a[self.hi[s] - 1])
        j = self.kcol.get(name)
        return float(self.kmat[s, j]) if j is not None else float("nan")

    # -- rows in -----------------------------------------------------------------------------------------

    def add_column(self, name: str) -> None:
        """A float column (an extra one) from now on: NaN in every row so far."""
        if name not in self.knames:
            self.kmat = np.concatenate([self.kmat, np.full((len(self.kmat), 1), np.nan, np.float32)], axis=1)
            self.kcol = {**self.kcol, name: len(self.knames)}
            self.knames = [*self.knames, name]

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
        vals = self._incoming(floats, extra)
        self._settle_consts(np.array([s]), vals, one_row=False)
        hi = int(self.hi[s])
        arrays = self.arrays
        for j, c in enumerate(self.exact):
            arrays[c][hi:hi + k] = exact[:, j]
        arrays["session"][hi:hi + k] = session
        for j, c in enumerate(self.knames):
            a = arrays.get(c)
            if a is not None:
                a[hi:hi + k] = vals[:, j]
        self.hi[s] = hi + k
        self.fresh[s] = False
        self.live += k

    def append_round(self, slots: np.ndarray, exact: np.ndarray, floats: np.ndarray, session: np.ndarray,
                     extra: dict[str, np.ndarray] | None = None) -> None:
        """Append one row to each of ``slots`` (no slot twice): one assignment per column for all of them.
        Extra columns not in ``extra`` (added first with :meth:`add_column`) are NaN in these rows."""
        k = len(slots)
        if not k:
            return
        self._make_room(slots, 1)
        self._widen_session(session)
        vals = self._incoming(floats, extra or {})
        self._settle_consts(slots, vals, one_row=True)
        at = self.hi[slots]
        arrays = self.arrays
        for j, c in enumerate(self.exact):
            arrays[c][at] = exact[:, j]
        arrays["session"][at] = session
        for j, c in enumerate(self.knames):
            a = arrays.get(c)
            if a is not None:
                a[at] = vals[:, j]
        self.hi[slots] = at + 1
        self.fresh[slots] = False
        self.live += k

    def _widen_session(self, session: np.ndarray) -> None:
        a = self.arrays["session"]
        if a.dtype == np.uint8 and len(session) and int(session.max()) > 255:
            self.arrays = {**self.arrays, "session": a.astype(np.int32)}

    def _incoming(self, floats: np.ndarray, extra: dict[str, np.ndarray]) -> np.ndarray:
        """The rows' float columns in kmat's order (an extra column not given: NaN)."""
        if len(self.knames) == len(self.floats):
            return floats if floats.dtype == np.float32 else floats.astype(np.float32)
        vals = np.full((len(floats), len(self.knames)), np.nan, np.float32)
        vals[:, :len(self.floats)] = floats
        for j in range(len(self.floats), len(self.knames)):
            v = extra.get(self.knames[j])
            if v is not None:
                vals[:, j] = v
        return vals

    def _settle_consts(self, slots: np.ndarray, vals: np.ndarray, one_row: bool) -> None:
        """Keep one-valued columns one-valued while every slot's new rows hold its value; make the others
        arrays. A fresh slot (never a row) takes its first row's values. ``one_row``: a row for each of
        ``slots``; else the rows of the one slot."""
        if not self.kcol:
            return
        fresh = self.fresh[slots]
        if fresh.any():  # in place: a fresh slot's old views hold no row
            self.kmat[slots[fresh]] = vals[fresh] if one_row else vals[0]
        now = _bits(self.kmat[slots])
        diff = (_bits(vals) != now) if one_row else (_bits(vals) != now[0])
        changed = diff.any(axis=0)
        if changed.any():
            names = [c for c, j in self.kcol.items() if changed[j]]
            if names:
                self._materialize(names)

    def _materialize(self, names: list[str]) -> None:
        """Columns ``names`` become arrays, every slot's held rows filled with its value (new arrays)."""
        S = self.slots
        held = self.hi[:S] - self.lo[:S]
        total = int(held.sum())
        rep = np.repeat(np.arange(S), held)
        cells = self.lo[:S][rep] + (np.arange(total) - np.repeat(np.cumsum(held) - held, held))
        arrays = dict(self.arrays)
        for c in names:
            a = np.empty(self.size, np.float32)
            a[cells] = self.kmat[rep, self.kcol[c]]
            arrays[c] = a
        self.kcol = {c: j for c, j in self.kcol.items() if c not in names}
        self.arrays = arrays

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
            S = self.slots
            held_all = self.hi[:S] - self.lo[:S]
            keep = np.minimum(self.room[:S], held_all + held_all // GROWTH + 64)
            keep[movers] = 0  # their regions die as they move: their new ones are the need
            kept = int(keep.sum()) + need
            if kept < (self.end + need) * 3 // 4:  # a quarter or more would be dead: compact
                self._compact(movers, want)
                return
            self._grow(self.end + need)  # else the cells as they are, in larger arrays (a copy a column)
        start = self.end + np.concatenate([[0], np.cumsum(want)[:-1]])
        self._move(movers, start)
        self.off[movers], self.room[movers] = start, want
        self.viewed[movers] = False
        self.end += need

    def _move(self, slots: np.ndarray, to: np.ndarray) -> None:
        """Copy the held rows of ``slots`` to cells ``to``.. past the arrays' end: every column in one gather;
        their ``lo``/``hi`` then say where they are."""
        held = self.hi[slots] - self.lo[slots]
        total = int(held.sum())
        if total:
            rep = np.repeat(np.arange(len(slots)), held)
            within = np.arange(total) - np.repeat(np.cumsum(held) - held, held)
            src = self.lo[slots][rep] + within
            dst = to[rep] + within
            for a in self.arrays.values():
                a[dst] = a[src]
        self.lo[slots], self.hi[slots] = to, to + held

    def _replace(self, size: int, fill: Callable[[str, np.ndarray, np.ndarray], None]) -> None:
        """New arrays of ``size`` cells, ``fill(name, old, new)`` copying each column's cells. Made whole, so
        frozen views keep the old ones; while no view has seen the arrays (a first read, ``summary``), column
        by column, each old one let go before the next is made (else the peak was both sets at once)."""
        old = self.arrays
        alone = not self.shared
        arrays: dict[str, np.ndarray] = {}
        for c in list(old):
            a = old.pop(c) if alone else old[c]
            arrays[c] = np.empty(size, a.dtype)
            fill(c, a, arrays[c])
            del a
        self.arrays = arrays
        self.viewed[:] = False  # new arrays: no view holds them
        self.shared = False
        self.size = size

    def _grow(self, need: int) -> None:
        """Arrays with room for ``need`` cells and half as many again, the cells handed out copied as they are
        (one copy a column: no region moves)."""
        end = self.end

        def fill(_c: str, a: np.ndarray, new: np.ndarray) -> None:
            new[:end] = a[:end]

        self._replace(max(MIN_SIZE, need + need // 2), fill)

    def _compact(self, movers: np.ndarray, want: np.ndarray) -> None:
        """New arrays holding the live regions (each with its room; ``movers`` with the room ``want``) and as
        many cells free: made whole, so frozen views keep the old ones."""
        S = self.slots
        held = self.hi[:S] - self.lo[:S]
        room = np.where(self.room[:S] > 0, np.minimum(self.room[:S], held + held // GROWTH + 64), 0)
        room[movers] = want
        total = int(room.sum())
        # as many cells again free: a compaction copies the live rows, at most as many as were handed out
        # since the last one (a rank's first read hands out its rows, then spills most of them)
        size = max(MIN_SIZE, total + total // 2)
        off = np.concatenate([[0], np.cumsum(room)[:-1]]).astype(np.int64)
        held = self.hi[:S] - self.lo[:S]
        n = int(held.sum())
        rep = np.repeat(np.arange(S), held)
        within = np.arange(n) - np.repeat(np.cumsum(held) - held, held)
        src, dst = self.lo[:S][rep] + within, off[rep] + within

        def fill(_c: str, a: np.ndarray, new: np.ndarray) -> None:
            new[dst] = a[src]

        self._replace(size, fill)
        self.off[:S], self.room[:S], self.lo[:S], self.hi[:S] = off, room, off, off + held
        self.end = total

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
        self.kmat = self.kmat.copy()
        self.fresh[s] = True

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays.values()) + self.kmat.nbytes

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
        constant = {c: float(self.kmat[s, self.kcol[c]]) for c in self.floats if c not in a}
        for c in extras:
            if c in a:
                blocks.append(((c,), a[c][lo:lo + m]))
            else:
                constant[c] = float(self.kmat[s, self.kcol[c]])
        return blocks, constant
