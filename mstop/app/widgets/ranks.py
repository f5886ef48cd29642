"""The ranks table (paged like htop, sortable, grouped by host) and the selected rank's detail.

User-controlled text (run names, notes, column names, host names, paths) is always wrapped in
``rich.text.Text``, never parsed as markup.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable, Static

from ... import fmt
from ...view import RankRow, RankTable, View
from ...view.hostfold import Fold, fold_hosts

RANK_COLUMNS = (("rank", "rank"), ("host", "host"), ("step", "step"), ("step_time", "step time (median)"),
                ("tokens_per_s", "tokens/s"), ("headroom", "headroom"), ("data_wait", "data wait"),
                ("age", "last row"))
#: the columns a run with device samples adds (mstop_writer.devices): the rank's NPU now
DEVICE_COLUMNS = (("aicore", "AICore"), ("device_memory", "NPU mem"), ("temperature", "°C"))
#: the columns a run whose ranks have exit witnesses adds (mstop_writer.witness): each rank's process, as top
PROCESS_COLUMNS = (("pid", "pid"), ("state", "state"), ("cpu", "CPU"), ("rss", "RSS"))
#: a process state in the table (``/proc``'s letter and a word), and the states drawn as trouble
STATE_WORDS = {"R": "R running", "S": "S sleeping", "D": "D disk wait", "T": "T stopped", "t": "t traced",
               "Z": "Z zombie", "I": "I idle", "X": "X dead"}
TROUBLE = ("D", "T", "t", "Z", "X", "ended")


def state_cell(r: RankRow) -> Text:
    """``S sleeping``, ``T stopped`` (in red), ``ended SIGKILL`` (in red)."""
    if r.state is None:
        return Text(fmt.NA)
    if r.state == "ended":
        words = "ended" if r.ended in (None, "ended") else f"ended {r.ended}"
    else:
        words = STATE_WORDS.get(r.state, r.state)
    return Text(words, style="bold red" if r.state in TROUBLE and r.ended != "exit 0" else "")


@dataclass
class HostRow(RankRow):
    """A host's ranks summed up for the grouped table: the worst of each column (``rank``: its lowest)."""

    count: int = 0


def _host_row(host: str, ranks: list) -> HostRow:
    def pick(attr, f):
        vals = [getattr(r, attr) for r in ranks if getattr(r, attr) is not None]
        return f(vals) if vals else None

    return HostRow(rank=min(r.rank for r in ranks), host=host, step=pick("step", min),
                   step_time=pick("step_time", max), tokens_per_s=pick("tokens_per_s", min),
                   headroom=pick("headroom", min), data_wait=pick("data_wait", max), age=pick("age", max),
                   aicore=pick("aicore", min), device_memory=pick("device_memory", max),
                   temperature=pick("temperature", max), count=len(ranks))


class Lines(Sequence):
    """The ungrouped table's lines: ``("rank", row)`` in the sorted order, each row built when its page is
    drawn (a RankTable builds a row object only when asked for one)."""

    def __init__(self, table: RankTable, order: list[int]) -> None:
        self.table, self.order = table, order

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [("rank", self.table[k]) for k in self.order[i]]
        return ("rank", self.table[self.order[i]])

    def position(self, rank: int) -> int | None:
        """Where ``rank``'s line is (None: not in the table)."""
        at = self.table.index_of(rank)
        return self.order.index(at) if at is not None else None


