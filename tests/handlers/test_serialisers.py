"""Example tests for the export files (docs/contract/files.md): CSV, JSON, XML, XLSX and headers."""

from __future__ import annotations

import csv
import io
import json
import math
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import openpyxl
import pytest
from defusedxml import ElementTree
from openpyxl.utils.escape import unescape

from handlers.serialisers import CONTENT_TYPES, EXTENSIONS, byte_chunks, xlsx_file
from handlers.serialisers.csv_file import csv_cell, csv_chunks
from handlers.serialisers.headers import unique_headers, utf16_prefix
from handlers.serialisers.json_file import json_chunks
from handlers.serialisers.xlsx_file import MAX_XLSX_DATA_ROWS, write_xlsx
from handlers.serialisers.xml_file import safe_element_name, xml_chunks
from handlers.serialisers.xml_names import NAME_START_RANGES

BOM = b"\xef\xbb\xbf"
Chunker = Callable[..., Iterator[bytes]]


def csv_bytes(columns: Sequence[str], rows: Iterable[Sequence[Any]], **kw: Any) -> bytes:
    return b"".join(csv_chunks(columns, rows, **kw))


def csv_records(data: bytes) -> list[list[str]]:
    text = data.decode("utf-8").removeprefix("\ufeff")
    return list(csv.reader(io.StringIO(text, newline=""), strict=True))


