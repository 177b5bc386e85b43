"""The local backend: every port on one SQLite file and one folder under the worker home."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from worker.local.blobs import LocalBlobs
from worker.local.outbox import LocalOutbox
from worker.local.queue import LocalQueue
from worker.local.store import LocalConversationStore, LocalLedger
from worker.ports import Backend

DATABASE_FILE = "worker.db"
BLOBS_DIR = "blobs"


def open_local_backend(
    home: Path, *, lock_duration: float = 60.0, clock: Callable[[], float] = time.time
) -> Backend:
    """Open (creating when missing) `home/worker.db` and `home/blobs` as a Backend."""
    home = Path(home)
    if home.exists() and not home.is_dir():
        raise NotADirectoryError(f"the home {home} is not a folder (EXPORT_WORKER_HOME)")
    home.mkdir(parents=True, exist_ok=True)
    database = home / DATABASE_FILE
    return Backend(
        queue=LocalQueue(database, lock_duration=lock_duration, clock=clock),
        store=LocalConversationStore(database),
        ledger=LocalLedger(database),
        blobs=LocalBlobs(home / BLOBS_DIR),
        publisher=LocalOutbox(database, clock=clock),
    )
