"""The xlsx writer's own rows (`_SheetRows`) against xlsxwriter's cell writes.

`write_xlsx` writes the sheet's rows into xlsxwriter's constant-memory row file itself.
Every workbook must be byte for byte the one xlsxwriter's `write_string`, `write_number`
and `write_boolean` make from the same cells (its fallback, `_write_cells`), except for
text shaped like a rich string, which xlsxwriter writes unescaped (a broken workbook) and
this writer escapes.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import openpyxl
import pytest
import xlsxwriter
from defusedxml import ElementTree
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from handlers.serialisers import ColumnBlock, xlsx_file
from handlers.serialisers.headers import unique_headers
from tests.handlers.test_serialiser_properties import xlsx_bytes as workbook

# Text that reaches every branch of a cell's escaping: XML's characters, control
# characters, OOXML's escape and its look-alikes, white space at either end, U+FFFE/U+FFFF,
# lone surrogates, characters past U+FFFF (two UTF-16 units each).
MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"

awkward = st.text(
    alphabet=st.sampled_from(
        ["a", "Z", "0", " ", "\t", "\n", "\r", "\x00", "\x01", "\x0b", "\x1f", "\x7f", "_",
         "x", "X", "4", "F", "&", "<", ">", '"', "'", "\ufffe", "\uffff", "\ud800", "\udfff",
         "é", "名", "\U0001f600", "\u00a0", "\u2028", "="]
    ),
    max_size=14,
)  # fmt: skip
texts = st.one_of(
    st.text(max_size=16),
    awkward,
    st.sampled_from(["_x0041_", "a_x00e9_b", "_x004", " lead", "trail ", "\u3000", "", "<b>"]),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.sampled_from([2**53, 2**53 + 1, -(2**53), -(2**53) - 1, 0, -1, 10**15, 10**16]),
    st.floats(),  # NaN and ±Infinity included
    st.sampled_from([-0.0, 5e-324, 1e16, 1.5e-7, 9.99999999999999e307, 1e308, 0.1 + 0.2]),
    texts,
)
values = st.one_of(
    scalars,
    st.lists(scalars, max_size=3),
    st.dictionaries(st.text(max_size=4), scalars, max_size=3),
)


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[str], list[list[Any]]]:
    """Columns (none, sometimes) and rows, some short, some empty or all missing."""
    columns = unique_headers(draw(st.lists(texts, max_size=5)))
    row = st.lists(values, max_size=len(columns))
    return columns, draw(st.lists(row, max_size=10))


def reference(columns: Sequence[str], rows: Sequence[Any], monkeypatch: Any) -> bytes:
    """The workbook made by xlsxwriter's own cell writes."""
    with monkeypatch.context() as patch:
        patch.setattr(xlsx_file._SheetRows, "fits", staticmethod(lambda sheet: False))
        return workbook(columns, rows)


def rich_shaped(text: str) -> bool:
    """Whether xlsxwriter would write the cell's text as a rich string's XML, unescaped
    (its `_write_cell`: after the control characters' escape, `<r>` … `</r>`)."""
    escaped = xlsxwriter.worksheet.Worksheet._escape_control_characters(text)
    return escaped.startswith("<r>") and escaped.endswith("</r>")


def cell_texts(columns: Sequence[str], rows: Sequence[Any]) -> list[str]:
    found = list(columns)
    for row in rows:
        for value in row:
            if isinstance(value, str):
                found.append(value)
            elif isinstance(value, list | dict):
                found.append(xlsx_file.cell_text(value))
    return found


@settings(max_examples=400, deadline=None)
@given(tables())
@example(([], []))
@example(([], [[], []]))
@example((["a"], []))
@example((["a", "b"], [[None, None], [1], [], [None, "x"]]))
@example((["a", "b"], [[1, 2], [None, None]]))  # the last row has no cell
@example((["t"], [["x" * 40_000], ["\U0001f600" * 16_384 + "x"], ["é" * 32_768]]))
def test_rows_are_the_bytes_xlsxwriters_own_cell_writes_make(
    table: tuple[list[str], list[list[Any]]],
) -> None:
    columns, rows = table
    assume(not any(rich_shaped(text) for text in cell_texts(columns, rows)))
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert workbook(columns, rows) == reference(columns, rows, monkeypatch)


def test_column_blocks_give_the_bytes_their_rows_give(monkeypatch: pytest.MonkeyPatch) -> None:
    columns = ["device", "value", "ok"]
    rows = [["d1", 1.5, True], ["d2", None, False], ["d<3>", 2**60, None]]
    block = ColumnBlock([list(column) for column in zip(*rows, strict=True)])
    assert workbook(columns, [block]) == reference(columns, rows, monkeypatch)


