"""Two worker processes on one local queue: each message completed once, sessions in order."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import sqlite3
from pathlib import Path
from typing import Any

from worker.local.queue import LocalQueue

SESSIONS = 20
MESSAGES = 200
PROCESSES = 2


def _consume(db_path: str, log_path: str, worker: int, start: Any, holding: Any) -> None:
    """A worker process: take sessions, receive, log, complete, until the queue is drained."""
    start.wait()  # a barrier: both processes start competing together
    asyncio.run(_consume_async(Path(db_path), Path(log_path), worker, holding))


async def _consume_async(db_path: Path, log_path: Path, worker: int, holding: Any) -> None:
    queue = LocalQueue(db_path, lock_duration=60.0)
    log = sqlite3.connect(log_path, timeout=30.0, isolation_level=None)
    first = True
    try:
        while True:
            session = await queue.accept_session(max_wait=0.2)
            if session is None:
                if await queue.is_drained():
                    return
                continue
            if first:
                # Both processes hold a session before either receives: they compete for
                # the rest. Without it, on a loaded machine one process could drain all
                # 200 messages before the other's first accept.
                holding.wait(timeout=60)
                first = False
            try:
                while (message := await session.receive(max_wait=0)) is not None:
                    body = json.loads(message.body)
                    # Logged before completing: a message completed twice shows up twice.
                    log.execute(
                        "INSERT INTO completions (worker, session_id, position) VALUES (?, ?, ?)",
                        (worker, message.session_id, body["position"]),
                    )
                    await session.complete(message)
            finally:
                await session.close()
    finally:
        log.close()
        await queue.close()


async def _fill(db_path: Path) -> None:
    queue = LocalQueue(db_path, lock_duration=60.0)
    for index in range(MESSAGES):
        session_id = f"conv-{index % SESSIONS:02d}"
        body = json.dumps({"position": index // SESSIONS}).encode()
        await queue.send(body, session_id)
    await queue.close()


def test_two_processes_complete_every_message_once_in_session_order(tmp_path: Path) -> None:
    db_path, log_path = tmp_path / "worker.db", tmp_path / "log.db"
    asyncio.run(_fill(db_path))
    log = sqlite3.connect(log_path, isolation_level=None)
    log.execute(
        "CREATE TABLE completions (id INTEGER PRIMARY KEY AUTOINCREMENT,"
        " worker INTEGER, session_id TEXT, position INTEGER)"
    )
    log.execute("PRAGMA journal_mode = WAL")

    context = multiprocessing.get_context("spawn")
    start, holding = context.Barrier(PROCESSES), context.Barrier(PROCESSES)
    workers = [
        context.Process(target=_consume, args=(str(db_path), str(log_path), n, start, holding))
        for n in range(PROCESSES)
    ]
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=120)
    for process in workers:
        if process.is_alive():
            process.kill()
    assert [process.exitcode for process in workers] == [0] * PROCESSES

    rows = log.execute(
        "SELECT worker, session_id, position FROM completions ORDER BY id"
    ).fetchall()
    log.close()
    assert len(rows) == MESSAGES
    done = {(session_id, position) for _, session_id, position in rows}
    expected = {(f"conv-{s:02d}", p) for s in range(SESSIONS) for p in range(MESSAGES // SESSIONS)}
    assert done == expected  # with the count above: each exactly once
    by_session: dict[str, list[int]] = {}
    for _, session_id, position in rows:
        by_session.setdefault(session_id, []).append(position)
    assert all(positions == sorted(positions) for positions in by_session.values())
    assert {worker for worker, _, _ in rows} == set(range(PROCESSES))  # they did compete
    assert asyncio.run(_drained(db_path))


async def _drained(db_path: Path) -> bool:
    queue = LocalQueue(db_path, lock_duration=60.0)
    try:
        return await queue.is_drained()
    finally:
        await queue.close()


def test_the_local_backend_keeps_every_port_under_its_home(tmp_path: Path) -> None:
    from worker.local.backend import open_local_backend
    from worker.ports import BlobInfo
    from worker.testing.records import a_turn_record

    home = tmp_path / "nested" / "home"

    async def main() -> None:
        backend = open_local_backend(home, lock_duration=5.0)
        try:
            await backend.queue.send(b"{}", "c1")
            await backend.store.put_conversation({"id": "c1", "user_id": "u1"})
            await backend.store.put_message({"id": "m1", "conversation_id": "c1", "seq": 1})
            await backend.ledger.put(a_turn_record("c1", "t1", seq=1))
            await backend.publisher.publish("exp_1", b'{"export_id": "exp_1"}')
            upload = await backend.blobs.upload(
                "exports/c1/t1/exp_1.csv", BlobInfo("text/csv", "x.csv", {})
            )
            await upload.write(b"a\r\n")
            await upload.commit()
            # Each port reads back through its own connection to the one file.
            assert not await backend.queue.is_drained()
            assert [d["id"] async for d in backend.store.history("c1", 1)] == ["m1"]
            assert [r.id for r in await backend.ledger.list_turns("c1")] == ["t1"]
            assert await backend.publisher.sent() == [{"export_id": "exp_1"}]
        finally:
            await backend.close()

    asyncio.run(main())
    assert (home / "blobs" / "exports/c1/t1/exp_1.csv").read_bytes() == b"a\r\n"
    database = sqlite3.connect(home / "worker.db")
    assert database.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {row[0] for row in database.execute("SELECT name FROM sqlite_master")}
    database.close()
    assert {"queue_messages", "queue_sessions", "conversations", "messages"} <= tables
    assert {"turns", "outbox"} <= tables
