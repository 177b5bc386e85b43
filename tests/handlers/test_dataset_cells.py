"""A dataset's cells a page at a time are each row's `action_cells`, in order."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from handlers.file_layout import action_cells, dataset_cells, layout
from handlers.selection import Selection
from handlers.serialisers import each_row

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


# Rows of one shape: the same keys, each row's values drawn on its own.
uniform_rows = st.lists(st.sampled_from(KEYS), unique=True, max_size=4).flatmap(
    lambda names: st.lists(
        st.fixed_dictionaries({name: st.none() | st.integers() | st.text() for name in names}),
        max_size=20,
    )
)


@given(rows_strategy | uniform_rows, st.sampled_from([None, "Source action", "x"]))
# A source column named as a key of a batch whose keys are the file's own, in its order:
# the action's value is written under it, not the row's.
@example([{"x": 1, "y": 2, "=z": 3, "": 4}], "x")
def test_spooled_batches_cells_are_each_rows_action_cells(
    rows: list[dict[str, Any]], source: str | None
) -> None:
    # As the spool hands them over: a batch whose rows share their keys as the first row's
    # keys and the values under each key (its columns); any other batch as the rows.
    selection = _selection(source)
    shape = layout("csv", None, selection)
    names = tuple(rows[0]) if rows else ()
    if names and all(row.keys() == set(names) for row in rows):
        batches: list[Any] = [(names, [[row[name] for row in rows] for name in names])]
    else:
        batches = [(None, rows)]
    expected = [action_cells(row, "b", selection, shape) for row in rows]
    got = each_row(dataset_cells(iter(batches), "b", selection, shape))
    assert [list(cells) for cells in got] == expected
