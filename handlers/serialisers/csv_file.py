"""CSV export: RFC 4180, comma, CRLF after every record, UTF-8 with an optional BOM.

Cells that a spreadsheet would run as a formula are neutralised with a leading `'`: text
starting (after spaces) with `=`, `+`, `-`, `@`, tab or CR, unless the whole text is a plain
number such as `-12.5`, `+1e5` or `-1,234.50` (digits before the point grouped in threes).
Only ASCII digits count as a number: a spreadsheet does not read other scripts' digits as
one, so such a cell is neutralised to be safe. The header row is neutralised too, since a
column name is as untrusted as a value.

Values: None is empty, booleans are `true`/`false`, numbers keep their Python repr (which
every spreadsheet reads as a number), NaN and ±Infinity are the text `NaN`, `Infinity`,
`-Infinity` (the last neutralised, it is not a plain number), nested values are compact
JSON. A lone surrogate cannot be encoded as UTF-8 and becomes U+FFFD.

Every line break in the file is CRLF, inside quoted cells too: a bare CR or LF in a value
is written as CRLF, so tools that split or check lines see one line-end style.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Sequence
from itertools import groupby, islice
from operator import itemgetter
from typing import Any, cast

from handlers.serialisers import (
    LONE_SURROGATE,
    Cells,
    ColumnBlock,
    CsvRecords,
    aligned,
    without_surrogates,
)
from handlers.serialisers.json_file import compact_json

_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# Digits before the point may be grouped in threes by commas ("-1,234.50" is a number).
_PLAIN_NUMBER = re.compile(
    r"[+-]?(([0-9]{1,3}(,[0-9]{3})+|[0-9]+)(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?"
)
_NEEDS_QUOTES = re.compile(r'[",\r\n]')
_LINE_BREAK = re.compile("\r\n?|\n")
# The fast path of a cell: text with none of these characters, not starting with one that
# may open a formula (a space may precede one), is written as it is.
_NEEDS_A_RULE = re.compile('[",\r\n\ud800-\udfff]')
_MAY_OPEN_A_FORMULA = frozenset("=+-@\t\r ")
# The same test over a column's texts joined by NUL, each preceded by one: substring
# searches for the characters, and a search led by a literal NUL for the starts, are far
# faster than one regular expression over the text. A NUL inside a text can only cause a
# false alarm, which sends the rows down the cell-by-cell path.
_COLUMN_NEEDS_QUOTES = ('"', ",", "\r", "\n")
_COLUMN_MAY_OPEN_A_FORMULA = re.compile("\x00[=+\\-@\t\r ]")
# Rows taken at a time for the column-wise fast path.
_BATCH_ROWS = 64
_UTF8_BOM = "\ufeff".encode()


def cell_text(value: Any) -> str:
    """One value as plain text, not neutralised (shared by the CSV, XML and XLSX writers)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return repr(value)
    if isinstance(value, dict | list | tuple):
        return compact_json(value)
    # Rows hold JSON values only; anything else is a bug upstream, not data to guess at.
    raise TypeError(f"cannot write a {type(value).__name__} as a cell")


def neutralised(text: str) -> str:
    """The text with `'` in front when a spreadsheet would run it as a formula."""
    stripped = text.lstrip(" ")
    if stripped.startswith(_FORMULA_STARTS) and not _PLAIN_NUMBER.fullmatch(stripped):
        return "'" + text
    return text


def csv_cell(value: Any) -> str:
    """A value as CSV text: numbers as numbers, nested as compact JSON, formulas neutralised."""
    # Line ends first: a bare LF would become a leading CR, a formula start to neutralise.
    text = neutralised(_LINE_BREAK.sub("\r\n", cell_text(value)))
    return without_surrogates(text)


def csv_chunks(
    columns: Sequence[str],
    rows: Iterable[Cells],
    *,
    bom: bool = True,
    chunk_size: int = 65536,
) -> Iterator[bytes]:
    """The CSV file as byte chunks (RFC 4180, comma, CRLF, UTF-8, optional BOM, header row)."""
    if chunk_size < 1:
        raise ValueError("chunk_size must be at least 1")
    return _csv_chunks(columns, rows, bom, chunk_size)


