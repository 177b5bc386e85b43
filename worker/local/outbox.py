"""Local outbox: the export.published topic as a SQLite table (`dev events` lists it).

Each event's application properties (subscription filters, the trace context) are kept in a
table of their own, beside the bodies: `dev events` shows the events as sent, bodies only,
and a home written before properties existed opens unchanged.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from worker.local.database import Database, rfc3339

SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id TEXT NOT NULL UNIQUE,
    body BLOB NOT NULL,
    sent_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS outbox_properties (
    message_id TEXT PRIMARY KEY,
    properties TEXT NOT NULL
)
"""


class LocalOutbox:
    """Publisher whose events land in the `outbox` table of `db_path`."""

    def __init__(self, db_path: Path, *, clock: Callable[[], float] = time.time) -> None:
        self._db = Database(db_path, SCHEMA)
        self._clock = clock

    async def publish(
        self, message_id: str, body: bytes, properties: Mapping[str, Any] | None = None
    ) -> None:
        """Record one event and its properties; a message id already sent is ignored
        (duplicate detection), properties included."""
        sent_at = rfc3339(self._clock())
        properties_json = json.dumps(dict(properties or {}), ensure_ascii=False)

        def insert(connection: sqlite3.Connection) -> None:
            cursor = connection.execute(
                "INSERT OR IGNORE INTO outbox (message_id, body, sent_at) VALUES (?, ?, ?)",
                (message_id, bytes(body), sent_at),
            )
            if cursor.rowcount:
                connection.execute(
                    "INSERT OR REPLACE INTO outbox_properties (message_id, properties)"
                    " VALUES (?, ?)",
                    (message_id, properties_json),
                )

        await self._db.write(insert)

    async def sent(self) -> list[dict[str, Any]]:
        """The events' JSON bodies, oldest first."""
        rows = await self._db.read(
            lambda c: c.execute("SELECT body FROM outbox ORDER BY seq").fetchall()
        )
        return [json.loads(row["body"]) for row in rows]

    async def sent_properties(self, message_id: str) -> dict[str, Any]:
        """The application properties the event with this message id was sent with ({}
        when it was sent without any, or not sent)."""
        row = await self._db.read(
            lambda c: c.execute(
                "SELECT properties FROM outbox_properties WHERE message_id = ?", (message_id,)
            ).fetchone()
        )
        loaded: dict[str, Any] = {} if row is None else json.loads(row["properties"])
        return loaded

    async def close(self) -> None:
        """Close the connection."""
        await self._db.close()