def json_value(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Any:
    return json.loads(b"".join(json_chunks(columns, rows)).decode("utf-8"))


def xml_root(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Any:
    return ElementTree.fromstring(b"".join(xml_chunks(columns, rows)))


def xml_rows(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[list[tuple[str, str]]]:
    """Each row as (column name as a reader recovers it, text) pairs, in document order."""
    root = xml_root(columns, rows)
    return [[(el.get("name") or el.tag, el.text or "") for el in row] for row in root]


def xlsx_sheet(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Any:
    sink = io.BytesIO()
    write_xlsx(columns, rows, sink)
    sink.seek(0)
    return openpyxl.load_workbook(sink).active


# --- headers ---------------------------------------------------------------------------


def test_blank_headers_become_column_and_their_one_based_position() -> None:
    assert unique_headers(["a", "", "  ", "b"]) == ["a", "Column 2", "Column 3", "b"]


def test_duplicate_headers_ignoring_case_get_a_number_suffix() -> None:
    assert unique_headers(["Name", "name"]) == ["Name", "name 2"]
    assert unique_headers(["x", "X", "x"]) == ["x", "X 2", "x 3"]


def test_header_suffix_never_collides_with_a_name_already_present() -> None:
    assert unique_headers(["a", "A", "a 2"]) == ["a", "A 3", "a 2"]


def test_duplicate_header_suffix_skips_a_suffix_another_column_holds() -> None:
    assert unique_headers(["Amount", "Amount 2", "Amount"]) == ["Amount", "Amount 2", "Amount 3"]


def test_header_for_a_blank_collides_with_a_real_column_name_and_is_suffixed() -> None:
    assert unique_headers(["Column 2", ""]) == ["Column 2", "Column 2 2"]


def test_headers_made_up_for_blanks_yield_to_the_users_own_names() -> None:
    assert unique_headers(["", "COLUMN 1"]) == ["Column 1 2", "COLUMN 1"]


def test_unique_headers_leaves_already_unique_headers_unchanged() -> None:
    names = ["id", "Name", "name 2", "Column 4"]
    assert unique_headers(names) == names
    assert unique_headers(unique_headers(["a", "A", ""])) == unique_headers(["a", "A", ""])


def test_each_repeat_of_a_name_starts_at_the_number_the_last_one_reached() -> None:
    # n repeats of one name try about n made-up names, not n² (1 + 2 + ... + n).
    tried: list[str] = []

    def shown(base: str, suffix: str) -> str:
        tried.append(base + suffix)
        return base + suffix

    names = unique_headers(["a"] * 200, shown=shown)
    assert names == ["a"] + [f"a {n}" for n in range(2, 201)]
    assert len(tried) < 3 * 200


@pytest.mark.parametrize(
    ("text", "units", "prefix"),
    [
        ("abc", 5, "abc"),
        ("abc", 3, "abc"),
        ("abc", 2, "ab"),
        ("a\U0001f600b", 3, "a\U0001f600"),
        ("a\U0001f600b", 2, "a"),  # the emoji's two units do not both fit: none of it is kept
        ("a\uffffb", 2, "a\uffff"),  # the last character of one unit
        ("a\U00010000", 2, "a"),  # the first of two
        ("", 0, ""),
    ],
)
def test_a_utf16_prefix_is_the_longest_that_fits_and_splits_no_character(
    text: str, units: int, prefix: str
) -> None:
    assert utf16_prefix(text, units) == prefix


# --- CSV -------------------------------------------------------------------------------


def test_csv_starts_with_a_bom_by_default() -> None:
    assert csv_bytes(["a"], [["x"]]).startswith(BOM + b"a\r\n")


@pytest.mark.parametrize("bom", [True, False])
def test_a_first_header_starting_with_u_feff_reads_back_whole_with_or_without_a_bom(
    bom: bool,
) -> None:
    # Keys copied from a CSV file with a byte-order mark often start with one ("\ufeffid").
    data = b"".join(csv_chunks(["\ufeffid", "b"], [[1, 2]], bom=bom))
    assert data == (BOM + BOM + b"id,b\r\n1,2\r\n" if bom else b'"' + BOM + b'id",b\r\n1,2\r\n')
    # A reader that honours a byte-order mark strips one at the start, as utf-8-sig does.
    text = data.decode("utf-8-sig")
    assert list(csv.reader(io.StringIO(text, newline=""))) == [["\ufeffid", "b"], ["1", "2"]]


def test_csv_has_no_bom_when_turned_off() -> None:
    assert csv_bytes(["a"], [["x"]], bom=False) == b"a\r\nx\r\n"


def test_csv_ends_every_record_with_crlf_including_the_last() -> None:
    data = csv_bytes(["a", "b"], [[1, 2], [3, 4]], bom=False)
    assert data == b"a,b\r\n1,2\r\n3,4\r\n"


def test_csv_writes_every_line_break_inside_a_cell_as_crlf() -> None:
    data = csv_bytes(["a"], [["1\n2\r3\r\n4"]], bom=False)
    assert data == b'a\r\n"1\r\n2\r\n3\r\n4"\r\n'
    assert b"\n" not in data.replace(b"\r\n", b"") and b"\r" not in data.replace(b"\r\n", b"")


def test_csv_of_no_rows_is_the_header_record_only() -> None:
    assert csv_bytes(["a", "b"], []) == BOM + b"a,b\r\n"


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ("a,b", '"a,b"'),
        ('say "hi"', '"say ""hi"""'),
        ("line\r\nbreak", '"line\r\nbreak"'),
        ("plain text", "plain text"),
        ("", ""),
    ],
)
def test_csv_quotes_cells_with_comma_quote_cr_or_lf_and_doubles_inner_quotes(
    value: str, cell: str
) -> None:
    data = csv_bytes(["a", "b"], [[value, "z"]], bom=False)
    assert data == b"a,b\r\n" + cell.encode() + b",z\r\n"
    assert csv_records(data)[1] == [value, "z"]


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ("=SUM(A1)", "'=SUM(A1)"),
        ("+cmd", "'+cmd"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\rx", "'\r\nx"),
        ("\nx", "'\r\nx"),
        ("  @x", "'  @x"),
        ("  =1", "'  =1"),
        ("-", "'-"),
        ("+", "'+"),
        ("-Infinity", "'-Infinity"),
        ("-12.5", "-12.5"),
        ("+1e5", "+1e5"),
        ("-.5", "-.5"),
        ("-3.", "-3."),
        ("  -7", "  -7"),
        ("-1E-3", "-1E-3"),
        ("-1e", "'-1e"),
        ("-12.5 ", "'-12.5 "),
        ("-١٢", "'-١٢"),
        ("-1,234.50", "-1,234.50"),
        ("+1,234", "+1,234"),
        ("-12,345,678.9e3", "-12,345,678.9e3"),
        ("-1,23", "'-1,23"),
        ("-1,2345", "'-1,2345"),
        ("-,123", "'-,123"),
        ("-1,,234", "'-1,,234"),
        ("a=b", "a=b"),
        ("12", "12"),
        ("x@y.z", "x@y.z"),
    ],
)
def test_csv_cell_neutralises_formula_starts_unless_a_plain_number(value: str, cell: str) -> None:
    assert csv_cell(value) == cell


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        (None, ""),
        (True, "true"),
        (False, "false"),
        (0, "0"),
        (-42, "-42"),
        (2.5, "2.5"),
        (-0.001, "-0.001"),
        (1e16, "1e+16"),
        (float("nan"), "NaN"),
        (float("inf"), "Infinity"),
        (float("-inf"), "'-Infinity"),
    ],
)
def test_csv_cell_writes_scalars_as_their_text_and_numbers_unneutralised(
    value: Any, cell: str
) -> None:
    assert csv_cell(value) == cell


