"""Excerpt matching: whether a reply table only shows rows the actions returned.

The contract: docs/contract/decision.md step 7, "Excerpt matching".

A table is an excerpt of the action rows when it has strictly fewer rows, every column of
it is an action column (names compared ignoring case, punctuation and a trailing unit in
brackets), and every row of it is shown by some action row. Whether one cell shows one
value is `handlers.cell_keys`: they share a key.

Action rows stream past the matcher one at a time and the dataset is never held. The table
is indexed on one column (the one that tells its rows apart best, text before date-times
before numbers, a column of cut texts last on a tie), so each action row costs the keys of
one value and a dict look-up; the other cells are read only for the few table rows that
share that key. Which table column each action key fills is decided once per key layout,
not once per row. The streaming pass that feeds rows past the matcher lives in
`handlers.dataset`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any, Final

from handlers.cell_keys import Key, cell_keys, merged, value_keys
from handlers.rows import Row, normalize_key
from handlers.tables import Table

# Starts only where a whitespace run starts (a run that fails from its start fails from any
# later position in it): a long run is not read again from each of its positions.
_TRAILING_UNIT: Final = re.compile(r"(?<!\s)\s*(?:\([^()]*\)|\[[^\[\]]*\])\s*$")
# Past this many distinct key layouts the cache stops growing (rows keyed by ids).
_LAYOUT_CACHE_LIMIT: Final = 256

# For one key layout of action rows: the key filling the anchor column, then the key
# filling each other column (None when the rows have no such key).
_Plan = tuple[str | None, tuple[str | None, ...]]


def column_name_key(name: str) -> str:
    """A column name as compared: no trailing unit in brackets, case and punctuation ignored."""
    bare = normalize_key(_TRAILING_UNIT.sub("", name))
    return bare or normalize_key(name)


def has_table_columns(table: Table, action_columns: Collection[str]) -> bool:
    """Whether every table column is an action column (ignoring case, punctuation, units)."""
    names = {column_name_key(column) for column in action_columns}
    return all(column_name_key(column) in names for column in table.columns)


class TableMatcher:
    """Finds the rows of a small reply table that an action row shows, one action row at a time."""

    def __init__(self, table: Table) -> None:
        self.table = table
        width = len(table.columns)
        self._names = [column_name_key(column) for column in table.columns]
        read = [
            [cell_keys(row[i] if i < len(row) else "") for i in range(width)] for row in table.rows
        ]
        self._keys = [[keys for keys, _ in row] for row in read]
        self._readings = [merged(row[i][1] for row in read) for i in range(width)]
        # A column of cut texts is looked up by one key per length cut: on a tie, another.
        self._anchor = max(
            range(width),
            key=lambda i: (
                len({row[i] for row in self._keys}),
                not self._readings[i].cuts,
                self._readings[i].kind_rank,
            ),
            default=0,
        )
        self._by_key: dict[Key, list[int]] = {}
        for index, row_keys in enumerate(self._keys):
            for key in row_keys[self._anchor] if width else ():
                self._by_key.setdefault(key, []).append(index)
        self._plans: dict[tuple[str, ...], _Plan] = {}

    def matches(self, row: Row, skip: Collection[int] = ()) -> set[int]:
        """The indexes of the table rows (other than `skip`) the action row shows."""
        if not self._names:
            return set()
        anchor_key, others = self._plan(row)
        anchor_value = row[anchor_key] if anchor_key is not None else None
        candidates: set[int] = set()
        for key in value_keys(anchor_value, self._readings[self._anchor]):
            candidates.update(self._by_key.get(key, ()))
        candidates.difference_update(skip)
        if not candidates:
            return candidates
        # The anchor column already shares a key; the others are read once, when needed.
        read: dict[int, list[Key]] = {}
        found = set()
        for index in sorted(candidates):
            for column, source in enumerate(others):
                if column == self._anchor:
                    continue
                if column not in read:
                    value = row[source] if source is not None else None
                    read[column] = value_keys(value, self._readings[column])
                if self._keys[index][column].isdisjoint(read[column]):
                    break
            else:
                found.add(index)
        return found

    def _plan(self, row: Mapping[str, Any]) -> _Plan:
        """Which action key fills each table column, decided once per layout of keys."""
        layout = tuple(row)
        plan = self._plans.get(layout)
        if plan is None:
            filling: list[str | None] = [None] * len(self._names)
            for key in layout:
                name = column_name_key(key)
                for column, wanted in enumerate(self._names):
                    # The first key of a name wins, as it does for the exported columns.
                    if wanted == name and filling[column] is None:
                        filling[column] = key
            plan = (filling[self._anchor], tuple(filling))
            if len(self._plans) < _LAYOUT_CACHE_LIMIT:
                self._plans[layout] = plan
        return plan


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
