"""Ports: what the worker needs from the outside world, each a `typing.Protocol`.

Every port has a local adapter (SQLite and files, `worker/local/`) and an Azure adapter
(`worker/azure/`); one contract suite per port runs against both (`tests/contracts/`).

Adapters raise only these errors outward, so the handler never sees an SDK type:
- `NotFound` for a missing document, message or blob (the handler decides its fate);
- `TransientError` for throttling, timeouts, 5xx and lost connections (retryable);
- `Conflict` for an optimistic-concurrency loss (ETag mismatch, row already there).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from schemas.records import TurnRecord


class PortError(Exception):
    """Base of the errors adapters raise."""


class NotFound(PortError):
    """The document, message or blob does not exist (or is not visible yet)."""


class TransientError(PortError):
    """Throttled, timed out, 5xx or connection lost: worth retrying."""


class Conflict(PortError):
    """Someone else wrote first (ETag 412, duplicate id)."""


# --------------------------------------------------------------------------------------
# Queue (turn.completed in, with a dead-letter queue); sessions keyed by conversation id
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class QueueMessage:
    """A peek-locked message; settle it through the session that delivered it."""

    sequence_number: int
    message_id: str
    session_id: str
    body: bytes
    delivery_count: int  # 1 on first delivery
    enqueued_at: str  # RFC 3339
    properties: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DeadLetteredMessage:
    """A dead-lettered message as `dlq list` shows it (SPEC section 10)."""

    sequence_number: int
    message_id: str
    session_id: str
    reason: str
    description: str
    enqueued_at: str
    delivery_count: int
    body: bytes = b""
    properties: Mapping[str, Any] = field(default_factory=dict)

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

    async def receive(self, max_wait: float) -> QueueMessage | None:
        """The next message of this session, peek-locked; None when none came in max_wait."""
        ...

    async def complete(self, message: QueueMessage) -> None:
        """Remove the message: its work is done."""
        ...

    async def abandon(self, message: QueueMessage, delay: float = 0.0) -> None:
        """Release the lock; redeliver after `delay` seconds (delivery count goes up)."""
        ...

    async def dead_letter(self, message: QueueMessage, reason: str, description: str) -> None:
        """Move the message to the dead-letter queue with a reason and a description."""
        ...

    async def renew_lock(self) -> None:
        """Extend the session lock and the locks of messages held through it."""
        ...

    async def close(self) -> None:
        """Release the session so another holder may accept it."""
        ...


class Queue(Protocol):
    """The turn.completed queue with sessions and a dead-letter queue."""

    async def send(
        self,
        body: bytes,
        session_id: str,
        *,
        message_id: str | None = None,
        properties: Mapping[str, Any] | None = None,
    ) -> None:
        """Enqueue one message on a session."""
        ...

    async def accept_session(self, max_wait: float) -> Session | None:
        """Lock the next session with a deliverable message; None when none came in max_wait."""
        ...

    async def is_drained(self) -> bool:
        """True when nothing is queued, scheduled or locked (the `--drain` exit test)."""
        ...

    async def dead_letters(self, reason: str | None = None) -> list[DeadLetteredMessage]:
        """The dead-letter queue, oldest first, optionally of one reason (peek, no lock)."""
        ...

    async def dead_letter_entry(self, sequence_number: int) -> DeadLetteredMessage:
        """One dead-lettered message; NotFound when it is not there."""
        ...

    async def replay(self, sequence_number: int) -> None:
        """Re-send a dead-lettered body on its session with `replay_of`/`replay_count`, then
        remove the dead-lettered copy."""
        ...

    async def purge(self, sequence_number: int) -> None:
        """Remove one dead-lettered message for good."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


