"""JSON export: a UTF-8 array of objects, keys in column order, values as retrieved.

NaN and ±Infinity are not JSON; they are written as null (at any depth) rather than as
the non-standard tokens Python would emit, so every strict parser reads the file. A lone
surrogate (possible in text decoded from JSON `\\ud800` escapes) is written as the same
`\\uXXXX` escape, so the value survives exactly instead of failing UTF-8 encoding.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from handlers.serialisers import Cells, aligned, byte_chunks, each_row


def finite(value: Any) -> Any:
    """The value with every NaN or infinite float (at any depth) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite(item) for item in value]
    return value


def compact_json(value: Any) -> str:
    """The value as compact JSON text (no spaces, non-ASCII kept, non-finite floats → null)."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError:
        # Only non-finite floats raise here; walking the value is paid for only then.
        return json.dumps(finite(value), separators=(",", ":"), ensure_ascii=False)


def json_chunks(
    columns: Sequence[str], rows: Iterable[Cells], *, chunk_size: int = 65536
) -> Iterator[bytes]:
    """A UTF-8 JSON array of objects, keys in column order, values as retrieved."""
    return byte_chunks(_json_texts(columns, each_row(rows)), chunk_size, errors="backslashreplace")


def least_bytes(columns: Sequence[str], row_count: int) -> int:
    """No JSON file of these columns and this many rows is shorter: the array's brackets,
    and each row's object naming every column (a key's characters are a byte each at the
    least, its value one character). The columns are distinct, as every serialiser's are
    (`headers.distinct_keys`): an object keeps one key of a name given twice."""
    if not row_count:
        return 2  # []
    keys = sum(len(column) + 4 for column in columns)  # "key":v
    # The first row's "[\n" or a later one's ",\n", its braces; the closing "\n]".
    return 2 + row_count * (2 + 2 + keys + max(len(columns) - 1, 0))


def _json_texts(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Iterator[str]:
    width = len(columns)
    separator = "[\n"
    for row in rows:
        # Every column is a key, even when missing, so each object has the same shape.
        yield separator + compact_json(dict(zip(columns, aligned(row, width), strict=True)))
        separator = ",\n"
    yield "[]" if separator == "[\n" else "\n]"
