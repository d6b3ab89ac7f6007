"""The screens of `top` under the app list: one app (ranks, log tail), a sweep's points, stacks,
logs followed, describe, the stop confirmation and the keys. Each reads one board function and
shows it with frame.py's cells."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Static

from trainlaunch.cli.top import frame
from trainlaunch.cli.top.live import AppActions, LiveScreen
from trainlaunch.cli.top.table import Table
from trainlaunch.errors import TrainlaunchError

LOG_LINES = 200  # under an app's ranks (also where each rank's last line is found)
FOLLOW_LINES = 500  # the logs screen


def fill(table: DataTable, columns: Sequence[str], rows: Sequence[tuple[str, list[Text]]]) -> None:
    """Show rows in a table, the cursor kept on its row. The same rows as before (the usual
    refresh) have only their changed cells updated: measuring and rendering every cell again
    was most of the cost of refreshing 100 apps. A column grows for a wider cell and keeps
    its width otherwise (DataTable measures the whole column again for a cell that grew but
    still fits: 100 rows per changed cell)."""
    if tuple(str(c.label) for c in table.columns.values()) != tuple(columns):
        table.clear(columns=True)
        table.add_columns(*columns)
    if [str(r.value) for r in table.rows] == [k for k, _ in rows]:
        keys = list(table.columns)
        for key, cells in rows:
            for column, old, new in zip(keys, table.get_row(key), cells, strict=True):
                if old != new:
                    wider = new.cell_len > table.columns[column].content_width
                    table.update_cell(key, column, new, update_width=wider)
        return
    keep = _cursor_key(table)
    table.clear()
    for key, cells in rows:
        table.add_row(*cells, key=key)
    if keep is not None and keep in {k for k, _ in rows}:
        table.move_cursor(row=table.get_row_index(keep), scroll=False)


def _cursor_key(table: DataTable) -> str | None:
    if not table.row_count:
        return None
    try:
        return str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)
    except Exception:  # noqa: BLE001 - a cursor past the rows: nothing to keep
        return None


class AppScreen(LiveScreen, AppActions):
    """One app: its head (state, stall, why it failed, hang), its ranks, its newest lines."""

    BINDINGS = [*LiveScreen.BINDINGS, *AppActions.ACTION_BINDINGS]

    def __init__(self, handle: str) -> None:
        super().__init__()
        self.handle = handle
        self.sweep: str | None = None

    def compose(self) -> ComposeResult:
        """Head, ranks table, log tail, keys."""
        yield Static(Text(self.handle, style="bold"), id="head")
        yield Table(id="ranks", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="tail"):
            yield Static("", id="logs")
        yield Footer()

    def read(self, runner: Any, rates: Any) -> Any:
        """board.app.app_view, without the metric's series (no chart here)."""
        from trainlaunch.cli.board.app import app_view

        return app_view(runner, self.handle, rates, self.top.metric, LOG_LINES, series=False)

    def show(self, data: Any) -> None:
        """Head lines, one row per rank, the tail scrolled to its end."""
        self.sweep = (data.get("live") or {}).get("sweep")
        self.query_one("#head", Static).update(Text("\n").join(frame.app_lines(data)))
        rows = [(str(r.get("rank")), frame.rank_cells(r)) for r in data.get("ranks") or []]
        fill(self.query_one("#ranks", DataTable), frame.RANK_COLUMNS, rows)
        self.query_one("#logs", Static).update(Text("\n").join(frame.tail_lines(data)))
        self.query_one("#tail", VerticalScroll).scroll_end(animate=False)

    def selected(self) -> tuple[str, str | None] | None:
        """This app."""
        return self.handle, self.sweep


