"""Property tests: every export file parses back to the rows it was given (files.md)."""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import re
from collections.abc import Sequence
from typing import Any

import openpyxl
import pytest
from defusedxml import ElementTree
from hypothesis import example, given, settings
from hypothesis import strategies as st
from openpyxl.utils.escape import unescape

from handlers.serialisers import ColumnBlock
from handlers.serialisers.csv_file import cell_text, csv_cell, csv_chunks
from handlers.serialisers.csv_file import least_bytes as csv_least
from handlers.serialisers.headers import unique_headers
from handlers.serialisers.json_file import json_chunks
from handlers.serialisers.json_file import least_bytes as json_least
from handlers.serialisers.xlsx_file import write_xlsx
from handlers.serialisers.xml_file import least_bytes as xml_least
from handlers.serialisers.xml_file import safe_element_name, xml_chunks

# A plain number (docs/contract/files.md): digits before the point optionally grouped in threes.
PLAIN_NUMBER = re.compile(r"[+-]?((\d{1,3}(,\d{3})+|\d+)(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
NOT_XML_CHAR = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")

names = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", " ", "a", "A", "a 2", "Column 1", "xml", "1", "=x", "名前", "-"]),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(["=1+1", "-12.5", "  @x", "\tx", "a,b", 'q"q', "l\r\nl", "\r"]),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[str], list[list[Any]]]:
    """Unique columns and rows aligned with them; some rows are short (missing cells)."""
    columns = unique_headers(draw(st.lists(names, min_size=1, max_size=6)))
    row = st.lists(values, max_size=len(columns))
    return columns, draw(st.lists(row, max_size=8))


def xlsx_bytes(columns: list[str], rows: Sequence[Any]) -> bytes:
    sink = io.BytesIO()
    write_xlsx(columns, rows, sink)
    return sink.getvalue()


def padded(row: list[Any], width: int) -> list[Any]:
    return row + [None] * (width - len(row))


@settings(max_examples=300, deadline=None)
@given(st.lists(names, max_size=10))
def test_unique_headers_are_nonblank_distinct_ignoring_case_and_keep_first_names(
    columns: list[str],
) -> None:
    result = unique_headers(columns)
    assert len(result) == len(columns)
    assert all(name.strip() for name in result)
    assert len({name.casefold() for name in result}) == len(result)
    seen: set[str] = set()
    for original, name in zip(columns, result, strict=True):
        if original.strip() and original.casefold() not in seen:
            assert name == original
        seen.add(original.casefold())
    assert unique_headers(result) == result


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(["x", "X", "x 2", "X 3", "", " ", "Column 2", "column 3"]), max_size=12
    )
)
def test_a_repeated_or_blank_header_gets_the_smallest_number_free_at_its_turn(
    columns: list[str],
) -> None:
    result = unique_headers(columns)
    reserved = {name.casefold() for name in columns if name.strip()}
    for position, (original, name) in enumerate(zip(columns, result, strict=True), start=1):
        taken = {earlier.casefold() for earlier in result[: position - 1]}
        if name == original:
            continue
        base = original if original.strip() else f"Column {position}"
        candidates = [base] + [f"{base} {n}" for n in range(2, len(columns) + 3)]
        free = [c for c in candidates if c.casefold() not in taken | reserved]
        assert name == free[0]


@settings(max_examples=300, deadline=None)
@given(tables(), st.booleans(), st.integers(min_value=1, max_value=200))
@example((["\ufeff"], []), False, 1)  # a first name that would read as a byte-order mark
def test_csv_parses_back_to_the_cells_csv_cell_gives(
    table: tuple[list[str], list[list[Any]]], bom: bool, chunk_size: int
) -> None:
    columns, rows = table
    data = b"".join(csv_chunks(columns, rows, bom=bom, chunk_size=chunk_size))
    assert data.startswith(b"\xef\xbb\xbf") == bom
    text = data.decode("utf-8").removeprefix("\ufeff")
    assert text.endswith("\r\n")
    assert "\n" not in text.replace("\r\n", "") and "\r" not in text.replace("\r\n", "")
    records = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    assert records[0] == [csv_cell(name) for name in columns]
    assert records[1:] == [[csv_cell(v) for v in padded(row, len(columns))] for row in rows]
    for record in records:
        for cell in record:
            stripped = cell.lstrip(" ")
            triggered = stripped[:1] in ("=", "+", "-", "@", "\t", "\r")
            assert not triggered or PLAIN_NUMBER.fullmatch(stripped)


