"""A dataset's cells a page at a time are each row's `action_cells`, in order."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from handlers.file_layout import action_cells, action_rows_cells, layout
from handlers.selection import Selection

KEYS = ("x", "y", "=z", "")
rows_strategy = st.lists(
    st.dictionaries(st.sampled_from(KEYS), st.none() | st.integers() | st.text(), max_size=4),
    max_size=20,
)


def _selection(source: str | None) -> Selection:
    columns = ("x", "y", "=z", "", *((source,) if source else ()))
    return Selection(
        ("a", "b") if source else ("a",), source is not None, source, columns, 0, (), False
    )


@given(rows_strategy, st.sampled_from([None, "Source action", "x"]))
def test_rows_cells_are_each_rows_action_cells(
    rows: list[dict[str, Any]], source: str | None
) -> None:
    selection = _selection(source)
    shape = layout("csv", None, selection)
    expected = [action_cells(row, "b", selection, shape) for row in rows]
    assert list(action_rows_cells(iter(rows), "b", selection, shape)) == expected
