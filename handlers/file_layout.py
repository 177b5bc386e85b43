"""The file as written: its header (what the record names `columns`) and its aligned rows.

Header names are a decision, not a detail of writing (docs/contract/files.md): CSV and XLSX
make blank and duplicate names usable, JSON and XML keep the keys as retrieved, and in CSV a
name a spreadsheet would run as a formula carries the same `'` as any other cell, so the
record names the columns exactly as the file reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import msgspec

from handlers.dataset import finish_row
from handlers.rows import Row
from handlers.selection import Selection
from handlers.serialisers import Cells, ColumnBlock, without_surrogates
from handlers.serialisers.csv_file import PlainCsvBatch, csv_cell
from handlers.serialisers.headers import Shown, distinct_keys, unique_headers, xlsx_header
from handlers.tables import Table
from schemas.vocabulary import ExportFormat


class Layout(msgspec.Struct, frozen=True):
    """Header, row keys aligned with it, and what the record says of the rows."""

    header: tuple[str, ...]
    keys: tuple[str, ...]  # action rows: the row key under each header name
    row_count: int
    source_artifacts: tuple[str, ...]
    truncated: bool


def layout(fmt: ExportFormat, table: Table | None, selection: Selection | None) -> Layout:
    """The layout of a file exported from the table, else from the selected action rows."""
    if table is not None:
        return _named(fmt, table.columns, len(table.rows), (), False)
    assert selection is not None
    return _named(
        fmt,
        selection.columns,
        selection.row_count,
        selection.source_artifacts,
        selection.truncated,
    )


def _named(
    fmt: ExportFormat,
    keys: tuple[str, ...],
    count: int,
    sources: tuple[str, ...],
    truncated: bool,
) -> Layout:
    # A lone surrogate has no UTF-8 form: the record and the event could not name the column
    # (the turn was recorded published, then failed to announce it).
    names = [without_surrogates(key) for key in keys]
    if fmt in ("json", "xml"):
        # Keys as retrieved: JSON and XML tell "amount" from "Amount" and can name "".
        return Layout(tuple(distinct_keys(names)), keys, count, sources, truncated)
    # Compared as the file reads them. In CSV neutralised, CRLF line ends: "=a" and "'=a"
    # would otherwise both read "'=a", and "-1 2", made up beside "-1", needs the guard. In
    # XLSX cut to a cell's limit: two long names alike in their first 32,767 units differ.
    shown: Shown = _csv_header if fmt == "csv" else xlsx_header
    return Layout(tuple(unique_headers(names, shown)), keys, count, sources, truncated)


def _csv_header(base: str, suffix: str) -> str:
    return csv_cell(base + suffix)


def table_cells(table: Table, shape: Layout) -> Iterator[list[Any]]:
    """The table's rows aligned with the header (a short row is padded with None)."""
    width = len(shape.header)
    for row in table.rows:
        yield [row[i] if i < len(row) else None for i in range(width)]


def action_cells(row: Row, action: str, selection: Selection, shape: Layout) -> list[Any]:
    """One action row aligned with the header, with its source column when combined."""
    full = finish_row(row, action, selection)
    return [full.get(key) for key in shape.keys]


# As `RowSpool.batches` gives them: (None, rows), (names, columns), or (names, the batch
# written as CSV records) for a CSV export.
SpooledBatch = tuple[tuple[str, ...] | None, list[Any] | PlainCsvBatch]


def selection_cells(
    batches_of: Callable[[str], Iterable[SpooledBatch]], selection: Selection, shape: Layout
) -> Iterator[Cells]:
    """The file's rows from the selection: each selected dataset's `dataset_cells`, one
    after another in first-call order (`batches_of(action)`: its spooled batches). A key's
    column is found once for the file, not once per dataset: a combined export of thousands
    of groups, each with columns of its own, is as wide as all of them."""
    places = _Places(shape.keys)
    for action in selection.actions:
        yield from _dataset_cells(batches_of(action), action, selection, places)


def dataset_cells(
    batches: Iterable[SpooledBatch], action: str, selection: Selection, shape: Layout
) -> Iterator[Cells]:
    """A selected dataset's cells from its spooled batches: each row's `action_cells`, the
    source column (when groups were combined) added to every row of a batch."""
    return _dataset_cells(batches, action, selection, _Places(shape.keys))


def _dataset_cells(
    batches: Iterable[SpooledBatch], action: str, selection: Selection, places: _Places
) -> Iterator[Cells]:
    source = selection.source_column
    if source is not None:
        batches = (_with_source(batch, source, action, selection) for batch in batches)
    return _batch_cells(batches, places)


def _with_source(
    batch: SpooledBatch, source: str, action: str, selection: Selection
) -> SpooledBatch:
    names, rows = batch
    if isinstance(rows, PlainCsvBatch):
        assert names is not None
        return (*names, source), rows.with_constant(action)
    if names is None:
        return None, [finish_row(row, action, selection) for row in rows]
    column = [action] * len(rows[0])
    if source in names:  # the action's value replaces the row's, as `finish_row` does
        at = names.index(source)
        return names, [*rows[:at], column, *rows[at + 1 :]]
    return (*names, source), [*rows, column]


def batch_cells(batches: Iterable[SpooledBatch], keys: tuple[str, ...]) -> Iterator[Cells]:
    """Rows given a batch at a time (`RowSpool.batches`) aligned with `keys`, as
    `action_cells` aligns a row: a batch of rows, (None, dicts), by key, row by row; a
    batch of columns under the same keys, (names, columns), as one `ColumnBlock` of the
    columns the keys name (a key it lacks, a column of None: a sparse block, made in the
    time of the batch's own columns, not the keys'); a batch written as CSV records, as
    those records under the keys."""
    return _batch_cells(batches, _Places(keys))


class _Places:
    """The file's keys and each key's column, found when a batch first needs them."""

    __slots__ = ("_place", "keys")

    def __init__(self, keys: tuple[str, ...]) -> None:
        self.keys = keys
        self._place: dict[str, int] | None = None

    def of(self) -> dict[str, int] | None:
        """Each key's column; None when a key is named twice (it has more than one)."""
        if self._place is None:
            self._place = {key: column for column, key in enumerate(self.keys)}
        return self._place if len(self._place) == len(self.keys) else None


def _batch_cells(batches: Iterable[SpooledBatch], places: _Places) -> Iterator[Cells]:
    keys = places.keys
    for names, written in batches:
        if isinstance(written, PlainCsvBatch):
            assert names is not None
            yield written.records(names, keys)
        elif names is None:
            # Rows not all of one set of keys (a batch of one shape comes as columns): a
            # look-up per key.
            yield from (list(map(row.get, keys)) for row in written)
        elif not keys:
            yield from ([] for _ in written[0])  # rows of no cells
        elif names == keys:
            yield ColumnBlock(written)
        elif (place := places.of()) is None:
            yield _spread(names, written, keys)
        else:
            # The last of a name given twice wins, as a dict keeps the last value.
            mine = {place[name]: at for at, name in enumerate(names) if name in place}
            held = sorted(mine)
            yield ColumnBlock.sparse(
                len(keys), len(written[0]), held, [written[mine[column]] for column in held]
            )


def _spread(names: tuple[str, ...], written: list[Any], keys: tuple[str, ...]) -> ColumnBlock:
    """The batch's columns under keys that may repeat: each key's, else a column of None."""
    at = {name: position for position, name in enumerate(names)}
    absent = [None] * len(written[0])
    return ColumnBlock([absent if at.get(key) is None else written[at[key]] for key in keys])
