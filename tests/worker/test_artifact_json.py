"""An artifact is parsed to exactly the value json.loads gives, or fails as json.loads does."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.artifact_json import parse_artifact_json


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal types, -0.0 apart from 0.0, NaN equal to NaN, keys in order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1, a) == math.copysign(1, b)
        )
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same, a, b))
    return bool(a == b)


scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(st.characters(exclude_categories=()))  # lone surrogates too
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300)
@given(values, st.booleans())
def test_any_json_text_parses_to_what_json_loads_gives(value: Any, ascii_only: bool) -> None:
    data = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    try:
        expected = json.loads(data)
    except ValueError:
        with pytest.raises(ValueError):
            parse_artifact_json(data)
        return
    assert _same(parse_artifact_json(data), expected)


@pytest.mark.parametrize(
    "data",
    [
        b'{"a": NaN, "b": Infinity, "c": -Infinity}',
        b"[1e400, -1e400, 1E400]",
        b'["\\ud800", "x\\udfffy"]',
        b'\xef\xbb\xbf{"bom": 1}',
        '{"utf16": 1}'.encode("utf-16"),
        b'{"k": 1, "k": 2, "j": 3}',
        b"[123456789012345678901234567890, -0, -0.0, 1.0, 1e5, 0.1]",
        b"[" + b"9" * 5000 + b"]",
        b'{"a": 1',
        b"\xff\xfe",
        b"",
        b"[] []",
        b"[" * 100_000 + b"]" * 100_000,
    ],
)
def test_what_msgspec_refuses_is_answered_as_json_loads_answers(data: bytes) -> None:
    try:
        expected = json.loads(data)
    except (ValueError, RecursionError) as exc:
        with pytest.raises(type(exc)):
            parse_artifact_json(data)
        return
    assert _same(parse_artifact_json(data), expected)
