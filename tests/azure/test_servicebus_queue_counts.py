"""What the Service Bus queue holds, by both paths of worker/azure/queue_counts.py.

The runtime counts come from the administration client (ATOM over HTTPS), which the test
broker does not serve: here it gets its answers from an azure-core transport handed to
the client, answering with an ATOM entry written after the SDK's own model of it
(`QueueDescriptionEntry`: Atom `entry/content`, `QueueDescription`, `CountDetails` in the
2011/06 namespace), not recorded from a namespace. The AMQP path runs on the broker.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from azure.core.exceptions import ServiceRequestError
from azure.core.pipeline.transport import AsyncHttpResponse, AsyncHttpTransport
from azure_factories import isolated_settings

from tests.servicebus_broker import ManualClock, QueueConfig, ServiceBusBroker
from worker.azure.credentials import is_development_emulator
from worker.azure.servicebus import AzureQueue

pytestmark = pytest.mark.servicebus_broker

QUEUE = "turns"
WAIT = 10.0
ATOM_ENTRY = """<?xml version="1.0" encoding="utf-8"?>
<entry xmlns="http://www.w3.org/2005/Atom">
  <id>https://ns.servicebus.windows.net/turns</id>
  <title type="text">turns</title>
  <content type="application/xml">
    <QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"
        xmlns:i="http://www.w3.org/2001/XMLSchema-instance">
      <RequiresSession>true</RequiresSession>
      <CountDetails xmlns:d2p1="http://schemas.microsoft.com/netservices/2011/06/servicebus">
        <d2p1:ActiveMessageCount>{active}</d2p1:ActiveMessageCount>
        <d2p1:DeadLetterMessageCount>0</d2p1:DeadLetterMessageCount>
        <d2p1:ScheduledMessageCount>{scheduled}</d2p1:ScheduledMessageCount>
        <d2p1:TransferMessageCount>0</d2p1:TransferMessageCount>
        <d2p1:TransferDeadLetterMessageCount>0</d2p1:TransferDeadLetterMessageCount>
      </CountDetails>
    </QueueDescription>
  </content>
</entry>"""


class _Response(AsyncHttpResponse):
    def __init__(self, request: Any, status: int, body: bytes) -> None:
        super().__init__(request, None)
        self.status_code = status
        self.reason = "OK" if status == 200 else "Unauthorized"
        self.content_type = "application/atom+xml;type=entry;charset=utf-8"
        self.headers = {"Content-Type": self.content_type}
        self._body = body

    def body(self) -> bytes:
        return self._body


class AdminEndpoint(AsyncHttpTransport):
    """The administration endpoint, answering every request with `answer()`."""

    def __init__(self, answer: Callable[[], tuple[int, bytes] | Exception]) -> None:
        self.answer = answer
        self.paths: list[str] = []

    async def __aenter__(self) -> AdminEndpoint:
        return self

    async def __aexit__(self, *_: object) -> None:
        return None

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def send(self, request: Any, **_: Any) -> _Response:
        self.paths.append(request.url.split("?")[0].rsplit("/", 1)[-1])
        answer = self.answer()
        if isinstance(answer, Exception):
            raise answer
        return _Response(request, *answer)


def counts(active: int, scheduled: int = 0) -> Callable[[], tuple[int, bytes]]:
    body = ATOM_ENTRY.format(active=active, scheduled=scheduled).encode()
    return lambda: (200, body)


@asynccontextmanager
async def queue_with_admin(
    broker: ServiceBusBroker, endpoint: AdminEndpoint
) -> AsyncIterator[AzureQueue]:
    settings = isolated_settings(
        servicebus_connection_string=broker.connection_string, queue_name=QUEUE
    )
    queue = AzureQueue(settings, use_admin_counts=True, admin_options={"transport": endpoint})
    try:
        yield queue
    finally:
        await queue.close()


def on_broker(body: Callable[[ServiceBusBroker], Awaitable[None]]) -> None:
    config = QueueConfig(QUEUE, requires_session=True, lock_duration=30.0)
    with ServiceBusBroker([config], clock=ManualClock()) as broker:
        asyncio.run(body(broker))


def test_runtime_counts_give_the_depth_and_decide_is_drained() -> None:
    async def body(broker: ServiceBusBroker) -> None:
        endpoint = AdminEndpoint(counts(active=7, scheduled=1))
        async with queue_with_admin(broker, endpoint) as queue:
            stats = await queue.stats()
            assert (stats.queue_depth, stats.oldest_enqueued_at) == (8, None)
            assert not await queue.is_drained()  # the broker holds nothing: counts decided
            endpoint.answer = counts(active=0)
            assert await queue.is_drained()
            assert endpoint.paths == [QUEUE] * 3

    on_broker(body)


@pytest.mark.parametrize(
    "refusal",
    [lambda: (401, b"<Error><Code>401</Code></Error>"), lambda: ServiceRequestError("refused")],
    ids=["not-authorized", "unreachable"],
)
def test_without_runtime_counts_the_queue_is_counted_over_amqp_from_then_on(
    refusal: Callable[[], Any],
) -> None:
    async def body(broker: ServiceBusBroker) -> None:
        endpoint = AdminEndpoint(refusal)
        async with queue_with_admin(broker, endpoint) as queue:
            await queue.send(b"a", "conv-1")
            await queue.send(b"b", "conv-1")
            await queue.send(b"c", "conv-2")
            stats = await queue.stats()
            assert stats.queue_depth == 3 and stats.oldest_enqueued_at is not None
            asked = len(endpoint.paths)
            assert not await queue.is_drained()
            assert len(endpoint.paths) == asked  # given up for good, not asked again

    on_broker(body)


def test_a_session_held_by_a_worker_counts_as_its_message_in_flight() -> None:
    async def body(broker: ServiceBusBroker) -> None:
        endpoint = AdminEndpoint(lambda: (403, b"<Error><Code>403</Code></Error>"))
        async with queue_with_admin(broker, endpoint) as queue:
            for body in (b"a", b"b", b"c"):
                await queue.send(body, "conv-held")
            await queue.send(b"d", "conv-idle")
            held = await queue.accept_session(WAIT)
            assert held is not None and held.session_id == "conv-held"
            stats = await queue.stats()
            # What waits behind the held session's head is not seen, nor its age.
            assert (stats.queue_depth, stats.oldest_enqueued_at) == (2, None)
            await held.close()
            assert (await queue.stats()).queue_depth == 4

    on_broker(body)


def test_a_development_emulator_connection_string_turns_runtime_counts_off() -> None:
    emulator = "Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=k;SharedAccessKey=a2V5;"
    assert is_development_emulator(
        isolated_settings(servicebus_connection_string=emulator + "UseDevelopmentEmulator=true")
    )
    assert not is_development_emulator(isolated_settings(servicebus_connection_string=emulator))
    assert not is_development_emulator(isolated_settings(servicebus_namespace="ns"))
