"""Local conversation store and ledger: JSON documents in SQLite, keyed like their Cosmos
containers (conversations by id; messages and turn records by conversation, then id)."""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from worker.local.database import Database
from worker.ports import NotFound

if TYPE_CHECKING:  # the record's struct is imported by the turns that build one
    from schemas.records import TurnRecord

# Rows per history page: a caller that stops after the first few messages reads one page.
HISTORY_PAGE_SIZE = 50

STORE_SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY,
    doc TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    conversation_id TEXT NOT NULL,
    id TEXT NOT NULL,
    seq INTEGER,
    doc TEXT NOT NULL,
    PRIMARY KEY (conversation_id, id)
);
CREATE INDEX IF NOT EXISTS messages_by_seq ON messages (conversation_id, seq, id)
"""

LEDGER_SCHEMA = """
CREATE TABLE IF NOT EXISTS turns (
    conversation_id TEXT NOT NULL,
    id TEXT NOT NULL,
    seq INTEGER,
    export_id TEXT,
    has_export INTEGER NOT NULL DEFAULT 0,
    decision TEXT,
    doc TEXT NOT NULL,
    PRIMARY KEY (conversation_id, id)
);
CREATE INDEX IF NOT EXISTS turns_by_export_id ON turns (export_id)
"""

# NULL seq last, then insertion order (an upsert keeps the row's rowid).
_TURN_ORDER = "seq IS NULL, seq, rowid"


class LocalConversationStore:
    """Conversations and messages in `db_path`."""

    def __init__(self, db_path: Path) -> None:
        self._db = Database(db_path, STORE_SCHEMA)

    async def get_conversation(self, conversation_id: str) -> dict[str, Any]:
        """Point-read a conversation; NotFound when missing."""
        row = await self._db.read(
            lambda c: c.execute(
                "SELECT doc FROM conversations WHERE id = ?", (conversation_id,)
            ).fetchone()
        )
        if row is None:
            raise NotFound(f"conversation {conversation_id!r} not found")
        return _load(row["doc"])

    async def get_message(self, conversation_id: str, message_id: str) -> dict[str, Any]:
        """Point-read a message of the conversation; NotFound when missing."""
        row = await self._db.read(
            lambda c: c.execute(
                "SELECT doc FROM messages WHERE conversation_id = ? AND id = ?",
                (conversation_id, message_id),
            ).fetchone()
        )
        if row is None:
            raise NotFound(f"message {message_id!r} not found in {conversation_id!r}")
        return _load(row["doc"])

    async def history(self, conversation_id: str, max_seq: int) -> AsyncIterator[dict[str, Any]]:
        """Messages with seq <= max_seq, newest first, read a page at a time (keyset on seq).

        Every stored document is yielded, soft-deleted ones included: the handler filters.
        Messages without a numeric seq are never part of a history; as on Cosmos DB, whose
        query compares numbers only, a fractional one is (and the handler refuses it).
        """
        after: tuple[int | float, str] | None = None
        while True:

            def read_page(
                c: sqlite3.Connection, after: tuple[int | float, str] | None = after
            ) -> list[sqlite3.Row]:
                return _history_page(c, conversation_id, max_seq, after)

            page = await self._db.read(read_page)
            for row in page:
                yield _load(row["doc"])
            if len(page) < HISTORY_PAGE_SIZE:
                return
            after = (page[-1]["seq"], page[-1]["id"])

    async def put_conversation(self, document: Mapping[str, Any]) -> None:
        """Insert or replace a conversation."""
        conversation_id = _required(document, "id")
        doc = json.dumps(dict(document))
        await self._db.write(
            lambda c: c.execute(
                "INSERT INTO conversations (id, doc) VALUES (?, ?)"
                " ON CONFLICT (id) DO UPDATE SET doc = excluded.doc",
                (conversation_id, doc),
            )
        )

    async def put_message(self, document: Mapping[str, Any]) -> None:
        """Insert or replace a message."""
        key = (_required(document, "conversation_id"), _required(document, "id"))
        seq, doc = _number_or_none(document.get("seq")), json.dumps(dict(document))
        await self._db.write(
            lambda c: c.execute(
                "INSERT INTO messages (conversation_id, id, seq, doc) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (conversation_id, id) DO UPDATE"
                " SET seq = excluded.seq, doc = excluded.doc",
                (*key, seq, doc),
            )
        )

    async def close(self) -> None:
        """Close the connection."""
        await self._db.close()


class LocalLedger:
    """Turn records in `db_path`: one per (conversation_id, turn id)."""

    def __init__(self, db_path: Path) -> None:
        self._db = Database(db_path, LEDGER_SCHEMA)

    async def get(self, conversation_id: str, turn_id: str) -> TurnRecord | None:
        """The turn record, or None."""
        row = await self._db.read(
            lambda c: c.execute(
                "SELECT doc FROM turns WHERE conversation_id = ? AND id = ?",
                (conversation_id, turn_id),
            ).fetchone()
        )
        return None if row is None else _record(row["doc"])

    async def create(self, record: TurnRecord) -> TurnRecord:
        """Insert the turn's first record unless one is stored; return the stored record.

        The insert and the read of what was there are one transaction: one write, as a
        plain insert is, whoever wins."""

        def create(c: sqlite3.Connection) -> str | None:
            inserted = c.execute(
                f"{_INSERT_TURN} ON CONFLICT (conversation_id, id) DO NOTHING", _row(record)
            )
            if inserted.rowcount:
                return None
            row = c.execute(
                "SELECT doc FROM turns WHERE conversation_id = ? AND id = ?",
                (record.conversation_id, record.id),
            ).fetchone()
            doc: str = row["doc"]
            return doc

        stored = await self._db.write(create)
        return record if stored is None else _record(stored)

    async def put(self, record: TurnRecord) -> None:
        """Insert or replace the turn record; a stored record whose event went out is kept
        over one whose event did not (the condition is part of the one statement)."""
        await self._db.write(
            lambda c: c.execute(
                f"{_INSERT_TURN} ON CONFLICT (conversation_id, id) DO UPDATE"
                " SET seq = excluded.seq, export_id = excluded.export_id,"
                " has_export = excluded.has_export, decision = excluded.decision,"
                " doc = excluded.doc"
                " WHERE json_extract(turns.doc, '$.event_sent') IS NOT 1"
                " OR json_extract(excluded.doc, '$.event_sent') IS 1",
                _row(record),
            )
        )

    async def list_turns(self, conversation_id: str) -> list[TurnRecord]:
        """The conversation's turn records by seq (records without seq last, as inserted)."""
        rows = await self._db.read(
            lambda c: c.execute(
                f"SELECT doc FROM turns WHERE conversation_id = ? ORDER BY {_TURN_ORDER}",
                (conversation_id,),
            ).fetchall()
        )
        return [_record(row["doc"]) for row in rows]

    async def list_exports(self, conversation_id: str | None = None) -> list[TurnRecord]:
        """Records whose `export` is set, by conversation then seq; optionally of one."""
        query = "SELECT doc FROM turns WHERE has_export = 1"
        params: tuple[str, ...] = ()
        if conversation_id is not None:
            query, params = query + " AND conversation_id = ?", (conversation_id,)
        rows = await self._db.read(
            lambda c: c.execute(
                f"{query} ORDER BY conversation_id, {_TURN_ORDER}", params
            ).fetchall()
        )
        return [_record(row["doc"]) for row in rows]

    async def find_export(self, export_id: str) -> TurnRecord | None:
        """The turn record holding this export id, or None."""
        row = await self._db.read(
            lambda c: c.execute(
                "SELECT doc FROM turns WHERE export_id = ? ORDER BY rowid LIMIT 1", (export_id,)
            ).fetchone()
        )
        return None if row is None else _record(row["doc"])

    async def latest_export(self) -> TurnRecord | None:
        """The published record with the greatest `processed_at` (the worker writes every
        one in the same fixed-width UTC form, so text order is time order), or None."""
        row = await self._db.read(
            lambda c: c.execute(
                "SELECT doc FROM turns WHERE has_export = 1"
                " ORDER BY json_extract(doc, '$.processed_at') DESC, rowid DESC LIMIT 1"
            ).fetchone()
        )
        return None if row is None else _record(row["doc"])

    async def close(self) -> None:
        """Close the connection."""
        await self._db.close()


