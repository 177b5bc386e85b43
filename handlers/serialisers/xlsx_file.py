"""XLSX export: one sheet "Export", bold header row frozen, written in constant memory.

Numbers are written as numbers and booleans as booleans; text is always written as a
string cell, never parsed as a formula, URL or number. None leaves the cell blank.
Nested values are compact JSON text. Choices a spreadsheet forces:

- NaN and ±Infinity are not storable numbers: written as the text `NaN`, `Infinity`,
  `-Infinity`.
- An integer beyond ±2**53 would lose digits as a double (think long ids): written as text.
- A float beyond a sheet's largest number (9.99999999999999E+307) is written as text.
- xlsxwriter keeps 16 significant digits of a number (a spreadsheet shows 15).
- A cell holds at most 32767 UTF-16 units: longer text is truncated to that.
- A lone surrogate cannot be encoded: replaced by U+FFFD.
- A sheet holds 1,048,576 rows, one of them the header: more data rows raise ValueError.
  The caller counts first and decides `too_large`; if it does not, the sink is left
  holding a truncated workbook that must be discarded.
- A sheet holds 16,384 columns: more raise ValueError (xlsxwriter would drop them silently).

xlsxwriter makes the workbook (its parts, styles, the frozen pane, the zip). The sheet's
cells are this module's: in constant-memory mode xlsxwriter writes each row's XML into a
temporary file and copies that file into the sheet when the workbook closes, and
`_SheetRows` writes the same XML into that file, a row at a time instead of a Python call
chain per cell (~3x faster in one process; the same bytes, which
`tests/handlers/test_xlsx_rows.py` holds against xlsxwriter's own cell writes). One text
differs on purpose: xlsxwriter writes a string shaped `<r>…</r>` into the sheet unescaped,
as the XML of a rich string, so a cell reading `<r>&</r>` made a workbook no reader could
open; here it is escaped like any other text. The pin in pyproject.toml keeps xlsxwriter to
the versions whose row file this was checked against; a worksheet that does not keep one
falls back to xlsxwriter's cell writes.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from itertools import repeat
from typing import Any, BinaryIO, Final

from handlers.serialisers import Cells, ColumnBlock, aligned, each_row, without_surrogates
from handlers.serialisers.csv_file import cell_text
from handlers.serialisers.headers import XLSX_CELL_UNITS, utf16_prefix
from schemas.text import utf16_units

MAX_XLSX_DATA_ROWS: Final = 1_048_575
MAX_XLSX_COLUMNS: Final = 16_384
SHEET_NAME: Final = "Export"
_MAX_EXACT_INT: Final = 2**53
_MAX_SHEET_NUMBER: Final = 9.99999999999999e307
_OPTIONS: Final = {
    "constant_memory": True,
    # Text is data: never let xlsxwriter turn "=1+1", "http://…" or "007" into something else.
    "strings_to_formulas": False,
    "strings_to_urls": False,
    "strings_to_numbers": False,
}

# What a cell's text needs done before it goes between <t> and </t> as it is: a lone
# surrogate (replaced), a character XML escapes, a control character or an escape-shaped
# run (OOXML's `_xHHHH_`), U+FFFE/U+FFFF, leading or trailing white space (kept by
# xml:space="preserve"). Text past half the cell's limit is checked for length too.
_NOT_PLAIN: Final = re.compile(
    r"[\ud800-\udfff&<>\x00-\x08\x0b-\x1f\ufffe\uffff]|_x[0-9a-fA-F]{4}_|^\s|\s$"
)
_ESCAPE_SHAPED: Final = re.compile("(_x[0-9a-fA-F]{4}_)")
_CONTROL: Final = re.compile(r"([\x00-\x08\x0b-\x1f])")
_LEADING_SPACE: Final = re.compile(r"^\s")
_TRAILING_SPACE: Final = re.compile(r"\s$")
# Rows joined before each write to xlsxwriter's row file.
_ROWS_A_WRITE: Final = 512


# The workbook's "created" stamp: fixed, so the same rows give the same bytes (xlsxwriter
# would otherwise read the clock, and a redelivered turn would get a different sha256).
FIXED_CREATED = datetime(2000, 1, 1, tzinfo=UTC)


def write_xlsx(
    columns: Sequence[str],
    rows: Iterable[Cells],
    sink: BinaryIO,
    *,
    created: datetime = FIXED_CREATED,
    tmpdir: str | None = None,
) -> None:
    """One sheet, frozen bold header, numbers as numbers, text always text, constant memory
    (the rows wait in a temporary file, in `tmpdir` when given, until the workbook closes)."""
    if len(columns) > MAX_XLSX_COLUMNS:
        raise ValueError(f"more than {MAX_XLSX_COLUMNS} columns do not fit in a sheet")
    # Imported here: every other format (and start-up) does without it.
    import xlsxwriter

    workbook = xlsxwriter.Workbook(
        sink, _OPTIONS if tmpdir is None else {**_OPTIONS, "tmpdir": tmpdir}
    )
    workbook.set_properties({"created": created})
    # Always close: in constant-memory mode the rows sit in a temp file only close removes.
    sheet = None
    try:
        sheet = workbook.add_worksheet(SHEET_NAME)
        bold = workbook.add_format({"bold": True})
        sheet.freeze_panes(1, 0)
        if _SheetRows.fits(sheet):
            _SheetRows(sheet).write(columns, rows, bold)
        else:
            _write_cells(sheet, columns, rows, bold)
    finally:
        try:
            workbook.close()
        finally:
            _remove_row_file(sheet)


def _remove_row_file(sheet: Any) -> None:
    """Close removes a sheet's row file only when the sheet holds a cell: a sheet with no
    columns, or one whose rows raised before any was counted, would leave it behind."""
    row_file = getattr(sheet, "row_data_fh", None)
    if row_file is not None:
        row_file.close()
    name = getattr(sheet, "row_data_filename", None)
    if name:
        with contextlib.suppress(FileNotFoundError):  # close removed it: the sheet held a cell
            os.unlink(name)


def _write_cells(sheet: Any, columns: Sequence[str], rows: Iterable[Cells], bold: Any) -> None:
    """The header and rows through xlsxwriter's own cell writes (`write_string` and the
    like): the fallback, and the reference the tests hold `_SheetRows` to."""
    for col, name in enumerate(columns):
        sheet.write_string(0, col, _text(name), bold)
    width = len(columns)
    for index, row in enumerate(each_row(rows), start=1):
        if index > MAX_XLSX_DATA_ROWS:
            raise ValueError(f"more than {MAX_XLSX_DATA_ROWS} rows do not fit in a sheet")
        for col, value in enumerate(aligned(row, width)):
            _write_cell(sheet, index, col, value)


class _SheetRows:
    """The sheet's rows as xlsxwriter's constant-memory mode writes them, into its row file.

    A row is `<row r="N">` and its cells, a cell `<c r="A2">` with its value: a number as
    `<v>` (16 significant digits), a boolean `t="b"` with `<v>` 1 or 0, text as an inline
    string `t="inlineStr"` (the header's with the bold style `s`). Missing cells are left
    out, and a row with none is not written, so a sparse column block (a group of a combined
    export, holding a few of the file's columns) is written in the time of the cells it
    holds. Afterwards the worksheet's dimensions and last row are those its own writes would
    have left, so it closes the sheet as it would have."""

    __slots__ = ("_out", "_sheet")

    def __init__(self, sheet: Any) -> None:
        self._sheet = sheet
        self._out = sheet.row_data_fh

    @staticmethod
    def fits(sheet: Any) -> bool:
        """Whether the worksheet keeps its rows the way this writer writes them: in
        constant-memory mode, an open row file, nothing written yet."""
        return (
            getattr(sheet, "constant_memory", False) is True
            and getattr(sheet, "row_data_fh", None) is not None
            and isinstance(getattr(sheet, "table", None), defaultdict)
            and not sheet.table
            and getattr(sheet, "previous_row", None) == 0
            and getattr(sheet, "dim_rowmin", 0) is None
            and all(hasattr(sheet, name) for name in ("dim_rowmax", "dim_colmin", "dim_colmax"))
        )

    def write(self, columns: Sequence[str], rows: Iterable[Cells], header_style: Any) -> None:
        from xlsxwriter.utility import xl_col_to_name

        width = len(columns)
        letters = [xl_col_to_name(col) for col in range(width)]
        pending = []
        if width:  # the bold style is the header's: a workbook without one does not hold it
            style = f' s="{header_style._get_xf_index()}"'
            header = "".join(
                _string_cell(f'r="{letter}1"{style}', name)
                for letter, name in zip(letters, columns, strict=True)
            )
            pending.append(f'<row r="1">{header}</row>')
        last = 0  # the last row written (0: the header's)
        not_plain = _NOT_PLAIN.search
        for index, (row_letters, row) in enumerate(_lettered(rows, letters), start=1):
            if index > MAX_XLSX_DATA_ROWS:
                raise ValueError(f"more than {MAX_XLSX_DATA_ROWS} rows do not fit in a sheet")
            number = str(index + 1)
            cells = []
            for letter, value in zip(row_letters, row, strict=True):
                kind = type(value)
                if kind is str:
                    if len(value) <= XLSX_CELL_UNITS // 2 and not not_plain(value):
                        cells.append(
                            f'<c r="{letter}{number}" t="inlineStr"><is><t>{value}</t></is></c>'
                        )
                    else:
                        cells.append(_string_cell(f'r="{letter}{number}"', value))
                # `_fits_a_double` for a float, inline: False for NaN and ±Infinity too.
                elif kind is float and -_MAX_SHEET_NUMBER <= value <= _MAX_SHEET_NUMBER:
                    cells.append(f'<c r="{letter}{number}"><v>{value:.16G}</v></c>')
                elif value is not None:
                    cells.append(_cell(f'r="{letter}{number}"', value))
            if cells:
                pending.append(f'<row r="{number}">{"".join(cells)}</row>')
                last = index
            if len(pending) >= _ROWS_A_WRITE:
                self._out.write("".join(pending))
                pending.clear()
        self._out.write("".join(pending))
        if width:
            # As `_check_dimensions` would have kept them: the header spans every column.
            sheet = self._sheet
            sheet.dim_rowmin, sheet.dim_rowmax = 0, last
            sheet.dim_colmin, sheet.dim_colmax = 0, width - 1
            sheet.previous_row = last  # written: closing finds nothing left in its table


def _lettered(
    rows: Iterable[Cells], letters: Sequence[str]
) -> Iterator[tuple[Sequence[str], Sequence[Any]]]:
    """Each row with the column letters of its cells: every column's (padded to the
    header's width), or for a sparse column block, those of the columns it holds only (the
    rest are missing: left out of the sheet, so never walked)."""
    width = len(letters)
    for item in rows:
        if type(item) is ColumnBlock and item.held is not None:
            if item.width > width and item.row_count():  # as `aligned` refuses a longer row
                raise ValueError(f"row has {item.width} cells but there are {width} columns")
            held = item.held
            if not held:  # rows of no cells: counted, not written
                yield from repeat(((), ()), item.row_count())
                continue
            held_letters = [letters[column] for column in held]
            for row in zip(*item.held_columns(), strict=True):
                yield held_letters, row
        else:
            for cells in each_row((item,)):
                yield letters, aligned(cells, width)


def _cell(attributes: str, value: Any) -> str:
    """Any cell but None, as `_write_cell` would have the worksheet write it."""
    if isinstance(value, bool):
        return f'<c {attributes} t="b"><v>{1 if value else 0}</v></c>'
    if _fits_a_double(value):
        return f"<c {attributes}><v>{value:.16G}</v></c>"
    return _string_cell(attributes, cell_text(value))


def _string_cell(attributes: str, value: str) -> str:
    """A text cell as xlsxwriter writes an inline string: surrogates replaced, truncated to
    the cell's limit, control characters in OOXML's escape (and an escape-shaped run
    escaped in turn), white space at either end kept, `&`, `<` and `>` escaped."""
    text = _text(value)
    if len(text) > XLSX_CELL_UNITS // 2 and utf16_units(text) > XLSX_CELL_UNITS:
        text = utf16_prefix(text, XLSX_CELL_UNITS)
    text = _ESCAPE_SHAPED.sub(r"_x005F\1", text)
    text = _CONTROL.sub(lambda match: f"_x{ord(match.group(1)):04X}_", text)
    text = text.replace("\ufffe", "_xFFFE_").replace("\uffff", "_xFFFF_")
    keep = _LEADING_SPACE.search(text) or _TRAILING_SPACE.search(text)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    space = ' xml:space="preserve"' if keep else ""
    return f'<c {attributes} t="inlineStr"><is><t{space}>{text}</t></is></c>'


def _write_cell(sheet: Any, row: int, col: int, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool):
        sheet.write_boolean(row, col, value)
    elif _fits_a_double(value):
        sheet.write_number(row, col, value)
    else:
        sheet.write_string(row, col, _text(cell_text(value)))


def _fits_a_double(value: Any) -> bool:
    if isinstance(value, int):
        return abs(value) <= _MAX_EXACT_INT
    return isinstance(value, float) and math.isfinite(value) and abs(value) <= _MAX_SHEET_NUMBER


def _text(text: str) -> str:
    return without_surrogates(text)