def test_a_sparse_block_writes_only_its_held_cells_in_their_columns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Held columns that are not the first ones, an all-None held column, a row with no
    # value, and a block of no held column at all (its rows counted, not written).
    columns = ["a", "b", "c", "d", "e"]
    rows = [
        [None, 1.5, None, None, "x"],
        [None, None, None, None, None],
        [None, 2, None, None, "y<"],
        [None, None, None, None, None],
        [True, None, None, None, None],
    ]
    blocks = [
        ColumnBlock.sparse(5, 3, [1, 3, 4], [[1.5, None, 2], [None] * 3, ["x", None, "y<"]]),
        ColumnBlock.sparse(5, 1, [], []),
        ColumnBlock.sparse(5, 1, [0], [[True]]),
    ]
    assert workbook(columns, blocks) == reference(columns, rows, monkeypatch)


def test_a_sparse_block_is_never_widened_for_the_sheet() -> None:
    # 16,000 columns, each block holding two: the sheet takes the held columns only (a
    # block widened to the file's width would be 16,000 columns a row).
    columns = [f"c{k}" for k in range(16_000)]
    blocks = [
        ColumnBlock.sparse(16_000, 2, [k, 15_999], [[k, k], ["s", "t"]])
        for k in range(0, 15_999, 40)
    ]
    with zipfile.ZipFile(io.BytesIO(workbook(columns, blocks))) as book:
        sheet = ElementTree.fromstring(book.read("xl/worksheets/sheet1.xml"))
    data_rows = sheet.findall(f"{{{MAIN}}}sheetData/{{{MAIN}}}row")[1:]
    assert len(data_rows) == 2 * len(blocks)
    assert {len(row) for row in data_rows} == {2}
    assert data_rows[2][0].get("r") == "AO4" and data_rows[2][1].get("r") == "WQJ4"
    assert all(block._columns is None for block in blocks)


def test_the_installed_xlsxwriter_keeps_the_row_file_this_writer_writes_into(
    tmp_path: Path,
) -> None:
    # The fast rows are used on the version the project pins; a worksheet without a row
    # file (or another layout) falls back to xlsxwriter's cell writes. (The empty sheet's row
    # file stays behind after close: it goes with tmp_path.)
    book = xlsxwriter.Workbook(io.BytesIO(), {"constant_memory": True, "tmpdir": str(tmp_path)})
    try:
        assert xlsx_file._SheetRows.fits(book.add_worksheet("Export"))
    finally:
        book.close()
    other = xlsxwriter.Workbook(io.BytesIO())
    try:
        assert not xlsx_file._SheetRows.fits(other.add_worksheet("Export"))
    finally:
        other.close()


def test_the_fast_rows_are_the_ones_written() -> None:
    calls: list[int] = []
    real = xlsx_file._SheetRows.write

    def write(self: Any, columns: Any, rows: Any, style: Any) -> None:
        calls.append(len(columns))
        real(self, columns, rows, style)

    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(xlsx_file._SheetRows, "write", write)
        workbook(["a"], [[1]])
    assert calls == [1]


@pytest.mark.parametrize("text", ["<r>&</r>", "<r>x</r>", "<r><t>x</t></r>", "<r>\x01</r>"])
def test_text_shaped_like_a_rich_string_is_written_as_escaped_text(text: str) -> None:
    # xlsxwriter writes such text into the sheet as XML: `<r>&</r>` made a workbook that
    # no reader could parse.
    data = workbook([text], [[text]])
    sheet_xml = zipfile.ZipFile(io.BytesIO(data)).read("xl/worksheets/sheet1.xml")
    ElementTree.fromstring(sheet_xml)  # well-formed
    sheet = openpyxl.load_workbook(io.BytesIO(data)).active
    assert sheet is not None
    expected = text.replace("\x01", "_x0001_")  # openpyxl leaves OOXML's escape as it is
    assert [sheet["A1"].value, sheet["A2"].value] == [expected, expected]


def test_a_sparse_block_wider_than_the_header_is_refused_as_a_longer_row_is() -> None:
    with pytest.raises(ValueError, match="3 cells but there are 2 columns") as block:
        workbook(["a", "b"], [ColumnBlock.sparse(3, 1, [0], [[1]])])
    with pytest.raises(ValueError) as row:
        workbook(["a", "b"], [[1, None, None]])
    assert str(block.value) == str(row.value)
