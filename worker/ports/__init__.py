"""Ports: what the worker needs from the outside world, each a `typing.Protocol`, by role.

- `queue`: `Consumer` (the runtime), `Sender` (`send`, `dev seed`), `DeadLetterOperations`
  (the `dlq` commands), `QueueInspection` (`status`) and the `Session` a consumer accepts;
  `Queue` is the four together.
- `stores`: `ConversationStore` (the chat service's documents), `Ledger` (turn records).
- `blobs`: `Blobs` (artifacts in, exports out) and the `BlobUpload` it starts.
- `publisher`: `Publisher` (export.published out).
- `calls`: `@port_call(Effect…)`, each method's effect, declared once next to it.
- `errors`: the only errors adapters raise outward.

Every port has a local adapter (SQLite and files, `worker/local/`) and an Azure adapter
(`worker/azure/`); one contract suite per port runs against both (`tests/contracts/`).
Writing the chat service's documents, small blobs and listing what was published are test
and development roles: `worker/testing/seeding.py`.
"""

from worker.ports.backend import Backend
from worker.ports.blobs import BlobInfo, Blobs, BlobUpload
from worker.ports.calls import Effect, PortCall, UndeclaredPortCall, declared_calls, port_call
from worker.ports.errors import (
    Archived,
    Conflict,
    FailedTries,
    LockLost,
    NotFound,
    PortError,
    TransientError,
    error_code_of,
    name_service,
    note_failed_try,
    service_of,
    watching_tries,
)
from worker.ports.publisher import Publisher
from worker.ports.queue import (
    FIRST_DELIVERY,
    MAX_DELIVERY_COUNT,
    MAX_DELIVERY_REASON,
    MAX_MESSAGE_ID,
    Consumer,
    DeadLetteredMessage,
    DeadLetterOperations,
    InvalidMessageId,
    Queue,
    QueueInspection,
    QueueMessage,
    QueueStats,
    Sender,
    Session,
    checked_message_id,
)
from worker.ports.stores import ConversationStore, Ledger

__all__ = [
    "FIRST_DELIVERY",
    "MAX_DELIVERY_COUNT",
    "MAX_DELIVERY_REASON",
    "MAX_MESSAGE_ID",
    "Archived",
    "Backend",
    "BlobInfo",
    "BlobUpload",
    "Blobs",
    "Conflict",
    "Consumer",
    "ConversationStore",
    "DeadLetterOperations",
    "DeadLetteredMessage",
    "Effect",
    "FailedTries",
    "InvalidMessageId",
    "Ledger",
    "LockLost",
    "NotFound",
    "PortCall",
    "PortError",
    "Publisher",
    "Queue",
    "QueueInspection",
    "QueueMessage",
    "QueueStats",
    "Sender",
    "Session",
    "TransientError",
    "UndeclaredPortCall",
    "checked_message_id",
    "declared_calls",
    "error_code_of",
    "name_service",
    "note_failed_try",
    "port_call",
    "service_of",
    "watching_tries",
]