def test_csv_writes_nested_values_as_compact_json_never_python_repr() -> None:
    assert csv_cell({"k": [1, None, True], "é": "x"}) == '{"k":[1,null,true],"é":"x"}'
    assert csv_cell([{"a": 1}, "b"]) == '[{"a":1},"b"]'
    assert csv_cell({"n": float("nan")}) == '{"n":null}'
    records = csv_records(csv_bytes(["n"], [[{"a": [1, 2]}]]))
    assert json.loads(records[1][0]) == {"a": [1, 2]}


def test_csv_header_cells_are_neutralised_too() -> None:
    assert csv_records(csv_bytes(["=cmd", "ok"], []))[0] == ["'=cmd", "ok"]


def test_csv_missing_cells_are_empty_and_records_keep_the_header_width() -> None:
    records = csv_records(csv_bytes(["a", "b", "c"], [[1], [None, 2], []]))
    assert records[1:] == [["1", "", ""], ["", "2", ""], ["", "", ""]]


def test_csv_record_of_one_empty_cell_is_written_as_quoted_empty_not_a_blank_line() -> None:
    data = csv_bytes(["a"], [[None], ["x"]], bom=False)
    assert data == b'a\r\n""\r\nx\r\n'
    assert csv_records(data) == [["a"], [""], ["x"]]


def test_csv_replaces_lone_surrogates_it_cannot_encode() -> None:
    assert csv_records(csv_bytes(["a"], [["x\ud800y"]]))[1] == ["x\ufffdy"]


def test_rows_longer_than_the_columns_are_rejected_not_truncated() -> None:
    with pytest.raises(ValueError):
        csv_bytes(["a"], [[1, 2]])
    with pytest.raises(ValueError):
        b"".join(json_chunks(["a"], [[1, 2]]))


def test_values_that_are_not_json_are_a_bug_not_data() -> None:
    with pytest.raises(TypeError, match="cannot write a object as a cell"):
        csv_cell(object())


# --- chunking ----------------------------------------------------------------------------

CHUNKERS: list[Chunker] = [csv_chunks, json_chunks, xml_chunks]


@pytest.mark.parametrize("chunker", CHUNKERS)
def test_large_input_streams_in_several_chunks_equal_to_the_single_shot_file(
    chunker: Chunker,
) -> None:
    columns = ["id", "text", "nested"]
    rows = [[i, f'row {i} ünïcode, "quoted"', {"i": [i]}] for i in range(3000)]
    chunks = list(chunker(columns, iter(rows), chunk_size=4096))
    single = list(chunker(columns, iter(rows), chunk_size=10**9))
    assert len(chunks) > 10
    assert len(single) == 1
    assert b"".join(chunks) == single[0]
    assert all(len(chunk) >= 4096 for chunk in chunks[:-1])