@settings(max_examples=300, deadline=None)
@given(tables(), st.integers(min_value=1, max_value=200))
def test_json_parses_back_to_exactly_the_values_given(
    table: tuple[list[str], list[list[Any]]], chunk_size: int
) -> None:
    columns, rows = table
    parsed = json.loads(b"".join(json_chunks(columns, rows, chunk_size=chunk_size)))
    expected = [dict(zip(columns, padded(row, len(columns)), strict=True)) for row in rows]
    assert parsed == expected
    assert all(list(obj) == columns for obj in parsed)


@settings(max_examples=300, deadline=None)
@given(tables(), st.integers(min_value=1, max_value=200))
def test_xml_parses_back_to_the_text_of_every_column_in_order(
    table: tuple[list[str], list[list[Any]]], chunk_size: int
) -> None:
    columns, rows = table
    root = ElementTree.fromstring(b"".join(xml_chunks(columns, rows, chunk_size=chunk_size)))
    assert root.tag == "rows"
    assert [el.tag for el in root] == ["row"] * len(rows)
    expected_names = [NOT_XML_CHAR.sub("", name) for name in columns]
    for element, row in zip(root, rows, strict=True):
        assert [el.attrib.get("name", el.tag) for el in element] == expected_names
        texts = [el.text or "" for el in element]
        assert texts == [NOT_XML_CHAR.sub("", cell_text(v)) for v in padded(row, len(columns))]


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_safe_element_names_always_parse_as_an_element(name: str) -> None:
    safe = safe_element_name(name)
    assert ElementTree.fromstring(f"<{safe}/>".encode()).tag == safe
    assert not safe.lower().startswith("xml")


def _xlsx_expected(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and abs(value) <= 2**53:
        return value
    if isinstance(value, float) and abs(value) <= 9.99999999999999e307:
        return value
    return cell_text(value)


def _xlsx_matches(got: Any, want: Any) -> bool:
    if isinstance(want, float):
        # xlsxwriter keeps 16 significant digits, more than a spreadsheet shows.
        return isinstance(got, int | float) and math.isclose(got, want, rel_tol=1e-15)
    if isinstance(got, str):
        got = unescape(got)
    return type(got) is type(want) and got == want


@settings(max_examples=30, deadline=None)
@given(tables())
def test_xlsx_parses_back_to_numbers_booleans_and_text(
    table: tuple[list[str], list[list[Any]]],
) -> None:
    columns, rows = table
    sheet = openpyxl.load_workbook(io.BytesIO(xlsx_bytes(columns, rows))).active
    grid = list(sheet.iter_rows(values_only=True))
    assert [unescape(name) for name in grid[0][: len(columns)]] == columns
    body = [list(r) + [None] * (len(columns) - len(r)) for r in grid[1:]]
    # openpyxl stops at the last non-empty row, so trailing all-blank rows are absent.
    body += [[None] * len(columns)] * (len(rows) - len(body))
    for got_row, row in zip(body, rows, strict=True):
        wanted = [_xlsx_expected(v) for v in padded(row, len(columns))]
        assert all(_xlsx_matches(g, w) for g, w in zip(got_row, wanted, strict=True)), (
            got_row,
            wanted,
        )


grouped_numbers = st.builds(
    lambda sign, head, groups, frac: f"{sign}{head}{''.join(f',{g:03d}' for g in groups)}{frac}",
    st.sampled_from(["", "-", "+"]),
    st.integers(min_value=1, max_value=999),
    st.lists(st.integers(min_value=0, max_value=999), min_size=1, max_size=4),
    st.sampled_from(["", ".5", ".50", ".125", "."]),
)
multiline_text = st.lists(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=6), max_size=4
).flatmap(
    lambda parts: st.lists(
        st.sampled_from(["\n", "\r", "\r\n"]), min_size=len(parts), max_size=len(parts)
    ).map(lambda breaks: "".join(p + b for p, b in zip(parts, breaks, strict=True)))
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(grouped_numbers, multiline_text), min_size=1, max_size=6))
def test_csv_round_trip_keeps_grouped_numbers_plain_and_line_breaks_as_crlf(
    cells: list[str],
) -> None:
    columns = [f"c{i}" for i in range(len(cells))]
    text = b"".join(csv_chunks(columns, [cells], bom=False)).decode("utf-8")
    assert "\n" not in text.replace("\r\n", "") and "\r" not in text.replace("\r\n", "")
    [header, record] = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    assert header == columns
    for written, value in zip(record, cells, strict=True):
        crlf = re.sub("\r\n?|\n", "\r\n", value)
        if PLAIN_NUMBER.fullmatch(value):
            assert written == value  # a grouped number stays a number: no apostrophe
        else:
            assert written in (crlf, "'" + crlf)


