"""Local queue: Service Bus session semantics on two SQLite tables, safe across processes.

The rules, pinned by `tests/contracts/test_queue_contract.py`:
- A session is deliverable when its head (its oldest active message) is visible and no
  live holder locks it; `accept_session` takes the session with the oldest such head.
- Delivery inside a session is FIFO: only the head is delivered, and a head that is still
  locked or scheduled for later (abandoned with a delay) holds back everything behind it.
- Message locks live through the session that took them: receiving and settling need the
  session lock alive, and settling also needs the message's own lock (a fresh token per
  delivery, so a stale copy of a redelivered message cannot settle it). Session locks
  expire after `lock_duration` unless renewed, so a killed worker's sessions come back.
- When a session changes hands (closed, or its lock expired) the old message locks are
  cleared: `close` releases them, and a new holder's `accept_session` drops any left by a
  crashed one. As on Service Bus, a delivery released by `close` is not counted in
  `delivery_count`; one whose lock expired is (docs/contract/delivery.md).
- Lock expiry and scheduling read the injected clock; waiting up to `max_wait` uses real
  time (so tests with a fake clock pass `max_wait=0` and never sleep).
- A wait looks again every `POLL_SECONDS` with a read, which other processes' writes do not
  wait on, and takes the write lock only when that read saw something to take: an idle
  worker's accepts would otherwise hold the file's one write lock twenty times a second
  each.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from worker.local.database import Database, rfc3339
from worker.ports import (
    MAX_DELIVERY_COUNT,
    MAX_DELIVERY_REASON,
    DeadLetteredMessage,
    LockLost,
    NotFound,
    QueueMessage,
    QueueStats,
    checked_message_id,
)

Clock = Callable[[], float]
T = TypeVar("T")

# How often an empty accept/receive looks again while it may still wait.
POLL_SECONDS = 0.05

SCHEMA = """
CREATE TABLE IF NOT EXISTS queue_messages (
    sequence_number INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    body BLOB NOT NULL,
    properties TEXT NOT NULL DEFAULT '{}',
    enqueued_at TEXT NOT NULL,
    visible_at REAL NOT NULL,
    delivery_count INTEGER NOT NULL DEFAULT 0,
    lock_token TEXT,
    locked_until REAL,
    state TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'dead')),
    dead_letter_reason TEXT,
    dead_letter_description TEXT,
    dead_lettered_at TEXT
);
CREATE INDEX IF NOT EXISTS queue_messages_by_session
    ON queue_messages (state, session_id, sequence_number);
CREATE INDEX IF NOT EXISTS queue_messages_active ON queue_messages (state, sequence_number);
CREATE TABLE IF NOT EXISTS queue_sessions (
    session_id TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    locked_until REAL NOT NULL
)
"""

_MESSAGE_COLUMNS = (
    "sequence_number, message_id, session_id, body, properties, enqueued_at, delivery_count"
)
_DEAD_COLUMNS = f"{_MESSAGE_COLUMNS}, dead_letter_reason, dead_letter_description"

# The oldest visible head among sessions that no live holder locks: the active messages in
# sequence order (queue_messages_active), the first that is its session's head (nothing
# active before it in its session), visible and unlocked. It stops at the first such message
# instead of grouping every active message by session first: an accept cost a scan of the
# whole backlog (~1 ms per 1,000 queued messages), ~10 us now however long the backlog.
_NEXT_SESSION = """
SELECT head.session_id
FROM queue_messages AS head
WHERE head.state = 'active'
  AND head.visible_at <= :now
  AND NOT EXISTS (SELECT 1 FROM queue_messages AS earlier
                  WHERE earlier.state = 'active' AND earlier.session_id = head.session_id
                    AND earlier.sequence_number < head.sequence_number)
  AND NOT EXISTS (SELECT 1 FROM queue_sessions AS s
                  WHERE s.session_id = head.session_id AND s.locked_until > :now)
