"""Local outbox: the export.published topic as a SQLite table (`dev events` lists it)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from worker.local.database import Database, rfc3339

SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id TEXT NOT NULL UNIQUE,
    body BLOB NOT NULL,
    sent_at TEXT NOT NULL
)
"""


class LocalOutbox:
    """Publisher whose events land in the `outbox` table of `db_path`."""

    def __init__(self, db_path: Path, *, clock: Callable[[], float] = time.time) -> None:
        self._db = Database(db_path, SCHEMA)
        self._clock = clock

    async def publish(self, message_id: str, body: bytes) -> None:
        """Record one event; a message id already sent is ignored (duplicate detection)."""
        sent_at = rfc3339(self._clock())
        await self._db.write(
            lambda c: c.execute(
                "INSERT OR IGNORE INTO outbox (message_id, body, sent_at) VALUES (?, ?, ?)",
                (message_id, bytes(body), sent_at),
            )
        )

    async def sent(self) -> list[dict[str, Any]]:
        """The events' JSON bodies, oldest first."""
        rows = await self._db.read(
            lambda c: c.execute("SELECT body FROM outbox ORDER BY seq").fetchall()
        )
        return [json.loads(row["body"]) for row in rows]

    async def close(self) -> None:
        """Close the connection."""
        await self._db.close()
