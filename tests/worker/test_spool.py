"""The row spool gives back exactly the rows it was given, per action, in order; a batch of
rows with the same keys comes back as those keys and the values under each (its columns)."""

from __future__ import annotations

import marshal
import math
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from handlers.file_layout import batch_cells
from handlers.serialisers import ColumnBlock, each_row
from worker.spool import BATCH_ROWS, RowSpool

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**64, max_value=2**200),
    st.floats(),  # NaN, ±Infinity and -0.0 included
    st.text(),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)),  # lone surrogates
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
ROWS = st.dictionaries(st.text(max_size=8), VALUES, max_size=5)


def same(a: Any, b: Any, *, key_order: bool = True) -> bool:
    """Equal and of the same types all the way down; floats by bits (NaN equals NaN, -0.0
    differs from 0.0); key order counts (at the top, only when `key_order`)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, dict):
        keys_match = list(a) == list(b) if key_order else a.keys() == b.keys()
        return keys_match and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same, a, b))
    return bool(a == b)


@settings(max_examples=150, deadline=None)
@given(appended=st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), ROWS), max_size=40))
def test_rows_come_back_exactly_per_action_in_append_order(
    appended: list[tuple[str, dict[str, Any]]],
) -> None:
    with RowSpool() as spool:
        for action, row in appended:
            spool.extend(action, [row])
        assert spool.count == len(appended)
        for action in ("a", "b", "c", "never"):
            expected = [row for name, row in appended if name == action]
            for _ in range(2):  # a retried upload reads the rows again from the start
                back = list(spool.rows(action))
                assert len(back) == len(expected)
                assert all(map(same, back, expected))


def test_a_lone_surrogate_and_big_numbers_survive_the_spool() -> None:
    row = {"unit": "V\ud800", "big": 2**100, "nan": math.nan, "neg": -0.0, "k\udc00": [1.5]}
    with RowSpool() as spool:
        spool.extend("h", [row])
        (back,) = spool.rows("h")
    assert same(back, row)


def test_many_batches_and_rows_added_after_a_read_keep_their_order() -> None:
    rows = [{"n": n} for n in range(3 * BATCH_ROWS + 7)]
    with RowSpool() as spool:
        spool.extend("h", rows[: BATCH_ROWS + 3])
        for row in rows[BATCH_ROWS + 3 : -5]:
            spool.extend("h", [row])
        assert [r["n"] for r in spool.rows("h")] == list(range(len(rows) - 5))
        spool.extend("h", rows[-5:])
        assert list(spool.rows("h")) == rows


@settings(max_examples=40, deadline=None)
@given(
    chunks=st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(1, 3 * BATCH_ROWS), st.booleans()),
        max_size=12,
    )
)
def test_actions_written_interleaved_into_one_file_come_back_apart(
    chunks: list[tuple[str, int, bool]],
) -> None:
    # The actions' batches lie interleaved in the spool's one file; a read between two
    # writes (a retried upload, a selection's look) must not move where the next goes.
    sent: dict[str, list[dict[str, Any]]] = {"a": [], "b": [], "c": []}
    with RowSpool() as spool:
        for action, size, read_after in chunks:
            rows = [{"action": action, "n": len(sent[action]) + k} for k in range(size)]
            sent[action] += rows
            spool.extend(action, rows)
            if read_after:
                assert list(spool.rows(action)) == sent[action]
        for action, expected in sent.items():
            assert list(spool.rows(action)) == expected


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts /proc/self/fd")
def test_many_actions_each_past_the_memory_buffer_hold_one_file_open() -> None:
    # Each action used to have a file of its own once past the buffer: a combined export of
    # ~1,000 large groups ran out of file descriptors (EMFILE), dead-lettered as a bug.
    open_before = len(os.listdir("/proc/self/fd"))
    # A batch of 1,024 such rows is ~620 KB, past the 512 KB buffer (each text its own
    # object: marshal writes a repeated object once).
    rows = [{"text": f"{k:06d}" + "x" * 600} for k in range(BATCH_ROWS + 1)]
    with RowSpool() as spool:
        for n in range(64):
            spool.extend(f"action_{n}", rows)
        assert len(os.listdir("/proc/self/fd")) - open_before <= 1
        assert list(spool.rows("action_42")) == rows
    assert len(os.listdir("/proc/self/fd")) == open_before


def test_fewer_rows_than_a_batch_never_go_through_marshal(monkeypatch: Any) -> None:
    # A headline turn's 900 rows: writing and reading them back cost more than the csv.
    def refused(_: object) -> bytes:
        raise AssertionError("marshalled")

    monkeypatch.setattr(marshal, "dumps", refused)
    rows = [{"n": n, "unit": "V"} for n in range(BATCH_ROWS - 1)]
    with RowSpool() as spool:
        spool.extend("h", rows[:10])
        spool.extend("h", rows[10:])
        assert list(spool.rows("h")) == rows
        assert list(spool.rows("h")) == rows


# Pages as calls return them: many rows of one shape (the same keys, maybe in another order,
# now and then a row of other keys), enough of them to fill several marshalled batches.
SHAPES = st.lists(st.text(max_size=4), min_size=1, max_size=5, unique=True)


@st.composite
def pages(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(SHAPES)
    odd = draw(st.dictionaries(st.text(max_size=4), SCALARS, max_size=4))
    count = draw(st.integers(min_value=0, max_value=2 * BATCH_ROWS + 10))
    every = draw(st.sampled_from([0, 1, 7, 500]))  # how often a row breaks the shape
    value = draw(SCALARS)
    reordered = draw(st.booleans())
    rows: list[dict[str, Any]] = []
    for n in range(count):
        if every and n % every == every - 1:
            rows.append(dict(odd))
        else:
            keys = names[::-1] if reordered and n % 2 else names
            rows.append({key: [n, value] if key == names[0] else value for key in keys})
    return rows


@settings(max_examples=30, deadline=None)
@given(
    appended=st.lists(st.tuples(st.sampled_from(["a", "b"]), pages()), max_size=3),
    keys=st.lists(st.text(max_size=4), max_size=6, unique=True),
)
def test_batches_align_with_any_keys_as_the_rows_would(
    appended: list[tuple[str, list[dict[str, Any]]]], keys: list[str]
) -> None:
    with RowSpool() as spool:
        for action, rows in appended:
            spool.extend(action, rows)
        for action in ("a", "b"):
            expected = [row for name, rows in appended if name == action for row in rows]
            for wanted in (tuple(keys), *{tuple(row) for row in expected[:1]}):
                cells = list(each_row(batch_cells(spool.batches(action), wanted)))
                assert len(cells) == len(expected)
                assert all(
                    same(list(got), [row.get(key) for key in wanted])
                    for got, row in zip(cells, expected, strict=True)
                )
            back = list(spool.rows(action))  # dicts again: the same keys and values
            assert all(map(lambda a, b: same(a, b, key_order=False), back, expected))


def test_a_page_of_one_shape_is_spooled_as_its_keys_and_columns() -> None:
    rows = [{"ts": f"t{n}", "value": n / 2, "unit": "V"} for n in range(2 * BATCH_ROWS + 5)]
    rows[3] = {"unit": "V", "ts": "t3", "value": 1.5}  # the same keys in another order
    with RowSpool() as spool:
        spool.extend("h", rows[: 2 * BATCH_ROWS])
        spool.extend("h", rows[2 * BATCH_ROWS :])
        first, second, rest = spool.batches("h")
        assert first[0] == second[0] == rest[0] == ("ts", "value", "unit")
        ts, value, unit = first[1]
        assert (ts[3], value[3], unit[3]) == ("t3", 1.5, "V")
        assert (ts[4], value[4], unit[4]) == ("t4", 2.0, "V")
        # The partial batch, still in memory, is handed over in the same form.
        assert rest[1] == [[row[key] for row in rows[2 * BATCH_ROWS :]] for key in rest[0]]
        # The header's keys take the columns as read, as one block per batch; other keys
        # pick columns by name, a column of None for a key no row has.
        blocks = list(batch_cells(spool.batches("h"), ("ts", "value", "unit")))
        assert all(type(block) is ColumnBlock for block in blocks)
        assert [block.columns for block in blocks[:2]] == [first[1], second[1]]  # type: ignore[union-attr]
        assert list(each_row(batch_cells(spool.batches("h"), ("unit", "gone"))))[:2] == [
            ("V", None),
            ("V", None),
        ]


def test_rows_of_other_keys_or_of_no_key_are_spooled_as_rows() -> None:
    mixed = [{"a": n, "b": n} for n in range(BATCH_ROWS)]
    mixed[-1] = {"a": 1, "c": 2}  # as many keys, not the same ones
    sized = [{"a": n, "b": n} for n in range(BATCH_ROWS)]
    sized[0] = {"a": 0}
    empty = [{} for _ in range(BATCH_ROWS)]  # no key: no column would hold them
    for rows in (mixed, sized, empty, mixed[-10:]):  # the last: still in memory
        with RowSpool() as spool:
            spool.extend("h", rows)
            ((names, back),) = spool.batches("h")
            assert names is None and back == rows
            assert list(spool.rows("h")) == rows
    single = [{"n": n} for n in range(BATCH_ROWS)]  # one key: one column
    with RowSpool() as spool:
        spool.extend("h", single)
        assert list(spool.batches("h")) == [(("n",), [list(range(BATCH_ROWS))])]
        assert list(spool.rows("h")) == single


@pytest.mark.parametrize("shape", ["columns", "rows"])
def test_a_batch_whose_every_row_is_skipped_is_left_out_not_given_empty(shape: str) -> None:
    if shape == "columns":
        rows = [{"n": n} for n in range(BATCH_ROWS + 2)]
    else:  # rows of other keys: written as the rows themselves
        rows = [{"n": n} if n % 2 else {"m": n} for n in range(BATCH_ROWS + 2)]
    with RowSpool() as spool:
        spool.extend("h", rows)
        spool.skip("h", range(BATCH_ROWS))  # the whole first batch
        batches = list(spool.batches("h"))
        assert len(batches) == 1
        assert list(spool.rows("h")) == rows[BATCH_ROWS:]
