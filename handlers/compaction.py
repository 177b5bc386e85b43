"""The compact citation kept on a tool message, and the row estimate it still allows.

The contract: docs/contract/stored-data.md.

The chat service imports `build_citation` to keep messages small; the worker reads the
same citations in reach-back phase 1 (`estimate_rows`) without fetching any artifact. The
limits below are load-bearing for that estimate: a guard test pins them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from itertools import islice
from typing import Any, Final

from handlers.rows import extract_rows, locate_rows
from schemas.documents import CompactCitation

MAX_STRING_CHARS = 400
MAX_LIST_ITEMS = 5
MAX_DICT_KEYS = 12
# The result itself is level 1; containers at this level or deeper become a placeholder.
PLACEHOLDER_LEVEL = 4
REMAINING_ITEMS = "remaining_items"
REMAINING_KEYS = "remaining_keys"
# What `_compact` leaves of a string it cut, and of a container it replaced (relevance reads
# both out of a citation's strings; `bounding_estimate` asks whether anything was cut).
TRUNCATED: Final = re.compile(r"…\[truncated \d+ chars\]$")
PLACEHOLDER: Final = re.compile(r"<(?:dict|list) with \d+ (?:keys|items)>")


def compact(value: Any) -> Any:
    """The compacted copy of a function result kept on the message."""
    return _compact(value, 1)


def build_citation(result: Any) -> dict[str, Any]:
    """{"result": compact(result), "row_count": N, "columns": [...]} for a raw result."""
    row_count = 0
    columns: dict[str, None] = {}  # an ordered set: first-seen key order
    for row in extract_rows(result):
        row_count += 1
        columns.update(dict.fromkeys(row))
    return {"result": compact(result), "row_count": row_count, "columns": list(columns)}


def estimate_rows(citation: CompactCitation | Mapping[str, Any] | None) -> int | None:
    """Rows a compact citation stands for: row_count, else compacted rows plus remaining_items."""
    return _estimate(citation)[0]


def bounding_estimate(citation: CompactCitation | Mapping[str, Any] | None) -> int | None:
    """`estimate_rows` when the result cannot hold more rows than it says; None otherwise.

    A `row_count`, or a compacted list's length plus its `remaining_items`, counts the rows
    exactly. A compacted result whose rows are not a list may hide them in what compaction
    cut: a truncated JSON string reads as one row, and so does a placeholder or a dict whose
    rows key was past the twelfth. The dominance rule reads a group after another only on
    an estimate that bounds its rows (docs/contract/decision.md step 7)."""
    estimate, bounds = _estimate(citation)
    return estimate if bounds else None


def _estimate(citation: CompactCitation | Mapping[str, Any] | None) -> tuple[int | None, bool]:
    """`estimate_rows`, and whether it bounds the rows from above (`bounding_estimate`)."""
    if citation is None:
        return None, False
    if isinstance(citation, CompactCitation):
        row_count, result = citation.row_count, citation.result
    else:
        row_count, result = citation.get("row_count"), citation.get("result")
    if isinstance(row_count, int) and not isinstance(row_count, bool):
        return row_count, True
    if result is None:
        return None, False
    source = locate_rows(result)
    if source.items is None:
        return (0 if source.row is None else 1), not _was_cut(result)
    items = list(source.items)
    hidden = _remaining_items(items[-1]) if items else None
    return (len(items) if hidden is None else len(items) - 1 + hidden), True


def _was_cut(value: Any) -> bool:
    """Whether compaction cut something out of this compacted value."""
    if isinstance(value, str):
        return TRUNCATED.search(value) is not None or PLACEHOLDER.fullmatch(value) is not None
    if isinstance(value, Mapping):
        return REMAINING_KEYS in value or any(_was_cut(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_was_cut(v) for v in value) or (
            bool(value) and _remaining_items(value[-1]) is not None
        )
    return False


def _compact(value: Any, level: int) -> Any:
    """The value compacted as it sits at `level` (1 = the result itself)."""
    if isinstance(value, str):
        cut = len(value) - MAX_STRING_CHARS
        return value if cut <= 0 else f"{value[:MAX_STRING_CHARS]}…[truncated {cut} chars]"
    if isinstance(value, Mapping):
        if level >= PLACEHOLDER_LEVEL:
            return f"<dict with {len(value)} keys>"
        kept = {k: _compact(v, level + 1) for k, v in islice(value.items(), MAX_DICT_KEYS)}
        if len(value) > MAX_DICT_KEYS:
            kept[REMAINING_KEYS] = len(value) - MAX_DICT_KEYS
        return kept
    if isinstance(value, list | tuple):
        if level >= PLACEHOLDER_LEVEL:
            return f"<list with {len(value)} items>"
        items = [_compact(v, level + 1) for v in value[:MAX_LIST_ITEMS]]
        if len(value) > MAX_LIST_ITEMS:
            items.append({REMAINING_ITEMS: len(value) - MAX_LIST_ITEMS})
        return items
    return value


def _remaining_items(item: Any) -> int | None:
    """N when the item is the trailing {"remaining_items": N} marker compaction leaves."""
    if isinstance(item, Mapping) and list(item) == [REMAINING_ITEMS]:
        count = item[REMAINING_ITEMS]
        if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
            return count
    return None
