"""The file's header is decided in the core: the record names columns as the file reads."""

from __future__ import annotations

import pytest

from handlers.file_layout import action_cells, batch_cells, layout, table_cells
from handlers.selection import Selection
from handlers.tables import Table
from schemas.vocabulary import ExportFormat


def selection(columns: tuple[str, ...], source: str | None = None) -> Selection:
    return Selection(
        actions=("a", "b") if source else ("a",),
        combined=source is not None,
        source_column=source,
        columns=columns,
        row_count=2,
        source_artifacts=("artifacts/c/t/1.json",),
        truncated=True,
    )


def test_csv_header_carries_the_same_formula_guard_as_the_cells() -> None:
    shape = layout("csv", None, selection(("=cmd", "value")))
    assert shape.header == ("'=cmd", "value")
    assert shape.keys == ("=cmd", "value")
    assert layout("json", None, selection(("=cmd", "value"))).header == ("=cmd", "value")


@pytest.mark.parametrize("fmt", ["csv", "xlsx"])
def test_blank_and_duplicate_headers_are_made_usable_in_csv_and_xlsx(fmt: ExportFormat) -> None:
    shape = layout(fmt, Table(columns=("", "Name", "name"), rows=(("1", "x"),)), None)
    assert shape.header == ("Column 1", "Name", "name 2")
    assert list(table_cells(Table(("", "Name", "name"), (("1", "x"),)), shape)) == [
        ["1", "x", None]
    ]


@pytest.mark.parametrize("fmt", ["json", "xml"])
def test_json_and_xml_keep_the_keys_as_retrieved_and_part_only_exact_repeats(
    fmt: ExportFormat,
) -> None:
    shape = layout(fmt, None, selection(("", "Amount", "amount")))
    assert shape.header == ("", "Amount", "amount")
    # Only a pasted table can name a column twice: an object keeps one key of each name.
    table = Table(columns=("", "Name", "Name", ""), rows=(("1", "x", "y", "z"),))
    assert layout(fmt, table, None).header == ("", "Name", "Name 2", "Column 4")


def test_action_cells_follow_the_keys_and_add_the_source_column() -> None:
    sel = selection(("x", "y", "Source action"), source="Source action")
    shape = layout("csv", None, sel)
    assert action_cells({"y": 2}, "b", sel, shape) == [None, 2, "b"]
    assert (shape.row_count, shape.truncated) == (2, True)
    assert shape.source_artifacts == ("artifacts/c/t/1.json",)


def test_a_csv_header_is_unique_as_the_file_reads_it_and_the_record_names_it_so() -> None:
    import csv
    import io

    from handlers.serialisers.csv_file import csv_chunks

    # "=a" and "'=a" both read "'=a" once guarded: they were made unique before, not after.
    shape = layout("csv", None, selection(("=a", "'=a", "\nx", "a\nb")))
    assert len({name.casefold() for name in shape.header}) == 4
    data = b"".join(csv_chunks(shape.header, [], bom=False)).decode("utf-8")
    assert next(csv.reader(io.StringIO(data, newline=""))) == list(shape.header)


def csv_header_read_back(header: tuple[str, ...]) -> list[str]:
    import csv
    import io

    from handlers.serialisers.csv_file import csv_chunks

    data = b"".join(csv_chunks(header, [], bom=False)).decode("utf-8")
    return next(csv.reader(io.StringIO(data, newline="")))


def test_a_made_up_csv_header_is_guarded_before_it_is_compared() -> None:
    # "-1" is a number and stays; the " 2" made up beside it is not, and is guarded: the
    # guarded form must not meet a column that already reads so.
    shape = layout("csv", None, selection(("-1e5", "-1E5", "'-1E5 2")))
    assert shape.header == ("-1e5", "'-1E5 3", "'-1E5 2")
    assert csv_header_read_back(shape.header) == list(shape.header)
    assert layout("csv", None, selection(("-1", "-1"))).header == ("-1", "'-1 2")


def test_a_blank_csv_header_is_blank_before_it_is_guarded_as_in_xlsx() -> None:
    blank = ("\t", "\r\n", "\u00a0", " \t ", "x")
    for fmt in ("csv", "xlsx"):
        shape = layout(fmt, None, selection(blank))  # type: ignore[arg-type]
        assert shape.header == ("Column 1", "Column 2", "Column 3", "Column 4", "x")


def test_a_lone_surrogate_in_a_key_is_a_replacement_character_in_every_header() -> None:
    # The record and the event are UTF-8 JSON: such a name failed the announcement after the
    # file was written and the turn recorded published.
    import msgspec

    for fmt in ("csv", "json", "xml", "xlsx"):
        shape = layout(fmt, None, selection(("id", "unit\ud800")))  # type: ignore[arg-type]
        assert shape.header == ("id", "unit\ufffd") and shape.keys == ("id", "unit\ud800")
        msgspec.json.encode(list(shape.header))


def test_long_xlsx_headers_alike_within_a_cell_are_told_apart_in_the_sheet() -> None:
    # A cell holds 32,767 UTF-16 units: names alike up to there would read alike in the sheet.
    # The made-up " 2" is kept whole by cutting its base; the record names what the sheet holds.
    import io

    import openpyxl

    from handlers.serialisers.xlsx_file import write_xlsx

    long = "a" * 32_767
    emoji = "\U0001f600" * 16_384  # two units each: 32,768 units, one too many
    shape = layout("xlsx", None, selection((long + "x", long.upper() + "y", emoji, emoji + "z")))
    assert shape.header == (long, long.upper()[:-2] + " 2", emoji[:-1], emoji[:-2] + " 2")
    assert shape.keys == (long + "x", long.upper() + "y", emoji, emoji + "z")
    sink = io.BytesIO()
    write_xlsx(shape.header, [], sink)
    sheet = openpyxl.load_workbook(sink).active
    assert [cell.value for cell in sheet[1]] == list(shape.header)
    names = (long + "x", long + "y")
    assert layout("csv", None, selection(names)).header == names  # a CSV field has no limit


@pytest.mark.parametrize("fmt", ["csv", "json", "xml", "xlsx"])
def test_a_table_export_is_whole_and_names_no_artifact(fmt: ExportFormat) -> None:
    shape = layout(fmt, Table(("a", "b"), (("1", "2"), ("3", "4"))), None)
    assert (shape.row_count, shape.source_artifacts, shape.truncated) == (2, (), False)


def test_a_batch_of_columns_under_no_keys_is_rows_of_no_cells() -> None:
    assert list(batch_cells([(("a",), [[1, 2]])], ())) == [[], []]


def test_a_key_named_twice_takes_its_column_twice_and_a_missing_key_none() -> None:
    (block,) = batch_cells([(("a", "b"), [[1, 2], [3, 4]])], ("a", "c", "a"))
    assert list(block.rows()) == [(1, None, 1), (2, None, 2)]
