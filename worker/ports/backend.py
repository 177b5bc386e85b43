"""One adapter per port, opened together and closed together."""

from __future__ import annotations

import msgspec

from worker.ports.blobs import Blobs
from worker.ports.publisher import Publisher
from worker.ports.queue import Queue
from worker.ports.stores import ConversationStore, Ledger


class Backend(msgspec.Struct):
    """The adapters of one backend (local or Azure)."""

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
