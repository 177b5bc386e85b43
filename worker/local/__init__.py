"""Local (embedded) adapters of every port: one SQLite file and a folder of blobs."""

from worker.local.backend import open_local_backend
from worker.local.blobs import LocalBlobs, LocalBlobUpload
from worker.local.outbox import LocalOutbox
from worker.local.queue import LocalQueue, LocalSession
from worker.local.store import LocalConversationStore, LocalLedger

__all__ = [
    "LocalBlobUpload",
    "LocalBlobs",
    "LocalConversationStore",
    "LocalLedger",
    "LocalOutbox",
    "LocalQueue",
    "LocalSession",
    "open_local_backend",
]
