"""The broker driven by the asyncio Service Bus SDK (the one the worker's adapter uses):
sessions, settlement, lock expiry, the session browser, session state and dead letters."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.aio import ServiceBusClient, ServiceBusReceiver
from azure.servicebus.exceptions import OperationTimeoutError, SessionLockLostError

from .broker import EntityCounts, ServiceBusBroker
from .clock import ManualClock
from .conftest import EMPTY_WAIT, LOCK_SECONDS, MAX_DELIVERIES, WAIT

pytestmark = pytest.mark.servicebus_broker


def run(broker: ServiceBusBroker, body: Callable[[ServiceBusClient], Awaitable[None]]) -> None:
    """Run `body` with an asyncio client on the broker."""

    async def main() -> None:
        async with ServiceBusClient.from_connection_string(
            broker.connection_string, retry_total=0
        ) as client:
            await body(client)

    asyncio.run(main())


async def send(client: ServiceBusClient, session_id: str, *bodies: bytes) -> None:
    async with client.get_queue_sender("sessions", keep_alive=None) as sender:
        for body in bodies:
            await sender.send_messages(ServiceBusMessage(body, session_id=session_id))


def next_session(client: ServiceBusClient, wait: float = WAIT) -> ServiceBusReceiver:
    return client.get_queue_receiver(
        "sessions", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=wait
    )


async def receive_one(receiver: ServiceBusReceiver) -> object:
    received = await receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)
    assert len(received) == 1, "a deliverable message was not delivered"
    return received[0]


def test_async_round_trip_counts_a_delivery_per_abandon(broker: ServiceBusBroker) -> None:
    async def body(client: ServiceBusClient) -> None:
        await send(client, "conv", b"work")
        async with next_session(client) as receiver:
            assert receiver.session.session_id == "conv"
            first = await receive_one(receiver)
            assert first.delivery_count == 0
            await receiver.abandon_message(first)
            again = await receive_one(receiver)
            assert (again.sequence_number, again.delivery_count) == (first.sequence_number, 1)
            await receiver.complete_message(again)
        assert broker.counts("sessions").active == 0

    run(broker, body)


def test_async_next_available_takes_the_session_whose_head_is_oldest(
    broker: ServiceBusBroker,
) -> None:
    async def body(client: ServiceBusClient) -> None:
        await send(client, "older", b"1")
        await send(client, "newer", b"2")
        await send(client, "newer", b"3")
        async with next_session(client) as first, next_session(client) as second:
            assert (first.session.session_id, second.session.session_id) == ("older", "newer")

    run(broker, body)


def test_async_named_session_gets_only_its_messages(broker: ServiceBusBroker) -> None:
    async def body(client: ServiceBusClient) -> None:
        await send(client, "a", b"for a")
        await send(client, "b", b"for b")
        async with client.get_queue_receiver("sessions", session_id="b") as receiver:
            message = await receive_one(receiver)
            assert b"".join(message.body) == b"for b"
            await receiver.complete_message(message)
            assert await receiver.receive_messages(max_wait_time=EMPTY_WAIT) == []

    run(broker, body)


def test_async_empty_next_available_accept_times_out(broker: ServiceBusBroker) -> None:
    async def body(client: ServiceBusClient) -> None:
        with pytest.raises(OperationTimeoutError):
            async with next_session(client, wait=EMPTY_WAIT):
                pass

    run(broker, body)


def test_async_expired_session_lock_moves_the_session_to_a_new_holder(
    broker: ServiceBusBroker, clock: ManualClock
) -> None:
    async def body(client: ServiceBusClient) -> None:
        await send(client, "conv", b"work")
        crashed = next_session(client)
        await crashed.__aenter__()
        first = await receive_one(crashed)
        clock.advance(LOCK_SECONDS + 1)
        async with next_session(client) as successor:
            again = await receive_one(successor)
            assert (again.message_id, again.delivery_count) == (first.message_id, 1)
            with pytest.raises(SessionLockLostError):
                await crashed.complete_message(first)
            await successor.complete_message(again)
        await crashed.close()

    run(broker, body)


def test_async_renewing_an_expired_session_lock_raises_session_lock_lost(
    broker: ServiceBusBroker, clock: ManualClock
) -> None:
    async def body(client: ServiceBusClient) -> None:
        await send(client, "conv", b"x")
        async with next_session(client) as receiver:
            await receiver.session.renew_lock()
            clock.advance(LOCK_SECONDS + 1)
            with pytest.raises(SessionLockLostError):
                await receiver.session.renew_lock()

    run(broker, body)


def test_async_max_delivery_count_dead_letters_with_the_reason(broker: ServiceBusBroker) -> None:
    async def body(client: ServiceBusClient) -> None:
        await send(client, "conv", b"poison")
        async with next_session(client) as receiver:
            for _ in range(MAX_DELIVERIES):
                await receiver.abandon_message(await receive_one(receiver))
        async with client.get_queue_receiver(
            "sessions", sub_queue=ServiceBusSubQueue.DEAD_LETTER
        ) as dlq:
            [peeked] = await dlq.peek_messages(max_message_count=5)
            assert peeked.dead_letter_reason == "MaxDeliveryCountExceeded"
            dead = await receive_one(dlq)
            assert (dead.sequence_number, dead.session_id) == (peeked.sequence_number, "conv")
            await dlq.complete_message(dead)
        assert broker.counts("sessions") == EntityCounts(active=0, dead_letter=0, deferred=0)

    run(broker, body)


def test_async_session_browser_and_session_state(broker: ServiceBusBroker) -> None:
    async def body(client: ServiceBusClient) -> None:
        assert [s async for s in client.list_queue_sessions("sessions")] == []
        await send(client, "a", b"1")
        await send(client, "b", b"2")
        assert sorted([s async for s in client.list_queue_sessions("sessions")]) == ["a", "b"]
        async with client.get_queue_receiver("sessions", session_id="a") as receiver:
            await receiver.session.set_state(b"step-2")
            assert await receiver.session.get_state() == b"step-2"
            await receiver.complete_message(await receive_one(receiver))
        async with client.get_queue_receiver("sessions", session_id="b") as receiver:
            await receiver.complete_message(await receive_one(receiver))
        # "a" has no message left but keeps its state; "b" has neither.
        assert [s async for s in client.list_queue_sessions("sessions")] == ["a"]

    run(broker, body)


def test_async_deferred_message_settles_over_the_management_link(
    broker: ServiceBusBroker,
) -> None:
    async def body(client: ServiceBusClient) -> None:
        await send(client, "conv", b"later")
        async with next_session(client) as receiver:
            message = await receive_one(receiver)
            await receiver.defer_message(message)
            assert await receiver.receive_messages(max_wait_time=EMPTY_WAIT) == []
            [deferred] = await receiver.receive_deferred_messages([message.sequence_number])
            await receiver.complete_message(deferred)
        assert broker.counts("sessions") == EntityCounts(active=0, dead_letter=0, deferred=0)

    run(broker, body)
