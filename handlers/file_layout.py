"""The file as written: its header (what the record names `columns`) and its aligned rows.

Header names are a decision, not a detail of writing: blank and duplicate names are made
usable (docs/contract/files.md) and, in CSV, a name a spreadsheet would run as a formula carries the
same `'` as any other cell, so the record names the columns exactly as the file reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import msgspec

from handlers.dataset import finish_row
from handlers.rows import Row
from handlers.selection import Selection
from handlers.serialisers import Cells, ColumnBlock, without_surrogates
from handlers.serialisers.csv_file import PlainCsvBatch, csv_cell
from handlers.serialisers.headers import unique_headers
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
    if fmt == "csv":
        # As the file reads them (neutralised, CRLF line ends), before they are made unique:
        # "=a" and "'=a" would otherwise both read "'=a".
        names = [csv_cell(name) for name in names]
    return Layout(tuple(unique_headers(names)), keys, count, sources, truncated)


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


def dataset_cells(
    batches: Iterable[SpooledBatch], action: str, selection: Selection, shape: Layout
) -> Iterator[Cells]:
    """A selected dataset's cells from its spooled batches: each row's `action_cells`, the
    source column (when groups were combined) added to every row of a batch."""
    source = selection.source_column
    if source is not None:
        batches = (_with_source(batch, source, action, selection) for batch in batches)
    return batch_cells(batches, shape.keys)


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
    columns the keys name (a key it lacks, a column of None); a batch written as CSV
    records, as those records under the keys."""
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
        else:
            # The last of a name given twice wins, as a dict keeps the last value.
            at = {name: position for position, name in enumerate(names)}
            absent = [None] * len(written[0])
            yield ColumnBlock([absent if at.get(key) is None else written[at[key]] for key in keys])
