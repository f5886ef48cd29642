"""The runs table of ``mstop runs/``: one row per run, paged, sortable, marks in the first column.

User-controlled text (run names, notes, host names, paths) is always wrapped in ``rich.text.Text``,
never parsed as markup.
"""

from __future__ import annotations

from rich.text import Text

from ... import fmt
from ...live.runs import COLUMNS, RunRow
from .ranks import PagedTable

#: a status's colour (the text says it too: the table reads without colour)
STATUS_STYLE = {"running": "green", "starting": "cyan", "waiting": "grey50", "finished": "blue",
                "stalled": "yellow", "dead": "bold red", "failed": "bold red", "unreadable": "red",
                "reading": "grey50 italic"}


#: the fewest cells a run's name is cut to (below it the columns scroll sideways instead): at 120 columns a
#: name kept at 16 pushed ``duration`` past the edge (``durat``, ``2 m 4``); cut in its middle, 10 cells still
#: keep a folder's start and a leaf's end
NAME_LEAST = 10
#: below this many cells for names the loss column's label is plain ``loss``
NAME_COMFORT = 16
#: the loss column's label, and the ones it takes where names are cut to fit (the smoothed loss is an EMA)
LOSS_LABEL = dict(COLUMNS)["loss"]
LOSS_SHORT = "loss (EMA)"
LOSS_SHORTEST = "loss"


def _width(cell: object) -> int:
    """The cells ``cell`` takes on screen."""
    return cell.cell_len if isinstance(cell, Text) else Text(str(cell)).cell_len


