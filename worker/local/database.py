"""The worker's SQLite file: one connection per adapter, WAL, and immediate write transactions.

Several worker processes share `HOME/worker.db`. WAL lets readers run beside the one
writer; every state change runs in `BEGIN IMMEDIATE`, so it takes the write lock before it
reads what it decides on (a deferred transaction that upgrades can fail at once with
SQLITE_BUSY instead of waiting). Calls run one at a time per connection.

A transaction runs on the event loop when it cannot wait there: the connection is free, and
with the busy timeout at zero SQLite answers SQLITE_BUSY at once instead of waiting for
another process's lock. A commit in WAL mode with `synchronous = NORMAL` writes to the log
without a sync. What could wait (a busy file, opening it, a checkpoint, which syncs) runs
in a worker thread, so the loop never waits on disk or on another process's lock; a thread
hand-off per call cost more than the work itself (see benchmarks/PROFILE.md). Each
transaction is the same either way, committed before the call returns.
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

from worker.logs import get_logger
from worker.ports import TransientError
from worker.ports.queue import utc_text

T = TypeVar("T")

BUSY_TIMEOUT_SECONDS = 10.0
# The log is copied back into the database file (a checkpoint, which syncs) by a worker
# thread after this many writes, never by a commit on the loop (see _open, _checkpoint).
CHECKPOINT_EVERY_WRITES = 64
# Switching a fresh file to WAL needs a moment alone with it; processes opening the file
# together retry instead of failing.
_WAL_ATTEMPTS = 100
_WAL_RETRY_SECONDS = 0.05


def rfc3339(timestamp: float) -> str:
    """A POSIX timestamp as an RFC 3339 UTC string (what `enqueued_at` and `sent_at` hold)."""
    return utc_text(datetime.fromtimestamp(timestamp, UTC))


class _Deferred:
    """The connection cannot run the work at once: it goes to a worker thread."""


_DEFERRED = _Deferred()


class Database:
    """One connection to the SQLite file, opened lazily with `schema` applied idempotently."""

    def __init__(self, path: Path, schema: str) -> None:
        self._path = Path(path)
        self._schema = schema
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._closed = False
        self._waits = True  # the connection's busy timeout is BUSY_TIMEOUT_SECONDS, not 0
        self._writes = 0  # since the last checkpoint
        self._checkpoint_lock = threading.Lock()
        self._checkpointer: sqlite3.Connection | None = None  # see _checkpoint

    async def read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work` in a read transaction (one consistent snapshot)."""
        result = self._run_now(work, "BEGIN")
        if isinstance(result, _Deferred):
            return await asyncio.to_thread(self._run, work, "BEGIN")
        return result

    async def write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work` atomically in a `BEGIN IMMEDIATE` transaction; rolled back if it raises."""
        result = self._run_now(work, "BEGIN IMMEDIATE")
        if isinstance(result, _Deferred):
            result = await asyncio.to_thread(self._run, work, "BEGIN IMMEDIATE")
        self._writes += 1
        if self._writes >= CHECKPOINT_EVERY_WRITES:
            self._writes = 0
            await asyncio.to_thread(self._checkpoint)
        return result

    async def close(self) -> None:
        """Close the connection; later calls fail."""
        await asyncio.to_thread(self._close)

    def _run_now(self, work: Callable[[sqlite3.Connection], T], begin: str) -> T | _Deferred:
        """Run `work` on the caller's thread if nothing has to wait; else `_DEFERRED`."""
        if self._connection is None or not self._lock.acquire(blocking=False):
            return _DEFERRED  # not open yet, or a worker thread is using it
        try:
            connection = self._connect()
            if self._waits:
                connection.execute("PRAGMA busy_timeout = 0")
                self._waits = False
            try:
                return _transaction(connection, work, begin)
            except sqlite3.OperationalError as exc:
                if _transient(exc) is None:
                    _raise_transient(exc)  # a full or failing disk
                    raise
                return _DEFERRED  # rolled back; the thread waits for the lock
        finally:
            self._lock.release()

    def _checkpoint(self) -> None:
        """Copy the log back into the database file, on a connection of its own.

        It syncs, so it takes milliseconds (2-25 here): on the working connection it held
        that connection's lock all the while, and every call meanwhile went to a worker
        thread to wait for it. In WAL mode writers go on beside it (`_copy_log`). The write
        that asked for it has committed: a checkpoint that fails leaves the log to the next
        one."""
        with self._checkpoint_lock:
            if self._closed:
                return
            try:
                if self._checkpointer is None:
                    self._checkpointer = sqlite3.connect(
                        self._path, isolation_level=None, check_same_thread=False
                    )
                    self._checkpointer.execute("PRAGMA synchronous = NORMAL")
                _copy_log(self._checkpointer)
            except sqlite3.Error as exc:
                get_logger().warning("sqlite_checkpoint_failed", error=type(exc).__name__)

    def _run(self, work: Callable[[sqlite3.Connection], T], begin: str) -> T:
        with self._lock:
            connection = self._connect()
            if not self._waits:
                connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
                self._waits = True
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
        with self._checkpoint_lock:
            if self._checkpointer is not None:
                self._checkpointer.close()
                self._checkpointer = None


def _copy_log(connection: sqlite3.Connection) -> None:
    """A checkpoint. PASSIVE: copies what no reader needs and never waits for a lock."""
    connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()


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
        # A commit would run the checkpoint, which syncs, on the event loop: Database does it
        # in a worker thread every CHECKPOINT_EVERY_WRITES writes instead.
        connection.execute("PRAGMA wal_autocheckpoint = 0")
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
    """Re-raise a lock wait that ran out, a full disk or a failing one as retryable (an
    operator can free or fix it; ports raise PortErrors, which the runtime retries and
    survives); return for any other fault."""
    transient = _transient(exc)
    if transient is None and getattr(exc, "sqlite_errorname", "").startswith(_DISK_FAULTS):
        transient = TransientError(f"SQLite {exc.sqlite_errorname}")
    if transient is not None:
        raise transient from exc


_DISK_FAULTS = ("SQLITE_FULL", "SQLITE_IOERR")


def _transient(exc: sqlite3.OperationalError) -> TransientError | None:
    """The retryable error for a lock wait that ran out, else None (a real fault)."""
    message = str(exc).lower()
    if "locked" in message or "busy" in message:
        return TransientError(f"SQLite busy: {exc}")
    return None
