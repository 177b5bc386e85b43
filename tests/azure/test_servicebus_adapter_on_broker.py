"""The Service Bus adapter through the real SDK on the AMQP test broker: the defects a
line-by-line reading of it against azure-servicebus 7.15 found, each pinned here
(the port's own rules are the queue contract suite's, tests/contracts/)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
from azure_factories import isolated_settings

from tests.servicebus_broker import ManualClock, QueueConfig, ServiceBusBroker
from worker.azure.servicebus import AzureQueue

pytestmark = pytest.mark.servicebus_broker

QUEUE = "turns"
LOCK_SECONDS = 30.0
WAIT = 10.0


@asynccontextmanager
async def azure_queue(broker: ServiceBusBroker, **options: object) -> AsyncIterator[AzureQueue]:
    """The adapter on the broker's queue, closed after."""
    settings = isolated_settings(
        servicebus_connection_string=broker.connection_string, queue_name=QUEUE
    )
    queue = AzureQueue(settings, **options)  # type: ignore[arg-type]
    try:
        yield queue
    finally:
        await queue.close()


def on_broker(body: Callable[[ServiceBusBroker], Awaitable[None]], clock: ManualClock) -> None:
    """Run `body` against a fresh broker holding one session queue."""
    config = QueueConfig(QUEUE, requires_session=True, lock_duration=LOCK_SECONDS)
    with ServiceBusBroker([config], clock=clock) as broker:
        asyncio.run(body(broker))


def test_an_empty_accept_returns_within_its_wait_not_after_sdk_retries() -> None:
    # The service answers an accept with no session after the wait with a timeout the SDK
    # retries 3 times (1.6 + 3.2 + 6.4 s of backoff): sessions are accepted on a client of
    # their own with retry_total=0.
    async def body(broker: ServiceBusBroker) -> None:
        async with azure_queue(broker) as queue:
            for wait in (0.5, 1.0):
                started = time.monotonic()
                assert await queue.accept_session(wait) is None
                assert time.monotonic() - started < wait + 2.0

    on_broker(body, ManualClock())


def test_is_drained_leaves_no_session_browser_connection_open() -> None:
    # A full first page of the session browser (100 sessions) leaves its iterator open,
    # and with it an AMQP connection, unless the browsing client is closed.
    async def body(broker: ServiceBusBroker) -> None:
        async with azure_queue(broker, use_admin_counts=False) as queue:
            for n in range(120):
                await queue.send(b"x", f"conv-{n:03d}")
            baseline = broker.open_connections()
            for _ in range(3):
                assert not await queue.is_drained()
            assert broker.open_connections(expected=baseline) == baseline

    on_broker(body, ManualClock())


def new_session_id() -> str:
    return f"conv-{uuid.uuid4().hex[:12]}"