ORDER BY head.sequence_number
LIMIT 1
"""


class LocalQueue:
    """The turn.completed queue with sessions and a dead-letter queue, in `db_path`."""

    def __init__(self, db_path: Path, *, lock_duration: float, clock: Clock = time.time) -> None:
        if lock_duration <= 0:
            raise ValueError("lock_duration must be positive")
        self._db = Database(db_path, SCHEMA)
        self._lock_duration = lock_duration
        self._clock = clock

    async def send(
        self,
        body: bytes,
        session_id: str,
        *,
        message_id: str | None = None,
        properties: Mapping[str, Any] | None = None,
    ) -> None:
        """Enqueue one message on a session (message id defaults to a fresh uuid4 hex);
        InvalidMessageId past MAX_MESSAGE_ID characters, as on Service Bus."""
        message_id = checked_message_id(message_id) if message_id else uuid.uuid4().hex
        values = (message_id, session_id, bytes(body), dict(properties or {}))
        await self._db.write(lambda c: _insert(c, *values, now=self._clock()))

    async def accept_session(self, max_wait: float) -> LocalSession | None:
        """Lock the session with the oldest deliverable head; None when none came in max_wait."""
        taken = await _poll(
            lambda: self._db.write(self._take_session),
            lambda: self._db.read(self._has_session),
            max_wait,
        )
        if taken is None:
            return None
        session_id, holder = taken
        return LocalSession(self, session_id, holder)

    async def is_drained(self) -> bool:
        """True when no message is queued, scheduled or locked (dead letters do not count)."""

        def any_active(connection: sqlite3.Connection) -> bool:
            row = connection.execute(
                "SELECT EXISTS (SELECT 1 FROM queue_messages WHERE state = 'active')"
            ).fetchone()
            return bool(row[0])

        return not await self._db.read(any_active)

    async def stats(self) -> QueueStats:
        """Depths, dead letters by reason and the oldest active message, in one read."""

        def count(connection: sqlite3.Connection) -> QueueStats:
            active, oldest = connection.execute(
                "SELECT COUNT(*), (SELECT enqueued_at FROM queue_messages WHERE state = 'active'"
                " ORDER BY sequence_number LIMIT 1) FROM queue_messages WHERE state = 'active'"
            ).fetchone()
            by_reason = {
                str(reason or ""): int(n)
                for reason, n in connection.execute(
                    "SELECT dead_letter_reason, COUNT(*) FROM queue_messages"
                    " WHERE state = 'dead' GROUP BY dead_letter_reason ORDER BY 1"
                )
            }
            return QueueStats(
                queue_depth=int(active),
                dead_letter_depth=sum(by_reason.values()),
                dead_letters_by_reason=by_reason,
                oldest_enqueued_at=oldest,
            )

        return await self._db.read(count)

    async def dead_letters(self, reason: str | None = None) -> list[DeadLetteredMessage]:
        """The dead-letter queue by sequence number, optionally of one reason."""

        def select(connection: sqlite3.Connection) -> list[DeadLetteredMessage]:
            query = f"SELECT {_DEAD_COLUMNS} FROM queue_messages WHERE state = 'dead'"
            params: tuple[str, ...] = ()
            if reason is not None:
                query += " AND dead_letter_reason = ?"
                params = (reason,)
            rows = connection.execute(query + " ORDER BY sequence_number", params)
            return [_dead_letter(row) for row in rows]

        return await self._db.read(select)

    async def dead_letter_entry(self, sequence_number: int) -> DeadLetteredMessage:
        """One dead-lettered message; NotFound when it is not there."""

        def select(connection: sqlite3.Connection) -> DeadLetteredMessage:
            return _dead_letter(_dead_row(connection, sequence_number))

        return await self._db.read(select)

    async def replay(self, sequence_number: int) -> None:
        """Re-send a dead letter on its session (same body and message id, `replay_of`,
        `replay_count`) and delete the dead-lettered copy, in one transaction."""

        def move(connection: sqlite3.Connection) -> None:
            row = _dead_row(connection, sequence_number)
            properties = json.loads(row["properties"])
            properties["replay_of"] = sequence_number
            properties["replay_count"] = _int(properties.get("replay_count")) + 1
            _insert(
                connection,
                row["message_id"],
                row["session_id"],
                row["body"],
                properties,
                now=self._clock(),
            )
            connection.execute(
                "DELETE FROM queue_messages WHERE sequence_number = ?", (sequence_number,)
            )

        await self._db.write(move)

    async def purge(self, sequence_number: int) -> None:
        """Delete one dead-lettered message for good; NotFound when it is not there."""

        def delete(connection: sqlite3.Connection) -> None:
            cursor = connection.execute(
                "DELETE FROM queue_messages WHERE sequence_number = ? AND state = 'dead'",
                (sequence_number,),
            )
            if cursor.rowcount == 0:
                raise NotFound(f"no dead letter with sequence number {sequence_number}")

        await self._db.write(delete)

    async def close(self) -> None:
        """Close the connection (sessions still open lose their locks by expiry)."""
        await self._db.close()

    # ---- used by LocalSession --------------------------------------------------------
    def _has_session(self, connection: sqlite3.Connection) -> bool:
        """Whether `_take_session` would take a session now (a lock that expired is free)."""
        return connection.execute(_NEXT_SESSION, {"now": self._clock()}).fetchone() is not None

    def _take_session(self, connection: sqlite3.Connection) -> tuple[str, str] | None:
        now = self._clock()
        # Expired holders (crashed or never closed) leave rows behind: drop them here.
        connection.execute("DELETE FROM queue_sessions WHERE locked_until <= ?", (now,))
        row = connection.execute(_NEXT_SESSION, {"now": now}).fetchone()
        if row is None:
            return None
        session_id, holder = row["session_id"], uuid.uuid4().hex
        connection.execute(
            "INSERT INTO queue_sessions (session_id, holder, locked_until) VALUES (?, ?, ?)",
            (session_id, holder, now + self._lock_duration),
        )
        # Locks left by a holder whose session lock is gone died with it.
        connection.execute(
            "UPDATE queue_messages SET lock_token = NULL, locked_until = NULL"
            " WHERE state = 'active' AND session_id = ? AND lock_token IS NOT NULL",
            (session_id,),
        )
        return session_id, holder


class LocalSession:
    """One accepted session of a `LocalQueue`: FIFO receive and settlement under its lock."""

    def __init__(self, queue: LocalQueue, session_id: str, holder: str) -> None:
        self.session_id = session_id
        self._queue = queue
        self._db = queue._db
        self._clock = queue._clock
        self._holder = holder
        # (sequence number, delivery count) -> lock token: each delivery has its own lock,
        # so a stale copy of a redelivered message cannot settle the newer delivery.
        self._held: dict[tuple[int, int], str] = {}

    async def receive(self, max_wait: float) -> QueueMessage | None:
        """The session's head message, peek-locked; None when none came in max_wait.

        Raises LockLost when the session lock is gone.
        """
        taken = await _poll(
            lambda: self._db.write(self._take_head),
            lambda: self._db.read(self._has_head),
            max_wait,
        )
        if taken is None:
            return None
        message, token = taken
        for stale in [key for key in self._held if key[0] == message.sequence_number]:
            del self._held[stale]  # an earlier delivery whose lock expired
        self._held[_delivery(message)] = token
        return message

    async def complete(self, message: QueueMessage) -> None:
        """Delete the message; LockLost when its lock or the session's is gone."""

        def delete(connection: sqlite3.Connection, now: float) -> None:
            connection.execute(
                "DELETE FROM queue_messages WHERE sequence_number = ?",
                (message.sequence_number,),
            )

        await self._settle(message, delete)

    async def abandon(self, message: QueueMessage, delay: float = 0.0) -> None:
        """Unlock the message and make it visible again after `delay` seconds."""

        def release(connection: sqlite3.Connection, now: float) -> None:
            connection.execute(
                "UPDATE queue_messages SET lock_token = NULL, locked_until = NULL,"
                " visible_at = ? WHERE sequence_number = ?",
                (now + max(delay, 0.0), message.sequence_number),
            )

        await self._settle(message, release)

    async def dead_letter(self, message: QueueMessage, reason: str, description: str) -> None:
        """Move the message to the dead-letter queue, keeping its delivery count."""

        def bury(connection: sqlite3.Connection, now: float) -> None:
            connection.execute(
                "UPDATE queue_messages SET state = 'dead', lock_token = NULL,"
                " locked_until = NULL, dead_letter_reason = ?, dead_letter_description = ?,"
                " dead_lettered_at = ? WHERE sequence_number = ?",
                (reason, description, rfc3339(now), message.sequence_number),
            )

        await self._settle(message, bury)

    async def renew_lock(self) -> None:
        """Extend the session lock and the live locks of messages held through it."""
        tokens = list(self._held.values())

        def renew(connection: sqlite3.Connection) -> None:
            now = self._check_session(connection)
            until = now + self._queue._lock_duration
            connection.execute(
                "UPDATE queue_sessions SET locked_until = ? WHERE session_id = ? AND holder = ?",
                (until, self.session_id, self._holder),
            )
            if tokens:
                marks = ", ".join("?" * len(tokens))
                connection.execute(
                    "UPDATE queue_messages SET locked_until = ? WHERE state = 'active'"
                    f" AND locked_until > ? AND lock_token IN ({marks})",
                    (until, now, *tokens),
                )

        await self._db.write(renew)

    async def close(self) -> None:
        """Release the session lock and the locks of messages it still holds.

        Released messages are deliverable at once and their delivery is not counted
        (Service Bus counts an expired lock or an abandon, not a closed session).
        A session already taken over by another holder is left alone.
        """
        self._held.clear()

        def release(connection: sqlite3.Connection) -> None:
            cursor = connection.execute(
                "DELETE FROM queue_sessions WHERE session_id = ? AND holder = ?",
                (self.session_id, self._holder),
            )
            if cursor.rowcount:
                # Whoever holds the session holds every lock in it: these are ours. A lock
                # still alive is released uncounted; one that lapsed keeps its count.
                connection.execute(
                    "UPDATE queue_messages SET delivery_count = delivery_count - 1"
                    " WHERE state = 'active' AND session_id = ? AND lock_token IS NOT NULL"
                    " AND locked_until > ?",
                    (self.session_id, self._clock()),
                )
                connection.execute(
                    "UPDATE queue_messages SET lock_token = NULL, locked_until = NULL"
                    " WHERE state = 'active' AND session_id = ? AND lock_token IS NOT NULL",
                    (self.session_id,),
                )

        await self._db.write(release)

    def _check_session(self, connection: sqlite3.Connection) -> float:
        """The clock's now, once the session lock is known to be ours and alive."""
        now = self._clock()
        row = connection.execute(
            "SELECT 1 FROM queue_sessions WHERE session_id = ? AND holder = ? AND locked_until > ?",
            (self.session_id, self._holder, now),
        ).fetchone()
        if row is None:
            raise LockLost(f"session lock lost for session {self.session_id!r}")
        return now

    def _head(self, connection: sqlite3.Connection, now: float) -> sqlite3.Row | None:
        """The session's head when it can be delivered now: visible and not locked."""
        row: sqlite3.Row | None = connection.execute(
            f"SELECT {_MESSAGE_COLUMNS}, visible_at, lock_token, locked_until"
            " FROM queue_messages WHERE state = 'active' AND session_id = ?"
            " ORDER BY sequence_number LIMIT 1",
            (self.session_id,),
        ).fetchone()
        if row is None or row["visible_at"] > now:
            return None
        if row["lock_token"] is not None and row["locked_until"] > now:
            return None
        return row

    def _has_head(self, connection: sqlite3.Connection) -> bool:
        """Whether `_take_head` has a head to take or dead-letter; LockLost as it would."""
        return self._head(connection, self._check_session(connection)) is not None

    def _take_head(self, connection: sqlite3.Connection) -> tuple[QueueMessage, str] | None:
        now = self._check_session(connection)
        while True:
            row = self._head(connection, now)
            if row is None:
                return None
            if row["delivery_count"] < MAX_DELIVERY_COUNT:
                break
            # Every earlier delivery ended without a verdict: the queue dead-letters it,
            # as Service Bus does, and the session goes on with its next message.
            connection.execute(
                "UPDATE queue_messages SET state = 'dead', lock_token = NULL,"
                " locked_until = NULL, dead_letter_reason = ?, dead_letter_description = ?,"
                " dead_lettered_at = ? WHERE sequence_number = ?",
                (
                    MAX_DELIVERY_REASON,
                    f"delivered {row['delivery_count']} times, never completed or dead-lettered",
                    rfc3339(now),
                    row["sequence_number"],
                ),
            )
        token = uuid.uuid4().hex
        connection.execute(
            "UPDATE queue_messages SET lock_token = ?, locked_until = ?,"
            " delivery_count = delivery_count + 1 WHERE sequence_number = ?",
            (token, now + self._queue._lock_duration, row["sequence_number"]),
        )
        return _message(row, delivery_count=row["delivery_count"] + 1), token

    async def _settle(
        self,
        message: QueueMessage,
        apply: Callable[[sqlite3.Connection, float], None],
    ) -> None:
        token = self._held.get(_delivery(message))
        if token is None:
            raise LockLost(f"message {message.sequence_number} is not held by this session")

        def settle(connection: sqlite3.Connection) -> None:
            now = self._check_session(connection)
            row = connection.execute(
                "SELECT 1 FROM queue_messages WHERE sequence_number = ? AND state = 'active'"
                " AND lock_token = ? AND locked_until > ?",
                (message.sequence_number, token, now),
            ).fetchone()
            if row is None:
                raise LockLost(f"message lock lost for message {message.sequence_number}")
            apply(connection, now)

        try:
            await self._db.write(settle)
        except LockLost:
            self._held.pop(_delivery(message), None)
            raise
        self._held.pop(_delivery(message), None)


