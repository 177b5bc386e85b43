"""Which action rows a turn exports: reach-back, dominance, excerpt matching (SPEC 5.7, section 7).

Everything here decides from small, already-loaded data: compact citations for reach-back
phase 1, per-group row counts for dominance, one cell and one table at a time for the
excerpt test. The streaming pass that produces those counts lives in `handlers.dataset`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from handlers.compaction import estimate_rows
from handlers.rows import Row, cell_text, normalize_key
from handlers.tables import Table
from schemas.documents import CompactCitation

MAX_REACH_BACK_ARTIFACTS = 25
DATASET_MIN_ROWS = 10
DOMINANCE_FACTOR = 5
SOURCE_COLUMN = "Source action"

_DECIMAL_TEXT = re.compile(r"[+-]?\d+(?:\.(\d+))?")


@dataclass(frozen=True)
class ResultRef:
    """A pair-valid, successful tool result the export may read."""

    turn_id: str
    action: str  # the tool/action name
    call_id: str
    artifact: str | None  # blob path, None when the result has no artifact
    # Out of the hash (a citation holds dicts) so refs can key sets and dicts.
    citation: CompactCitation | None = field(hash=False)
    order: int  # call order within the messages considered (0, 1, 2, ...)


def reach_back(refs: Sequence[ResultRef]) -> list[ResultRef]:
    """Phase 1: the winning (turn, action) group of the window, from compact citations only."""
    groups: dict[tuple[str, str], list[ResultRef]] = {}
    for ref in sorted(refs, key=lambda r: r.order):
        groups.setdefault((ref.turn_id, ref.action), []).append(ref)
    if not groups:
        return []
    estimates = {
        key: sum(estimate_rows(r.citation) or 0 for r in refs) for key, refs in groups.items()
    }
    # Dict order is first-call order, so max() keeps the first called group on a tie.
    winner = _newest_dataset(groups, estimates)
    if winner is None:
        with_rows = [key for key in groups if estimates[key] > 0]
        if not with_rows:
            return []
        winner = max(with_rows, key=lambda key: groups[key][-1].order)
    with_artifact = [ref for ref in groups[winner] if ref.artifact is not None]
    return with_artifact[:MAX_REACH_BACK_ARTIFACTS]


def _newest_dataset(
    groups: Mapping[tuple[str, str], list[ResultRef]], estimates: Mapping[tuple[str, str], int]
) -> tuple[str, str] | None:
    """The newest turn's best group when its estimate reaches DATASET_MIN_ROWS."""
    turns: dict[str, list[tuple[str, str]]] = {}
    for key in groups:
        turns.setdefault(key[0], []).append(key)
    # A turn is as new as its latest call: turns never interleave, so that orders them.
    by_newest = sorted(turns.values(), key=lambda keys: max(groups[k][-1].order for k in keys))
    for keys in reversed(by_newest):
        best = max(keys, key=lambda key: estimates[key])
        if estimates[best] >= DATASET_MIN_ROWS:
            return best
    return None


def choose_actions(counts: Sequence[tuple[str, int]]) -> tuple[list[str], bool]:
    """Dominance: ([largest], False) when >= 10 and >= 5x the rest, else (all with rows, True)."""
    with_rows = [(action, n) for action, n in counts if n > 0]
    if not with_rows:
        return [], False
    largest, most = max(with_rows, key=lambda pair: pair[1])  # first called wins a tie
    others = sum(n for _, n in with_rows) - most
    if most >= DATASET_MIN_ROWS and most >= DOMINANCE_FACTOR * others:
        return [largest], False
    # One group with rows is a dataset of its own: no source column to tell groups apart.
    return [action for action, _ in with_rows], len(with_rows) > 1


def source_column_name(columns: Sequence[str]) -> str:
    """'Source action', or 'Source action 2', 3, ... when taken (compared ignoring case)."""
    taken = {column.casefold() for column in columns}
    name, n = SOURCE_COLUMN, 1
    while name.casefold() in taken:
        n += 1
        name = f"{SOURCE_COLUMN} {n}"
    return name


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
