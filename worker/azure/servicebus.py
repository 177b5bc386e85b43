"""Service Bus adapters of the `Queue` and `Publisher` ports: a session-enabled queue for
turn.completed (with its dead-letter sub-queue) and a topic for export.published.

Thin on purpose: each method is one or two SDK calls under `guarded`, bounded by the SDK
first (`try_timeout` and `timeout` = SDK_TIMEOUT_SECONDS) and by our backstop after
(`worker/azure/timeouts.py`). The pieces: `sessions.py` (an accepted session, delayed
abandons), `dead_letters.py` (the dead-letter sub-queue), `queue_counts.py` (`is_drained`,
`stats`). Where Service Bus cannot do what the port says, the nearest honest behaviour is
documented where it is done:
- sessions are accepted on a client of their own with `retry_total=0`: the service
  answers an accept that found no session with a timeout, which the SDK would retry three
  times (about 15 s of backoff) where the port asks for `max_wait`. The session's own
  calls get their retries from the call retries (`worker/call_retries.py`) instead; its
  settlements are never repeated (`sessions.py`). Every other call keeps the SDK's retries.
- only the service's own answer means "no session": the link detached with the AMQP
  condition `com.microsoft:timeout`. The SDK raises the same OperationTimeoutError when
  its own deadline on acquiring the link (connection, credential, attach) runs out, which
  is what an unreachable namespace looks like; that one is a TransientError, so the
  runtime logs it and readiness reports the queue unreachable. The wait asked of the
  service is kept to half the SDK's timeout, so that its answer comes before that deadline.
- an accept also comes back empty, with sessions waiting, while the queue holds as many
  sessions as it may (`max_sessions`; each costs an AMQP connection): a session parked for
  a delayed abandon is held until the delay is over (`sessions.py`).
- `replay` keeps the message id: a queue with duplicate detection would drop a replay that
  falls inside the detection window (the queue is expected to have it off).
- `Publisher.sent()` cannot list a topic and says so.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusMessage
from azure.servicebus.aio import ServiceBusClient, ServiceBusReceiver, ServiceBusSender
from azure.servicebus.exceptions import OperationTimeoutError

from worker.azure.credentials import servicebus_client
from worker.azure.dead_letters import DeadLetterQueue
from worker.azure.messages import decoded_properties, service_bus_session, session_properties
from worker.azure.queue_counts import QueueCounts
from worker.azure.sessions import (
    MIN_WAIT_SECONDS,
    AzureSession,
    HeldSessions,
    ParkedSessions,
    SessionLimits,
    close_quietly,
)
from worker.azure.timeouts import BACKSTOP_SECONDS, SERVICE_BUS, DeadlineExceeded, guarded
from worker.ports import (
    MAX_DELIVERY_COUNT,
    DeadLetteredMessage,
    QueueStats,
    checked_message_id,
)
from worker.settings import Settings

__all__ = ["AzurePublisher", "AzureQueue", "AzureSession", "decoded_properties"]

Clock = Callable[[], float]

# The AMQP error condition Service Bus detaches a next-available-session link with when no
# session came within the link's wait (the SDK's ERROR_CODE_TIMEOUT).
NO_SESSION_CONDITION = "com.microsoft:timeout"
# How deep the chain of causes of an accept's timeout is searched for that condition.
MAX_CAUSES = 4
# The share of the SDK's timeout (its deadline on acquiring a link) the service may wait
# for a session: the rest is for connecting, authenticating and attaching.
ACCEPT_WAIT_SHARE = 0.5


class AzureQueue:
    """The turn.completed queue (sessions on) and its dead-letter sub-queue."""

    def __init__(
        self,
        settings: Settings,
        *,
        max_lock_renewal_seconds: float | None = None,
        max_abandon_delay: float = 60.0,
        max_sessions: int | None = None,
        use_admin_counts: bool | None = None,
        admin_options: Mapping[str, Any] | None = None,
        clock: Clock = time.time,
        max_deliveries: int | None = None,
    ) -> None:
        """`max_lock_renewal_seconds` (default: the setting) must exceed the longest time
        one message is handled; `max_sessions` (default: twice the worker's concurrency)
        bounds the sessions held at once, in workers' hands or parked (`sessions.py`);
        `use_admin_counts` (None: unless the connection string names
        a development emulator) lets `is_drained` and `stats` read the runtime counts, which
        need Manage rights (`queue_counts.py`); `clock` measures delays and the renewal cap;
        `max_deliveries` (default: 10, or MAX_ATTEMPTS if higher, so that the worker's own
        verdict comes first) is how many deliveries of a message may begin without a
        verdict before the session dead-letters it (`sessions.py`)."""
        self._queue = settings.queue_name
        self._timeout = settings.sdk_timeout_seconds
        self._client, self._credential = servicebus_client(settings, try_timeout=self._timeout)
        self._sessions_client, _ = servicebus_client(
            settings, self._credential, retry_total=0, try_timeout=self._timeout
        )
        self._limits = SessionLimits(
            timeout=self._timeout,
            max_renewal=max_lock_renewal_seconds or settings.max_lock_renewal_seconds,
            max_abandon_delay=max_abandon_delay,
            clock=clock,
            max_deliveries=max_deliveries or max(MAX_DELIVERY_COUNT, settings.max_attempts),
        )
        self._parked = ParkedSessions(settings.lock_duration_seconds)
        # One session in each worker's hands, and as many parked for a delayed abandon.
        self._sessions = HeldSessions(max_sessions or 2 * settings.concurrency)
        self._sending = Sending(lambda: self._client.get_queue_sender(self._queue), self._timeout)
        self._dead_letters = DeadLetterQueue(self._client, self._queue, self._timeout)
        self._counts = QueueCounts(
            settings,
            self._credential,
            self._sessions_client,
            use_admin_counts=use_admin_counts,
            admin_options=admin_options,
        )

    async def send(
        self,
        body: bytes,
        session_id: str,
        *,
        message_id: str | None = None,
        properties: Mapping[str, Any] | None = None,
    ) -> None:
        """Enqueue one message on a session (a fresh message id unless one is given);
        InvalidMessageId past 128 characters, checked before the SDK's plain ValueError."""
        message = ServiceBusMessage(
            body,
            session_id=service_bus_session(session_id),
            message_id=checked_message_id(message_id) if message_id else uuid.uuid4().hex,
            application_properties=session_properties(  # type: ignore[arg-type]
                session_id, properties or {}
            ),
        )
        await self._sending.send(message)

    async def accept_session(self, max_wait: float) -> AzureSession | None:
        """Lock the next session with a deliverable message; None when the service found
        none in time, or when as many sessions as the queue may hold are held throughout
        `max_wait`. The service's wait is at most half the SDK's timeout (see the module
        docstring)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        if not await self._sessions.take(max_wait):
            return None
        max_wait -= loop.time() - started
        wait = max(min(max_wait, self._timeout * ACCEPT_WAIT_SHARE), MIN_WAIT_SECONDS)
        receiver = self._sessions_client.get_queue_receiver(
            self._queue,
            session_id=NEXT_AVAILABLE_SESSION,
            max_wait_time=wait,
            timeout=self._timeout,  # its wait for a settlement's outcome (settle_deadline)
        )
        opened = False
        try:
            opened = await guarded(
                _open_or_time_out(receiver), wait + self._timeout + BACKSTOP_SECONDS, SERVICE_BUS
            )
        finally:
            if not opened:
                self._sessions.give_back()
                await close_quietly(receiver, self._timeout)
        if not opened:
            return None
        return AzureSession(
            receiver, self._limits, self._parked.park, released=self._sessions.give_back
        )

    async def is_drained(self) -> bool:
        """True when nothing is queued, scheduled or locked (`queue_counts.py`)."""
        return not await self._counts.any_active()

    async def stats(self) -> QueueStats:
        """Depths and dead letters by reason (peeked); the active count and the oldest
        message's age as `queue_counts.py` can tell them."""
        dead = await self._dead_letters.entries()
        active = await self._counts.active()
        by_reason = Counter(entry.reason for entry in dead)
        return QueueStats(
            queue_depth=active.count,
            dead_letter_depth=len(dead),
            dead_letters_by_reason=dict(sorted(by_reason.items())),
            oldest_enqueued_at=active.oldest_enqueued_at,
        )

    async def dead_letters(self, reason: str | None = None) -> list[DeadLetteredMessage]:
        """The dead-letter sub-queue, oldest first, optionally of one reason (peeked)."""
        return await self._dead_letters.entries(reason)

    async def dead_letter_entry(self, sequence_number: int) -> DeadLetteredMessage:
        """One dead-lettered message; NotFound when it is not there."""
        return await self._dead_letters.entry(sequence_number)

    async def replay(self, sequence_number: int) -> None:
        """Re-send the dead-lettered body on its session with `replay_of`/`replay_count`
        (same message id), then complete the dead-lettered copy."""

        async def resend(
            body: bytes, session_id: str, message_id: str | None, properties: dict[str, Any]
        ) -> None:
            await self.send(body, session_id, message_id=message_id, properties=properties)

        await self._dead_letters.replay(sequence_number, resend)

    async def purge(self, sequence_number: int) -> None:
        """Remove one dead-lettered message for good; NotFound when it is not there."""
        await self._dead_letters.purge(sequence_number)

    async def close(self) -> None:
        """Abandon parked deliveries now, then release the connections and the credential."""
        try:
            await self._parked.close()
            await self._sending.close()
            await close_quietly(self._sessions_client, self._timeout)
        finally:
            await _close_client(self._client, self._credential, self._timeout)


class AzurePublisher:
    """Sends export.published to the topic; duplicate detection on the topic makes the
    same message id (the export id) one event."""

    def __init__(self, settings: Settings) -> None:
        """Authenticated like the queue; the topic is `settings.topic_name`."""
        self._topic = settings.topic_name
        self._timeout = settings.sdk_timeout_seconds
        self._client, self._credential = servicebus_client(settings, try_timeout=self._timeout)
        self._sending = Sending(lambda: self._client.get_topic_sender(self._topic), self._timeout)

    async def publish(
        self, message_id: str, body: bytes, properties: Mapping[str, Any] | None = None
    ) -> None:
        """Send one event with this message id, as JSON, with `properties` as application
        properties (what subscription SQL rules filter on)."""
        message = ServiceBusMessage(
            body,
            message_id=message_id,
            content_type="application/json",
            application_properties=dict(properties or {}),  # type: ignore[arg-type]
        )
        await self._sending.send(message)

    async def sent(self) -> list[dict[str, Any]]:
        """Not available: a topic cannot be listed (read a subscription instead)."""
        raise NotImplementedError(
            "the Service Bus topic cannot list what was sent; read one of its subscriptions"
        )

    async def close(self) -> None:
        """Release the sender, the connection and the credential."""
        try:
            await self._sending.close()
        finally:
            await _close_client(self._client, self._credential, self._timeout)


class Sending:
    """A sender opened on first use, one send at a time, and replaced after our deadline cut
    a send short (it may have been mid-frame).

    One at a time because an SDK sender is not safe to share between coroutines: two first
    sends racing to open its link break it (seen with two session workers publishing)."""

    def __init__(
        self,
        open_sender: Callable[[], ServiceBusSender],
        timeout: float,
        backstop: float = BACKSTOP_SECONDS,
    ) -> None:
        self._open = open_sender
        self._timeout = timeout
        self._backstop = backstop
        self._sender: ServiceBusSender | None = None
        self._one_at_a_time = asyncio.Lock()

    async def send(self, message: ServiceBusMessage) -> None:
        """Send one message within the SDK's timeout (and our backstop)."""
        async with self._one_at_a_time:
            if self._sender is None:
                self._sender = self._open()
            sender = self._sender
            try:
                await guarded(
                    sender.send_messages(message, timeout=self._timeout),
                    self._timeout + self._backstop,
                    SERVICE_BUS,
                )
            except DeadlineExceeded:
                self._sender = None
                await close_quietly(sender, self._timeout)
                raise

    async def close(self) -> None:
        """Close the sender, if one was opened."""
        if self._sender is not None:
            sender, self._sender = self._sender, None
            await close_quietly(sender, self._timeout)


async def _close_client(client: ServiceBusClient, credential: Any, timeout: float) -> None:
    """Release the client's connections, and the credential whatever fails."""
    try:
        await close_quietly(client, timeout)
    finally:
        if credential is not None:
            await credential.close()


async def _open_or_time_out(receiver: ServiceBusReceiver) -> bool:
    """Open a NEXT_AVAILABLE_SESSION receiver: False when the service found no session in
    its wait; any other timeout (the SDK's own deadline) is raised."""
    try:
        await receiver.__aenter__()
    except OperationTimeoutError as exc:
        if _service_found_no_session(exc):
            return False
        raise
    return True


def _service_found_no_session(exc: BaseException) -> bool:
    """Whether the timeout is the service's `com.microsoft:timeout` answer.

    With its retries spent, azure-servicebus 7.15 raises a fresh OperationTimeoutError
    `from` the last attempt's error, and only an error built from an AMQP frame carries the
    frame's condition (`_condition`, decoded to text); the SDK's own deadlines raise
    without one. So the chain of causes is searched, not the outer exception alone."""
    seen: BaseException | None = exc
    for _ in range(MAX_CAUSES):
        if seen is None:
            break
        condition = getattr(seen, "_condition", None)
        condition = getattr(condition, "value", condition)  # an ErrorCondition member
        if isinstance(condition, bytes):
            condition = condition.decode("utf-8", "replace")
        if condition == NO_SESSION_CONDITION:
            return True
        seen = seen.__cause__
    return False
