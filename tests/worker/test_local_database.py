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
import structlog.testing

from worker.local import database
from worker.local.database import CHECKPOINT_EVERY_WRITES, Database
from worker.ports import TransientError

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
    checkpoints: list[tuple[int, int]] = []  # (writes so far, thread)
    sizes: list[int] = []  # the database file's size after each write
    writes = 0
    real_checkpoint = Database._checkpoint

    def spying_checkpoint(self: Database) -> None:
        checkpoints.append((writes, threading.get_ident()))
        real_checkpoint(self)

    monkeypatch.setattr(Database, "_checkpoint", spying_checkpoint)

    async def main() -> list[int]:
        nonlocal writes
        db = Database(path, SCHEMA)
        threads = []
        for n in range(2 * CHECKPOINT_EVERY_WRITES):
            threads.append((await db.write(_insert(n)))[1])
            writes += 1
            sizes.append(path.stat().st_size)
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
    # The first write opens the file (in a thread); the others run on the loop.
    assert [i for i, thread in enumerate(threads) if thread != loop_thread] == [0]
    # Every CHECKPOINT_EVERY_WRITES-th write is followed by a checkpoint, in a thread.
    assert [count for count, _ in checkpoints] == [
        CHECKPOINT_EVERY_WRITES - 1,
        2 * CHECKPOINT_EVERY_WRITES - 1,
    ]
    assert all(thread != loop_thread for _, thread in checkpoints)
    # Only a checkpoint writes the database file: it grows there and nowhere else.
    grew = [i for i in range(1, len(sizes)) if sizes[i] > sizes[i - 1]]
    assert grew and set(grew) <= {CHECKPOINT_EVERY_WRITES - 1, 2 * CHECKPOINT_EVERY_WRITES - 1}
    assert sizes[CHECKPOINT_EVERY_WRITES - 1] > sizes[CHECKPOINT_EVERY_WRITES - 2]


def test_calls_go_on_running_on_the_loop_while_a_checkpoint_syncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint syncs (milliseconds): on the working connection it held the connection's
    lock throughout, and every call meanwhile went to a thread to wait for it."""
    entered, gate = threading.Event(), threading.Event()
    real_copy = database._copy_log

    def held_copy(connection: sqlite3.Connection) -> None:  # the checkpoint, mid-way
        entered.set()
        assert gate.wait(10)
        real_copy(connection)

    monkeypatch.setattr(database, "_copy_log", held_copy)

    async def main() -> None:
        db = Database(tmp_path / "worker.db", SCHEMA)
        for n in range(CHECKPOINT_EVERY_WRITES - 1):
            await db.write(_insert(n))
        checkpointing = asyncio.ensure_future(db.write(_insert(-1)))  # the one that asks
        while not entered.is_set():
            await asyncio.sleep(0.001)
        loop_thread = threading.get_ident()
        others = [(await db.write(_insert(n)))[1] for n in range(5)]
        assert others == [loop_thread] * 5
        assert await db.read(_count) == CHECKPOINT_EVERY_WRITES + 5
        assert not checkpointing.done()  # its write committed; its caller waits for the copy
        gate.set()
        assert (await checkpointing)[0] == -1
        await db.close()

    asyncio.run(main())


def test_a_checkpoint_that_fails_does_not_fail_the_committed_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "worker.db"
    real_connect = sqlite3.connect

    def refusing_connect(*args: object, **kwargs: object) -> sqlite3.Connection:
        if threading.current_thread() is not threading.main_thread():
            raise sqlite3.OperationalError("unable to open database file")
        return real_connect(*args, **kwargs)  # type: ignore[arg-type]

    async def main() -> list[int]:
        db = Database(path, SCHEMA)
        await db.write(_insert(0))  # opens the file, in a thread, before the refusal
        monkeypatch.setattr(database.sqlite3, "connect", refusing_connect)
        done = [(await db.write(_insert(n)))[0] for n in range(1, CHECKPOINT_EVERY_WRITES)]
        count = await db.read(_count)
        await db.close()
        return [*done, count]

    with structlog.testing.capture_logs() as logs:
        *done, count = asyncio.run(main())
    assert done == list(range(1, CHECKPOINT_EVERY_WRITES))
    assert count == CHECKPOINT_EVERY_WRITES
    failed = [line for line in logs if line["event"] == "sqlite_checkpoint_failed"]
    assert [(line["log_level"], line["error"]) for line in failed] == [
        ("warning", "OperationalError")
    ]


def test_a_full_disk_is_a_retryable_port_error_and_the_database_goes_on_after_it(
    tmp_path: Path,
) -> None:
    # A raw OperationalError escaped the port: the runtime, which survives PortErrors, died
    # when an accept met it, and a turn that met it was dead-lettered as a bug.
    async def main() -> None:
        db = Database(tmp_path / "worker.db", SCHEMA)
        await db.write(_insert(0))
        await db.write(lambda c: c.execute("PRAGMA max_page_count = 1").fetchall())  # at its size

        def big(connection: sqlite3.Connection) -> None:
            connection.execute("INSERT INTO items (n) VALUES (?)", (b"x" * 100_000,))

        for _ in range(2):  # on the loop's connection, then again
            with pytest.raises(TransientError, match="SQLITE_FULL"):
                await db.write(big)
        await db.write(_insert(1))  # a row that fits the pages left
        assert await db.read(_count) == 2
        await db.close()

    asyncio.run(main())