def test_chunks_are_consumed_lazily_from_the_row_iterator() -> None:
    pulled: list[int] = []

    def rows() -> Iterator[list[Any]]:
        for i in range(10_000):
            pulled.append(i)
            yield [i, "x" * 50]

    first = next(csv_chunks(["a", "b"], rows(), chunk_size=1024))
    assert len(first) >= 1024
    assert len(pulled) < 100


@pytest.mark.parametrize("chunker", CHUNKERS)
def test_chunk_size_must_be_positive(chunker: Chunker) -> None:
    # Refused at the call, before a chunk is asked for: the caller learns it where it erred.
    with pytest.raises(ValueError, match="chunk_size must be at least 1"):
        byte_chunks(["x"], 0)
    with pytest.raises(ValueError, match="chunk_size must be at least 1"):
        chunker(["a", "b"], iter([[1, 2]]), chunk_size=0)


# --- JSON --------------------------------------------------------------------------------


def test_json_objects_have_every_column_as_key_in_column_order() -> None:
    value = json_value(["b", "a", "c"], [[1, None], [None, "x", 3]])
    assert value == [{"b": 1, "a": None, "c": None}, {"b": None, "a": "x", "c": 3}]
    assert [list(obj) for obj in value] == [["b", "a", "c"], ["b", "a", "c"]]


def test_json_keeps_values_as_retrieved_numbers_booleans_and_nested() -> None:
    row = [12, 2.5, True, "007", {"k": [1, {"z": None}]}, [1, "a"]]
    columns = ["i", "f", "b", "s", "d", "l"]
    assert json_value(columns, [row]) == [dict(zip(columns, row, strict=True))]


def test_json_of_no_rows_is_an_empty_array() -> None:
    assert b"".join(json_chunks(["a"], [])) == b"[]"


def test_json_is_utf8_without_bom_and_keeps_non_ascii_unescaped() -> None:
    data = b"".join(json_chunks(["名前"], [["Größe"]]))
    assert not data.startswith(BOM)
    assert "名前".encode() in data and "Größe".encode() in data


def test_json_writes_nan_and_infinity_as_null_at_any_depth() -> None:
    data = b"".join(json_chunks(["a", "b"], [[float("nan"), {"x": [float("-inf"), 1.5]}]]))
    assert b"NaN" not in data and b"Infinity" not in data
    assert json.loads(data) == [{"a": None, "b": {"x": [None, 1.5]}}]


def test_json_keeps_every_other_value_beside_a_non_finite_float_as_it_was() -> None:
    value = {"x": [float("nan"), 1.5, 2, "t", True, None], "y": ("u", 0), "z": "Größe"}
    data = b"".join(json_chunks(["a", "b"], [[value, 7]]))
    assert json.loads(data) == [
        {"a": {"x": [None, 1.5, 2, "t", True, None], "y": ["u", 0], "z": "Größe"}, "b": 7}
    ]
    assert "Größe".encode() in data  # kept as UTF-8, not escaped, on this path too


def test_json_keeps_lone_surrogates_as_escapes_so_they_round_trip() -> None:
    assert json_value(["a"], [["x\ud800y"]]) == [{"a": "x\ud800y"}]


# --- XML ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "safe"),
    [
        ("amount", "amount"),
        ("first name", "first_name"),
        ("1st", "_1st"),
        ("2024", "_2024"),
        ("-x", "_-x"),
        (".x", "_.x"),
        ("xml", "_xml"),
        ("XMLData", "_XMLData"),
        ("xMl_id", "_xMl_id"),
        ("a:b", "a_b"),
        ("a/b<c>", "a_b_c_"),
        ("", "_"),
        ("_ok-1.2", "_ok-1.2"),
        ("Größe", "Größe"),
        ("Имя", "Имя"),
        ("日付", "日付"),
        ("e\u0301te", "éte"),
        ("temp 🌡", "temp__"),
    ],
)
def test_safe_element_name_replaces_invalid_characters_and_prefixes_bad_starts(
    name: str, safe: str
) -> None:
    assert safe_element_name(name) == safe


