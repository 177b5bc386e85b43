"""A dataset's cells a page at a time are each row's `action_cells`, in order."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from handlers.file_layout import (
    action_cells,
    batch_cells,
    dataset_cells,
    layout,
    selection_cells,
)
from handlers.selection import Selection
from handlers.serialisers import ColumnBlock, each_row

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


def _batches(rows: list[dict[str, Any]]) -> list[Any]:
    """The rows as the spool hands them over: as columns when they share the first row's
    keys, else as the rows."""
    names = tuple(rows[0]) if rows else ()
    if names and all(row.keys() == set(names) for row in rows):
        return [(names, [[row[name] for row in rows] for name in names])]
    return [(None, rows)]


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
    expected = [action_cells(row, "b", selection, shape) for row in rows]
    got = each_row(dataset_cells(iter(_batches(rows)), "b", selection, shape))
    assert [list(cells) for cells in got] == expected


def test_a_batch_of_a_few_of_many_keys_is_a_sparse_block_of_its_own_columns() -> None:
    # A combined export of groups with columns of their own: each batch names two of
    # 10,000 keys, and its block holds those two (the last of a name given twice), never
    # a column per key.
    keys = tuple(f"k{n}" for n in range(10_000))
    batches: list[Any] = [(("k7", "k3", "nope", "k7"), [[1], [2], [3], [4]])]
    (block,) = batch_cells(iter(batches), keys)
    assert isinstance(block, ColumnBlock)
    assert block.held == [3, 7]
    assert block.held_columns() == [[2], [4]]
    assert block._columns is None
    expected = tuple(2 if n == 3 else 4 if n == 7 else None for n in range(10_000))
    assert list(each_row([block])) == [expected]


def test_keys_named_twice_take_the_batch_column_under_each() -> None:
    batches: list[Any] = [(("a", "b"), [[1, 2], [3, 4]])]
    got = [list(row) for row in each_row(batch_cells(iter(batches), ("b", "c", "b")))]
    assert got == [[3, None, 3], [4, None, 4]]


@given(st.lists(rows_strategy | uniform_rows, min_size=1, max_size=3))
def test_a_selections_cells_are_its_datasets_cells_one_after_another(
    datasets: list[list[dict[str, Any]]],
) -> None:
    # Each action's batches as the spool hands them over; the file's cells are each
    # dataset's, in the selection's order, their keys' columns found once for the file.
    actions = tuple(f"action {n}" for n in range(len(datasets)))
    selection = Selection(actions, True, "Source action", (*KEYS, "Source action"), 0, (), False)
    shape = layout("xlsx", None, selection)
    spooled = {action: _batches(rows) for action, rows in zip(actions, datasets, strict=True)}
    expected = [
        cells
        for action in actions
        for cells in each_row(dataset_cells(iter(spooled[action]), action, selection, shape))
    ]
    got = each_row(selection_cells(lambda action: iter(spooled[action]), selection, shape))
    assert [list(cells) for cells in got] == [list(cells) for cells in expected]
    assert [list(cells) for cells in expected] == [
        action_cells(row, action, selection, shape)
        for action, rows in zip(actions, datasets, strict=True)
        for row in rows
    ]
