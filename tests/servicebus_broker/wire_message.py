"""Messages on the wire: what a delivered or peeked message carries, built with proton's
codec (never by hand).

Per the protocol guide ("Messages: message annotations") a message leaving the broker
carries `x-opt-sequence-number`, `x-opt-enqueued-time` and, when peek-locked,
`x-opt-locked-until` as message annotations, and the lock token as the delivery tag; the
request-response guide ("Message Renew Lock") adds that the token may also appear as the
delivery annotation `x-opt-lock-token`, which this broker sets. The header's
`delivery-count` is the number of failed deliveries, per the AMQP core spec.
"""

from __future__ import annotations

import uuid
from typing import Any

from proton import Data, Described, Message, symbol, timestamp

from .entity import StoredMessage

SEQUENCE_NUMBER = symbol("x-opt-sequence-number")
ENQUEUED_TIME = symbol("x-opt-enqueued-time")
LOCKED_UNTIL = symbol("x-opt-locked-until")
LOCK_TOKEN = symbol("x-opt-lock-token")
MESSAGE_STATE = symbol("x-opt-message-state")
# .NET ticks (100 ns) at the Unix epoch: Service Bus states the session lock in them.
DOTNET_EPOCH_TICKS = 621355968000000000
ACTIVE, DEFERRED = 0, 1
HEADER_DESCRIPTOR = 0x70  # amqp:header:list


def amqp_timestamp(seconds: float) -> timestamp:
    """An AMQP timestamp (milliseconds since the epoch)."""
    return timestamp(round(seconds * 1000))


def dotnet_ticks(seconds: float) -> int:
    """A UTC time as .NET ticks, the unit of `com.microsoft:locked-until-utc`."""
    return DOTNET_EPOCH_TICKS + round(seconds * 10_000_000)


def decode(data: bytes) -> Message:
    """A message from its wire encoding."""
    message = Message()
    message.decode(data)
    return message


def message_id(message: Message) -> str | None:
    """The message id as Service Bus compares it (a string), or None."""
    return None if message.id is None else str(message.id)


def session_id(message: Message) -> str | None:
    """The session id: the AMQP `group-id` (protocol guide, "Messages: properties")."""
    return None if message.group_id is None else str(message.group_id)


def outgoing(
    stored: StoredMessage,
    *,
    lock_token: uuid.UUID | None = None,
    locked_until: float | None = None,
) -> bytes:
    """The stored message as it leaves the broker (delivered, peeked or dead-lettered)."""
    message = decode(stored.payload)
    annotations: dict[Any, Any] = dict(message.annotations or {})
    annotations[SEQUENCE_NUMBER] = stored.sequence_number
    annotations[ENQUEUED_TIME] = amqp_timestamp(stored.enqueued_at)
    annotations[MESSAGE_STATE] = DEFERRED if stored.deferred else ACTIVE
    if locked_until is not None:
        annotations[LOCKED_UNTIL] = amqp_timestamp(locked_until)
    message.annotations = annotations
    if lock_token is not None:
        message.instructions = {LOCK_TOKEN: lock_token}
    if stored.added_properties:
        properties = dict(message.properties or {})
        properties.update(stored.added_properties)
        message.properties = properties
    return _header(message, stored.failed_deliveries) + _without_header(message)


def _header(message: Message, delivery_count: int) -> bytes:
    """The header section, always present: proton leaves it out when every field has its
    default, and the SDK then reports no delivery count at all instead of 0."""
    header = Data()
    header.put_described()
    header.enter()
    header.put_ulong(HEADER_DESCRIPTOR)
    header.put_list()
    header.enter()
    header.put_bool(bool(message.durable))
    header.put_ubyte(message.priority)
    if message.ttl:
        header.put_uint(round(message.ttl * 1000))
    else:
        header.put_null()
    header.put_bool(bool(message.first_acquirer))
    header.put_uint(delivery_count)
    header.exit()
    header.exit()
    encoded: bytes = header.encode()
    return encoded


def _without_header(message: Message) -> bytes:
    """Every section but the header (which `_header` writes instead)."""
    encoded = bytes(message.encode())
    first = Data()
    consumed = first.decode(encoded)  # one section: proton writes the header first
    first.rewind()
    first.next()
    section = first.get_object()
    if isinstance(section, Described) and section.descriptor == HEADER_DESCRIPTOR:
        return encoded[consumed:]
    return encoded