def test_every_letter_kept_in_element_names_is_accepted_by_the_parser() -> None:
    letters = [chr(c) for first, last in NAME_START_RANGES for c in range(first, last + 1)]
    # NFC writes a few letters as a letter and a combining mark (U+0958 is U+0915 U+093C).
    names = [safe_element_name(letter) for letter in letters]
    assert names == [unicodedata.normalize("NFC", letter) for letter in letters]
    body = "".join(f"<{name}/><a{name}/>" for name in names)
    root = ElementTree.fromstring(f"<rows>{body}</rows>".encode())
    assert len(root) == 2 * len(letters)


def test_xml_has_declaration_rows_root_and_one_element_per_column_in_order() -> None:
    data = b"".join(xml_chunks(["id", "name"], [[1, "x"], [2, None]]))
    assert data.startswith(b'<?xml version="1.0" encoding="UTF-8"?>')
    root = ElementTree.fromstring(data)
    assert root.tag == "rows"
    assert [row.tag for row in root] == ["row", "row"]
    assert [[(el.tag, el.text) for el in row] for row in root] == [
        [("id", "1"), ("name", "x")],
        [("id", "2"), ("name", None)],
    ]


def test_xml_is_written_byte_for_byte_as_its_layout_says() -> None:
    data = b"".join(xml_chunks(["id", "1st"], [[1, "x"], [None, 2]]))
    assert data == (
        b'<?xml version="1.0" encoding="UTF-8"?>\n<rows>\n'
        b'<row><id>1</id><_1st name="1st">x</_1st></row>\n'
        b'<row><id/><_1st name="1st">2</_1st></row>\n'
        b"</rows>\n"
    )


def test_xml_of_no_rows_is_an_empty_rows_element() -> None:
    root = xml_root(["a"], [])
    assert root.tag == "rows" and len(root) == 0


def test_xml_keeps_the_original_name_in_an_attribute_only_when_it_changed() -> None:
    root = xml_root(["id", "1st", "xml", 'a "b"\t&\nc'], [[1, 2, 3, 4]])
    elements = list(root[0])
    assert [el.tag for el in elements] == ["id", "_1st", "_xml", "a__b____c"]
    assert [el.get("name") for el in elements] == [None, "1st", "xml", 'a "b"\t&\nc']


def test_xml_escapes_markup_and_a_carriage_return_in_the_name_attribute() -> None:
    name = "a<b>c\r\nd"
    data = b"".join(xml_chunks([name], [[1]]))
    assert b'name="a&lt;b&gt;c&#13;&#10;d"' in data
    assert [el.get("name") for el in ElementTree.fromstring(data)[0]] == [name]


def test_xml_names_a_blank_key_in_its_attribute_and_keeps_case_apart() -> None:
    elements = list(xml_root(["", "Amount", "amount"], [[1, 2, 3]])[0])
    assert [(el.tag, el.get("name"), el.text) for el in elements] == [
        ("_", "", "1"),
        ("Amount", None, "2"),
        ("amount", None, "3"),
    ]


def test_xml_columns_with_the_same_safe_name_stay_apart_by_name_attribute() -> None:
    assert xml_rows(["a b", "a_b", "a-b"], [[1, 2, 3]]) == [
        [("a b", "1"), ("a_b", "2"), ("a-b", "3")]
    ]


def test_xml_text_is_escaped_and_round_trips_special_characters() -> None:
    text = "a < b && c > \"d\" ]]> 'e'\r\nf\tg"
    assert xml_rows(["t"], [[text]]) == [[("t", text)]]


