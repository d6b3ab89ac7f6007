"""The tables of `top`: Textual's DataTable, with each cell's rendering kept while its value is
the same.

DataTable keys its cell cache on a counter that every ``update_cell`` bumps, so one changed
cell (an app's idle time, every refresh) renders every visible cell again: ~30 rows x 11
columns through rich's padding and cropping, most of the CPU `top` spent on 100 running
apps. Here a cell's rendering is kept by what decides it (its text and styles, where it is,
its width, cursor and hover), so a refresh renders only the cells whose text changed.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.widgets import DataTable

MAX_CELLS = 8192  # kept renderings; past this the memory starts afresh

SegmentLines = list[list[Segment]]


def _signature(cell: Any) -> Hashable | None:
    """What a cell's rendering depends on (None: not known, render it as DataTable does)."""
    if isinstance(cell, Text):
        return (cell.plain, cell.style, tuple(cell.spans), cell.justify, cell.overflow)
    if isinstance(cell, str):
        return cell
    return None


class Table(DataTable[Any]):
    """A DataTable whose unchanged cells are not rendered again (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._kept: dict[Hashable, SegmentLines] = {}  # before DataTable's watchers can run
        super().__init__(*args, **kwargs)

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> SegmentLines:
        if row_index < 0 or column_index < 0:  # the header and row labels: DataTable's way
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        row_key = self._row_locations.get_key(row_index)
        column_key = self._column_locations.get_key(column_index)
        row = self._data.get(row_key) if row_key is not None else None
        if row is None or column_key is None or row_key is None:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        sig = _signature(row.get(column_key))
        if sig is None or self.rows[row_key].height != 1:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        key = (
            sig,
            row_index,
            column_index,
            base_style,
            width,
            cursor,
            hover,
            self._show_hover_cursor,
            self.show_cursor,
            self._pseudo_class_state,
        )
        lines = self._kept.get(key)
        if lines is None:
            lines = super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
            if len(self._kept) >= MAX_CELLS:
                self._kept = {}
            self._kept[key] = lines
        return lines

    def _clear_caches(self) -> None:
        super()._clear_caches()
        self._kept = {}

    def notify_style_update(self) -> None:
        """A new theme or CSS: every cell is rendered again."""
        self._kept = {}
        super().notify_style_update()


__all__ = ["Table"]