_INSERT_TURN = (
    "INSERT INTO turns (conversation_id, id, seq, export_id, has_export, decision, doc)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)


def _row(record: TurnRecord) -> tuple[Any, ...]:
    """The values of `_INSERT_TURN` for a record."""
    export = record.export
    return (
        record.conversation_id,
        record.id,
        record.seq,
        None if export is None else export.export_id,
        int(export is not None),
        record.decision,
        json.dumps(record.model_dump()),
    )


def _history_page(
    connection: sqlite3.Connection,
    conversation_id: str,
    max_seq: int,
    after: tuple[int | float, str] | None,
) -> list[sqlite3.Row]:
    query = "SELECT seq, id, doc FROM messages WHERE conversation_id = ? AND seq <= ?"
    params: tuple[Any, ...] = (conversation_id, max_seq)
    if after is not None:
        # Keyset on (seq, id): equal seqs (never in valid data) still page without loss.
        query += " AND (seq < ? OR (seq = ? AND id < ?))"
        params += (after[0], after[0], after[1])
    query += " ORDER BY seq DESC, id DESC LIMIT ?"
    return connection.execute(query, (*params, HISTORY_PAGE_SIZE)).fetchall()


def _required(document: Mapping[str, Any], key: str) -> str:
    value = document.get(key)
    if not isinstance(value, str) or not value:
        raise ValueError(f"document needs a non-empty string {key!r}")
    return value


def _number_or_none(value: Any) -> int | float | None:
    """A JSON number (never a bool, NaN or infinity) as SQLite can compare it, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if isinstance(value, int) or math.isfinite(value) else None


def _load(doc: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(doc)
    return loaded


def _record(doc: str) -> TurnRecord:
    from schemas.records import TurnRecord  # off the start path (issue 10's start-up goal)

    return TurnRecord.model_validate_json(doc)
