"""Excerpt matching: whether a reply table only shows rows the actions returned.

The contract: docs/contract/decision.md step 7, "Excerpt matching".

Decided from small, already-loaded data: one reply table and one action row at a time. The
streaming pass that feeds action rows past the matcher lives in `handlers.dataset`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from handlers.rows import Row, cell_text, normalize_key
from handlers.tables import Table

_DECIMAL_TEXT = re.compile(r"[+-]?\d+(?:\.(\d+))?")


def has_table_columns(table: Table, action_columns: Collection[str]) -> bool:
    """Whether every table column is an action column (ignoring case and punctuation)."""
    names = {normalize_key(column) for column in action_columns}
    return all(normalize_key(column) in names for column in table.columns)


class TableMatcher:
    """Finds the rows of a small reply table that an action row shows, one action row at a time."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self._names = [normalize_key(column) for column in table.columns]
        self._cells = [_padded(cells, len(table.columns)) for cells in table.rows]
        # A column with no number in it can only match by exact text: index the table on the
        # first such column so a long stream of action rows is not compared row by row.
        self._anchor = next(
            (
                i
                for i in range(len(table.columns))
                if not any(_DECIMAL_TEXT.fullmatch(cells[i].strip()) for cells in self._cells)
            ),
            None,
        )
        self._by_anchor: dict[str, list[int]] = {}
        for index, cells in enumerate(self._cells):
            key = cells[self._anchor].strip() if self._anchor is not None else ""
            self._by_anchor.setdefault(key, []).append(index)

    def matches(self, row: Row, skip: Collection[int] = ()) -> set[int]:
        """The indexes of the table rows (other than `skip`) the action row shows."""
        by_name: dict[str, Any] = {}
        for key, value in row.items():
            by_name.setdefault(normalize_key(key), value)
        values = [by_name.get(name) for name in self._names]
        if self._anchor is None:
            candidates: Sequence[int] = range(len(self._cells))
        else:
            candidates = self._by_anchor.get(cell_text(values[self._anchor]), [])
        return {
            index
            for index in candidates
            if index not in skip
            and all(
                cell_matches(text, value)
                for text, value in zip(self._cells[index], values, strict=True)
            )
        }


def _padded(cells: Sequence[str], width: int) -> tuple[str, ...]:
    """A table row as exactly `width` cells: a short row's missing cells are empty."""
    return tuple(cells[:width]) + ("",) * (width - len(cells))


def cell_matches(text: str, value: Any) -> bool:
    """Whether a cell shows a value: same text, or the value rounded to the decimals shown."""
    shown = text.strip()
    if shown == cell_text(value):
        return True
    found = _DECIMAL_TEXT.fullmatch(shown)
    if found is None or isinstance(value, bool) or not isinstance(value, int | float | str):
        return False
    try:
        exact, target = Decimal(str(value).strip()), Decimal(shown)
        quantum = Decimal(1).scaleb(-len(found.group(1) or ""))
        return any(exact.quantize(quantum, rounding=mode) == target for mode in _ROUNDINGS)
    except (InvalidOperation, ValueError):
        return False


_ROUNDINGS = (ROUND_HALF_UP, ROUND_HALF_EVEN)


def is_excerpt(
    table: Table,
    action_columns: Collection[str],
    action_row_count: int,
    matched_rows: Collection[int],
) -> bool:
    """Whether the table is an excerpt, given the indexes of its rows the action rows matched."""
    return (
        len(table.rows) < action_row_count
        and has_table_columns(table, action_columns)
        and all(index in matched_rows for index in range(len(table.rows)))
    )
