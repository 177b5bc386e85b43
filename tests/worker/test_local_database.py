"""The local SQLite file: transactions run on the event loop only when nothing has to wait.

A thread hand-off per call cost a headline turn more than its SQLite work (issue 10), so an
open, free connection runs each transaction on the loop; a file another connection has
locked, and the checkpoint that syncs the log, go to a worker thread, so the loop is never
held by another process or by the disk.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from worker.local import database
from worker.local.database import CHECKPOINT_EVERY_WRITES, Database

SCHEMA = "CREATE TABLE IF NOT EXISTS items (n INTEGER NOT NULL)"


def _insert(n: int) -> Callable[[sqlite3.Connection], tuple[int, int]]:
    """A write that records which thread ran it."""

    def work(connection: sqlite3.Connection) -> tuple[int, int]:
        connection.execute("INSERT INTO items (n) VALUES (?)", (n,))
        return n, threading.get_ident()

    return work


def _count(connection: sqlite3.Connection) -> int:
    return int(connection.execute("SELECT COUNT(*) FROM items").fetchone()[0])


def test_reads_and_writes_of_an_open_free_connection_run_on_the_loop(tmp_path: Path) -> None:
    async def main() -> None:
        db = Database(tmp_path / "worker.db", SCHEMA)
        loop_thread = threading.get_ident()
        _, opened_in = await db.write(_insert(0))  # opening the file may wait: a thread
        assert opened_in != loop_thread
        threads = {(await db.write(_insert(n)))[1] for n in range(1, 10)}
        assert threads == {loop_thread}
        assert await db.read(_count) == 10
        await db.close()

    asyncio.run(main())


def test_a_write_to_a_file_another_connection_locked_waits_in_a_thread(tmp_path: Path) -> None:
    path = tmp_path / "worker.db"

    async def main() -> None:
        db = Database(path, SCHEMA)
        await db.write(_insert(0))
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process's write lock
        pending = asyncio.ensure_future(db.write(_insert(1)))
        await asyncio.sleep(0)  # the loop runs on: the write did not fail at once
        assert not pending.done()
        other.execute("COMMIT")
        other.close()
        n, thread = await pending
        assert (n, thread != threading.get_ident()) == (1, True)
        assert await db.read(_count) == 2
        await db.close()

    asyncio.run(main())


def test_the_log_is_checkpointed_in_a_thread_not_by_a_commit_on_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "worker.db"

    async def main() -> list[int]:
        db = Database(path, SCHEMA)
        threads = [(await db.write(_insert(n)))[1] for n in range(2 * CHECKPOINT_EVERY_WRITES)]
        await db.close()
        return threads

    autocheckpoints: list[int] = []
    real_open = database._open

    def spying_open(target: Path, schema: str) -> sqlite3.Connection:
        connection = real_open(target, schema)
        autocheckpoints.append(connection.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
        return connection

    monkeypatch.setattr(database, "_open", spying_open)
    threads = asyncio.run(main())
    assert autocheckpoints == [0]  # no commit checkpoints on its own
    loop_thread = threading.get_ident()  # asyncio.run runs the loop on this thread
    off_loop = [i + 1 for i, thread in enumerate(threads) if thread != loop_thread]
    # The first write opens the file; every CHECKPOINT_EVERY_WRITES-th one checkpoints.
    assert off_loop == [1, CHECKPOINT_EVERY_WRITES, 2 * CHECKPOINT_EVERY_WRITES]
