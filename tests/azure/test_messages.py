"""Any message a Service Bus producer can send reads into the port's message
(worker/azure/messages.py): an error there would leave the message locked, released
uncounted when its session closes, back at its session's head for ever. Read, it reaches the
handler, which dead-letters what is no event (tests/emulated/test_cli_azure.py sends such
messages through the broker)."""

from __future__ import annotations

from datetime import UTC
from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from worker.azure.messages import (
    SENT_SESSION_KEY,
    sent_session,
    service_bus_session,
    session_properties,
    to_dead_letter,
    to_queue_message,
)
from worker.ports import FIRST_DELIVERY

# What the SDK hands back as `body`: data sections (bytes, or a list of them), an AMQP
# value (any AMQP type), or a sequence section (lists of values).
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(), st.binary())
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.one_of(st.text(), st.binary()), inner)
    ),
    max_leaves=8,
)
bodies = st.one_of(st.binary(), st.lists(st.binary(), max_size=3), values)
# Application properties as the SDK hands them back: keys and text values as bytes when
# they came as AMQP symbols or binary, any simple AMQP type otherwise.
property_values = st.one_of(scalars, st.uuids(), st.datetimes(timezones=st.just(UTC)))
properties = st.one_of(
    st.none(),
    st.dictionaries(st.one_of(st.text(), st.binary()), property_values, max_size=4),
    st.builds(lambda value: {SENT_SESSION_KEY.encode(): value}, property_values),
)


@given(
    body=bodies,
    application_properties=properties,
    session_id=st.one_of(st.none(), st.text()),
    message_id=st.one_of(st.none(), st.text(), st.integers(), st.uuids()),
    sequence_number=st.one_of(st.none(), st.integers(0, 2**63 - 1)),
    delivery_count=st.one_of(st.none(), st.integers(0, 1000)),
    enqueued=st.one_of(st.none(), st.datetimes(timezones=st.just(UTC))),
)
def test_any_message_a_producer_can_send_reads_into_the_ports_message(
    body: Any,
    application_properties: Any,
    session_id: str | None,
    message_id: Any,
    sequence_number: int | None,
    delivery_count: int | None,
    enqueued: Any,
) -> None:
    raw: Any = SimpleNamespace(
        body=body,
        application_properties=application_properties,
        session_id=session_id,
        message_id=message_id,
        sequence_number=sequence_number,
        delivery_count=delivery_count,
        enqueued_time_utc=enqueued,
        dead_letter_reason=None,
        dead_letter_error_description=None,
    )
    message = to_queue_message(raw)
    assert isinstance(message.body, bytes) and isinstance(message.session_id, str)
    assert message.delivery_count == (delivery_count or 0) + FIRST_DELIVERY
    assert SENT_SESSION_KEY not in message.properties
    assert to_dead_letter(raw).body == message.body


def test_a_session_id_property_that_is_not_utf8_reads_with_replacement_characters() -> None:
    # A producer other than the Python SDK (which decodes bytes properties as it sends) may
    # put binary there: strictly decoded, it raised at every receive of its session.
    raw: Any = SimpleNamespace(
        application_properties={SENT_SESSION_KEY.encode(): b"conv\xff"}, session_id="other"
    )
    assert sent_session(raw) == "conv\ufffd"


@given(st.text())
def test_a_session_id_reads_back_as_sent_whatever_service_bus_was_given(session_id: str) -> None:
    sent = session_properties(session_id, {"k": "v"})
    raw: Any = SimpleNamespace(
        application_properties={key.encode(): value for key, value in sent.items()},
        session_id=service_bus_session(session_id),
    )
    assert sent_session(raw) == session_id
