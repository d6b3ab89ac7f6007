"""The Textual app of `top`: the app list (and the sweeps) refreshed every interval; Enter opens
an app or a sweep (screens.py). The board is read in worker threads, one call at a time, with
one Runner and one RateBook for the whole session."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Static

from trainlaunch.cli.board.rates import RateBook
from trainlaunch.cli.top import frame
from trainlaunch.cli.top.live import AppActions, LiveScreen
from trainlaunch.cli.top.screens import (
    AppScreen,
    Confirm,
    DescribeScreen,
    Help,
    LogScreen,
    StackScreen,
    SweepScreen,
    fill,
)
from trainlaunch.cli.top.table import Table
from trainlaunch.errors import TrainlaunchError

OFFSCREEN_MARGIN = 5  # rows above and below the shown ones read as if shown (arrow keys)


class Overview(LiveScreen, AppActions):
    """Every app of the backends (running first), then the sweeps of this app store."""

    BINDINGS = [*LiveScreen.BINDINGS, *AppActions.ACTION_BINDINGS]

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, dict[str, Any]] = {}
        self._offscreen: frozenset[str] = frozenset()

    def compose(self) -> ComposeResult:
        """Title, apps, sweeps, keys."""
        yield Static(Text("trainlaunch top: reading ...", style="bold"), id="head")
        yield Table(id="apps", cursor_type="row", zebra_stripes=True)
        yield Static(Text("sweeps", style="bold"), id="sweeps-head")
        yield Table(id="sweeps", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def reload(self) -> None:
        """Note which apps are off the screen (on the UI thread), then read."""
        self._offscreen = self.offscreen()
        super().reload()

    def offscreen(self) -> frozenset[str]:
        """The apps of the table that are neither shown nor within OFFSCREEN_MARGIN rows of
        the shown ones (nor under the cursor): a refresh reads only their list rows."""
        table = self.query_one("#apps", DataTable)
        keys = [str(k.value) for k in table.rows]
        top = int(table.scroll_y)
        shown = set(
            keys[max(0, top - OFFSCREEN_MARGIN) : top + table.size.height + OFFSCREEN_MARGIN]
        )
        cursor = self.selected()
        if cursor is not None:
            shown.add(cursor[0])
        return frozenset(keys) - shown

    def read(self, runner: Any, rates: RateBook) -> Any:
        """board.apps.overview (the apps on the screen live) and board.sweep.sweeps."""
        from trainlaunch.cli.board.apps import overview
        from trainlaunch.cli.board.sweep import sweeps

        doc = overview(
            runner,
            self.top.backends,
            rates,
            self.top.metric,
            default_metric=True,
            offscreen=self._offscreen,
        )
        return doc, sweeps()

    def show(self, data: Any) -> None:
        """Both tables; the head says when and what (or that there is nothing). An app read
        off the screen keeps what was read of it last (its state and age are new)."""
        doc, sweeps = data
        last = self.rows
        for i, r in enumerate(doc["apps"]):
            if r.get("live") is False and r["handle"] in last:
                doc["apps"][i] = {**last[r["handle"]], **r}
        self.rows = {r["handle"]: r for r in doc["apps"]}
        title = frame.metric_column(doc)
        rows = [(r["handle"], frame.app_cells(r, title)) for r in doc["apps"]]
        fill(self.query_one("#apps", DataTable), frame.app_columns(doc), rows)
        now = time.time()
        points = [(str(s.get("handle") or s["id"]), frame.sweep_cells(s, now)) for s in sweeps]
        fill(self.query_one("#sweeps", DataTable), frame.SWEEP_COLUMNS, points)
        sweeps_head = Text("sweeps", style="bold") if sweeps else Text("no sweeps", style="dim")
        self.query_one("#sweeps-head", Static).update(sweeps_head)
        running = sum(1 for r in doc["apps"] if r.get("running"))
        head = Text.assemble(
            ("trainlaunch top", "bold"),
            f"  {', '.join(self.top.backends)}: {running} running, {len(doc['apps'])} shown",
            f"  at {time.strftime('%H:%M:%S', time.localtime(doc['at']))}",
            f", every {self.top.interval:g}s   ? keys",
        )
        if not doc["apps"]:
            head.append("\nno apps yet: start one with `trainlaunch run ...`", style="yellow")
        for note in doc["notes"]:
            head.append(f"\n{note}", style="yellow")
        self.query_one("#head", Static).update(head)

    def selected(self) -> tuple[str, str | None] | None:
        """The app under the cursor of the apps table."""
        table = self.query_one("#apps", DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        row = self.rows.get(str(key))
        return (str(key), row.get("sweep") if row else None) if key else None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The cursor reached an app read off the screen: read again now."""
        row = self.rows.get(str(event.row_key.value))
        if event.data_table.id == "apps" and row is not None and row.get("live") is False:
            self.reload()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter: the app's screen, or the sweep's."""
        key = str(event.row_key.value)
        if event.data_table.id == "sweeps":
            self.app.push_screen(SweepScreen(key))
        else:
            self.app.push_screen(AppScreen(key))

    def action_back(self) -> None:
        """The app list is the first screen: q quits."""
        self.app.exit()


class Top(App[None]):
    """`trainlaunch top`."""

    INTERRUPTED = 130
    TITLE = "trainlaunch top"
    BINDINGS = [
        Binding("ctrl+c", "interrupt", "Quit", show=False, priority=True),
    ]
    CSS = """
    #head { height: auto; padding: 0 1; }
    #sweeps-head { padding: 1 1 0 1; }
    DataTable { height: auto; max-height: 60%; }
    #tail, #body { height: 1fr; padding: 0 1; }
    """

    def __init__(
        self,
        runner: Any,
        backends: list[str],
        metric: str | None,
        interval: float,
        handle: str | None = None,
    ) -> None:
        super().__init__()
        self.runner, self.backends, self.metric, self.interval = runner, backends, metric, interval
        self.start = handle
        self.rates = RateBook()
        self._board = threading.Lock()  # one Runner, one RateBook: one reader at a time

    def on_mount(self) -> None:
        """The app list, and on it HANDLE's screen when one was given."""
        self.push_screen(Overview())
        if self.start:
            sweep = "sweep:" in self.start
            self.push_screen(SweepScreen(self.start) if sweep else AppScreen(self.start))

    def call_board(self, read: Callable[[Any, RateBook], Any]) -> Any:
        """Run a board reading (from a worker thread) with the session's Runner and rates."""
        with self._board:
            return read(self.runner, self.rates)

    def open_screen(self, kind: str, handle: str) -> None:
        """One app's stacks, logs or describe, or a sweep's points, on top of this screen."""
        screens = {
            "stacks": StackScreen,
            "logs": LogScreen,
            "describe": DescribeScreen,
            "sweep": SweepScreen,
            "app": AppScreen,
        }
        self.push_screen(screens[kind](handle))

    def ask_stop(self, handle: str) -> None:
        """The y/n dialog; yes stops the app (in a worker), no leaves it running."""

        def answered(yes: bool | None) -> None:
            if yes:
                self.stop_app(handle)
            else:
                self.notify(f"{handle} left running")

        self.push_screen(Confirm(handle), answered)

    def action_help(self) -> None:
        """The keys."""
        self.push_screen(Help())

    def action_interrupt(self) -> None:
        """Ctrl-C: leave as an interrupted command does (exit 130)."""
        self.exit(return_code=self.INTERRUPTED)

    @work(thread=True, group="stop")
    def stop_app(self, handle: str) -> None:
        """Stop an app (confirmed before): what `trainlaunch stop` does."""
        from trainlaunch.runner import get_runner

        self.notify(f"stopping {handle} ...")
        try:
            with get_runner() as runner:  # its own: the refreshes go on during the grace period
                runner.cancel(handle)
        except TrainlaunchError as e:
            self.notify(f"{handle}: {e.message}", severity="error")
            return
        self.notify(f"{handle} stopped")


__all__ = ["Overview", "Top"]
