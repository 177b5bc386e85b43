"""The row spool gives back exactly the rows it was given, per action, in order."""

from __future__ import annotations

import marshal
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

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


def same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down; floats by bits (NaN equals NaN, -0.0
    differs from 0.0); key order counts."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same, a, b))
    return bool(a == b)


@settings(max_examples=150, deadline=None)
@given(
    appended=st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), ROWS, st.booleans()), max_size=40)
)
def test_rows_come_back_exactly_per_action_in_append_order(
    appended: list[tuple[str, dict[str, Any], bool]],
) -> None:
    with RowSpool() as spool:
        for action, row, one_by_one in appended:
            if one_by_one:
                spool.append(action, row)
            else:
                spool.extend(action, [row])
        assert spool.count == len(appended)
        for action in ("a", "b", "c", "never"):
            expected = [row for name, row, _ in appended if name == action]
            for _ in range(2):  # a retried upload reads the rows again from the start
                back = list(spool.rows(action))
                assert len(back) == len(expected)
                assert all(map(same, back, expected))


def test_a_lone_surrogate_and_big_numbers_survive_the_spool() -> None:
    row = {"unit": "V\ud800", "big": 2**100, "nan": math.nan, "neg": -0.0, "k\udc00": [1.5]}
    with RowSpool() as spool:
        spool.append("h", row)
        (back,) = spool.rows("h")
    assert same(back, row)


def test_many_batches_and_rows_added_after_a_read_keep_their_order() -> None:
    rows = [{"n": n} for n in range(3 * BATCH_ROWS + 7)]
    with RowSpool() as spool:
        spool.extend("h", rows[: BATCH_ROWS + 3])
        for row in rows[BATCH_ROWS + 3 : -5]:
            spool.append("h", row)
        assert [r["n"] for r in spool.rows("h")] == list(range(len(rows) - 5))
        spool.extend("h", rows[-5:])
        assert list(spool.rows("h")) == rows


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
