"""Export files (docs/contract/files.md): rows in, file bytes out, one module per format.

Every serialiser takes `columns` (already distinct, by `headers.unique_headers` or
`headers.distinct_keys`, so the file's header matches the columns the caller records) and an
iterable of rows aligned with them; a value is a JSON value and `None` means missing. In
that iterable a `ColumnBlock` may stand for several rows given as their columns (how the row
spool hands a batch back): CSV writes such a block a column at a time, the other formats row
by row (`each_row`), and every format writes the same bytes as for the rows themselves. A
`CsvRecords` item is rows the CSV writer wrote already (a spooled batch of a CSV export):
only CSV takes it. Nothing here does I/O: the text formats yield byte chunks, XLSX writes to
a sink it is handed. Rows are consumed a row or a block at a time so no format holds the
whole dataset. This module holds only what every format shares: content types, extensions,
the row shape rule, column blocks, the chunking rule and the lone-surrogate rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from itertools import pairwise
from typing import Any, Final

CONTENT_TYPES: Final[dict[str, str]] = {
    "csv": "text/csv; charset=utf-8",
    "json": "application/json",
    "xml": "application/xml",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
}
EXTENSIONS: Final[dict[str, str]] = {"csv": "csv", "json": "json", "xml": "xml", "xlsx": "xlsx"}
# Half a surrogate pair (JSON may escape one alone) has no UTF-8 form.
LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def without_surrogates(text: str) -> str:
    """The text with each lone surrogate replaced by U+FFFD."""
    return LONE_SURROGATE.sub("\ufffd", text)


class ColumnBlock:
    """Rows given as their columns: one sequence per column of the file, all of one length;
    row i is the i-th value of each.

    A block made `sparse` knows the only columns that may hold a value (`held`): a combined
    export of groups with columns of their own is as wide as all of them, and each group's
    rows hold only a few. A format that leaves missing cells out (XLSX) writes such a row in
    the time of its own cells (`held_columns`), never building or walking the file's width;
    `columns` gives every column (the rest all None) to the formats that write them all."""

    __slots__ = ("_columns", "_count", "_held_columns", "_width", "held")

    def __init__(self, columns: Sequence[Sequence[Any]]) -> None:
        if not columns:
            raise ValueError("a column block needs at least one column")
        self._columns: Sequence[Sequence[Any]] | None = columns
        self._width, self._count = len(columns), len(columns[0])
        self.held: Sequence[int] | None = None  # None: any column may hold a value
        self._held_columns: Sequence[Sequence[Any]] = columns

    @classmethod
    def sparse(
        cls,
        width: int,
        count: int,
        held: Sequence[int],
        held_columns: Sequence[Sequence[Any]],
    ) -> ColumnBlock:
        """`count` rows of `width` columns, of which only those at the positions `held`
        (ascending) may hold a value: `held_columns`, in the same order."""
        if width < 1:
            raise ValueError("a column block needs at least one column")
        if len(held) != len(held_columns) or any(b <= a for a, b in pairwise(held)):
            raise ValueError("held names each held column once, in ascending order")
        if held and not 0 <= held[0] <= held[-1] < width:
            raise ValueError(f"a held column is outside the block's {width} columns")
        block = cls.__new__(cls)
        block._columns = None
        block._width, block._count = width, count
        block.held, block._held_columns = held, held_columns
        return block

    @property
    def columns(self) -> Sequence[Sequence[Any]]:
        """Every column of the block, in order."""
        if self._columns is None:
            absent = [None] * self._count
            columns: list[Sequence[Any]] = [absent] * self._width
            for position, column in zip(self.held or (), self._held_columns, strict=True):
                columns[position] = column
            self._columns = columns
        return self._columns

    def held_columns(self) -> Sequence[Sequence[Any]]:
        """The columns at the positions `held` (every column when `held` is None)."""
        return self._held_columns

    @property
    def width(self) -> int:
        """The number of columns."""
        return self._width

    def row_count(self) -> int:
        """The number of rows."""
        return self._count

    def rows(self) -> Iterator[tuple[Any, ...]]:
        """The block's rows, as tuples, in order."""
        return zip(*self.columns, strict=True)


class CsvRecords:
    """Rows already written as the CSV file's records (`csv_file.PlainCsvBatch`): only the
    CSV writer takes them, as they are."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


Cells = Sequence[Any] | ColumnBlock | CsvRecords  # what a serialiser's `rows` yields


def each_row(rows: Iterable[Cells]) -> Iterator[Sequence[Any]]:
    """The rows, a column block's expanded in place."""
    for item in rows:
        if type(item) is ColumnBlock:
            yield from item.rows()
        elif type(item) is CsvRecords:
            raise TypeError("CSV records are written by the CSV writer only")
        else:
            yield item  # type: ignore[misc]


def aligned(row: Sequence[Any], width: int) -> Sequence[Any]:
    """The row padded with None to `width` cells; a longer row is a caller bug (ValueError)."""
    if len(row) == width:
        return row
    if len(row) > width:
        # Dropping cells would silently lose data that has no column to go in.
        raise ValueError(f"row has {len(row)} cells but there are {width} columns")
    return [*row, *([None] * (width - len(row)))]


def byte_chunks(texts: Iterable[str], chunk_size: int, errors: str = "strict") -> Iterator[bytes]:
    """The texts joined as UTF-8, in chunks of about `chunk_size` bytes (the last may be less).
    A chunk size below 1 is refused at the call, as `csv_chunks` refuses it, not at the first
    chunk asked for."""
    if chunk_size < 1:
        raise ValueError("chunk_size must be at least 1")
    return _byte_chunks(texts, chunk_size, errors)


def _byte_chunks(texts: Iterable[str], chunk_size: int, errors: str) -> Iterator[bytes]:
    buffer = bytearray()
    for text in texts:
        buffer += text.encode("utf-8", errors)
        if len(buffer) >= chunk_size:
            yield bytes(buffer)
            buffer.clear()
    if buffer:
        yield bytes(buffer)
