"""The queue's dead-letter sub-queue on Service Bus: list, show, replay, purge.

Reading is peeking (no lock, sequence-number order, exact: a peek from a sequence number
starts at that message when it is there). Replay and purge need the message itself, and a
dead-letter sub-queue hands its messages out only in the order they arrived in it, so the
wanted one is found by receiving one message at a time:

- a peek first says whether it is there at all (NotFound otherwise, without locking
  anything);
- dead letters received before it are held locked until it is settled, then abandoned
  (their delivery count goes up by one: Service Bus has no uncounted release in the SDK);
  one message per receive, so nothing behind the wanted one is ever locked;
- a receive that comes back empty is not taken for absence: a peek decides again, and a
  dead letter still there is locked by another receiver (TransientError, try again once
  its lock expires);
- the scan ends without reaching it (TransientError, after the same peek) when a dead
  letter comes back a second time, or after `MAX_PASSED` dead letters. A dead letter comes
  back once its lock lapses, when the scan has taken longer than the queue's lock
  duration, and every one passed then comes round again: the scan would never end. The
  bound also caps what is held locked (and in memory) at once.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from azure.servicebus import ServiceBusReceivedMessage, ServiceBusSubQueue
from azure.servicebus.aio import ServiceBusClient, ServiceBusReceiver

from worker.azure.messages import body_bytes, decoded_properties, sent_session, to_dead_letter
from worker.azure.sessions import close_quietly, settle_deadline
from worker.azure.timeouts import BACKSTOP_SECONDS, SERVICE_BUS, guarded
from worker.ports import DeadLetteredMessage, NotFound, TransientError

PEEK_PAGE = 100
# Service Bus answers an empty receive only after its wait: kept short for an operator.
SCAN_WAIT_SECONDS = 2.0
# The most dead letters a replay or purge receives (and holds locked) on the way to its own.
MAX_PASSED = 1000

Resend = Callable[[bytes, str, str | None, dict[str, Any]], Awaitable[None]]
Action = Callable[[ServiceBusReceiver, ServiceBusReceivedMessage], Awaitable[None]]


class DeadLetterQueue:
    """The dead-letter sub-queue of `queue`, read and settled through `client`."""

    def __init__(self, client: ServiceBusClient, queue: str, timeout: float) -> None:
        self._client = client
        self._queue = queue
        self._timeout = timeout

    async def entries(self, reason: str | None = None) -> list[DeadLetteredMessage]:
        """Every dead letter, by sequence number, optionally of one reason (peeked)."""
        found: list[DeadLetteredMessage] = []
        async with self._receiver() as receiver:
            start = 1
            while True:
                page = await self._peek(receiver, PEEK_PAGE, start)
                if not page:
                    break
                found.extend(to_dead_letter(raw) for raw in page)
                start = (page[-1].sequence_number or start) + 1
        return [entry for entry in found if reason is None or entry.reason == reason]

    async def entry(self, sequence_number: int) -> DeadLetteredMessage:
        """One dead letter; NotFound when it is not there."""
        async with self._receiver() as receiver:
            raw = await self._peeked(receiver, sequence_number)
        if raw is None:
            raise NotFound(f"no dead letter with sequence number {sequence_number}")
        return to_dead_letter(raw)

    async def replay(self, sequence_number: int, resend: Resend) -> None:
        """Re-send the dead letter's body on its session (same message id, `replay_of`,
        `replay_count` one more), then complete the dead-lettered copy."""

        async def again(receiver: ServiceBusReceiver, raw: ServiceBusReceivedMessage) -> None:
            properties = decoded_properties(raw)
            previous = properties.get("replay_count")
            properties["replay_of"] = raw.sequence_number
            properties["replay_count"] = (previous if isinstance(previous, int) else 0) + 1
            message_id = str(raw.message_id) if raw.message_id else None
            # A crash between this send and the completion leaves the dead letter in place
            # and the event queued: a second replay queues it again, and the ledger makes
            # the turn's second delivery a no-op (docs/contract/delivery.md).
            await resend(body_bytes(raw), sent_session(raw), message_id, properties)
            await self._complete(receiver, raw)

        await self._take(sequence_number, again)

    async def purge(self, sequence_number: int) -> None:
        """Remove one dead letter for good; NotFound when it is not there."""
        await self._take(sequence_number, self._complete)

    async def _take(self, sequence_number: int, act: Action) -> None:
        """Receive the dead letter `sequence_number` (see the module docstring) and `act`
        on it; the dead letters received before it are abandoned after."""
        passed: list[ServiceBusReceivedMessage] = []
        seen: set[int | None] = set()
        async with self._receiver() as receiver:
            try:
                await self._still_there(receiver, sequence_number)
                while True:
                    raw = await self._receive_one(receiver)
                    if raw is None:
                        await self._still_there(receiver, sequence_number)
                        raise TransientError(
                            f"dead letter {sequence_number} is locked by another receiver"
                        )
                    if raw.sequence_number == sequence_number:
                        await act(receiver, raw)
                        return
                    passed.append(raw)
                    if raw.sequence_number in seen:
                        await self._still_there(receiver, sequence_number)
                        raise TransientError(
                            f"dead letter {sequence_number} not reached: dead letter"
                            f" {raw.sequence_number} came back, its lock lapsed while"
                            f" {len(seen)} dead letters ahead were received; try again"
                        )
                    seen.add(raw.sequence_number)
                    if len(seen) >= MAX_PASSED:
                        await self._still_there(receiver, sequence_number)
                        raise TransientError(
                            f"dead letter {sequence_number} not reached within the"
                            f" {MAX_PASSED} dead letters ahead of it; replay or purge"
                            " those first"
                        )
            finally:
                for raw in passed:
                    with contextlib.suppress(Exception):  # its lock lapses instead
                        await guarded(
                            receiver.abandon_message(raw),
                            settle_deadline(self._timeout),
                            SERVICE_BUS,
                        )

    async def _still_there(self, receiver: ServiceBusReceiver, sequence_number: int) -> None:
        """NotFound unless a peek finds the dead letter `sequence_number`."""
        if await self._peeked(receiver, sequence_number) is None:
            raise NotFound(f"no dead letter with sequence number {sequence_number}")

    async def _receive_one(self, receiver: ServiceBusReceiver) -> ServiceBusReceivedMessage | None:
        batch: list[ServiceBusReceivedMessage] = await guarded(
            receiver.receive_messages(max_message_count=1, max_wait_time=SCAN_WAIT_SECONDS),
            SCAN_WAIT_SECONDS + self._timeout + BACKSTOP_SECONDS,
            SERVICE_BUS,
        )
        return batch[0] if batch else None

    async def _complete(self, receiver: ServiceBusReceiver, raw: ServiceBusReceivedMessage) -> None:
        await guarded(receiver.complete_message(raw), settle_deadline(self._timeout), SERVICE_BUS)

    async def _peeked(
        self, receiver: ServiceBusReceiver, sequence_number: int
    ) -> ServiceBusReceivedMessage | None:
        page = await self._peek(receiver, 1, sequence_number)
        if page and page[0].sequence_number == sequence_number:
            return page[0]
        return None

    async def _peek(
        self, receiver: ServiceBusReceiver, count: int, start: int
    ) -> list[ServiceBusReceivedMessage]:
        page: list[ServiceBusReceivedMessage] = await guarded(
            receiver.peek_messages(
                max_message_count=count, sequence_number=start, timeout=self._timeout
            ),
            self._timeout + BACKSTOP_SECONDS,
            SERVICE_BUS,
        )
        return page

    @contextlib.asynccontextmanager
    async def _receiver(self) -> AsyncIterator[ServiceBusReceiver]:
        receiver = self._client.get_queue_receiver(
            self._queue,
            sub_queue=ServiceBusSubQueue.DEAD_LETTER,
            timeout=self._timeout,  # its wait for a settlement's outcome (settle_deadline)
        )
        try:
            await guarded(receiver.__aenter__(), self._timeout + BACKSTOP_SECONDS, SERVICE_BUS)
            yield receiver
        finally:
            await close_quietly(receiver, self._timeout)