class PagedTable(DataTable):
    """A table that builds only the page on screen (pgup/pgdn, home/end, arrows past the edge move the
    page), like htop: a frame costs the same with 8 rows or 10,000. Sorted by any column (click a header:
    SortChanged). Subclasses keep what they show and redraw it in :meth:`reshow`."""

    BINDINGS = [Binding("pagedown", "page(1)", "page down", show=False),
                Binding("pageup", "page(-1)", "page up", show=False),
                Binding("home", "edge(0)", "first", show=False), Binding("end", "edge(1)", "last", show=False)]

    #: the first line of the page on screen (a class default, not set in __init__: it stands in for the
    #: widget's CSS ``offset``, which the table never uses)
    offset = 0

    class SortChanged(Message):
        """A header was clicked: the rows must be sorted again from a fresh frame."""

    def __init__(self, sort_key: str, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.sort_key = sort_key
        self.sort_reverse = False

    @property
    def page_size(self) -> int:
        return max(1, self.size.height - 1)

    def cursor_key(self) -> str:
        """The row key under the cursor, or empty."""
        return str(self.coordinate_to_cell_key((self.cursor_row, 0)).row_key.value) if self.row_count else ""

    def reshow(self) -> None:
        """Draw the page again from what was last shown (nothing before anything was)."""

    def on_resize(self) -> None:
        self.reshow()  # the page holds as many rows as fit

    def _move(self, offset: int) -> None:
        self.offset = max(0, offset)
        self.reshow()

    def action_page(self, direction: int) -> None:
        self._move(self.offset + direction * self.page_size)

    def action_edge(self, last: int) -> None:
        self._move(10**9 if last else 0)

    def action_cursor_down(self) -> None:
        if self.cursor_row >= self.row_count - 1:
            self._move(self.offset + 1)
        else:
            super().action_cursor_down()

    def action_cursor_up(self) -> None:
        if self.cursor_row <= 0 and self.offset > 0:
            self._move(self.offset - 1)
        else:
            super().action_cursor_up()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        self.sort_by(str(event.column_key.value))

    def sort_by(self, key: str) -> None:
        """Sort by ``key``; the same key again reverses the order."""
        self.sort_reverse = not self.sort_reverse if key == self.sort_key else False
        self.sort_key = key
        self.offset = 0
        self.post_message(self.SortChanged())


class RanksTable(PagedTable):
    """Every rank, sortable by any column (click a header), paged like htop."""

    BINDINGS = [Binding("h", "toggle_group", "group by host", show=False)]

    def __init__(self, **kwargs: object) -> None:
        super().__init__("rank", **kwargs)
        self.grouped = False  # h: a row per host, Enter expands it to its ranks
        self.expanded: set[str] = set()  # hosts shown with their ranks
        self.opened: set[str] = set()  # hosts of the folds opened: each on its own line
        self._folds: dict[str, list[str]] = {}  # a fold's line -> its hosts
        self._view: View | None = None
        self._want: int | None = None  # select_rank: the rank to bring under the cursor
        self._cursor_to: int | None = None
        self._lines: list = []

    def reshow(self) -> None:
        if self._view is not None:
            self.show(self._view)

    def on_mount(self) -> None:
        self.cursor_type = "row"
        for key, label in RANK_COLUMNS:
            self.add_column(label, key=key)

    def show(self, v: View) -> None:
        self._view = v

        def key(r):
            val = getattr(r, self.sort_key)
            missing = val is None or (isinstance(val, float) and math.isnan(val))
            return (missing, val if not missing else 0)

        table = v.ranks
        lines: Lines | list[tuple[str, object]]
        if self.grouped:
            lines = self._grouped(v, key)
        else:  # the columns sorted, the rows built for the page alone (10,000 ranks: the 40 on screen)
            lines = Lines(table, table.order(self.sort_key, self.sort_reverse))
        self._lines = lines
        if self._want is not None:  # select_rank: put that rank's row on the page, under the cursor
            at = lines.position(self._want) if isinstance(lines, Lines) else \
                next((i for i, (kind, r) in enumerate(lines) if kind == "rank" and r.rank == self._want), None)
            self._want = None
            if at is not None:
                if not self.offset <= at < self.offset + self.page_size:
                    self.offset = max(0, at - self.page_size // 2)
                self.offset = max(0, min(self.offset, len(lines) - self.page_size))
                self._cursor_to = at - self.offset
        self.offset = max(0, min(self.offset, len(lines) - self.page_size))
        page = lines[self.offset: self.offset + self.page_size]
        cursor = self.cursor_row if self._cursor_to is None else self._cursor_to
        self._cursor_to = None
        self.clear()
        devices, procs = self._add_columns(v)
        for kind, r in page:
            first = (("- " if r.host in self.expanded else "+ ") + f"{r.count:,} ranks") if kind == "host" \
                else f"+ {r.count:,} hosts" if kind == "fold" else (f"  {r.rank}" if self.grouped else str(r.rank))
            cells = [first, Text(r.host), fmt.num(r.step, 9), fmt.ms(r.step_time), fmt.si(r.tokens_per_s),
                     fmt.pct(r.headroom), fmt.pct(r.data_wait), fmt.duration(r.age)]
            if devices:
                cells += [fmt.pct(r.aicore), fmt.pct(r.device_memory),
                          fmt.NA if r.temperature is None else f"{r.temperature:.0f}"]
            if procs:
                cells += [fmt.NA if r.pid is None else str(r.pid), state_cell(r),
                          fmt.NA if r.cpu is None else f"{100 * r.cpu:.0f} %", fmt.gib(r.rss)]
            self.add_row(*cells, key=f"{kind}:{r.host}" if kind in ("host", "fold") else str(r.rank))
        if page:
            self.move_cursor(row=min(cursor, len(page) - 1))
        arrow = "down" if self.sort_reverse else "up"
        what = "hosts and ranks" if self.grouped else "ranks"
        self.border_title = (f"rows {self.offset + 1}-{self.offset + len(page)} of {len(lines):,} {what}"
                             f" · sorted by {self.sort_key} ({arrow}) · click a header to sort, pgup/pgdn to page"
                             f" · h: {'ungroup' if self.grouped else 'group by host'}")

    def _grouped(self, v: View, key: Any) -> list[tuple[str, object]]:
        """The grouped table's lines: ("host", HostRow) with its ranks ("rank", RankRow) when expanded, or
        ("fold", HostRow) for quiet hosts folded into one line (mstop.view.hostfold)."""
        hosts: dict[str, list] = {}
        for r in sorted(v.ranks, key=key, reverse=self.sort_reverse):
            hosts.setdefault(r.host, []).append(r)
        groups = {g.host: g for g in sorted((_host_row(h, rs) for h, rs in hosts.items()), key=key,
                                            reverse=self.sort_reverse)}
        alerted = {a.rank for a in v.alerts if a.rank is not None}
        apart = self.expanded | self.opened | {h for h, rs in hosts.items() if any(
            r.rank in alerted or (r.state in TROUBLE and r.ended != "exit 0") for r in rs)}
        grouped: list[tuple[str, object]] = []
        self._folds = {}
        for item in fold_hosts([(h, g.count) for h, g in groups.items()], apart):
            if isinstance(item, Fold):
                row = _host_row(f"{fmt.hosts(item.hosts)} ok · {item.ranks_each:,} ranks each",
                                [r for h in item.hosts for r in hosts[h]])
                row.count = len(item.hosts)
                self._folds[row.host] = item.hosts
                grouped.append(("fold", row))
                continue
            grouped.append(("host", groups[item]))
            if item in self.expanded:
                grouped += [("rank", r) for r in hosts[item]]
        return grouped

    def _add_columns(self, v: View) -> tuple[bool, bool]:
        """The device columns at the first device samples, the process columns at the first process facts
        (once added they stay); whether each set is shown."""
        if v.devices and DEVICE_COLUMNS[0][0] not in self.columns:
            for col, label in DEVICE_COLUMNS:
                self.add_column(label, key=col)
        if PROCESS_COLUMNS[0][0] not in self.columns and any(x is not None for x in v.ranks.column("state")):
            for col, label in PROCESS_COLUMNS:
                self.add_column(label, key=col)
        return DEVICE_COLUMNS[0][0] in self.columns, PROCESS_COLUMNS[0][0] in self.columns

    def select_rank(self, rank: int) -> None:
        """Move the cursor to ``rank`` (paging to it; in the grouped table its host is expanded)."""
        if self._view is None:
            return
        if self.grouped:
            at = self._view.ranks.index_of(rank)
            host = self._view.ranks[at].host if at is not None else None
            if host is not None:
                self.expanded.add(host)
        self._want = rank
        self.show(self._view)

    def action_toggle_group(self) -> None:
        self.grouped = not self.grouped
        self.offset = 0
        self.opened.clear()
        if self._view is not None:
            self.show(self._view)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        key = str(event.row_key.value)
        if key.startswith("host:"):
            host = key[5:]
            self.expanded.symmetric_difference_update({host})
        elif key.startswith("fold:") and key[5:] in self._folds:  # its hosts, each on its own line
            self.opened.update(self._folds[key[5:]])
        if self._view is not None and key.startswith(("host:", "fold:")):
            self.show(self._view)



class RankDetail(Static):
    """The rank under the table's cursor: its figures and its alerts (its chart is beside it)."""

    def show(self, v: View, key: str) -> RankRow | None:
        """Show the row ``key`` names (a rank, or ``host:NAME``); return that rank's row, if any."""
        at = v.ranks.index_of(int(key)) if key.isdigit() else None
        row = v.ranks[at] if at is not None else None
        if row is None:
            self.update(Text(f"host {key[5:]}: Enter shows its ranks") if key.startswith("host:") else
                        Text(f"hosts {key[5:]}: no alert, no rank in trouble; Enter shows each host")
                        if key.startswith("fold:") else "")
            return None
        t = Text(f"rank {row.rank}", style="bold")
        t.append(" on ")
        t.append(Text(row.host))
        t.append(f"\nstep {fmt.num(row.step, 9)} · last row {fmt.duration(row.age)} ago"
                 f"\nstep time {fmt.ms(row.step_time)} · tokens/s {fmt.si(row.tokens_per_s)}"
                 f"\nheadroom {fmt.pct(row.headroom)} · data wait {fmt.pct(row.data_wait)}")
        for a in v.alerts:
            if a.rank == row.rank:
                t.append(f"\n!! {a.kind} ")
                t.append(Text(a.message))
        self.update(t)
        return row


class DeviceStrip(Static):
    """The hosts' NPUs in the ranks view: a line per host, a cell per device (AICore % · memory % · °C, the
    rank on it), a device not OK in red; hidden for a run with no devices file."""

    MAX_HOSTS = 6

    def show(self, v: View) -> None:
        self.display = bool(v.devices)
        if not v.devices:
            return
        hosts: dict[str, list] = {}
        for c in v.devices:
            hosts.setdefault(c.host, []).append(c)
        t = Text("NPUs (AICore · mem · °C, rank): ", style="dim")
        for i, (host, cells) in enumerate(hosts.items()):
            if i == self.MAX_HOSTS:
                t.append(f"\n+ {len(hosts) - i} more hosts (the table's AICore, NPU mem and °C columns)", style="dim")
                break
            t.append("\n").append_text(Text(f"{host}:", style="bold"))
            for c in cells:
                name = f"{c.npu}" + (f".{c.chip}" if c.chip else "")
                aic = "--" if c.aicore is None else f"{100 * c.aicore:.0f}%"
                mem = "--" if c.memory is None else f"{100 * c.memory:.0f}%"
                deg = "--" if c.temperature is None else f"{c.temperature:.0f}°"
                who = f" r{c.ranks[0]}" if c.ranks else ""
                bad = c.health is not None and c.health.upper() != "OK"
                t.append(f" [{name} {aic} {mem} {deg}{who}{' ' + c.health if bad else ''}]",
                         style="bold red" if bad else "")
        self.update(t)
