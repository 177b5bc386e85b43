"""The local queue's session accept: which session it takes, that its cost does not grow
with the backlog (the query stops at the first eligible head), that the lock it takes
lasts some time, and that waiting for a session or a message looks with reads."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.local.queue import _NEXT_SESSION, SCHEMA, LocalQueue, LocalSession
from worker.ports import LockLost, QueueMessage

NOW = 1_000.0
T = TypeVar("T")


@contextmanager
def queue_tables() -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(":memory:")
    try:
        connection.executescript(SCHEMA)
        yield connection
    finally:
        connection.close()


def enqueue(connection: sqlite3.Connection, session: str, *, visible_at: float = 0.0,
            state: str = "active") -> None:  # fmt: skip
    connection.execute(
        "INSERT INTO queue_messages (message_id, session_id, body, enqueued_at, visible_at,"
        " state) VALUES ('m', ?, x'00', 't', ?, ?)",
        (session, visible_at, state),
    )


def lock(connection: sqlite3.Connection, session: str, until: float) -> None:
    connection.execute("INSERT INTO queue_sessions VALUES (?, 'holder', ?)", (session, until))


def next_session(connection: sqlite3.Connection) -> str | None:
    row = connection.execute(_NEXT_SESSION, {"now": NOW}).fetchone()
    return None if row is None else str(row[0])


MESSAGES = st.lists(
    st.tuples(
        st.sampled_from("abcdef"),  # session
        st.sampled_from([0.0, NOW, NOW + 1]),  # visible_at: now, at now, later
        st.sampled_from(["active", "active", "active", "dead"]),
    ),
    max_size=30,
)
LOCKS = st.dictionaries(st.sampled_from("abcdef"), st.sampled_from([NOW - 1, NOW, NOW + 60]))


@settings(max_examples=300, deadline=None)
@given(messages=MESSAGES, locks=LOCKS)
def test_accept_takes_the_oldest_visible_head_of_a_session_no_live_holder_locks(
    messages: list[tuple[str, float, str]], locks: dict[str, float]
) -> None:
    with queue_tables() as connection:
        for session, visible_at, state in messages:
            enqueue(connection, session, visible_at=visible_at, state=state)
        for session, until in locks.items():
            lock(connection, session, until)
        heads: dict[str, tuple[int, float]] = {}  # session -> (its first active, visible_at)
        for sequence, (session, visible_at, state) in enumerate(messages):
            if state == "active" and session not in heads:
                heads[session] = (sequence, visible_at)
        eligible = [
            (sequence, session)
            for session, (sequence, visible_at) in heads.items()
            if visible_at <= NOW and locks.get(session, NOW) <= NOW
        ]
        assert next_session(connection) == (min(eligible)[1] if eligible else None)


def vm_steps(connection: sqlite3.Connection) -> int:
    """SQLite virtual-machine steps (in hundreds) one accept query takes."""
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0  # carry on

    connection.set_progress_handler(count, 100)
    try:
        next_session(connection)
    finally:
        connection.set_progress_handler(None, 0)
    return steps[0]


def test_accepting_a_session_costs_the_same_however_long_the_backlog() -> None:
    def steps_with(backlog: int) -> int:
        with queue_tables() as connection:
            lock(connection, "busy", NOW + 60)
            for _ in range(3):  # a held session's messages come first
                enqueue(connection, "busy")
            for n in range(backlog):
                enqueue(connection, f"conversation-{n}")
                enqueue(connection, "dead-letters", state="dead")
            return vm_steps(connection)

    small, large = steps_with(100), steps_with(5_000)
    # Grouping every queued message by session first made it grow fifty-fold here.
    assert large <= small + 2


@pytest.mark.parametrize("seconds", [0.0, -5.0])
def test_a_session_lock_must_last_some_time(tmp_path: Path, seconds: float) -> None:
    # A lock that lasts no time is lost as it is taken: every accept would hand the session
    # to whoever asks next, and two workers would run one conversation's turns at once.
    with pytest.raises(ValueError, match="lock_duration must be positive"):
        LocalQueue(tmp_path / "queue.db", lock_duration=seconds)
    assert not (tmp_path / "queue.db").exists()


# --------------------------------------------------------------------------------------
# Waiting: reads until there is something to take
# --------------------------------------------------------------------------------------
class Transactions:
    """Counts the write and read transactions a queue's connection runs."""

    def __init__(self, queue: LocalQueue) -> None:
        self.writes = self.reads = 0
        write, read = queue._db.write, queue._db.read

        async def counted_write(work: Any) -> Any:
            self.writes += 1
            return await write(work)

        async def counted_read(work: Any) -> Any:
            self.reads += 1
            return await read(work)

        queue._db.write = counted_write  # type: ignore[method-assign]
        queue._db.read = counted_read  # type: ignore[method-assign]


async def while_another_sends(sender: LocalQueue, waiting: Awaitable[T], message_id: str) -> T:
    """What `waiting` gives when another process sends to conversation-1 0.2 s into it."""
    later = asyncio.get_running_loop().call_later(
        0.2,
        lambda: asyncio.ensure_future(sender.send(b"{}", "conversation-1", message_id=message_id)),
    )
    try:
        return await waiting
    finally:
        later.cancel()


async def emptied_session(queue: LocalQueue) -> LocalSession:
    """conversation-1's session, accepted, with its one message received and completed."""
    await queue.send(b"{}", "conversation-1", message_id="first")
    session = await queue.accept_session(max_wait=0)
    assert session is not None
    first = await session.receive(max_wait=0)
    assert first is not None
    await session.complete(first)
    return session


@pytest.mark.parametrize("waiting_for", ["a session", "a message"])
def test_a_wait_looks_again_with_reads_and_writes_only_to_take(
    tmp_path: Path, waiting_for: str
) -> None:
    # Another process's send or settle never waits on a read (WAL); it waits on the write
    # lock, which an idle worker's accepts took twenty times a second each.
    async def main() -> None:
        queue = LocalQueue(tmp_path / "queue.db", lock_duration=30)
        sender = LocalQueue(tmp_path / "queue.db", lock_duration=30)  # another process
        session = await emptied_session(queue) if waiting_for == "a message" else None

        def wait(seconds: float) -> Awaitable[LocalSession | QueueMessage | None]:
            if session is None:
                return queue.accept_session(max_wait=seconds)
            return session.receive(max_wait=seconds)

        seen = Transactions(queue)
        assert await wait(0.3) is None
        assert seen.writes == 1  # the first look, which takes what is there at once
        assert seen.reads >= 3

        seen.writes = seen.reads = 0
        got = await while_another_sends(sender, wait(5), "second")
        assert got is not None and got.session_id == "conversation-1"
        assert seen.writes == 2  # the first look, and the take once a read saw something
        if isinstance(got, LocalSession):
            await got.close()
        if session is not None:
            await session.close()
        await sender.close()
        await queue.close()

    asyncio.run(main())


def test_a_waiting_receive_still_learns_at_once_that_its_session_lock_is_gone(
    tmp_path: Path,
) -> None:
    # The looks are reads now; they still check the session lock, so a worker whose lock
    # expired stops waiting on a session another worker may already hold.
    async def main() -> None:
        now = [NOW]
        queue = LocalQueue(tmp_path / "queue.db", lock_duration=30, clock=lambda: now[0])
        session = await emptied_session(queue)
        asyncio.get_running_loop().call_later(0.15, lambda: now.__setitem__(0, NOW + 31))
        started = time.monotonic()
        with pytest.raises(LockLost):
            await session.receive(max_wait=5)
        assert time.monotonic() - started < 1.0
        await queue.close()

    asyncio.run(main())