def test_xml_writes_scalars_unneutralised_and_nested_as_compact_json() -> None:
    row = [True, 3, -1.5, "=SUM(A1)", {"k": [1, None]}, None, float("nan")]
    columns = ["b", "i", "f", "s", "n", "none", "nan"]
    texts = [text for _, text in xml_rows(columns, [row])[0]]
    assert texts == ["true", "3", "-1.5", "=SUM(A1)", '{"k":[1,null]}', "", "NaN"]


def test_xml_drops_characters_xml_cannot_hold() -> None:
    value = "a\x00b\x1fc\ufffed\ud800e"
    assert xml_rows(["t", "x\x01y"], [[value, 1]]) == [[("t", "abcde"), ("xy", "1")]]


# --- XLSX --------------------------------------------------------------------------------


def test_xlsx_has_one_sheet_with_a_bold_frozen_header() -> None:
    sheet = xlsx_sheet(["id", "name"], [[1, "x"]])
    assert sheet.parent.sheetnames == ["Export"]
    assert [cell.value for cell in sheet[1]] == ["id", "name"]
    assert all(cell.font.b for cell in sheet[1])
    assert sheet.freeze_panes == "A2"
    assert not sheet["A2"].font.b


def test_xlsx_writes_numbers_as_numbers_and_booleans_as_booleans() -> None:
    sheet = xlsx_sheet(["i", "f", "b"], [[42, -2.5, True]])
    assert [(c.value, c.data_type) for c in sheet[2]] == [(42, "n"), (-2.5, "n"), (True, "b")]


def test_xlsx_writes_text_always_as_text_never_formula_url_or_number() -> None:
    texts = ["=1+1", "+A1", "@x", "http://example.com", "007", "1e5", "TRUE"]
    sheet = xlsx_sheet([f"c{i}" for i in range(len(texts))], [texts])
    assert [(c.value, c.data_type) for c in sheet[2]] == [(t, "s") for t in texts]


def test_xlsx_leaves_missing_cells_blank_and_writes_nested_as_compact_json() -> None:
    sheet = xlsx_sheet(["a", "b", "c"], [[None, {"k": [1, "x"]}]])
    assert [c.value for c in sheet[2]] == [None, '{"k":[1,"x"]}', None]


def test_xlsx_writes_non_finite_floats_and_huge_integers_as_text() -> None:
    big = 2**53 + 1
    sheet = xlsx_sheet(
        ["n", "p", "m", "big", "edge"], [[math.nan, math.inf, -math.inf, big, 2**53]]
    )
    cells = [(c.value, c.data_type) for c in sheet[2]]
    assert cells == [
        ("NaN", "s"),
        ("Infinity", "s"),
        ("-Infinity", "s"),
        (str(big), "s"),
        (2**53, "n"),
    ]


def test_xlsx_writes_floats_beyond_the_largest_sheet_number_as_text() -> None:
    sheet = xlsx_sheet(["f"], [[1.7976931348623157e308]])
    assert (sheet["A2"].value, sheet["A2"].data_type) == ("1.7976931348623157e+308", "s")


def test_xlsx_keeps_control_characters_in_the_ooxml_escape() -> None:
    sheet = xlsx_sheet(["t"], [["a\r\nb\x01c_x0041_"]])
    assert unescape(sheet["A2"].value) == "a\r\nb\x01c_x0041_"


def test_xlsx_truncates_text_longer_than_a_cell_holds() -> None:
    sheet = xlsx_sheet(["t"], [["x" * 40_000]])
    assert sheet["A2"].value == "x" * 32_767


def test_xlsx_sheet_limit_is_the_spreadsheet_row_count_minus_the_header() -> None:
    assert MAX_XLSX_DATA_ROWS == 2**20 - 1