# --------------------------------------------------------------------------------------
# Conversation store (conversations, messages) and ledger (turn records)
# --------------------------------------------------------------------------------------
class ConversationStore(Protocol):
    """Reads the chat service's documents (and lets `dev seed` write them)."""

    async def get_conversation(self, conversation_id: str) -> dict[str, Any]:
        """Point-read a conversation; NotFound when missing."""
        ...

    async def get_message(self, conversation_id: str, message_id: str) -> dict[str, Any]:
        """Point-read a message in the conversation's partition; NotFound when missing."""
        ...

    def history(self, conversation_id: str, max_seq: int) -> AsyncIterator[dict[str, Any]]:
        """Messages with seq <= max_seq, newest first, in pages from one partition query.

        The caller stops iterating once it has what it needs: the query is bounded by that.
        """
        ...

    async def put_conversation(self, document: Mapping[str, Any]) -> None:
        """Insert or replace a conversation (fixtures, tests)."""
        ...

    async def put_message(self, document: Mapping[str, Any]) -> None:
        """Insert or replace a message (fixtures, tests)."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


class Ledger(Protocol):
    """Turn records: one per processed turn, id = turn_id, partition conversation_id."""

    async def get(self, conversation_id: str, turn_id: str) -> TurnRecord | None:
        """The turn record, or None."""
        ...

    async def put(self, record: TurnRecord) -> None:
        """Insert or replace the turn record (idempotent: same turn, same id)."""
        ...

    async def list_turns(self, conversation_id: str) -> list[TurnRecord]:
        """The conversation's turn records ordered by seq."""
        ...

    async def list_exports(self, conversation_id: str | None = None) -> list[TurnRecord]:
        """Records with an export (decision `published`), optionally of one conversation."""
        ...

    async def find_export(self, export_id: str) -> TurnRecord | None:
        """The turn record holding this export id, or None."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


# --------------------------------------------------------------------------------------
# Blobs (artifacts in, exports out). Paths read `container/name` (SPEC section 3).
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BlobInfo:
    """What is stored next to an export's bytes."""

    content_type: str
    file_name: str
    metadata: Mapping[str, str]


class BlobUpload(Protocol):
    """An export being written: nothing is visible at its path until `commit`."""

    async def write(self, chunk: bytes) -> None:
        """Append bytes (staged, not yet visible)."""
        ...

    async def commit(self) -> None:
        """Make the whole blob visible at once."""
        ...

    async def abort(self) -> None:
        """Drop what was staged; the path keeps whatever it held before."""
        ...


class Blobs(Protocol):
    """Blob storage: artifacts are read, exports are written."""

    def read(self, path: str, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
        """Stream a blob's bytes; NotFound (raised on first iteration) when missing."""
        ...

    async def exists(self, path: str) -> bool:
        """Whether a blob is at `path`."""
        ...

    async def upload(self, path: str, info: BlobInfo) -> BlobUpload:
        """Start writing a blob at `path` (replaced whole on commit)."""
        ...

    async def put(self, path: str, data: bytes, content_type: str = "application/json") -> None:
        """Write a small blob in one call (fixtures, tests)."""
        ...

    async def info(self, path: str) -> BlobInfo:
        """Content type, download file name and metadata; NotFound when missing."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


# --------------------------------------------------------------------------------------
# Publisher (export.published out)
# --------------------------------------------------------------------------------------
class Publisher(Protocol):
    """Sends export.published; the same message id twice is one event (duplicate detection)."""

    async def publish(self, message_id: str, body: bytes) -> None:
        """Send one event with this message id."""
        ...

    async def sent(self) -> list[dict[str, Any]]:
        """Events sent so far, oldest first (local outbox; the Azure topic cannot list)."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


class LockLost(PortError):
    """The message or session lock expired or was taken: another holder owns the work now."""


@dataclass
class Backend:
    """One adapter per port, opened together and closed together."""

    queue: Queue
    store: ConversationStore
    ledger: Ledger
    blobs: Blobs
    publisher: Publisher

    async def close(self) -> None:
        """Close every adapter, even when one fails to close."""
        errors: list[BaseException] = []
        for port in (self.queue, self.store, self.ledger, self.blobs, self.publisher):
            try:
                await port.close()
            except Exception as exc:  # close all, report the first
                errors.append(exc)
        if errors:
            raise errors[0]