async def _poll(
    attempt: Callable[[], Awaitable[T | None]],
    ready: Callable[[], Awaitable[bool]],
    max_wait: float,
) -> T | None:
    """Call `attempt` until it returns something or `max_wait` real seconds have passed;
    after the first call, only when `ready` (a read) says it would find something."""
    deadline = time.monotonic() + max(max_wait, 0.0)
    result = await attempt()  # a queue with work answers in one transaction, not two
    while result is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        await asyncio.sleep(min(POLL_SECONDS, remaining))
        if await ready():
            result = await attempt()
    return result


def _insert(
    connection: sqlite3.Connection,
    message_id: str,
    session_id: str,
    body: bytes,
    properties: dict[str, Any],
    *,
    now: float,
) -> None:
    connection.execute(
        "INSERT INTO queue_messages (message_id, session_id, body, properties, enqueued_at,"
        " visible_at) VALUES (?, ?, ?, ?, ?, ?)",
        (message_id, session_id, body, json.dumps(properties), rfc3339(now), now),
    )


def _delivery(message: QueueMessage) -> tuple[int, int]:
    return message.sequence_number, message.delivery_count


def _dead_row(connection: sqlite3.Connection, sequence_number: int) -> sqlite3.Row:
    row: sqlite3.Row | None = connection.execute(
        f"SELECT {_DEAD_COLUMNS} FROM queue_messages WHERE sequence_number = ? AND state = 'dead'",
        (sequence_number,),
    ).fetchone()
    if row is None:
        raise NotFound(f"no dead letter with sequence number {sequence_number}")
    return row


def _message(row: sqlite3.Row, *, delivery_count: int) -> QueueMessage:
    return QueueMessage(
        sequence_number=row["sequence_number"],
        message_id=row["message_id"],
        session_id=row["session_id"],
        body=bytes(row["body"]),
        delivery_count=delivery_count,
        enqueued_at=row["enqueued_at"],
        properties=json.loads(row["properties"]),
    )


def _dead_letter(row: sqlite3.Row) -> DeadLetteredMessage:
    return DeadLetteredMessage(
        sequence_number=row["sequence_number"],
        message_id=row["message_id"],
        session_id=row["session_id"],
        reason=row["dead_letter_reason"] or "",
        description=row["dead_letter_description"] or "",
        enqueued_at=row["enqueued_at"],
        delivery_count=row["delivery_count"],
        body=bytes(row["body"]),
        properties=json.loads(row["properties"]),
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
