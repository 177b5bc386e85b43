"""`dev seed`'s artifacts: the fixture's JSON value, as bytes a chat service could have written."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from worker.artifact_json import parse_artifact_json
from worker.testing.seeding import artifact_bytes

# JSON values whose strings may hold anything a JSON text can escape, lone surrogates too
# (Hypothesis leaves out the surrogate category unless told not to).
texts = st.text(st.characters(exclude_categories=()), max_size=8)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_an_artifact_is_written_as_the_same_json_value(value: Any) -> None:
    data = artifact_bytes(value)
    assert json.loads(data) == value
    assert parse_artifact_json(data) == value  # as the worker reads it back


def test_a_lone_surrogate_is_written_escaped_and_other_text_as_utf8() -> None:
    assert artifact_bytes({"unit": "bad\ud800x"}) == b'{"unit": "bad\\ud800x"}'
    assert artifact_bytes({"unit": "\u00b0C"}) == '{"unit": "\u00b0C"}'.encode()