class SweepScreen(LiveScreen):
    """A sweep's points: parameters, seed, state, the metric's last and best values."""

    def __init__(self, handle: str) -> None:
        super().__init__()
        self.handle = handle

    def compose(self) -> ComposeResult:
        """Head, points table, keys."""
        yield Static(Text(self.handle, style="bold"), id="head")
        yield Table(id="points", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def read(self, runner: Any, rates: Any) -> Any:
        """board.sweep.sweep_view."""
        from trainlaunch.cli.board.sweep import sweep_view

        return sweep_view(runner, self.handle, self.top.metric)

    def show(self, data: Any) -> None:
        """One row per point."""
        head = f"{data.get('handle')}  {data.get('component')} {' '.join(data.get('args', []))}"
        self.query_one("#head", Static).update(Text(head, style="bold"))
        rows = [(str(p.get("index")), frame.point_cells(data, p)) for p in data["points"]]
        fill(self.query_one("#points", DataTable), frame.sweep_columns(data), rows)


class TextScreen(LiveScreen):
    """A text read once (``r`` reads it again): stacks, describe."""

    BINDINGS = [*LiveScreen.BINDINGS, Binding("r", "reload", "Again")]
    FOLLOW = False

    def __init__(self, handle: str, title: str) -> None:
        super().__init__()
        self.handle, self.title_text = handle, title

    def compose(self) -> ComposeResult:
        """Title, the text (scrolls), keys."""
        yield Static(Text(f"{self.title_text}: {self.handle}", style="bold"), id="head")
        with VerticalScroll(id="body"):
            yield Static(Text(f"reading {self.title_text} ...", style="dim"), id="text")
        yield Footer()

    def on_mount(self) -> None:
        """Read once (a follower: every interval)."""
        if self.FOLLOW:
            super().on_mount()
        else:
            self.reload()

    def action_reload(self) -> None:
        """Read again."""
        self.reload()

    def show(self, data: Any) -> None:
        """The text; a follower stays at the end."""
        self.query_one("#text", Static).update(Text(data) if isinstance(data, str) else data)
        if self.FOLLOW:
            self.query_one("#body", VerticalScroll).scroll_end(animate=False)

    def failed(self, error: TrainlaunchError) -> None:
        """Why there is nothing to show."""
        hint = f"\n{error.hint}" if error.hint else ""
        self.query_one("#text", Static).update(Text(error.message + hint, style="red"))


class StackScreen(TextScreen):
    """Every rank's stack, grouped, as `trainlaunch stack` prints it (py-spy: on demand)."""

    def __init__(self, handle: str) -> None:
        super().__init__(handle, "stacks")

    def read(self, runner: Any, rates: Any) -> Any:
        """board.stacks.stacks_view's text: runner.stacks grouped as `trainlaunch stack` prints
        them, the collective story first when the Flight Recorder has one."""
        from trainlaunch.cli.board.stacks import stacks_view

        view = stacks_view(runner, self.handle)
        story = list(view["collectives"].get("lines") or [])
        return "\n".join([*story, view["text"]])


class DescribeScreen(TextScreen):
    """How the app was submitted: board's describe document (secrets masked)."""

    def __init__(self, handle: str) -> None:
        super().__init__(handle, "describe")

    def read(self, runner: Any, rates: Any) -> Any:
        """app_view's ``describe`` (render.describe_doc: env secrets masked)."""
        from rich.json import JSON

        from trainlaunch.cli.board.app import app_view

        doc = app_view(runner, self.handle, rates, None, log_lines=0, series=False)
        return JSON(json.dumps(doc["describe"], default=str))


class LogScreen(TextScreen):
    """The app's newest lines merged across ranks, followed (every interval)."""

    FOLLOW = True

    def __init__(self, handle: str) -> None:
        super().__init__(handle, "logs -f")

    def read(self, runner: Any, rates: Any) -> Any:
        """board.logtail.tail: the newest lines, each after who wrote it."""
        from trainlaunch.cli.board.logtail import tail

        lines = tail(runner, self.handle, runner.describe_app(self.handle), FOLLOW_LINES)
        return Text("\n").join(frame.tail_lines({"logs": lines}))


class Confirm(ModalScreen[bool]):
    """``Stop HANDLE? [y/n]``: the only way `top` changes anything."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes, stop it"),
        Binding("n,escape,q", "answer(False)", "No"),
    ]
    DEFAULT_CSS = """
    Confirm { align: center middle; }
    Confirm > Vertical { width: 72; height: auto; border: thick $error; padding: 1 2; }
    """

    def __init__(self, handle: str) -> None:
        super().__init__()
        self.handle = handle

    def compose(self) -> ComposeResult:
        """The question."""
        with Vertical():
            yield Static(Text.assemble("Stop ", (self.handle, "bold"), "?"))
            yield Static("Every process gets SIGTERM, then SIGKILL after the grace period.")
            yield Static(Text("y: stop it    n: leave it running", style="bold"))

    def action_answer(self, yes: bool) -> None:
        """Close with the answer."""
        self.dismiss(yes)


KEYS = """\
enter     open the selected app (or sweep)     tab     next table
s         stacks of every rank (py-spy)        l       logs, followed
d         describe (secrets masked)            w       the app's sweep
x         stop the app (asks first)            r       read again (stacks, describe)
q, esc    back; quit on the app list           ctrl+c  quit
"""


class Help(ModalScreen[None]):
    """The keys."""

    BINDINGS = [Binding("escape,q,question_mark", "app.pop_screen", "Close")]
    DEFAULT_CSS = """
    Help { align: center middle; }
    Help > Static { width: auto; height: auto; border: thick $accent; padding: 1 2; }
    """

    def compose(self) -> ComposeResult:
        """The key table."""
        yield Static(Text("keys of trainlaunch top\n\n", style="bold") + Text(KEYS))


__all__ = [
    "AppScreen",
    "Confirm",
    "DescribeScreen",
    "Help",
    "LogScreen",
    "StackScreen",
    "SweepScreen",
    "fill",
]