@settings(max_examples=40, deadline=None)
@given(tables())
def test_rows_given_as_value_tuples_write_the_same_bytes_as_lists(
    table: tuple[list[str], list[list[Any]]],
) -> None:
    # The spool hands a dataset's batches over as value tuples (worker/spool.py): every
    # format must write them exactly as it writes lists.
    columns, rows = table
    as_tuples = [tuple(row) for row in rows]
    for chunks in (csv_chunks, json_chunks, xml_chunks):
        assert b"".join(chunks(columns, as_tuples)) == b"".join(chunks(columns, rows))
    assert xlsx_bytes(columns, as_tuples) == xlsx_bytes(columns, rows)


@settings(max_examples=60, deadline=None)
@given(tables(), st.data())
def test_rows_given_as_column_blocks_write_the_same_bytes_as_rows(
    table: tuple[list[str], list[list[Any]]], data: Any
) -> None:
    # The spool hands a dataset's batches over as columns (`ColumnBlock`), runs of rows may
    # sit between them: every format must write exactly what it writes for the rows.
    columns, rows = table
    full = [padded(row, len(columns)) for row in rows]
    cuts = sorted(data.draw(st.lists(st.integers(0, len(full)), max_size=4)))
    items: list[Any] = []
    for start, end in itertools.pairwise([0, *cuts, len(full)]):
        run = full[start:end]
        kind = data.draw(st.sampled_from(["rows", "block", "sparse"])) if run else "rows"
        if kind == "block":
            items.append(ColumnBlock([list(column) for column in zip(*run, strict=True)]))
        elif kind == "sparse" and columns:
            # Held: every column with a value, and any others drawn (all None).
            every = [list(column) for column in zip(*run, strict=True)]
            held = sorted(
                set(data.draw(st.lists(st.integers(0, len(columns) - 1))))
                | {at for at, column in enumerate(every) if any(v is not None for v in column)}
            )
            items.append(
                ColumnBlock.sparse(len(columns), len(run), held, [every[at] for at in held])
            )
        else:
            items.extend(run)
    for chunks in (csv_chunks, json_chunks, xml_chunks):
        assert b"".join(chunks(columns, items)) == b"".join(chunks(columns, rows))
    assert xlsx_bytes(columns, items) == xlsx_bytes(columns, rows)


@settings(max_examples=300, deadline=None)
@given(tables(), st.booleans())
def test_no_file_is_shorter_than_the_least_its_columns_and_rows_take(
    table: tuple[list[str], list[list[Any]]], bom: bool
) -> None:
    # The size cap refuses a file from its least size before writing it: that must never
    # be more than the file the rows make (or a file under the cap would be refused).
    columns, rows = table
    files = {
        "csv": (
            b"".join(csv_chunks(columns, rows, bom=bom)),
            csv_least(columns, len(rows), bom=bom),
        ),
        "json": (b"".join(json_chunks(columns, rows)), json_least(columns, len(rows))),
        "xml": (b"".join(xml_chunks(columns, rows)), xml_least(columns, len(rows))),
    }
    for fmt, (data, least) in files.items():
        assert least <= len(data), fmt


def test_the_least_is_the_file_when_every_cell_is_as_short_as_it_can_be() -> None:
    # ASCII names, rows whose every cell is missing (csv, xml) or a one-digit number (json):
    # the bound is the file's size, as tight as it can be.
    columns = ["a", "b-c", "c d"]
    empty: list[list[Any]] = [[None] * 3] * 4
    assert csv_least(columns, 4, bom=True) == len(b"".join(csv_chunks(columns, empty)))
    assert xml_least(columns, 4) == len(b"".join(xml_chunks(columns, empty)))
    digits = [[1, 2, 3]] * 4
    assert json_least(["a", "b", "c"], 4) == len(b"".join(json_chunks(["a", "b", "c"], digits)))
    assert json_least(columns, 0) == len(b"".join(json_chunks(columns, [])))


@pytest.mark.parametrize("width", [0, 1, 2, 5])
def test_the_json_least_is_tight_at_every_width_with_no_comma_before_the_first_key(
    width: int,
) -> None:
    columns = [f"k{i}" for i in range(width)]
    rows = [[i % 10 for i in range(width)]] * 3
    assert json_least(columns, 3) == len(b"".join(json_chunks(columns, rows)))


@pytest.mark.parametrize(
    ("width", "held", "columns"),
    [
        (0, [], []),  # no column
        (3, [2, 1], [[1], [2]]),  # not ascending
        (3, [1, 1], [[1], [2]]),  # a column twice
        (3, [3], [[1]]),  # past the width
        (3, [-1], [[1]]),
        (3, [0, 1], [[1]]),  # a held column without its values
    ],
)
def test_a_sparse_block_names_each_held_column_once_within_its_width(
    width: int, held: list[int], columns: list[list[Any]]
) -> None:
    with pytest.raises(ValueError, match="column"):
        ColumnBlock.sparse(width, 1, held, columns)
