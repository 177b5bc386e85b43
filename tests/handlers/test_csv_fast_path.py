"""The CSV writer's fast path writes the very bytes the cell rules write, for any cells."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from handlers.serialisers import ColumnBlock, aligned, byte_chunks
from handlers.serialisers.csv_file import _quoted, csv_cell, csv_chunks

TRICKY_TEXT = st.sampled_from(
    [
        "", " ", "plain", "=1+1", " =1", "  -3", "-3", "+1e5", "-1,234.50", "1,23", "@a", "\ta",
        "\r", "a\rb", "a\nb", "a\r\nb", '"', 'a"b', "a,b", "\ud800", "x\udfff", "é中", "'=x",
        "-", "+", "\x00", "\u2028", "NaN", "-Infinity", "1e999", " \t", "=", "0x1F",
    ]
)  # fmt: skip
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**53),
    st.floats(),
    TRICKY_TEXT,
    st.text(),
    st.text(alphabet="=+-@ \t\r\n,\"'0123456789.eE"),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2)
    ),
    max_leaves=4,
)


def rule_by_rule(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], bom: bool, chunk_size: int
) -> Iterator[bytes]:
    """The writer before its fast path: every cell through csv_cell and _quoted."""

    def record(values: Sequence[Any]) -> str:
        line = ",".join(_quoted(csv_cell(value)) for value in values)
        return (line or ('""' if values else "")) + "\r\n"

    def texts() -> Iterator[str]:
        yield ("\ufeff" if bom else "") + record(columns)
        for row in rows:
            yield record(aligned(row, len(columns)))

    return byte_chunks(texts(), chunk_size)


@settings(max_examples=500, deadline=None)
@given(
    columns=st.lists(st.one_of(TRICKY_TEXT, st.text(max_size=4)), max_size=4),
    data=st.data(),
    bom=st.booleans(),
    chunk_size=st.integers(min_value=1, max_value=300),
)
def test_the_file_is_byte_for_byte_what_the_cell_rules_write(
    columns: list[str], data: Any, bom: bool, chunk_size: int
) -> None:
    width = len(columns)
    rows = data.draw(st.lists(st.lists(VALUES, max_size=width), max_size=6))
    expected = b"".join(rule_by_rule(columns, rows, bom, chunk_size))
    chunks = list(csv_chunks(columns, rows, bom=bom, chunk_size=chunk_size))
    assert b"".join(chunks) == expected
    assert all(len(chunk) >= chunk_size for chunk in chunks[:-1])


COLUMN_KINDS = st.sampled_from(
    [
        st.one_of(TRICKY_TEXT, st.text(max_size=6)),
        # Plain text with one character a rule may apply to, so that a column holds it alone.
        *(st.text(alphabet="abc019.:TZ" + c, max_size=8) for c in '",\r\n=+-@\t \ud800\x00'),
        st.floats(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.integers(),
        st.booleans(),
        st.none(),
    ]
)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), width=st.integers(min_value=1, max_value=4), bom=st.booleans())
def test_columns_of_one_kind_are_byte_for_byte_what_the_cell_rules_write(
    data: Any, width: int, bom: bool
) -> None:
    # Full rows whose columns each hold one kind of value take the column-wise path; the
    # row count crosses its batch boundary.
    kinds = [data.draw(COLUMN_KINDS) for _ in range(width)]
    count = data.draw(st.integers(min_value=0, max_value=150))
    rows = [[data.draw(kind) for kind in kinds] for _ in range(count)]
    columns = [f"c{i}" for i in range(width)]
    expected = b"".join(rule_by_rule(columns, rows, bom, 4096))
    assert b"".join(csv_chunks(columns, rows, bom=bom, chunk_size=4096)) == expected


@settings(max_examples=300, deadline=None)
@given(data=st.data(), width=st.integers(min_value=1, max_value=4), bom=st.booleans())
def test_column_blocks_are_byte_for_byte_what_the_cell_rules_write(
    data: Any, width: int, bom: bool
) -> None:
    # The spool's batches reach the writer as columns: a block whose columns each hold one
    # kind is written a column at a time, any other block row by row; rows may sit between
    # blocks. The bytes are the cell rules' bytes either way.
    kinds = [data.draw(COLUMN_KINDS) for _ in range(width)]
    items: list[Any] = []
    rows: list[list[Any]] = []
    for _ in range(data.draw(st.integers(min_value=0, max_value=3))):
        count = data.draw(st.integers(min_value=0, max_value=150))
        run = [[data.draw(kind) for kind in kinds] for _ in range(count)]
        rows.extend(run)
        if data.draw(st.booleans()):
            items.append(ColumnBlock([[row[i] for row in run] for i in range(width)]))
        else:
            items.extend(run)
    columns = [f"c{i}" for i in range(width)]
    expected = b"".join(rule_by_rule(columns, rows, bom, 4096))
    assert b"".join(csv_chunks(columns, items, bom=bom, chunk_size=4096)) == expected


def test_a_column_block_of_other_width_than_the_header_is_refused() -> None:
    with pytest.raises(ValueError, match="a block of 1 columns for 2 columns"):
        b"".join(csv_chunks(["a", "b"], [ColumnBlock([[1, 2]])]))
