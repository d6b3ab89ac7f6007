"""What every screen of `top` shares: reading the board off the UI thread, every interval,
while the screen is the one shown; and the keys that act on one app (stacks, logs, describe,
stop after a confirmation)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual import work
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen

from trainlaunch.errors import TrainlaunchError


class Arrived(Message):
    """A reading came back from the worker thread (the board's document, or its error)."""

    def __init__(self, data: Any) -> None:
        super().__init__()
        self.data = data


class LiveScreen(Screen[None]):
    """A screen that reads ``read()`` in a thread every interval and shows it with ``show``.

    One reading at a time: a refresh due while the last is still out is skipped, so a slow
    backend never piles threads up. Screens under another one do not read.
    """

    BINDINGS = [
        Binding("escape,q", "back", "Back"),
        Binding("question_mark", "app.help", "Keys"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._busy = False

    def on_mount(self) -> None:
        """Read now, then every interval."""
        self.reload()
        self.set_interval(self.top.interval, self._tick)

    @property
    def top(self) -> Any:
        """The Top app (typed loosely: app.py imports this module)."""
        return self.app

    def _tick(self) -> None:
        if self.is_current:
            self.reload()

    def reload(self) -> None:
        """Start a reading unless one is out."""
        if not self._busy:
            self._busy = True
            self._read()

    @work(thread=True, group="read")
    def _read(self) -> None:
        try:
            data: Any = self.top.call_board(self.read)
        except TrainlaunchError as e:  # the app went away, a backend failed: shown, not fatal
            data = e
        self.post_message(Arrived(data))

    def on_arrived(self, message: Arrived) -> None:
        """Show what the worker read (on the UI thread)."""
        self._busy = False
        if isinstance(message.data, TrainlaunchError):
            self.failed(message.data)
        else:
            self.show(message.data)

    def read(self, runner: Any, rates: Any) -> Any:
        """The board's document this screen shows (runs in a worker thread)."""
        raise NotImplementedError

    def show(self, data: Any) -> None:
        """Put a reading on the screen."""
        raise NotImplementedError

    def failed(self, error: TrainlaunchError) -> None:
        """A reading failed: say why (the next refresh tries again)."""
        self.notify(error.message, title="error", severity="error")

    def action_back(self) -> None:
        """Back to the screen below (the app list quits)."""
        self.dismiss()


class AppActions:
    """The keys that act on one app; ``selected()`` names it (None: nothing selected). The
    app opens the screens (app.py), so that this module needs none of them."""

    ACTION_BINDINGS = [
        Binding("s", "stack", "Stack"),
        Binding("l", "logs", "Logs -f"),
        Binding("d", "describe", "Describe"),
        Binding("x", "stop", "Stop"),
        Binding("w", "sweep", "Sweep"),
    ]

    app: Any

    def selected(self) -> tuple[str, str | None] | None:
        """(handle, sweep id) of the app the keys act on."""
        raise NotImplementedError

    def _with_selected(self, then: Callable[[str, str | None], None]) -> None:
        chosen = self.selected()
        if chosen is None:
            self.app.notify("no app selected")
        else:
            then(*chosen)

    def action_stack(self) -> None:
        """Every rank's stack, grouped (what `trainlaunch stack` prints)."""
        self._with_selected(lambda h, _s: self.app.open_screen("stacks", h))

    def action_logs(self) -> None:
        """The app's merged log tail, followed."""
        self._with_selected(lambda h, _s: self.app.open_screen("logs", h))

    def action_describe(self) -> None:
        """How the app was submitted (secrets masked)."""
        self._with_selected(lambda h, _s: self.app.open_screen("describe", h))

    def action_sweep(self) -> None:
        """The points of the sweep the app belongs to."""

        def open_sweep(_h: str, sweep: str | None) -> None:
            if sweep is None:
                self.app.notify("this app is not part of a sweep")
            else:
                self.app.open_screen("sweep", f"sweep:{sweep}")

        self._with_selected(open_sweep)

    def action_stop(self) -> None:
        """Stop the app, once a confirmation said yes."""
        self._with_selected(lambda h, _s: self.app.ask_stop(h))


__all__ = ["AppActions", "Arrived", "LiveScreen"]
