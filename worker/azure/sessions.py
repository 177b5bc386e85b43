"""One accepted Service Bus session, and the sessions parked until a delayed abandon is due.

A session holds at most one delivery unsettled (the port hands out one message of a
session at a time). Three rules come from how azure-servicebus 7.15 settles and times out:

- A delivery gets one disposition. The SDK waits for the service to confirm it (for the
  SDK timeout: `settle_deadline`), then settles again over the management link itself;
  whatever happens after that, the delivery is forgotten here, so a repeat of the call (the
  call retries repeat `IDEMPOTENT` calls) raises LockLost instead of sending a second one.
- Our deadline on a call lies past the SDK's own bound (`worker/azure/timeouts.py`). When
  it fires anyway the receiver may be mid-frame: the session is given up (LockLost) and
  the receiver only closed.
- Lock renewal is capped per message: a delivery held longer than `max_renewal` seconds is
  not renewed again (LockLost), so a turn stuck for good lets its message go; the runtime
  then cancels the turn. Accepting the session does not start that count.

Service Bus does not count a delivery whose session is closed before it is settled, and a
killed worker's connection closes with it ("Message sessions", impact of delivery count):
a message that kills every holder (an OOM) would come back for ever. The session counts
instead, in its own session state, before a delivery is handed out: `{"seq", "began"}`,
the deliveries of its head message that began. The port's delivery count is that count
(or the service's, if higher); a message that began `max_deliveries` times without a
verdict is dead-lettered `MaxDeliveryCountExceeded`, as the local queue does. A verdict
clears the count (Service Bus keeps a session's state for ever, and its session browser
lists a session that holds one), and a session closed with its message unsettled takes
the count back (the service's rule, kept).

Service Bus has no delayed abandon, and a message cannot be kept from delivery for a while
at the head of its session except by holding the session's lock. `abandon(message, delay)`
parks the delivery instead: the session stays held (its lock renewed, its later messages
held back, so the conversation's order is kept) while the worker goes on with other
sessions, and the message is abandoned when the delay is over, or at once when the queue
closes (SIGTERM).

Each session held keeps its own receiver, and with it an AMQP connection, so the sessions
a queue holds, in a worker's hands or parked, are bounded (`HeldSessions`): while that
many are held an accept waits for one to be released, and comes back empty if none is
released within its wait. A dependency that fails every turn then slows the worker down, each
delay still waited out in full, instead of having it lock every conversation in the queue.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import msgspec
from azure.servicebus import ServiceBusReceivedMessage
from azure.servicebus.aio import ServiceBusReceiver
from azure.servicebus.exceptions import ServiceBusError

from worker.azure.messages import to_queue_message
from worker.azure.timeouts import (
    BACKSTOP_SECONDS,
    SERVICE_BUS,
    DeadlineExceeded,
    cancelled_surely,
    guarded,
)
from worker.logs import get_logger
from worker.ports import (
    MAX_DELIVERY_COUNT,
    MAX_DELIVERY_REASON,
    LockLost,
    PortError,
    QueueMessage,
)

T = TypeVar("T")
Clock = Callable[[], float]

MIN_WAIT_SECONDS = 0.05
# How often a parked session looks at the clock (a test's clock may be moved by hand).
PARK_POLL_SECONDS = 0.1

log = get_logger()


def settle_sdk_bound(sdk_timeout: float) -> float:
    """Seconds the SDK itself may take over a settlement: its wait for the service to
    confirm the disposition, then its re-settlement over the management link (the client's
    `try_timeout`), each `sdk_timeout`.

    azure-servicebus 7.15 waits for that confirmation for the receiver's `timeout`
    configuration, 60 s unless given: every receiver that settles is built with
    `timeout=sdk_timeout`, so that a settlement meeting a network gone silent ends as soon as
    every other call does (and a shutdown fits the replica's termination grace)."""
    return 2 * sdk_timeout


def settle_deadline(sdk_timeout: float, backstop: float = BACKSTOP_SECONDS) -> float:
    """Seconds a settlement may take before our deadline ends it: the SDK's bound and the
    backstop."""
    return settle_sdk_bound(sdk_timeout) + backstop


class SessionLimits(msgspec.Struct, frozen=True):
    """What every session of a queue is bounded by."""

    timeout: float  # the SDK's bound on one call (SDK_TIMEOUT_SECONDS, the client's try_timeout)
    max_renewal: float  # seconds one delivery's lock is renewed at most
    max_abandon_delay: float  # the longest delayed abandon honoured
    clock: Clock  # seconds; what delays and the renewal cap are measured on
    backstop: float = BACKSTOP_SECONDS  # our deadline past the SDK's bound
    max_deliveries: int = MAX_DELIVERY_COUNT  # deliveries without a verdict, then dead-lettered


class DeliveryCount(msgspec.Struct, frozen=True):
    """A session's state: how many deliveries of message `seq` began."""

    seq: int
    began: int


def _decoded_count(state: bytes | None) -> DeliveryCount | None:
    """The count a session state holds; None for none, or for a state not ours."""
    if not state:
        return None
    try:
        return msgspec.json.decode(bytes(state), type=DeliveryCount)
    except (msgspec.DecodeError, TypeError, ValueError):
        return None


class _Held(msgspec.Struct):
    """The delivery a session holds unsettled."""

    message: QueueMessage
    raw: ServiceBusReceivedMessage
    received_at: float
    due: float | None = None  # parked by a delayed abandon: released at this time


class AzureSession:
    """One accepted session: its receiver and the one delivery it holds unsettled."""

    def __init__(
        self,
        receiver: ServiceBusReceiver,
        limits: SessionLimits,
        park: Callable[[AzureSession], None],
        released: Callable[[], None] = lambda: None,
    ) -> None:
        """`park` takes the session while a delayed abandon is waited out; `released` is
        called once, when the receiver is let go."""
        self._receiver = receiver
        self._limits = limits
        self._park = park
        self._released: Callable[[], None] | None = released
        self._held: _Held | None = None
        # Our deadline cut a call short: the receiver may be mid-frame and is not used again.
        self._given_up = False
        self.session_id: str = receiver.session.session_id
        # The session state as last read or written (read once, on the first receive).
        self._count: DeliveryCount | None = None
        self._count_read = False
        self._count_settled = False  # the counted delivery reached a verdict

    async def receive(self, max_wait: float) -> QueueMessage | None:
        """The session's next message, peek-locked; None when none came in `max_wait`.

        A parked delivery that falls due within `max_wait` is abandoned, then received
        again. While a delivery is unsettled the answer is None (one message of a session in
        flight), once the service has confirmed that the session lock is still ours: only
        a renewal asks it that (a receive would lock the session's next message), so the
        lock is extended on the way, as the runtime's renewals do.
        """
        held = self._held
        if held is not None and held.due is not None and await self._due_within(max_wait):
            await self._settle(held.message, self._receiver.abandon_message)
            held = None
        if held is not None:
            await self.renew_lock()
            return None
        wait = max(max_wait, MIN_WAIT_SECONDS)
        while True:
            received = await self._receive_one(wait)
            if received is None:
                return None
            message = await self._counted(received)
            if message is not None:
                return message
            wait = MIN_WAIT_SECONDS  # the message behind it, if already queued

    async def _receive_one(self, wait: float) -> ServiceBusReceivedMessage | None:
        received: list[ServiceBusReceivedMessage] = await self._call(
            lambda: self._receiver.receive_messages(max_message_count=1, max_wait_time=wait),
            wait + self._limits.timeout,
        )
        return received[0] if received else None

    async def _counted(self, raw: ServiceBusReceivedMessage) -> QueueMessage | None:
        """The delivery of `raw` counted in the session state, then held; None once a
        message that began `max_deliveries` times is dead-lettered instead."""
        message = to_queue_message(raw)
        seq = message.sequence_number
        if not self._count_read:
            timeout = self._limits.timeout
            state = await self._call(
                lambda: self._receiver.session.get_state(timeout=timeout), timeout
            )
            self._count, self._count_read = _decoded_count(state), True
        counted = self._count
        began = counted.began if counted is not None and counted.seq == seq else 0
        if began >= self._limits.max_deliveries:
            self._held = _Held(message, raw, self._limits.clock())
            await self.dead_letter(
                message,
                MAX_DELIVERY_REASON,
                f"delivered {began} times, never completed or dead-lettered"
                " (counted by the worker: its holders stopped before a verdict)",
            )
            log.warning(
                "delivery_limit_dead_lettered",
                session_id=self.session_id,
                sequence_number=seq,
                deliveries=began,
            )
            return None
        began = max(began, message.delivery_count - 1) + 1
        await self._write_count(DeliveryCount(seq, began))
        message = msgspec.structs.replace(message, delivery_count=began)
        self._held = _Held(message, raw, self._limits.clock())
        return message

    async def _write_count(self, count: DeliveryCount | None) -> None:
        """Set (or, with None, clear) the session state."""
        timeout = self._limits.timeout
        state = None if count is None else msgspec.json.encode(count)
        await self._call(lambda: self._receiver.session.set_state(state, timeout=timeout), timeout)
        self._count, self._count_settled = count, False

    async def complete(self, message: QueueMessage) -> None:
        """Remove the message: its work is done."""
        await self._settle(message, self._receiver.complete_message)
        await self._settled(message)

    async def abandon(self, message: QueueMessage, delay: float = 0.0) -> None:
        """Release the message's lock now, or park it for `delay` seconds (bounded): the
        session stays held meanwhile and the message is abandoned when the delay is over."""
        held = self._holding(message)
        if delay <= 0:
            await self._settle(message, self._receiver.abandon_message)
            return
        held.due = self._limits.clock() + min(delay, self._limits.max_abandon_delay)

    async def dead_letter(self, message: QueueMessage, reason: str, description: str) -> None:
        """Move the message to the dead-letter sub-queue with a reason and a description."""

        async def move(raw: ServiceBusReceivedMessage) -> None:
            await self._receiver.dead_letter_message(
                raw, reason=reason, error_description=description
            )

        await self._settle(message, move)
        await self._settled(message)

    async def renew_lock(self) -> None:
        """Extend the session lock (which covers the session's messages); LockLost once the
        delivery held has been renewed for `max_renewal` seconds."""
        held = self._held
        if held is not None and held.due is None:
            held_for = self._limits.clock() - held.received_at
            if held_for >= self._limits.max_renewal:
                raise LockLost(
                    f"message {held.message.sequence_number} held {held_for:.0f} s, past the"
                    f" maximum lock renewal of {self._limits.max_renewal:g} s: its lock lapses"
                )
        await self._renew()

    async def close(self) -> None:
        """Release the session (an unsettled message goes to the next holder uncounted); a
        parked one is handed to the queue, which keeps the session until the delay is over."""
        if self.parked and not self.due:
            self._park(self)
            return
        await self.release()

    # ---- used by ParkedSessions ------------------------------------------------------
    @property
    def parked(self) -> bool:
        """Whether the delivery held waits out a delayed abandon."""
        return self._held is not None and self._held.due is not None and not self._given_up

    @property
    def due(self) -> bool:
        """Whether a parked delivery's delay is over."""
        held = self._held
        return held is not None and held.due is not None and self._limits.clock() >= held.due

    async def renew_parked(self) -> None:
        """Keep a parked session's lock (the per-message cap does not apply: the delay is
        bounded by `max_abandon_delay`)."""
        await self._renew()

    async def release(self) -> None:
        """Abandon a parked delivery now, then close the receiver; before it, take back
        the count of a delivery left unsettled, or clear the count of a settled one."""
        try:
            if self.parked:
                assert self._held is not None
                with contextlib.suppress(PortError):  # lost meanwhile: its lock lapses
                    await self._settle(self._held.message, self._receiver.abandon_message)
            elif not self._given_up:
                with contextlib.suppress(PortError):  # lost meanwhile: the count stays
                    await self._tidy_count()
        finally:
            self._held = None
            if self._released is not None:  # counted before the close, which may be cut short
                released, self._released = self._released, None
                released()
            await close_quietly(self._receiver, self._limits.timeout)

    # ---- internals -------------------------------------------------------------------
    async def _settled(self, message: QueueMessage) -> None:
        """The message reached a verdict: its count is cleared, now (the state outlives the
        session's messages, and a session browser lists a session that holds one) or, if
        that fails, when the session is released; the verdict stands either way."""
        counted = self._count
        if counted is None or counted.seq != message.sequence_number:
            return
        self._count_settled = True
        with contextlib.suppress(PortError):
            await self._write_count(None)

    async def _tidy_count(self) -> None:
        """As the session closes: a delivery held unsettled goes to the next holder
        uncounted (as Service Bus releases it); a count whose delivery reached a verdict and
        could not be cleared then is cleared now."""
        counted, held = self._count, self._held
        if counted is None:
            return
        if held is not None and held.message.sequence_number == counted.seq:
            earlier = counted.began - 1
            await self._write_count(DeliveryCount(counted.seq, earlier) if earlier else None)
        elif self._count_settled:
            await self._write_count(None)

    async def _due_within(self, max_wait: float) -> bool:
        """Wait (at most `max_wait` real seconds) for the parked delivery to fall due."""
        loop = asyncio.get_running_loop()
        until = loop.time() + max(max_wait, 0.0)
        while not self.due and loop.time() < until:
            await asyncio.sleep(min(PARK_POLL_SECONDS, until - loop.time()))
        return self.due

    async def _renew(self) -> None:
        timeout = self._limits.timeout
        await self._call(lambda: self._receiver.session.renew_lock(timeout=timeout), timeout)

    def _holding(self, message: QueueMessage) -> _Held:
        """The held delivery of `message`: LockLost for a settled, stale or foreign one."""
        held = self._held
        if held is None or held.message is not message:
            raise LockLost(f"message {message.sequence_number} is not held by this session")
        return held

    async def _settle(
        self,
        message: QueueMessage,
        settle: Callable[[ServiceBusReceivedMessage], Awaitable[None]],
    ) -> None:
        """Send the delivery's one disposition; it is forgotten whatever the outcome."""
        raw = self._holding(message).raw
        self._held = None
        try:
            await self._call(lambda: settle(raw), settle_sdk_bound(self._limits.timeout))
        except BaseException:
            # Its outcome is unknown: the message may still be locked to this session, and
            # the next receive would hand out the one behind it first. Given up, the
            # session is closed and the message goes to the next holder, in order.
            self._given_up = True
            raise

    async def _call(self, operation: Callable[[], Awaitable[T]], sdk_bound: float) -> T:
        """One SDK call on the receiver, within the SDK's bound plus the backstop."""
        if self._given_up:
            raise LockLost(f"session {self.session_id!r} was given up after a call hung")
        try:
            return await guarded(operation(), sdk_bound + self._limits.backstop, SERVICE_BUS)
        except DeadlineExceeded as exc:
            self._given_up = True
            self._held = None
            raise LockLost(f"session {self.session_id!r} given up: {exc}") from exc
        except LockLost:
            raise
        except Exception as exc:
            shut_by = receiver_shut_down_by(exc)
            if shut_by is None:
                raise
            self._given_up = True
            self._held = None
            raise LockLost(
                f"session {self.session_id!r} lost: the SDK closed its receiver after "
                f"{type(shut_by).__name__}"
            ) from exc


def receiver_shut_down_by(exc: BaseException) -> ServiceBusError | None:
    """The SDK error, raised by a session receiver's call or the cause of our port error
    for it, after which the SDK closed the receiver's link; None for any other.

    A closed link ends the session's lock: Service Bus frees a session whose receiving link
    or connection is gone, and the SDK's next call opens a new link, with the session again
    if nobody took it meanwhile. Its old deliveries cannot be settled any more. The SDK
    marks the session lost itself only after `SessionLockLostError` or
    `ServiceBusConnectionError` (`_handle_exception`), so a connection the service closed
    (`amqp:connection:forced`, a gateway restarting) under a management call came out as a
    generic `ServiceBusError`, a failed renewal retried at the next interval, and the turn
    went on without its lock (tests/azure/test_servicebus_adapter_on_broker.py). Every error
    the SDK's exceptions flag `shutdown_handler` closed the link; a busy server or an
    operation timeout (not flagged) leaves it, and the lock, as they were."""
    for error in (exc, exc.__cause__):
        if isinstance(error, ServiceBusError):
            return error if getattr(error, "_shutdown_handler", False) else None
    return None


class HeldSessions:
    """How many sessions a queue holds, in a worker's hands or parked, at most `limit`.

    A place is taken before an accept locks a session (so concurrent accepts cannot pass
    the limit together) and given back when the accept comes back empty or fails, or when
    the session's receiver is let go."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._held = 0
        self._freed = asyncio.Event()

    def __len__(self) -> int:
        return self._held

    async def take(self, max_wait: float) -> bool:
        """Take a place, waiting up to `max_wait` seconds for one to be given back while
        all are taken; False when none was."""
        loop = asyncio.get_running_loop()
        until = loop.time() + max(max_wait, 0.0)
        while self._held >= self.limit:
            self._freed.clear()
            left = until - loop.time()
            if left <= 0:
                return False
            # asyncio.timeout, not wait_for: a stop that came as a place was given back
            # would be lost (`cancelled_surely`) and an accept opened after it.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await self._freed.wait()
        self._held += 1
        return True

    def give_back(self) -> None:
        """A session is let go (or an accept locked none): its place is free."""
        self._held -= 1
        self._freed.set()


class ParkedSessions:
    """Sessions whose delivery waits out a delayed abandon, held off the workers' hands:
    each lock renewed every third of `lock_duration`, each delivery abandoned when due, all
    of them at once when the queue closes. A session is let go before it is due when its
    lock is lost, or when no renewal extended it for a whole `lock_duration` (each failed,
    as on a network that stopped answering): it has lapsed at the service."""

    def __init__(self, lock_duration: float, poll: float = PARK_POLL_SECONDS) -> None:
        self._lock_duration = lock_duration
        self._renew_every = lock_duration / 3
        self._poll = poll
        self._closing = asyncio.Event()
        self._holding: set[asyncio.Task[None]] = set()

    def park(self, session: AzureSession) -> None:
        """Hold `session` until its delivery is due (or the queue closes)."""
        task = asyncio.get_running_loop().create_task(self._hold(session))
        self._holding.add(task)
        task.add_done_callback(self._holding.discard)

    def __len__(self) -> int:
        return len(self._holding)

    async def close(self) -> None:
        """Abandon every parked delivery now and close their receivers."""
        self._closing.set()
        if self._holding:
            await asyncio.gather(*self._holding, return_exceptions=True)

    async def _hold(self, session: AzureSession) -> None:
        loop = asyncio.get_running_loop()
        extended_at = loop.time()  # the lock as parked, then each renewal's (sent at)
        next_renewal = extended_at + self._renew_every
        try:
            while not self._closing.is_set() and not session.due:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._poll):
                        await self._closing.wait()
                if loop.time() >= next_renewal and not self._closing.is_set():
                    sent_at = loop.time()
                    next_renewal = sent_at + self._renew_every
                    failure = await self._renewal_failure(session)
                    if failure is None:
                        extended_at = sent_at
                    elif (
                        isinstance(failure, LockLost)
                        or loop.time() - extended_at >= self._lock_duration
                    ):
                        return  # the lock is gone: the delay cannot be kept
        finally:
            await session.release()

    @staticmethod
    async def _renewal_failure(session: AzureSession) -> PortError | None:
        """Renew a parked session's lock: None, or why it failed (logged). A transient
        failure leaves the lock two more renewals before it lapses."""
        try:
            await session.renew_parked()
        except PortError as exc:
            log.warning(
                "parked_session_renewal_failed",
                session_id=session.session_id,
                error=type(exc).__name__,
            )
            return exc
        return None


async def close_quietly(closable: Any, timeout: float) -> None:
    """Close an SDK handler, bounded; a failure to close changes nothing for the caller."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(timeout + BACKSTOP_SECONDS):
            await cancelled_surely(closable.close())
