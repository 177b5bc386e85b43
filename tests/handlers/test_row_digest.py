"""Two rows have the same digest exactly when their canonical JSON is the same text."""

from __future__ import annotations

import json
import math
import struct
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from handlers.row_digest import canonical_digest, row_digest, row_digests


def canonical(row: dict[str, Any]) -> str:
    """The de-duplication contract's canonical text (what the digest used to hash)."""
    return json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def odd_nan(bits: int) -> float:
    """A NaN with another payload or sign than float('nan'): JSON prints it `NaN` all the same."""
    return float(struct.unpack(">d", (0x7FF0000000000000 | bits).to_bytes(8, "big"))[0])


# Values whose canonical texts are alike or equal: a NaN of any payload or sign is `NaN`.
LOOKALIKES: list[list[Any]] = [
    [math.nan, -math.nan, odd_nan(1), -odd_nan(5), None, "NaN", "null"],
    [0.0, -0.0, 0, False, "0"],
    [1, 1.0, True, "1", 1e16, 10**16],
    [math.inf, -math.inf, 1e308, -1e308, 2**64, float(2**64), 2**63, -(2**63) - 1],
    ["\ud800", "\udc00", "\ud800\udc00", "\U00010000"],
]
CONFUSABLE = [value for group in LOOKALIKES for value in group]


FLOATS = st.one_of(
    st.floats(),
    st.sampled_from([0.0, -0.0, 1.0, 1e16, 1e308, -1e308, math.inf, -math.inf, math.nan]),
    st.integers(min_value=1, max_value=2**52 - 1).map(odd_nan),
    st.integers(min_value=1, max_value=2**52 - 1).map(lambda bits: -odd_nan(bits)),
)
SCALARS = st.sampled_from(CONFUSABLE) | st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=3),
    st.integers(),
    st.integers(min_value=2**63 - 2, max_value=2**64 + 2),
    st.integers(min_value=-(2**64) - 2, max_value=-(2**63) + 2),
    FLOATS,
    st.sampled_from(["", "null", "1", "1.0", "true", "NaN", "\ud800", "a\udc00b", "é", "\x00"]),
    st.text(max_size=6),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
ROWS = st.dictionaries(st.sampled_from(["a", "b", "B", "é", "\ud800", "", "1"]), VALUES, max_size=4)


def variant(value: Any, draw: Any) -> Any:
    """A value the contract may call the same: dict keys reordered at any depth, and scalars
    swapped for look-alikes (NaN payloads, signed zeros, 1 / 1.0 / True, null / NaN)."""
    if isinstance(value, dict):
        items = [(key, variant(item, draw)) for key, item in value.items()]
        if draw(st.booleans()):
            items.reverse()
        return dict(items)
    if isinstance(value, list):
        return [variant(item, draw) for item in value]
    if draw(st.booleans()):
        return value
    group = next((g for g in LOOKALIKES if any(_identical(value, v) for v in g)), CONFUSABLE)
    return draw(st.sampled_from(group))


def _identical(a: Any, b: Any) -> bool:
    return type(a) is type(b) and (a == b or (a != a and b != b))


@settings(max_examples=400, deadline=None)
@given(data=st.data(), first=ROWS)
def test_digests_equal_exactly_when_canonical_json_is_equal(
    data: Any, first: dict[str, Any]
) -> None:
    second = data.draw(ROWS) if data.draw(st.booleans()) else variant(first, data.draw)
    same_text = canonical(first) == canonical(second)
    assert (row_digest(first) == row_digest(second)) == same_text


@settings(max_examples=200, deadline=None)
@given(row=ROWS)
def test_a_digest_is_64_bits_and_the_same_for_the_row_parsed_again(row: dict[str, Any]) -> None:
    digest = row_digest(row)
    assert 0 <= digest < 2**64
    # The same row parsed again from its JSON (a redelivered page) has the same digest.
    assert row_digest(json.loads(json.dumps(row, ensure_ascii=False))) == digest


def test_a_lone_surrogate_is_digested_not_raised() -> None:
    row = {"unit": "V\ud800", "value": 12.5}
    assert row_digest(row) == row_digest(dict(reversed(row.items())))
    assert row_digest(row) != row_digest({"unit": "V\udc00", "value": 12.5})
    assert canonical_digest(row) == row_digest(row)


def test_nan_infinities_and_signed_zeros_keep_their_json_identity() -> None:
    assert row_digest({"v": math.nan}) == row_digest({"v": odd_nan(1)})
    assert row_digest({"v": math.nan}) != row_digest({"v": None})
    assert row_digest({"v": math.inf}) != row_digest({"v": -math.inf})
    assert row_digest({"v": 0.0}) != row_digest({"v": -0.0})
    one, others = row_digest({"v": 1}), [{"v": 2}, {"v": 1.0}, {"v": True}, {"v": "1"}]
    assert all(row_digest(row) != one for row in others)
    assert row_digest({"v": 2**64}) == row_digest({"v": 2**64})
    assert row_digest({"v": 2**64}) != row_digest({"v": float(2**64)})


@st.composite
def pages(draw: Any) -> list[dict[str, Any]]:
    """A page as a call returns it: rows of the same keys (in any order), now and then a row
    of other keys, and values that send a row to its canonical text (NaN, 2**64, a lone
    surrogate)."""
    names = draw(st.lists(st.sampled_from(["a", "b", "B", "é", "1", ""]), min_size=1, unique=True))
    rows = []
    for _ in range(draw(st.integers(min_value=0, max_value=12))):
        if draw(st.integers(min_value=0, max_value=9)) == 0:
            rows.append(draw(ROWS))
            continue
        keys = draw(st.permutations(names))
        rows.append({key: draw(VALUES) for key in keys})
    return rows


@settings(max_examples=300, deadline=None)
@given(page=pages())
def test_a_page_is_digested_as_each_of_its_rows_would_be(page: list[dict[str, Any]]) -> None:
    # The page's rows are packed and hashed together in C; the digests are the rows' own.
    assert row_digests(page) == [row_digest(row) for row in page]