def least_bytes(columns: Sequence[str], row_count: int, *, bom: bool = True) -> int:
    """No CSV file of these columns and this many rows is shorter: its header (a byte a
    character at the least), and each row's commas and line end (every cell empty)."""
    header = len(_record(columns)) + len(_UTF8_BOM) * bom
    return header + row_count * (max(len(columns) - 1, 0) + 2)


def _csv_chunks(
    columns: Sequence[str], rows: Iterable[Cells], bom: bool, chunk_size: int
) -> Iterator[bytes]:
    # Records are joined and encoded a chunk at a time, not one by one. A chunk is cut once
    # it holds chunk_size characters (the BOM counts as one), so at least as many bytes.
    # The BOM goes in as its UTF-8 bytes: joined as U+FEFF it would make the first chunk's
    # text two bytes a character, to join and to encode, where records are mostly ASCII.
    prefix = _UTF8_BOM if bom else b""
    header = _record(columns)
    if not bom and header.startswith("\ufeff"):
        # A file that starts with U+FEFF reads as one with a byte-order mark: a reader would
        # drop it from the first name. Quoted, the name starts after the quote and reads back
        # whole. (Unquoted, the first cell holds no quote to double.)
        first = len(csv_cell(columns[0]))
        header = f'"{header[:first]}"{header[first:]}'
    lines = [header]
    size = len(lines[0]) + (1 if bom else 0)
    for text in _records(rows, len(columns)):
        lines.append(text)
        size += len(text)
        if size >= chunk_size:
            yield prefix + "".join(lines).encode("utf-8")
            prefix = b""
            lines.clear()
            size = 0
    if lines:
        yield prefix + "".join(lines).encode("utf-8")


def _records(rows: Iterable[Cells], width: int) -> Iterator[str]:
    """The records of the rows, a record or a batch of them at a time."""
    # Runs of rows and runs of column blocks, told apart in C (`type` of each item).
    for kind, run in groupby(rows, type):
        if kind is ColumnBlock:
            for block in cast(Iterator[ColumnBlock], run):
                yield from _block_records(block, width)
        elif kind is CsvRecords:
            yield from (records.text for records in cast(Iterator[CsvRecords], run))
        else:
            yield from _row_records(cast(Iterator[Sequence[Any]], run), width)


def _block_records(block: ColumnBlock, width: int) -> Iterator[str]:
    if len(block.columns) != width:
        raise ValueError(f"a block of {len(block.columns)} columns for {width} columns")
    text = _plain_columns(block.columns, width)
    if text is not None:
        yield text
    else:  # its rows, a batch at a time, cell by cell where a rule may apply
        yield from _row_records(block.rows(), width)


def _row_records(rows: Iterable[Sequence[Any]], width: int) -> Iterator[str]:
    cell = _cell
    rows = iter(rows)
    while batch := list(islice(rows, _BATCH_ROWS)):
        text = _plain_records(batch, width)
        if text is not None:
            yield text
            continue
        for row in batch:
            line = ",".join(map(cell, row if len(row) == width else aligned(row, width)))
            # A blank line reads back as a record of no cells; `""` keeps its one empty cell.
            yield (line or ('""' if width else "")) + "\r\n"


def _plain_records(rows: list[Sequence[Any]], width: int) -> str | None:
    """The rows' records when no cell needs a rule (`_plain_columns`); else None."""
    if set(map(len, rows)) != {width}:
        return None
    return _plain_columns(list(zip(*rows, strict=True)), width)


