"""Service Bus adapters against a real namespace: runs only when EXPORT_WORKER_TEST_SERVICEBUS
holds a connection string with Manage rights (each test creates its own queue or topic and
deletes it after). The Queue and Publisher contract suites run their `azure` params on the
same variable (tests/contracts/azure_factories.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from azure_factories import (
    SERVICEBUS_ENV,
    AzurePublisherFactory,
    AzureQueueFactory,
)

from worker.azure.servicebus import AzurePublisher, AzureQueue
from worker.ports import NotFound, QueueMessage

pytestmark = [
    pytest.mark.servicebus,
    pytest.mark.skipif(
        not os.environ.get(SERVICEBUS_ENV), reason=f"{SERVICEBUS_ENV} is not set (a real namespace)"
    ),
]

WAIT = AzureQueueFactory.wait
EMPTY_WAIT = AzureQueueFactory.empty_wait


def run_on_queue(body: Callable[[AzureQueue], Awaitable[None]]) -> None:
    """Run `body` on an AzureQueue over a queue of its own."""

    async def main() -> None:
        async with AzureQueueFactory().open() as queue:
            await body(queue)

    asyncio.run(main())


def new_session_id() -> str:
    return f"conv-{uuid.uuid4().hex[:12]}"


async def take(queue: AzureQueue) -> tuple[Any, QueueMessage]:
    session = await queue.accept_session(max_wait=WAIT)
    assert session is not None
    message = await session.receive(max_wait=WAIT)
    assert message is not None
    return session, message


def test_send_accept_receive_complete() -> None:
    async def body(queue: AzureQueue) -> None:
        sid = new_session_id()
        await queue.send(b'{"type": "turn.completed"}', sid, message_id="e-1", properties={"k": 1})
        assert not await queue.is_drained()
        session, message = await take(queue)
        assert (session.session_id, message.message_id, message.body) == (
            sid,
            "e-1",
            b'{"type": "turn.completed"}',
        )
        assert (message.delivery_count, message.properties["k"]) == (1, 1)
        await session.renew_lock()
        await session.complete(message)
        assert await session.receive(max_wait=EMPTY_WAIT) is None
        await session.close()
        assert await queue.accept_session(max_wait=EMPTY_WAIT) is None
        assert await queue.is_drained()

    run_on_queue(body)


def test_abandon_redelivers_on_the_same_session() -> None:
    async def body(queue: AzureQueue) -> None:
        await queue.send(b"retry me", new_session_id())
        session, message = await take(queue)
        await session.abandon(message, delay=0.5)  # parked; the receive waits it out
        again = await session.receive(max_wait=WAIT)
        assert again is not None
        assert (again.sequence_number, again.delivery_count) == (message.sequence_number, 2)
        await session.complete(again)
        await session.close()

    run_on_queue(body)


def test_dead_letter_replay_and_purge() -> None:
    async def body(queue: AzureQueue) -> None:
        sid = new_session_id()
        await queue.send(b"first", sid, message_id="m-1", properties={"k": "v"})
        await queue.send(b"second", sid, message_id="m-2")
        session, first = await take(queue)
        await session.dead_letter(first, "conversation_not_found", "after 5 attempts")
        second = await session.receive(max_wait=WAIT)
        assert second is not None
        await session.dead_letter(second, "schema_invalid", "not JSON")
        await session.close()

        entries = await queue.dead_letters()
        assert [(e.message_id, e.reason) for e in entries] == [
            ("m-1", "conversation_not_found"),
            ("m-2", "schema_invalid"),
        ]
        assert "DeadLetterReason" not in entries[0].properties
        entry = await queue.dead_letter_entry(entries[0].sequence_number)
        assert (entry.body, entry.description) == (b"first", "after 5 attempts")

        await queue.replay(entries[0].sequence_number)
        await queue.purge(entries[1].sequence_number)
        assert await queue.dead_letters() == []
        with pytest.raises(NotFound):
            await queue.purge(entries[1].sequence_number)

        session, replayed = await take(queue)
        assert (replayed.body, replayed.message_id, replayed.session_id) == (b"first", "m-1", sid)
        assert replayed.properties["replay_of"] == entries[0].sequence_number
        assert (replayed.properties["replay_count"], replayed.properties["k"]) == (1, "v")
        await session.complete(replayed)
        await session.close()

    run_on_queue(body)


def test_publisher_sends_json_with_the_export_id_as_message_id() -> None:
    from azure.servicebus.aio import ServiceBusClient

    async def main() -> None:
        factory = AzurePublisherFactory()
        async with factory.open() as publisher:
            assert isinstance(publisher, AzurePublisher)
            topic = publisher._topic
            connection = os.environ[SERVICEBUS_ENV]  # the factory made the subscription "all"
            export_id = f"exp_{uuid.uuid4().hex[:20]}"
            body = json.dumps({"type": "export.published", "export_id": export_id}).encode()
            await publisher.publish(export_id, body)
            await publisher.publish(export_id, body)  # duplicate detection keeps one
            with pytest.raises(NotImplementedError):
                await publisher.sent()

            client = ServiceBusClient.from_connection_string(connection)
            async with client, client.get_subscription_receiver(topic, "all") as receiver:
                got = await receiver.receive_messages(max_message_count=2, max_wait_time=WAIT)
                more = await receiver.receive_messages(max_message_count=1, max_wait_time=3)
                for message in got:
                    with contextlib.suppress(Exception):
                        await receiver.complete_message(message)
            assert [(m.message_id, m.content_type) for m in got] == [
                (export_id, "application/json")
            ]
            assert more == []
            assert b"".join(got[0].body) == body

    asyncio.run(main())
