"""Routing a turn.completed body onto the queue: its session and its message id."""

from __future__ import annotations

import json

import pytest

from worker.ports import MAX_MESSAGE_ID
from worker.sending import routing


def body(**fields: object) -> bytes:
    return json.dumps({"type": "turn.completed", **fields}).encode()


def test_the_event_id_is_the_message_id_and_the_conversation_the_session() -> None:
    assert routing(body(event_id="evt_1", conversation_id="conv_1")) == ("conv_1", "evt_1")


def test_an_event_id_past_the_message_id_limit_gives_a_derived_id_of_its_own() -> None:
    # A long event id is valid (the schema sets no length), so the event is enqueued as
    # given; only its message id is derived, the same for the same event id every time.
    long_id = "evt_" + "x" * 300
    _, first = routing(body(event_id=long_id, conversation_id="c"))
    _, again = routing(body(event_id=long_id, conversation_id="c", extra=1))
    _, other = routing(body(event_id=long_id + "y", conversation_id="c"))
    assert len(first) <= MAX_MESSAGE_ID
    assert first == again != other
    _, at_limit = routing(body(event_id="e" * MAX_MESSAGE_ID))
    assert at_limit == "e" * MAX_MESSAGE_ID


@pytest.mark.parametrize(
    "raw",
    [b"not json", b"[1]", body(event_id=""), body(event_id=7), body(event_id=None), body()],
    ids=["not-json", "not-an-object", "empty", "a-number", "null", "missing"],
)
def test_a_body_without_a_usable_event_id_gets_a_fresh_message_id(raw: bytes) -> None:
    session, first = routing(raw)
    _, second = routing(raw)
    assert session == "" and first != second and 0 < len(first) <= MAX_MESSAGE_ID


def test_ids_holding_a_lone_surrogate_route_without_failing_the_send() -> None:
    # No queue holds such an id; the body still goes in, for the worker to dead-letter it.
    bad = body(event_id="evt_\ud800", conversation_id="conv_\udfff")
    session, first = routing(bad)
    _, again = routing(bad)
    assert session == "" and first == again and first.startswith("evt-sha256-")
    first.encode("utf-8")
