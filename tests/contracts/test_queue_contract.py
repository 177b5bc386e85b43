"""Queue contract: Service Bus session semantics, for every adapter of the Queue port."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import pytest

from worker.ports import (
    MAX_MESSAGE_ID,
    InvalidMessageId,
    LockLost,
    NotFound,
    Queue,
    QueueMessage,
    Session,
)


def run(body: Callable[[Queue], Awaitable[None]], factory: Any) -> None:
    """Open a fresh queue from the factory and run `body` on it."""

    async def main() -> None:
        async with factory.open() as queue:
            await body(queue)

    asyncio.run(main())


def new_session_id() -> str:
    return f"conv-{uuid.uuid4().hex[:12]}"


def needs_clock(factory: Any) -> Any:
    if factory.clock is None:
        pytest.skip(f"{factory.name}: time cannot be faked")
    return factory.clock


async def accept(queue: Queue, factory: Any) -> Session:
    session = await queue.accept_session(max_wait=factory.wait)
    assert session is not None, "a session with a deliverable message was not accepted"
    return session


async def receive(session: Session, factory: Any) -> QueueMessage:
    message = await session.receive(max_wait=factory.wait)
    assert message is not None, "the session's next message was not delivered"
    return message


async def send_all(queue: Queue, session_id: str, *bodies: bytes) -> None:
    for body in bodies:
        await queue.send(body, session_id)


def test_send_keeps_body_properties_and_ids(queue_factory: Any) -> None:
    async def body(queue: Queue) -> None:
        sid = new_session_id()
        await queue.send(b'{"a": 1}', sid, message_id="m-1", properties={"kind": "turn"})
        await queue.send(b"second", sid)
        session = await accept(queue, queue_factory)
        assert session.session_id == sid
        first = await receive(session, queue_factory)
        assert (first.body, first.message_id, first.session_id) == (b'{"a": 1}', "m-1", sid)
        assert first.properties["kind"] == "turn"
        assert first.delivery_count == 1
        assert datetime.fromisoformat(first.enqueued_at).tzinfo is not None
        assert first.enqueued_at.endswith("Z")  # one form on both backends: `dlq list` shows it
        await session.complete(first)
        second = await receive(session, queue_factory)
        assert second.message_id and second.message_id != "m-1"  # a fresh id by default
        assert second.sequence_number > first.sequence_number
        await session.complete(second)
        await session.close()

    run(body, queue_factory)


def test_a_message_id_past_the_limit_is_refused_at_send_and_one_at_it_kept(
    queue_factory: Any,
) -> None:
    # Service Bus takes message ids of at most 128 characters; the local queue keeps the
    # same limit so that a caller's bug shows on both backends alike.
    async def body(queue: Queue) -> None:
        sid = new_session_id()
        with pytest.raises(InvalidMessageId):
            await queue.send(b"too long", sid, message_id="m" * (MAX_MESSAGE_ID + 1))
        assert await queue.is_drained()
        await queue.send(b"at the limit", sid, message_id="m" * MAX_MESSAGE_ID)
        session = await accept(queue, queue_factory)
        message = await receive(session, queue_factory)
        assert (message.body, message.message_id) == (b"at the limit", "m" * MAX_MESSAGE_ID)
        await session.complete(message)

    run(body, queue_factory)


def test_an_empty_or_overlong_session_id_reads_back_as_it_was_sent(queue_factory: Any) -> None:
    # An event without a usable conversation id, or with one longer than Service Bus takes,
    # is still enqueued (to be dead-lettered or handled); the queue hands back its id as sent.
    async def body(queue: Queue) -> None:
        long_id = "conv-" + "x" * 200
        sent = {b"no session": "", b"long session": long_id}
        for body_sent, sid in sent.items():
            await queue.send(body_sent, sid)
        got = set()
        for _ in range(2):
            session = await accept(queue, queue_factory)
            message = await receive(session, queue_factory)
            assert message.session_id == sent[message.body]
            got.add(message.session_id)
            await session.dead_letter(message, "schema_invalid", "no conversation id")
            await session.close()
        assert got == {"", long_id}
        assert sorted(d.session_id for d in await queue.dead_letters()) == ["", long_id]

    run(body, queue_factory)


def test_messages_of_a_session_come_in_order_one_at_a_time(queue_factory: Any) -> None:
    async def body(queue: Queue) -> None:
        sid = new_session_id()
        await send_all(queue, sid, b"1", b"2", b"3")
        session = await accept(queue, queue_factory)
        seen = []
        for _ in range(3):
            message = await receive(session, queue_factory)
            # The head is locked: nothing behind it overtakes.
            assert await session.receive(max_wait=queue_factory.empty_wait) is None
            seen.append(message.body)
            await session.complete(message)
        assert seen == [b"1", b"2", b"3"]
        assert await session.receive(max_wait=queue_factory.empty_wait) is None
        await session.close()

    run(body, queue_factory)


def test_accept_and_receive_wait_for_a_message_sent_within_their_wait(queue_factory: Any) -> None:
    # The runtime's idle accept and a session's first receive wait for work rather than
    # polling: what is sent meanwhile is delivered before the wait is over.
    async def body(queue: Queue) -> None:
        sid = new_session_id()
        wait = max(queue_factory.wait, 5.0)

        async def send_later(data: bytes) -> None:
            await asyncio.sleep(0.3)
            await queue.send(data, sid)

        sender = asyncio.create_task(send_later(b"1"))
        session = await queue.accept_session(max_wait=wait)
        await sender
        assert session is not None and session.session_id == sid
        await session.complete(await receive(session, queue_factory))
        sender = asyncio.create_task(send_later(b"2"))
        message = await session.receive(max_wait=wait)
        await sender
        assert message is not None and message.body == b"2"
        await session.complete(message)
        await session.close()

    run(body, queue_factory)


def test_a_session_has_one_holder_at_a_time(queue_factory: Any) -> None:
    async def body(queue: Queue) -> None:
        sid = new_session_id()
        await send_all(queue, sid, b"1", b"2")
        holder = await accept(queue, queue_factory)
        assert await queue.accept_session(max_wait=queue_factory.empty_wait) is None
        message = await receive(holder, queue_factory)
        await holder.complete(message)
        await holder.close()
        other = await accept(queue, queue_factory)
        assert other.session_id == sid
        assert (await receive(other, queue_factory)).body == b"2"

    run(body, queue_factory)


def test_different_sessions_are_held_in_parallel(queue_factory: Any) -> None:
    async def body(queue: Queue) -> None:
        first_id, second_id = new_session_id(), new_session_id()
        await queue.send(b"a", first_id)
        await queue.send(b"b", second_id)
        first = await accept(queue, queue_factory)
        second = await accept(queue, queue_factory)
        assert {first.session_id, second.session_id} == {first_id, second_id}
        got = {first.session_id: await receive(first, queue_factory)}
        got[second.session_id] = await receive(second, queue_factory)
        assert (got[first_id].body, got[second_id].body) == (b"a", b"b")
        await first.complete(got[first.session_id])
        await second.complete(got[second.session_id])

    run(body, queue_factory)


def test_complete_removes_the_message(queue_factory: Any) -> None:
    async def body(queue: Queue) -> None:
        await queue.send(b"only", new_session_id())
        session = await accept(queue, queue_factory)
        await session.complete(await receive(session, queue_factory))
        assert await session.receive(max_wait=queue_factory.empty_wait) is None
        await session.close()
        assert await queue.accept_session(max_wait=queue_factory.empty_wait) is None
        assert await queue.is_drained()

    run(body, queue_factory)


def test_abandon_redelivers_with_a_higher_delivery_count(queue_factory: Any) -> None:
    async def body(queue: Queue) -> None:
        await send_all(queue, new_session_id(), b"first", b"second")
        session = await accept(queue, queue_factory)
        message = await receive(session, queue_factory)
        await session.abandon(message)
        again = await receive(session, queue_factory)
        assert (again.sequence_number, again.message_id, again.body) == (
            message.sequence_number,
            message.message_id,
            b"first",
        )
        assert again.delivery_count == message.delivery_count + 1 == 2
        await session.complete(again)

    run(body, queue_factory)


def test_abandon_with_delay_holds_the_session_back_until_then(queue_factory: Any) -> None:
    clock = needs_clock(queue_factory)

    async def body(queue: Queue) -> None:
        await send_all(queue, new_session_id(), b"first", b"second")
        session = await accept(queue, queue_factory)
        message = await receive(session, queue_factory)
        await session.abandon(message, delay=20.0)
        # The scheduled head blocks the session: "second" does not overtake it.
        assert await session.receive(max_wait=0) is None
        clock.advance(19.0)
        assert await session.receive(max_wait=0) is None
        await session.close()
        assert await queue.accept_session(max_wait=0) is None
        assert not await queue.is_drained()
        clock.advance(2.0)
        later = await accept(queue, queue_factory)
        again = await receive(later, queue_factory)
        assert (again.body, again.delivery_count) == (b"first", 2)

    run(body, queue_factory)


def test_an_expired_lock_frees_the_message_and_the_session(queue_factory: Any) -> None:
    clock = needs_clock(queue_factory)

    async def body(queue: Queue) -> None:
        sid = new_session_id()
        await queue.send(b"work", sid)
        crashed = await accept(queue, queue_factory)
        message = await receive(crashed, queue_factory)
        assert await queue.accept_session(max_wait=0) is None
        clock.advance(queue_factory.lock_duration + 1)
        successor = await accept(queue, queue_factory)
        assert successor.session_id == sid
        again = await receive(successor, queue_factory)
        assert (again.message_id, again.delivery_count) == (message.message_id, 2)
        with pytest.raises(LockLost):
            await crashed.complete(message)
        await successor.complete(again)
        assert await queue.is_drained()

    run(body, queue_factory)


def test_the_queue_dead_letters_a_message_after_ten_deliveries_without_a_verdict(
    queue_factory: Any,
) -> None:
    # Service Bus's maxDeliveryCount (10, as infra/main.bicep sets it): a message whose
    # deliveries keep ending unsettled (abandoned, or a lock lost each time) is not
    # redelivered without end; the next message of its session is delivered instead.
    async def body(queue: Queue) -> None:
        await send_all(queue, new_session_id(), b"stuck", b"next")
        session = await accept(queue, queue_factory)
        for count in range(1, 11):
            message = await receive(session, queue_factory)
            assert (message.body, message.delivery_count) == (b"stuck", count)
            await session.abandon(message)
        following = await receive(session, queue_factory)
        assert following.body == b"next"
        await session.complete(following)
        [dead] = await queue.dead_letters()
        assert (dead.sequence_number, dead.reason) == (
            message.sequence_number,
            "MaxDeliveryCountExceeded",
        )

    run(body, queue_factory)


@pytest.mark.parametrize("settle", ["complete", "abandon", "dead_letter", "receive", "renew"])
def test_settling_after_the_lock_expired_raises_lock_lost(queue_factory: Any, settle: str) -> None:
    clock = needs_clock(queue_factory)

    async def body(queue: Queue) -> None:
        await queue.send(b"work", new_session_id())
        session = await accept(queue, queue_factory)
        message = await receive(session, queue_factory)
        clock.advance(queue_factory.lock_duration + 1)
        actions = {
            "complete": lambda: session.complete(message),
            "abandon": lambda: session.abandon(message),
            "dead_letter": lambda: session.dead_letter(message, "handler_error", "boom"),
            "receive": lambda: session.receive(max_wait=0),
            "renew": lambda: session.renew_lock(),
        }
        with pytest.raises(LockLost):
            await actions[settle]()
        assert await queue.dead_letters() == []
        assert not await queue.is_drained()

    run(body, queue_factory)


def test_renewing_keeps_the_session_and_its_message(queue_factory: Any) -> None:
    clock = needs_clock(queue_factory)

    async def body(queue: Queue) -> None:
        await queue.send(b"long export", new_session_id())
        session = await accept(queue, queue_factory)
        message = await receive(session, queue_factory)
        for _ in range(3):
            clock.advance(queue_factory.lock_duration * 0.75)
            await session.renew_lock()
        assert await queue.accept_session(max_wait=0) is None
        await session.complete(message)
        assert await queue.is_drained()

    run(body, queue_factory)


def test_settling_with_a_stale_delivery_raises_lock_lost(queue_factory: Any) -> None:
    async def body(queue: Queue) -> None:
        await queue.send(b"work", new_session_id())
        session = await accept(queue, queue_factory)
        first = await receive(session, queue_factory)
        await session.abandon(first)
        second = await receive(session, queue_factory)
        with pytest.raises(LockLost):
            await session.complete(first)
        await session.complete(second)

    run(body, queue_factory)


def test_dead_letters_are_listed_with_reason_and_filtered(queue_factory: Any) -> None:
    async def body(queue: Queue) -> None:
        sid = new_session_id()
        await queue.send(b"bad", sid, message_id="m-bad", properties={"k": "v"})
        await queue.send(b"lost", sid, message_id="m-lost")
        session = await accept(queue, queue_factory)
        bad = await receive(session, queue_factory)
        await session.dead_letter(bad, "schema_invalid", "missing field turn_id")
        lost = await receive(session, queue_factory)
        await session.abandon(lost)
        lost = await receive(session, queue_factory)
        await session.dead_letter(lost, "turn_not_found", "reply not visible")

        entries = await queue.dead_letters()
        assert [e.message_id for e in entries] == ["m-bad", "m-lost"]
        first, second = entries
        assert (first.session_id, first.reason, first.description) == (
            sid,
            "schema_invalid",
            "missing field turn_id",
        )
        assert (first.delivery_count, second.delivery_count) == (1, 2)
        assert (first.body, first.properties["k"]) == (b"bad", "v")
        assert first.sequence_number == bad.sequence_number
        assert first.summary()["reason"] == "schema_invalid"
        only = await queue.dead_letters(reason="turn_not_found")
        assert [e.message_id for e in only] == ["m-lost"]
        assert await queue.dead_letters(reason="not_authorized") == []
        assert await queue.is_drained()

    run(body, queue_factory)


def test_one_dead_letter_is_shown_by_sequence_number(queue_factory: Any) -> None:
    async def body(queue: Queue) -> None:
        await queue.send(b"bad", new_session_id(), message_id="m-bad")
        session = await accept(queue, queue_factory)
        message = await receive(session, queue_factory)
        await session.dead_letter(message, "handler_error", "KeyError: 'rows'")
        entry = await queue.dead_letter_entry(message.sequence_number)
        assert (entry.message_id, entry.reason, entry.body) == ("m-bad", "handler_error", b"bad")
        with pytest.raises(NotFound):
            await queue.dead_letter_entry(message.sequence_number + 1000)

    run(body, queue_factory)


def test_a_live_message_is_not_a_dead_letter(queue_factory: Any) -> None:
    async def body(queue: Queue) -> None:
        await queue.send(b"fine", new_session_id())
        session = await accept(queue, queue_factory)
        message = await receive(session, queue_factory)
        with pytest.raises(NotFound):
            await queue.dead_letter_entry(message.sequence_number)
        await session.complete(message)

    run(body, queue_factory)


def test_replay_resends_on_the_session_and_removes_the_dead_letter(queue_factory: Any) -> None:
    async def body(queue: Queue) -> None:
        sid = new_session_id()
        await queue.send(b"event", sid, message_id="m-1", properties={"k": "v"})
        session = await accept(queue, queue_factory)
        original = await receive(session, queue_factory)
        await session.dead_letter(original, "conversation_not_found", "after 5 attempts")
        await session.close()

        await queue.replay(original.sequence_number)
        assert await queue.dead_letters() == []
        with pytest.raises(NotFound):
            await queue.dead_letter_entry(original.sequence_number)
        session = await accept(queue, queue_factory)
        assert session.session_id == sid
        replayed = await receive(session, queue_factory)
        assert (replayed.body, replayed.message_id, replayed.delivery_count) == (b"event", "m-1", 1)
        assert replayed.properties["k"] == "v"
        assert replayed.properties["replay_of"] == original.sequence_number
        assert replayed.properties["replay_count"] == 1

        await session.dead_letter(replayed, "conversation_not_found", "again")
        await queue.replay(replayed.sequence_number)
        twice = await receive(session, queue_factory)
        assert twice.properties["replay_of"] == replayed.sequence_number
        assert twice.properties["replay_count"] == 2
        await session.complete(twice)
        assert await queue.is_drained()
        with pytest.raises(NotFound):
            await queue.replay(original.sequence_number)

    run(body, queue_factory)


def test_purge_removes_a_dead_letter_for_good(queue_factory: Any) -> None:
    async def body(queue: Queue) -> None:
        await send_all(queue, new_session_id(), b"a", b"b")
        session = await accept(queue, queue_factory)
        first = await receive(session, queue_factory)
        await session.dead_letter(first, "schema_invalid", "not JSON")
        second = await receive(session, queue_factory)
        await session.dead_letter(second, "schema_invalid", "not JSON")
        await queue.purge(first.sequence_number)
        remaining = await queue.dead_letters()
        assert [e.sequence_number for e in remaining] == [second.sequence_number]
        with pytest.raises(NotFound):
            await queue.dead_letter_entry(first.sequence_number)
        with pytest.raises(NotFound):
            await queue.purge(first.sequence_number)
        assert await queue.accept_session(max_wait=queue_factory.empty_wait) is None

    run(body, queue_factory)


def test_is_drained_counts_queued_and_locked_messages(queue_factory: Any) -> None:
    async def body(queue: Queue) -> None:
        assert await queue.is_drained()
        await queue.send(b"x", new_session_id())
        assert not await queue.is_drained()
        session = await accept(queue, queue_factory)
        message = await receive(session, queue_factory)
        assert not await queue.is_drained()  # locked, in flight
        await session.complete(message)
        assert await queue.is_drained()

    run(body, queue_factory)


def test_stats_count_active_and_dead_letters_by_reason(queue_factory: Any) -> None:
    async def body(queue: Queue) -> None:
        empty = await queue.stats()
        assert (empty.queue_depth, empty.dead_letter_depth) == (0, 0)
        assert dict(empty.dead_letters_by_reason) == {}
        sid = new_session_id()
        await send_all(queue, sid, b"poison", b"bad", b"waiting")
        session = await accept(queue, queue_factory)
        await session.dead_letter(await receive(session, queue_factory), "schema_invalid", "x")
        await session.dead_letter(await receive(session, queue_factory), "schema_invalid", "y")
        await session.close()
        stats = await queue.stats()
        assert (stats.queue_depth, stats.dead_letter_depth) == (1, 2)
        assert dict(stats.dead_letters_by_reason) == {"schema_invalid": 2}
        if queue_factory.name == "local":  # Service Bus cannot tell it (see its adapter)
            assert stats.oldest_enqueued_at is not None
            assert datetime.fromisoformat(stats.oldest_enqueued_at.replace("Z", "+00:00"))

    run(body, queue_factory)


def test_closing_a_session_releases_what_it_held_without_counting_a_delivery(
    queue_factory: Any,
) -> None:
    # Service Bus ("Message sessions", delivery count per message): a message left
    # unsettled in a session that is closed is not counted; only an expired lock or an
    # abandon counts (docs/contract/delivery.md).
    async def body(queue: Queue) -> None:
        sid = new_session_id()
        await queue.send(b"unsettled", sid)
        session = await accept(queue, queue_factory)
        message = await receive(session, queue_factory)
        await session.close()
        successor = await accept(queue, queue_factory)
        assert successor.session_id == sid
        again = await receive(successor, queue_factory)
        assert (again.message_id, again.delivery_count) == (message.message_id, 1)
        with pytest.raises(LockLost):
            await session.complete(message)
        await successor.complete(again)

    run(body, queue_factory)


# ---- local adapter only --------------------------------------------------------------
def test_local_accept_takes_the_session_with_the_oldest_head(tmp_path: Any) -> None:
    from local_factories import LocalQueueFactory

    factory = LocalQueueFactory(tmp_path)

    async def body(queue: Queue) -> None:
        await queue.send(b"1", "older")
        await queue.send(b"2", "newer")
        await queue.send(b"3", "older")
        first = await accept(queue, factory)
        second = await accept(queue, factory)
        assert (first.session_id, second.session_id) == ("older", "newer")

    run(body, factory)
