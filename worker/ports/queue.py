"""The turn.completed queue, by role: consuming it, sending to it, operating its dead letters.

Sessions are keyed by conversation id. One adapter (`Queue`) serves every role; each caller
depends only on the role it needs: the runtime on `Consumer`, `export-worker send` and
`dev seed` on `Sender`, the `dlq` commands on `DeadLetterOperations`, `status` on
`QueueInspection`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

import msgspec

from worker.ports.calls import Effect, port_call

# `QueueMessage.delivery_count` on a message's first delivery: the count includes the
# delivery in hand, so the Nth delivery of a message says N. Every adapter converts to this.
FIRST_DELIVERY = 1
# The longest message id `Sender.send` takes (Service Bus's limit, kept by every adapter);
# `worker/sending.py` derives a shorter one from a longer event id.
MAX_MESSAGE_ID = 128
# As a Service Bus queue's `maxDeliveryCount` (infra/main.bicep: 10): a message whose
# deliveries ended this many times without a verdict (abandoned, its lock expired, or its
# holder killed) is dead-lettered with this reason instead of being delivered again, so
# nothing is redelivered without end. Every adapter keeps it (docs/contract/delivery.md).
MAX_DELIVERY_COUNT = 10
MAX_DELIVERY_REASON = "MaxDeliveryCountExceeded"


class InvalidMessageId(ValueError):
    """A message id longer than MAX_MESSAGE_ID was passed to `send`: a caller's bug."""


def checked_message_id(message_id: str) -> str:
    """`message_id` itself, or InvalidMessageId when no queue would take it."""
    if len(message_id) > MAX_MESSAGE_ID:
        raise InvalidMessageId(
            f"a message id has at most {MAX_MESSAGE_ID} characters, not {len(message_id)}"
        )
    return message_id


def utc_text(at: datetime) -> str:
    """An instant as every adapter writes `enqueued_at`: RFC 3339, UTC, ending in `Z`."""
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def seconds_since(at: str | None, now: datetime) -> float | None:
    """Seconds from an RFC 3339 time (`utc_text`'s, an event's `occurred_at`; one without an
    offset is read as UTC) to `now`, never negative: clocks skew. None when `at` is missing
    or not a time."""
    if not at:
        return None
    try:
        then = datetime.fromisoformat(at.replace("Z", "+00:00"))
    except ValueError:
        return None
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    return max(0.0, (now - then).total_seconds())


class QueueMessage(msgspec.Struct, frozen=True):
    """A peek-locked message; settle it through the session that delivered it."""

    sequence_number: int
    message_id: str
    session_id: str
    body: bytes
    delivery_count: int  # FIRST_DELIVERY on the first delivery, one more on each after
    enqueued_at: str  # RFC 3339
    properties: Mapping[str, Any] = msgspec.field(default_factory=dict)


class DeadLetteredMessage(msgspec.Struct, frozen=True):
    """A message in the dead-letter queue, as `dlq list` shows it (docs/contract/cli.md)."""

    sequence_number: int
    message_id: str
    session_id: str
    reason: str
    description: str
    enqueued_at: str
    delivery_count: int
    body: bytes = b""
    properties: Mapping[str, Any] = msgspec.field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The JSON object `dlq list --json` prints."""
        return {
            "sequence_number": self.sequence_number,
            "message_id": self.message_id,
            "session_id": self.session_id,
            "reason": self.reason,
            "description": self.description,
            "enqueued_at": self.enqueued_at,
            "delivery_count": self.delivery_count,
        }


class Session(Protocol):
    """One accepted session: this holder alone receives its messages, FIFO, until closed."""

    session_id: str

    @port_call(Effect.ACQUIRE)
    async def receive(self, max_wait: float) -> QueueMessage | None:
        """The next message of this session, peek-locked; None when none came in max_wait."""
        ...

    @port_call(Effect.IDEMPOTENT)
    async def complete(self, message: QueueMessage) -> None:
        """Remove the message: its work is done."""
        ...

    @port_call(Effect.IDEMPOTENT)
    async def abandon(self, message: QueueMessage, delay: float = 0.0) -> None:
        """Release the lock; redeliver after `delay` seconds (delivery count goes up)."""
        ...

    @port_call(Effect.IDEMPOTENT)
    async def dead_letter(self, message: QueueMessage, reason: str, description: str) -> None:
        """Move the message to the dead-letter queue with a reason and a description."""
        ...

    @port_call(Effect.IDEMPOTENT)
    async def renew_lock(self) -> None:
        """Extend the session lock and the locks of messages held through it."""
        ...

    @port_call(Effect.RELEASE)
    async def close(self) -> None:
        """Release the session so another holder may accept it; a message left unsettled
        goes to the next holder without its delivery counted (as on Service Bus)."""
        ...


class Consumer(Protocol):
    """Takes sessions off the queue (the runtime)."""

    @port_call(Effect.ACQUIRE, opens=Session)
    async def accept_session(self, max_wait: float) -> Session | None:
        """Lock the next session with a deliverable message; None when none came in max_wait."""
        ...

    @port_call(Effect.READ)
    async def is_drained(self) -> bool:
        """True when nothing is queued, scheduled or locked (the `--drain` exit test)."""
        ...


class Sender(Protocol):
    """Puts turn.completed messages on the queue (`send`, `dev seed`)."""

    # A repeat after a lost reply enqueues the event twice; the ledger makes the second a
    # no-op, as it does for any redelivery.
    @port_call(Effect.IDEMPOTENT)
    async def send(
        self,
        body: bytes,
        session_id: str,
        *,
        message_id: str | None = None,
        properties: Mapping[str, Any] | None = None,
    ) -> None:
        """Enqueue one message on a session; InvalidMessageId past MAX_MESSAGE_ID characters."""
        ...


class DeadLetterOperations(Protocol):
    """What an operator does with the dead-letter queue (`dlq list/show/replay/purge`)."""

    @port_call(Effect.READ)
    async def dead_letters(self, reason: str | None = None) -> list[DeadLetteredMessage]:
        """The dead-letter queue, oldest first, optionally of one reason (peek, no lock)."""
        ...

    @port_call(Effect.READ)
    async def dead_letter_entry(self, sequence_number: int) -> DeadLetteredMessage:
        """One dead-lettered message; NotFound when it is not there."""
        ...

    @port_call(Effect.ONCE)
    async def replay(self, sequence_number: int) -> None:
        """Re-send a dead-lettered body on its session with `replay_of`/`replay_count`, then
        remove the dead-lettered copy."""
        ...

    @port_call(Effect.ONCE)
    async def purge(self, sequence_number: int) -> None:
        """Remove one dead-lettered message for good."""
        ...


class QueueStats(msgspec.Struct, frozen=True):
    """How the queue stands, as `export-worker status` reports it (docs/contract/cli.md)."""

    queue_depth: int  # active messages: queued, scheduled or locked
    dead_letter_depth: int
    dead_letters_by_reason: Mapping[str, int]
    oldest_enqueued_at: str | None  # RFC 3339 enqueue time of the oldest active message


class QueueInspection(Protocol):
    """What an operator reads about the queue without taking anything (`status`)."""

    @port_call(Effect.READ)
    async def stats(self) -> QueueStats:
        """Depths of the queue and its dead-letter queue, dead letters by reason, oldest age."""
        ...


class Queue(Consumer, Sender, DeadLetterOperations, QueueInspection, Protocol):
    """The queue adapter: every role above, with a dead-letter queue."""

    @port_call(Effect.RELEASE)
    async def close(self) -> None:
        """Release connections."""
        ...
