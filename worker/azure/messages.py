"""Between Service Bus messages and the port's shapes: bodies, properties, session ids."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

from azure.servicebus import ServiceBusReceivedMessage

from worker.ports import FIRST_DELIVERY, DeadLetteredMessage, QueueMessage
from worker.ports.queue import utc_text

# Kept by Service Bus in the application properties of a dead-lettered message.
_DEAD_LETTER_KEYS = frozenset({"DeadLetterReason", "DeadLetterErrorDescription"})
# The session id a message was sent with, when Service Bus could not take it as it was.
SENT_SESSION_KEY = "x-export-worker-session-id"
_OWN_KEYS = _DEAD_LETTER_KEYS | {SENT_SESSION_KEY}

UNROUTED_SESSION = "_unrouted"
MAX_SESSION_ID = 128


def service_bus_session(session_id: str) -> str:
    """A session id Service Bus accepts: an event without a usable conversation id (it will
    be dead-lettered as schema_invalid) still needs a session on a session-enabled queue,
    and one longer than 128 characters is hashed (its messages still share a session)."""
    if not session_id:
        return UNROUTED_SESSION
    if len(session_id) > MAX_SESSION_ID:
        return "_h" + hashlib.sha256(session_id.encode()).hexdigest()
    return session_id


def session_properties(session_id: str, properties: Mapping[str, Any]) -> dict[str, Any]:
    """The application properties to send: `properties`, and the session id as sent when
    Service Bus gets another one, so that it reads back as sent (`sent_session`)."""
    sent = dict(properties)
    if service_bus_session(session_id) != session_id:
        sent[SENT_SESSION_KEY] = session_id
    return sent


def sent_session(raw: ServiceBusReceivedMessage) -> str:
    """The session id the message was sent with."""
    for name, value in _properties(raw):
        if name == SENT_SESSION_KEY:
            return str(value)
    return raw.session_id or ""


def _properties(raw: ServiceBusReceivedMessage) -> Iterator[tuple[str, Any]]:
    """The application properties as (name, value), names as str and binary values as text.
    Binary that is not UTF-8 (a producer other than this worker may send it) reads with
    replacement characters: an error here would fail every receive of its session."""
    for key, value in (raw.application_properties or {}).items():
        name = key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)
        yield name, value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def body_bytes(raw: ServiceBusReceivedMessage) -> bytes:
    """The message body as bytes, whatever AMQP body section carried it; b"" for one that
    has no bytes form (a sequence of lists): the handler dead-letters it as invalid, where
    an error here would leave it locked, unsettled, back at its session's head for ever."""
    try:
        return _body_bytes(raw.body)
    except (TypeError, ValueError):
        return b""


def _body_bytes(body: Any) -> bytes:
    if isinstance(body, bytes | bytearray):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8")
    try:
        parts = list(body)
    except TypeError:
        return json.dumps(body).encode("utf-8")
    if all(isinstance(part, bytes | bytearray) for part in parts):
        return b"".join(parts)
    return json.dumps(parts).encode("utf-8")


def decoded_properties(raw: ServiceBusReceivedMessage) -> dict[str, Any]:
    """Application properties with str keys and str (not bytes) text values, without the
    bookkeeping kept there (Service Bus's dead-letter reason, the session id as sent)."""
    return {name: value for name, value in _properties(raw) if name not in _OWN_KEYS}


def delivery_count(raw: ServiceBusReceivedMessage) -> int:
    """The port's count (FIRST_DELIVERY on a first delivery) from the SDK's, which is the
    AMQP header's `delivery-count` as it came: failed deliveries before this one, 0 on a
    first delivery. A dead letter's count so names the delivery that dead-lettered it;
    one Service Bus moved at its max delivery count shows that count + 1."""
    return (raw.delivery_count or 0) + FIRST_DELIVERY


def _enqueued_at(raw: ServiceBusReceivedMessage) -> str:
    enqueued = raw.enqueued_time_utc
    return utc_text(enqueued) if enqueued is not None else ""


def to_queue_message(raw: ServiceBusReceivedMessage) -> QueueMessage:
    """The port's view of a received message."""
    return QueueMessage(
        sequence_number=raw.sequence_number or 0,
        message_id=str(raw.message_id or ""),
        session_id=sent_session(raw),
        body=body_bytes(raw),
        delivery_count=delivery_count(raw),
        enqueued_at=_enqueued_at(raw),
        properties=decoded_properties(raw),
    )


def to_dead_letter(raw: ServiceBusReceivedMessage) -> DeadLetteredMessage:
    """The port's view of a dead-lettered message."""
    return DeadLetteredMessage(
        sequence_number=raw.sequence_number or 0,
        message_id=str(raw.message_id or ""),
        session_id=sent_session(raw),
        reason=raw.dead_letter_reason or "",
        description=raw.dead_letter_error_description or "",
        enqueued_at=_enqueued_at(raw),
        delivery_count=delivery_count(raw),
        body=body_bytes(raw),
        properties=decoded_properties(raw),
    )