def _plain_columns(columns: Sequence[Sequence[Any]], width: int) -> str | None:
    """The records of rows given as their columns when no cell needs a rule, checked a column
    at a time in C; else None. Such a column holds only text no rule touches, only finite
    floats (their repr) or only integers (no bools); a record has a comma (two columns at
    least), so none is blank."""
    if width < 2 or not columns[0]:
        return None
    texts: list[Sequence[str]] = []
    for column in columns:
        kinds = set(map(type, column))
        if kinds == {str}:
            if not _plain_column("\x00" + "\x00".join(column)):
                return None
            texts.append(column)
        elif kinds == {float}:
            if not all(map(math.isfinite, column)):
                return None
            texts.append(list(map(repr, column)))
        elif kinds == {int}:
            texts.append(list(map(str, column)))
        else:
            return None
    return "\r\n".join(map(",".join, zip(*texts, strict=True))) + "\r\n"


class PlainCsvBatch:
    """A batch of rows written as CSV records under the batch's own keys (`plain_text`), and
    values every row of it holds after them (`constants`: the source column of combined
    groups). `records` lays them out under the file's columns."""

    __slots__ = ("constants", "text")

    def __init__(self, text: str, constants: tuple[Any, ...] = ()) -> None:
        self.text = text
        self.constants = constants

    def with_constant(self, value: Any) -> PlainCsvBatch:
        """The same rows with one more value after their cells."""
        return PlainCsvBatch(self.text, (*self.constants, value))

    def records(self, names: Sequence[str], keys: Sequence[str]) -> CsvRecords:
        """The records under `keys` of rows whose cells are `names` (its text's cells, then
        its constants): the last of a name given twice wins, a key not named is empty. The
        file's bytes are those of the rows' values written under `keys`."""
        if tuple(names) == tuple(keys) and not self.constants:
            return CsvRecords(self.text)
        at = {name: position for position, name in enumerate(names)}
        width = len(names) - len(self.constants)
        # Cells of a plain record hold no comma and no line break: split, they are the
        # record's cells as written. After them: the constants' cells, then an empty one.
        tail = [*map(_cell, self.constants), _cell(None)]
        picks = [at.get(key, len(names)) for key in keys]
        if len(picks) < 2 or width < 2:  # a plain record has two cells at least
            raise ValueError("plain CSV records have two columns at least")
        lines = self.text.split("\r\n")
        lines.pop()  # the text ends with a record's CRLF
        cells = itemgetter(*picks)
        return CsvRecords(
            "\r\n".join(map(",".join, map(cells, (line.split(",") + tail for line in lines))))
            + "\r\n"
        )


def plain_text(columns: Sequence[Sequence[Any]]) -> str | None:
    """The CSV records of rows given as their columns, in the columns' order, when no cell
    needs a rule (`_plain_columns`: two columns at least); else None."""
    return _plain_columns(columns, len(columns))


def _plain_column(joined: str) -> bool:
    """No text of the NUL-joined column needs a rule (surrogates only outside ASCII)."""
    if any(needle in joined for needle in _COLUMN_NEEDS_QUOTES):
        return False
    if _COLUMN_MAY_OPEN_A_FORMULA.search(joined):
        return False
    return joined.isascii() or not LONE_SURROGATE.search(joined)


def _cell(value: Any) -> str:
    """`_quoted(csv_cell(value))`, without its rules for the values no rule applies to."""
    kind = type(value)
    if kind is str:
        if (not value or value[0] not in _MAY_OPEN_A_FORMULA) and not _NEEDS_A_RULE.search(value):
            return value  # type: ignore[no-any-return]
    elif kind is float:
        if math.isfinite(value):
            return repr(value)  # a finite float's repr is a plain number: never neutralised
    elif kind is int:
        return str(value)  # "-5" is a plain number too
    elif value is None:
        return ""
    return _quoted(csv_cell(value))


def _record(values: Sequence[Any]) -> str:
    line = ",".join(_quoted(csv_cell(value)) for value in values)
    # A blank line reads back as a record of no cells; `""` keeps its one empty cell.
    return (line or ('""' if values else "")) + "\r\n"


def _quoted(cell: str) -> str:
    if _NEEDS_QUOTES.search(cell):
        return '"' + cell.replace('"', '""') + '"'
    return cell