@pytest.mark.parametrize("fallback", [False, True])
def test_xlsx_more_rows_than_a_sheet_holds_raise(
    monkeypatch: pytest.MonkeyPatch, fallback: bool
) -> None:
    # `fallback`: through xlsxwriter's own cell writes, as when its row file is not known.
    monkeypatch.setattr(xlsx_file, "MAX_XLSX_DATA_ROWS", 3)
    if fallback:
        monkeypatch.setattr(xlsx_file._SheetRows, "fits", staticmethod(lambda sheet: False))
    with pytest.raises(ValueError, match=r"^more than 3 rows do not fit in a sheet$"):
        write_xlsx(["a"], [[1], [2], [3], [4]], io.BytesIO())
    write_xlsx(["a"], [[1], [2], [3]], io.BytesIO())


def test_xlsx_more_columns_than_a_sheet_holds_raise_instead_of_dropping_them() -> None:
    with pytest.raises(ValueError, match=r"^more than 16384 columns do not fit in a sheet$"):
        write_xlsx([f"c{i}" for i in range(16_385)], [], io.BytesIO())


def test_xlsx_as_many_columns_as_a_sheet_holds_fit_the_last_one_named() -> None:
    sink = io.BytesIO()
    write_xlsx([f"c{i}" for i in range(16_384)], [], sink)
    sheet = openpyxl.load_workbook(sink, read_only=True).active
    header = next(sheet.iter_rows(max_row=1, values_only=True))
    assert len(header) == 16_384 and header[-1] == "c16383"


def test_xlsx_rows_wait_in_the_folder_the_caller_gives(tmp_path: Any) -> None:
    seen: list[list[str]] = []

    def rows() -> Iterator[list[int]]:
        for value in range(3):
            seen.append([entry.name for entry in tmp_path.iterdir()])
            yield [value]

    write_xlsx(["a"], rows(), io.BytesIO(), tmpdir=str(tmp_path))
    assert seen and all(seen)  # the row file sat there while the rows were written
    assert list(tmp_path.iterdir()) == []


# --- content types -------------------------------------------------------------------------


def test_every_format_has_a_content_type_and_extension() -> None:
    assert set(CONTENT_TYPES) == set(EXTENSIONS) == {"csv", "json", "xml", "xlsx"}
    assert CONTENT_TYPES["csv"] == "text/csv; charset=utf-8"
    assert EXTENSIONS["xlsx"] == "xlsx"


def test_xlsx_holds_no_clock_reading_so_redelivery_writes_the_same_bytes() -> None:
    import io
    import zipfile

    from handlers.serialisers.xlsx_file import write_xlsx

    sink = io.BytesIO()
    write_xlsx(["a", "b"], [[1, "x"], [2, "=1+1"]], sink)
    core = zipfile.ZipFile(io.BytesIO(sink.getvalue())).read("docProps/core.xml").decode()
    assert "2000-01-01T00:00:00Z" in core
    again = io.BytesIO()
    write_xlsx(["a", "b"], [[1, "x"], [2, "=1+1"]], again)
    assert again.getvalue() == sink.getvalue()


def test_xlsx_leaves_no_row_file_behind_when_the_sheet_is_empty_or_fails(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # xlsxwriter removes a constant-memory sheet's row file only when the sheet holds a cell.
    monkeypatch.setattr(xlsx_file, "MAX_XLSX_DATA_ROWS", 1)
    write_xlsx([], [], io.BytesIO(), tmpdir=str(tmp_path))
    with pytest.raises(ValueError):
        write_xlsx(["a"], [[1], [2]], io.BytesIO(), tmpdir=str(tmp_path))
    write_xlsx(["a"], [[1]], io.BytesIO(), tmpdir=str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_xlsx_scratch_that_cannot_take_the_row_file_fails_with_the_writers_error(
    tmp_path: Any,
) -> None:
    from xlsxwriter.exceptions import FileCreateError

    with pytest.raises(FileCreateError):
        write_xlsx(["a"], [[1]], io.BytesIO(), tmpdir=str(tmp_path / "missing"))
