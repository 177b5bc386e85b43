"""Service Bus adapters of the `Queue` and `Publisher` ports: a session-enabled queue for
turn.completed (with its dead-letter sub-queue) and a topic for export.published.

Thin on purpose: each method is one or two SDK calls under `guarded`. Where Service Bus
cannot do what the port says, the nearest honest behaviour is documented on the method:
- `abandon(delay)`: Service Bus has no delayed abandon, so the session holder waits
  `delay` (bounded by `max_abandon_delay`) while the lock renewer keeps the session, then
  abandons. The session stays held meanwhile, which is what FIFO order needs anyway.
- `replay` keeps the message id: a queue with duplicate detection drops a replay that
  falls inside the detection window (the queue is expected to have it off).
- `Publisher.sent()` cannot list a topic and says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from azure.core.exceptions import ClientAuthenticationError, HttpResponseError
from azure.servicebus import (
    NEXT_AVAILABLE_SESSION,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
    ServiceBusSubQueue,
)
from azure.servicebus.aio import AutoLockRenewer, ServiceBusReceiver, ServiceBusSender
from azure.servicebus.exceptions import OperationTimeoutError

from worker.azure.credentials import servicebus_admin, servicebus_client
from worker.azure.messages import (
    body_bytes,
    decoded_properties,
    service_bus_session,
    to_dead_letter,
    to_queue_message,
)
from worker.azure.timeouts import guarded
from worker.ports import DeadLetteredMessage, LockLost, NotFound, QueueMessage, QueueStats
from worker.settings import Settings

PEEK_PAGE = 100
SCAN_BATCH = 50
# Service Bus answers an empty receive only after its wait: keep the DLQ scans' short.
SCAN_WAIT_SECONDS = 2.0
MIN_WAIT_SECONDS = 0.05


class AzureSession:
    """One accepted session: its receiver (registered with the queue's lock renewer) and
    the one delivery it holds unsettled."""

    def __init__(
        self, receiver: ServiceBusReceiver, timeout: float, max_abandon_delay: float
    ) -> None:
        self._receiver = receiver
        self._timeout = timeout
        self._max_abandon_delay = max_abandon_delay
        # The delivery this session holds unsettled (the port hands out one at a time).
        self._held: tuple[QueueMessage, ServiceBusReceivedMessage] | None = None
        self.session_id: str = receiver.session.session_id

    async def receive(self, max_wait: float) -> QueueMessage | None:
        """The session's next message, peek-locked; None when none came in `max_wait`.

        While a delivery is unsettled the answer is None at once: Service Bus would hand
        out the next one, but the port keeps one message of a session in flight.
        """
        if self._held is not None:
            return None
        wait = max(max_wait, MIN_WAIT_SECONDS)
        received = await guarded(
            self._receiver.receive_messages(max_message_count=1, max_wait_time=wait),
            wait + self._timeout,
        )
        if not received:
            return None
        message = to_queue_message(received[0])
        self._held = (message, received[0])
        return message

    async def complete(self, message: QueueMessage) -> None:
        """Remove the message: its work is done."""
        await self._settle(message, self._receiver.complete_message)

    async def abandon(self, message: QueueMessage, delay: float = 0.0) -> None:
        """Wait `delay` (bounded) holding the session, then release the message's lock."""
        self._raw(message)
        if delay > 0:
            await asyncio.sleep(min(delay, self._max_abandon_delay))
        await self._settle(message, self._receiver.abandon_message)

    async def dead_letter(self, message: QueueMessage, reason: str, description: str) -> None:
        """Move the message to the dead-letter sub-queue with a reason and a description."""

        async def move(raw: ServiceBusReceivedMessage) -> None:
            await self._receiver.dead_letter_message(
                raw, reason=reason, error_description=description
            )

        await self._settle(message, move)

    async def renew_lock(self) -> None:
        """Extend the session lock (which covers the session's messages)."""
        session = self._receiver.session
        await guarded(session.renew_lock(timeout=self._timeout), self._timeout)

    async def close(self) -> None:
        """Release the session (unsettled messages are redelivered)."""
        self._held = None
        await guarded(self._receiver.close(), self._timeout)

    def _raw(self, message: QueueMessage) -> ServiceBusReceivedMessage:
        """The held delivery of `message`: LockLost for a settled, stale or foreign one."""
        if self._held is None or self._held[0] is not message:
            raise LockLost(f"message {message.sequence_number} is not held by this session")
        return self._held[1]

    async def _settle(
        self,
        message: QueueMessage,
        settle: Callable[[ServiceBusReceivedMessage], Awaitable[None]],
    ) -> None:
        """Settle the held delivery; it stays held when a transient failure may be retried."""
        raw = self._raw(message)
        try:
            await guarded(settle(raw), self._timeout)
        except LockLost:
            self._held = None
            raise
        self._held = None


class AzureQueue:
    """The turn.completed queue (sessions on) and its dead-letter sub-queue."""

    def __init__(
        self,
        settings: Settings,
        *,
        max_lock_renewal_seconds: float = 3600.0,
        max_abandon_delay: float = 60.0,
        use_admin_counts: bool = True,
    ) -> None:
        """`max_lock_renewal_seconds` must exceed the worst-case time one message is held
        (the longest export); `use_admin_counts` lets `is_drained` read the queue's runtime
        counts, which needs Manage rights (or the Data Owner role)."""
        self._settings = settings
        self._queue = settings.queue_name
        self._timeout = settings.sdk_timeout_seconds
        self._max_abandon_delay = max_abandon_delay
        self._use_admin = use_admin_counts
        self._client, self._credential = servicebus_client(settings)
        self._renewer = AutoLockRenewer(max_lock_renewal_duration=max_lock_renewal_seconds)
        self._max_renewal = max_lock_renewal_seconds
        self._sender: ServiceBusSender | None = None

    async def send(
        self,
        body: bytes,
        session_id: str,
        *,
        message_id: str | None = None,
        properties: Mapping[str, Any] | None = None,
    ) -> None:
        """Enqueue one message on a session (a fresh message id unless one is given)."""
        message = ServiceBusMessage(
            body,
            session_id=service_bus_session(session_id),
            message_id=message_id or uuid.uuid4().hex,
            application_properties=dict(properties or {}),  # type: ignore[arg-type]
        )
        if self._sender is None:
            self._sender = self._client.get_queue_sender(self._queue)
        await guarded(self._sender.send_messages(message, timeout=self._timeout), self._timeout)

    async def accept_session(self, max_wait: float) -> AzureSession | None:
        """Lock the next session with a deliverable message; None when none came in time."""
        wait = max(max_wait, MIN_WAIT_SECONDS)
        receiver = self._client.get_queue_receiver(
            self._queue, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=wait
        )
        try:
            opened = await guarded(_open_or_time_out(receiver), wait + self._timeout)
        except BaseException:
            await _close_quietly(receiver)
            raise
        if not opened:
            await _close_quietly(receiver)
            return None
        self._renewer.register(
            receiver, receiver.session, max_lock_renewal_duration=self._max_renewal
        )
        return AzureSession(receiver, self._timeout, self._max_abandon_delay)

    async def is_drained(self) -> bool:
        """True when no session has a message (the session browser: queued or locked) and,
        when `use_admin_counts`, the runtime counts show no active or scheduled message."""
        if self._use_admin and not await self._admin_counts_are_zero():
            return False
        return not await self._any_session()

    async def _admin_counts_are_zero(self) -> bool:
        """Zero active (queued or locked) and scheduled messages. Without Manage rights the
        counts are given up for good and the session browser decides alone."""
        admin = servicebus_admin(self._settings, self._credential)
        try:
            async with admin:
                props = await guarded(
                    admin.get_queue_runtime_properties(self._queue), self._timeout
                )
        except HttpResponseError as exc:
            if exc.status_code not in (401, 403) and not isinstance(exc, ClientAuthenticationError):
                raise
            self._use_admin = False
            return True
        active, scheduled = props.active_message_count, props.scheduled_message_count
        return (active or 0) == 0 and (scheduled or 0) == 0

    async def stats(self) -> QueueStats:
        """Depths from the queue's runtime counts (needs Manage rights: the operator's own
        identity), dead letters by reason from a peek of the dead-letter sub-queue.

        The oldest active message's age is not reported (None): a session-enabled queue can
        only be peeked through a session receiver, which would lock the session it peeks.
        """
        admin = servicebus_admin(self._settings, self._credential)
        async with admin:
            props = await guarded(admin.get_queue_runtime_properties(self._queue), self._timeout)
        by_reason = Counter(entry.reason for entry in await self.dead_letters())
        return QueueStats(
            queue_depth=(props.active_message_count or 0) + (props.scheduled_message_count or 0),
            dead_letter_depth=props.dead_letter_message_count or 0,
            dead_letters_by_reason=dict(sorted(by_reason.items())),
            oldest_enqueued_at=None,
        )

    async def _any_session(self) -> bool:
        if not hasattr(self._client, "list_queue_sessions"):
            # azure-servicebus before 7.15 has no session browser: try to take a session
            # (this cannot see sessions that other holders have locked).
            session = await self.accept_session(MIN_WAIT_SECONDS)
            if session is None:
                return False
            await session.close()
            return True

        async def first() -> bool:
            async for _ in self._client.list_queue_sessions(self._queue, timeout=self._timeout):
                return True
            return False

        return await guarded(first(), self._timeout * 2)

    async def dead_letters(self, reason: str | None = None) -> list[DeadLetteredMessage]:
        """The dead-letter sub-queue, oldest first, optionally of one reason (peeked)."""
        entries: list[DeadLetteredMessage] = []
        async with self._dead_letter_receiver() as receiver:
            start = 1
            while True:
                page = await self._peek(receiver, PEEK_PAGE, start)
                if not page:
                    break
                entries.extend(to_dead_letter(raw) for raw in page)
                start = (page[-1].sequence_number or start) + 1
        return [e for e in entries if reason is None or e.reason == reason]

    async def dead_letter_entry(self, sequence_number: int) -> DeadLetteredMessage:
        """One dead-lettered message; NotFound when it is not there."""
        async with self._dead_letter_receiver() as receiver:
            page = await self._peek(receiver, 1, sequence_number)
        if not page or page[0].sequence_number != sequence_number:
            raise NotFound(f"no dead letter with sequence number {sequence_number}")
        return to_dead_letter(page[0])

    async def replay(self, sequence_number: int) -> None:
        """Re-send the dead-lettered body on its session with `replay_of`/`replay_count`
        (same message id), then complete the dead-lettered copy."""

        async def resend(receiver: ServiceBusReceiver, raw: ServiceBusReceivedMessage) -> None:
            properties = decoded_properties(raw)
            previous = properties.get("replay_count")
            properties["replay_of"] = raw.sequence_number
            properties["replay_count"] = (previous if isinstance(previous, int) else 0) + 1
            await self.send(
                body_bytes(raw),
                raw.session_id or "",
                message_id=str(raw.message_id) if raw.message_id else None,
                properties=properties,
            )
            await guarded(receiver.complete_message(raw), self._timeout)

        await self._settle_dead_letter(sequence_number, resend)

    async def purge(self, sequence_number: int) -> None:
        """Remove one dead-lettered message for good; NotFound when it is not there."""

        async def complete(receiver: ServiceBusReceiver, raw: ServiceBusReceivedMessage) -> None:
            await guarded(receiver.complete_message(raw), self._timeout)

        await self._settle_dead_letter(sequence_number, complete)

    async def _settle_dead_letter(
        self,
        sequence_number: int,
        action: Callable[[ServiceBusReceiver, ServiceBusReceivedMessage], Awaitable[None]],
    ) -> None:
        """Receive (peek-lock) from the dead-letter sub-queue up to the wanted message, act
        on it, and abandon the ones locked on the way. A DLQ is read oldest first, so
        passing a higher sequence number means the wanted one is gone (or locked by
        someone else): NotFound."""
        held: list[ServiceBusReceivedMessage] = []
        async with self._dead_letter_receiver() as receiver:
            try:
                target = await self._scan_for(receiver, sequence_number, held)
                await action(receiver, target)
            finally:
                for raw in held:
                    with contextlib.suppress(Exception):
                        await guarded(receiver.abandon_message(raw), self._timeout)

    async def _scan_for(
        self,
        receiver: ServiceBusReceiver,
        sequence_number: int,
        held: list[ServiceBusReceivedMessage],
    ) -> ServiceBusReceivedMessage:
        while True:
            batch = await guarded(
                receiver.receive_messages(
                    max_message_count=SCAN_BATCH, max_wait_time=SCAN_WAIT_SECONDS
                ),
                SCAN_WAIT_SECONDS + self._timeout,
            )
            if not batch:
                raise NotFound(f"no dead letter with sequence number {sequence_number}")
            target = None
            for raw in batch:
                if raw.sequence_number == sequence_number and target is None:
                    target = raw
                else:
                    held.append(raw)
            if target is not None:
                return target
            if (batch[-1].sequence_number or 0) > sequence_number:
                raise NotFound(f"no dead letter with sequence number {sequence_number}")

    async def _peek(
        self, receiver: ServiceBusReceiver, count: int, start: int
    ) -> list[ServiceBusReceivedMessage]:
        page: list[ServiceBusReceivedMessage] = await guarded(
            receiver.peek_messages(
                max_message_count=count, sequence_number=start, timeout=self._timeout
            ),
            self._timeout,
        )
        return page

    @contextlib.asynccontextmanager
    async def _dead_letter_receiver(self) -> Any:
        receiver = self._client.get_queue_receiver(
            self._queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER
        )
        try:
            await guarded(receiver.__aenter__(), self._timeout)
            yield receiver
        finally:
            await _close_quietly(receiver)

    async def close(self) -> None:
        """Stop lock renewal and release the connection and the credential."""
        try:
            await guarded(self._renewer.close(), self._timeout)
        finally:
            await _close_client(self._sender, self._client, self._credential, self._timeout)


class AzurePublisher:
    """Sends export.published to the topic; duplicate detection on the topic makes the
    same message id (the export id) one event."""

    def __init__(self, settings: Settings) -> None:
        """Authenticated like the queue; the topic is `settings.topic_name`."""
        self._topic = settings.topic_name
        self._timeout = settings.sdk_timeout_seconds
        self._client, self._credential = servicebus_client(settings)
        self._sender: ServiceBusSender | None = None

    async def publish(
        self, message_id: str, body: bytes, properties: Mapping[str, Any] | None = None
    ) -> None:
        """Send one event with this message id, as JSON, with `properties` as application
        properties (what subscription SQL rules filter on)."""
        if self._sender is None:
            self._sender = self._client.get_topic_sender(self._topic)
        message = ServiceBusMessage(
            body,
            message_id=message_id,
            content_type="application/json",
            application_properties=dict(properties or {}),  # type: ignore[arg-type]
        )
        await guarded(self._sender.send_messages(message, timeout=self._timeout), self._timeout)

    async def sent(self) -> list[dict[str, Any]]:
        """Not available: a topic cannot be listed (read a subscription instead)."""
        raise NotImplementedError(
            "the Service Bus topic cannot list what was sent; read one of its subscriptions"
        )

    async def close(self) -> None:
        """Release the sender, the connection and the credential."""
        await _close_client(self._sender, self._client, self._credential, self._timeout)


async def _close_client(
    sender: ServiceBusSender | None, client: Any, credential: Any, timeout: float
) -> None:
    """Release a sender, its connection and the credential, the credential whatever fails."""
    try:
        if sender is not None:
            await guarded(sender.close(), timeout)
        await guarded(client.close(), timeout)
    finally:
        if credential is not None:
            await credential.close()


async def _open_or_time_out(receiver: ServiceBusReceiver) -> bool:
    """Open a NEXT_AVAILABLE_SESSION receiver: False when no session came in its wait."""
    try:
        await receiver.__aenter__()
    except OperationTimeoutError:
        return False
    return True


async def _close_quietly(receiver: ServiceBusReceiver) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(receiver.close(), 10.0)
