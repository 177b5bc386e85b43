"""The worker's SQLite file: one connection per adapter, WAL, and immediate write transactions.

Several worker processes share `HOME/worker.db`. WAL lets readers run beside the one
writer; every state change runs in `BEGIN IMMEDIATE`, so it takes the write lock before it
reads what it decides on (a deferred transaction that upgrades can fail at once with
SQLITE_BUSY instead of waiting). The sqlite calls run in worker threads, one at a time per
connection, so the event loop never blocks on disk or on another process's lock.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from worker.ports import TransientError

T = TypeVar("T")

BUSY_TIMEOUT_SECONDS = 10.0
# Switching a fresh file to WAL needs a moment alone with it; processes opening the file
# together retry instead of failing.
_WAL_ATTEMPTS = 100
_WAL_RETRY_SECONDS = 0.05


def rfc3339(timestamp: float) -> str:
    """A POSIX timestamp as an RFC 3339 UTC string (what `enqueued_at` and `sent_at` hold)."""
    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")


class Database:
    """One connection to the SQLite file, opened lazily with `schema` applied idempotently."""

    def __init__(self, path: Path, schema: str) -> None:
        self._path = Path(path)
        self._schema = schema
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._closed = False

    async def read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work` in a read transaction (one consistent snapshot)."""
        return await asyncio.to_thread(self._run, work, "BEGIN")

    async def write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work` atomically in a `BEGIN IMMEDIATE` transaction; rolled back if it raises."""
        return await asyncio.to_thread(self._run, work, "BEGIN IMMEDIATE")

    async def close(self) -> None:
        """Close the connection; later calls fail."""
        await asyncio.to_thread(self._close)

    def _run(self, work: Callable[[sqlite3.Connection], T], begin: str) -> T:
        with self._lock:
            connection = self._connect()
            try:
                result = _transaction(connection, work, begin)
            except sqlite3.OperationalError as exc:
                _raise_transient(exc)
                raise
            return result

    def _connect(self) -> sqlite3.Connection:
        if self._closed:
            raise RuntimeError(f"database {self._path} is closed")
        if self._connection is None:
            self._connection = _open(self._path, self._schema)
        return self._connection

    def _close(self) -> None:
        with self._lock:
            self._closed = True
            if self._connection is not None:
                self._connection.close()
                self._connection = None


def _transaction(
    connection: sqlite3.Connection,
    work: Callable[[sqlite3.Connection], T],
    begin: str = "BEGIN IMMEDIATE",
) -> T:
    """Run `work` in one explicit transaction: committed whole, or rolled back."""
    connection.execute(begin)
    try:
        result = work(connection)
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    return result


def _open(path: Path, schema: str) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    # isolation_level=None: no implicit transactions, Database opens each one explicitly.
    connection = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
    )
    connection.row_factory = sqlite3.Row
    try:
        connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
        _enable_wal(connection)
        connection.execute("PRAGMA synchronous = NORMAL")
        connection.execute("PRAGMA foreign_keys = ON")
        _transaction(connection, lambda c: [c.execute(s) for s in _statements(schema)])
    except sqlite3.OperationalError as exc:
        connection.close()
        _raise_transient(exc)
        raise
    except BaseException:
        connection.close()
        raise
    return connection


def _enable_wal(connection: sqlite3.Connection) -> None:
    for attempt in range(_WAL_ATTEMPTS):
        try:
            mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.OperationalError as exc:
            if _transient(exc) is None or attempt == _WAL_ATTEMPTS - 1:
                raise
            time.sleep(_WAL_RETRY_SECONDS)  # runs in a worker thread, never on the loop
            continue
        if str(mode).lower() != "wal":
            raise RuntimeError(f"SQLite refused WAL mode (got {mode!r})")
        return


def _statements(schema: str) -> list[str]:
    return [statement.strip() for statement in schema.split(";") if statement.strip()]


def _raise_transient(exc: sqlite3.OperationalError) -> None:
    """Re-raise a lock wait that ran out as retryable; return for any other fault."""
    transient = _transient(exc)
    if transient is not None:
        raise transient from exc


def _transient(exc: sqlite3.OperationalError) -> TransientError | None:
    """The retryable error for a lock wait that ran out, else None (a real fault)."""
    message = str(exc).lower()
    if "locked" in message or "busy" in message:
        return TransientError(f"SQLite busy: {exc}")
    return None
