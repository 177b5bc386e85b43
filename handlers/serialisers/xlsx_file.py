"""XLSX export: one sheet "Export", bold header row frozen, written in constant memory.

Numbers are written as numbers and booleans as booleans; text is always written as a
string cell, never parsed as a formula, URL or number. None leaves the cell blank.
Nested values are compact JSON text. Choices a spreadsheet forces:

- NaN and ±Infinity are not storable numbers: written as the text `NaN`, `Infinity`,
  `-Infinity`.
- An integer beyond ±2**53 would lose digits as a double (think long ids): written as text.
- A float beyond a sheet's largest number (9.99999999999999E+307) is written as text.
- xlsxwriter keeps 16 significant digits of a number (a spreadsheet shows 15).
- A cell holds at most 32767 UTF-16 units: xlsxwriter truncates longer text to that.
- A lone surrogate cannot be encoded: replaced by U+FFFD.
- A sheet holds 1,048,576 rows, one of them the header: more data rows raise ValueError.
  The caller counts first and decides `too_large`; if it does not, the sink is left
  holding a truncated workbook that must be discarded.
- A sheet holds 16,384 columns: more raise ValueError (xlsxwriter would drop them silently).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, BinaryIO, Final

from handlers.serialisers import Cells, aligned, each_row
from handlers.serialisers.csv_file import cell_text

MAX_XLSX_DATA_ROWS: Final = 1_048_575
MAX_XLSX_COLUMNS: Final = 16_384
SHEET_NAME: Final = "Export"
_MAX_EXACT_INT: Final = 2**53
_MAX_SHEET_NUMBER: Final = 9.99999999999999e307
_SURROGATE = re.compile("[\ud800-\udfff]")
_OPTIONS: Final = {
    "constant_memory": True,
    # Text is data: never let xlsxwriter turn "=1+1", "http://…" or "007" into something else.
    "strings_to_formulas": False,
    "strings_to_urls": False,
    "strings_to_numbers": False,
}


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
    try:
        sheet = workbook.add_worksheet(SHEET_NAME)
        bold = workbook.add_format({"bold": True})
        for col, name in enumerate(columns):
            sheet.write_string(0, col, _text(name), bold)
        sheet.freeze_panes(1, 0)
        width = len(columns)
        for index, row in enumerate(each_row(rows), start=1):
            if index > MAX_XLSX_DATA_ROWS:
                raise ValueError(f"more than {MAX_XLSX_DATA_ROWS} rows do not fit in a sheet")
            for col, value in enumerate(aligned(row, width)):
                _write_cell(sheet, index, col, value)
    finally:
        workbook.close()


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
    return _SURROGATE.sub("\ufffd", text)