class RunsTable(PagedTable):
    """Every run of the list (filtered and sorted by the screen), the cursor kept on its run."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__("name", **kwargs)
        self.lines: list[RunRow] = []
        self.marks: dict[str, int] = {}  # run key -> its group's number (1: the baseline)
        self.now = 0.0
        self.cursor_run = ""  # the run under the cursor: kept there when rows move
        self._cursor_to: str | None = None

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.fixed_columns = 2  # the mark and the run's name stay when the columns scroll sideways
        self.add_column(" ", key="mark")
        for key, label in COLUMNS:
            self.add_column(label, key=key)

    def show(self, rows: list[RunRow], marks: dict[str, int], now: float) -> None:
        """Show ``rows`` (in this order): the page holding the run under the cursor."""
        self.lines, self.marks, self.now = rows, marks, now
        self.reshow()

    def reshow(self) -> None:
        rows = self.lines
        want = self._cursor_to if self._cursor_to is not None else self.cursor_run
        self._cursor_to = None
        at = next((i for i, r in enumerate(rows) if r.key == want), None)
        if at is not None and not self.offset <= at < self.offset + self.page_size:
            self.offset = max(0, at - self.page_size // 2)
        self.offset = max(0, min(self.offset, len(rows) - self.page_size))
        page = rows[self.offset: self.offset + self.page_size]
        cursor = (at - self.offset) if at is not None and self.offset <= at < self.offset + len(page) \
            else min(self.cursor_row, max(0, len(page) - 1))
        self._put(page)
        if page:
            self.move_cursor(row=cursor)
            self.cursor_run = page[cursor].key
        else:
            self.cursor_run = ""

    def _put(self, page: list[RunRow]) -> None:
        """The page's rows into the table: only the cells that changed when the same runs are on it (a
        DataTable renders a cleared row's every cell again: about half a millisecond each)."""
        cells = [self.cells(r) for r in page]
        widths = [max((_width(row[j]) for row in cells), default=0) for j in range(len(cells[0]))] if cells else []
        self._fit_names(cells, widths)
        sigs = [tuple((str(c), str(getattr(c, "style", ""))) for c in row) for row in cells]
        keys = [r.key for r in page]
        if keys != getattr(self, "_keys", None) or widths != getattr(self, "_widths", None):
            # new runs, or a column's widest cell changed: built again with the columns' widths from this
            # page (a DataTable's columns only grow: a name once long kept the later columns off screen). The
            # widths are set here, from the cells: left to the table's own measure when it is next idle, a page
            # drawn before that (a busy machine) showed every cell cut to its column's label ("bas", "stalle")
            self.clear()
            for column, width in zip(self.columns.values(), widths):
                column.content_width = max(column.label.cell_len, width)
            for key, row in zip(keys, cells):
                self.add_row(*row, key=key)
            self._widths = widths
        else:
            columns = [c.key for c in self.columns.values()]
            for key, row, sig, old in zip(keys, cells, sigs, self._sigs):
                for col, cell, a, b in zip(columns, row, sig, old):
                    if a != b:
                        self.update_cell(key, col, cell)
        self._keys, self._sigs = keys, sigs

    #: the columns that must be on screen beside the name (up to ``duration``: at 120 columns a long name
    #: pushed ``alerts`` and ``started`` past the edge, ``47 s ag``)
    _MUST = 1 + [k for k, _ in COLUMNS].index("duration") + 1

    def _fit_names(self, cells: list[list[object]], widths: list[int]) -> None:
        """Cut the page's names (their middle: a run's folder and its leaf stay) so the columns up to the
        duration fit the table's width; never below NAME_LEAST cells. Where names are cut, the loss column
        takes its short label (``loss (EMA)``: five cells back for a name). The columns after them (host,
        note) scroll sideways as before. ``widths`` (each column's widest cell) gets the names' new width."""
        width = self.size.width or (self.app.size.width if self.is_mounted else 0)
        if not width or not cells:
            return
        labels = [" "] + [label for _, label in COLUMNS]
        loss = 1 + [k for k, _ in COLUMNS].index("loss")

        def room_with(loss_label: str) -> int:
            labels[loss] = loss_label
            others = sum(max(Text(labels[j]).cell_len, widths[j]) for j in range(self._MUST) if j != 1)
            return width - others - 2 * self.cell_padding * self._MUST - 1  # the scrollbar's gutter

        room = room_with(LOSS_LABEL)
        if widths[1] > room:
            room = room_with(LOSS_SHORT)
        if widths[1] > room and room < NAME_COMFORT:  # names cut hard: four cells more for them
            room = room_with(LOSS_SHORTEST)
        self._label(loss, labels[loss])
        room = max(NAME_LEAST, room)
        for row in cells:
            name = row[1]
            if isinstance(name, Text) and name.cell_len > room:
                keep = room - 1
                head = keep - keep // 3
                cut = name[:head]
                cut.append("…")
                cut.append_text(name[len(name) - (keep - head):])
                row[1] = cut
        widths[1] = max((_width(row[1]) for row in cells), default=0)

    def _label(self, j: int, label: str) -> None:
        """Column ``j``'s label set to ``label`` (the table drawn again only when it changes)."""
        column = list(self.columns.values())[j]
        if column.label.plain != label:
            column.label = Text(label)
            self._widths = None  # the page is built again: a column's width follows its label
            self.refresh()

    def cells(self, r: RunRow) -> list[object]:
        """One run's cells, as the columns order them."""
        mark = self.marks.get(r.key)
        status = Text(r.status, style=STATUS_STYLE.get(r.status, ""), justify="left")
        step = "" if r.step is None else f"{r.step:,}" + ("" if r.total is None else f"/{r.total:,}")
        unknown = r.step is not None and not r.history  # only the files' ends are read: a NaN long ago unseen
        if r.alerts or r.incidents:
            alerts = Text(f"{r.alerts}" + (f" +{r.incidents} past" if r.incidents else "") + ("?" if unknown else ""),
                          style="bold red" if r.alerts else "yellow", justify="right")
        else:
            alerts = Text("?" if unknown else "0" if r.full or r.step is not None else "", justify="right")
        name = Text(r.name)
        if r.run_name and r.run_name != r.name.rstrip("/").rsplit("/", 1)[-1]:
            name.append(f" · {r.run_name}", style="dim")  # the name the writer was given, where it differs
        loss = fmt.num(r.loss) if r.step is not None else ""

        def right(text: str) -> Text:
            return Text(text, justify="right")

        return [Text("" if mark is None else str(mark), style="bold reverse"), name, status, right(step),
                right(loss), right(fmt.si(r.tokens_per_s) if r.tokens_per_s is not None else ""),
                right(fmt.pct(r.mfu) if r.mfu is not None else ""),
                right(fmt.pct(r.headroom) if r.headroom is not None else ""),
                right(fmt.pct(r.goodput) if r.goodput is not None else ("" if not r.full else "n/a")), alerts,
                right(fmt.coarse(self.now - r.started) + " ago" if r.started is not None else ""),
                right(fmt.duration(r.duration(self.now)) if r.started is not None else ""),
                Text(r.verdict.replace("_", " "), style="bold yellow"), Text(r.host),
                Text(f"! {r.error}", style="red") if r.error else Text(r.hint or r.note)]

    def on_data_table_row_highlighted(self, event: PagedTable.RowHighlighted) -> None:
        if event.row_key is not None and event.row_key.value is not None:
            self.cursor_run = str(event.row_key.value)

    def step_down(self) -> None:
        """The cursor to the next run (after a mark, as htop's space does), kept there by the next show."""
        keys = [r.key for r in self.lines]
        if self.cursor_run in keys:
            i = keys.index(self.cursor_run)
            self.select_run(keys[min(i + 1, len(keys) - 1)])

    def select_run(self, key: str) -> None:
        """Put the cursor on run ``key`` (paging to it) at the next show."""
        self._cursor_to = key
        self.reshow()
