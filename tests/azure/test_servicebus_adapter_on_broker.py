"""The Service Bus adapter through the real SDK on the AMQP test broker: the defects a
line-by-line reading of it against azure-servicebus 7.15 found, each pinned here
(the port's own rules are the queue contract suite's, tests/contracts/)."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from types import SimpleNamespace

import pytest
import structlog
from azure_factories import isolated_settings

from tests.held_network import HeldNetwork
from tests.servicebus_broker import (
    EntityCounts,
    ManualClock,
    QueueConfig,
    ServiceBusBroker,
    SubscriptionConfig,
    TopicConfig,
)
from worker.azure.servicebus import AzureQueue
from worker.azure.timeouts import BACKSTOP_SECONDS
from worker.observer import NO_OBSERVER, RuntimeObserver
from worker.operations import Operations
from worker.ports import LockLost, NotFound, QueueMessage, TransientError
from worker.retry_policy import RetryPolicy
from worker.runtime import Runtime

pytestmark = pytest.mark.servicebus_broker

QUEUE = "turns"
LOCK_SECONDS = 30.0
WAIT = 10.0
# Where an accept is cancelled: every CANCEL_STEP_SECONDS from its start through the
# connection, the claims-based security exchange and the receiver's attach.
CANCEL_POINTS = 25
CANCEL_STEP_SECONDS = 0.01


@asynccontextmanager
async def azure_queue(
    broker: ServiceBusBroker, settings: Mapping[str, object] | None = None, **options: object
) -> AsyncIterator[AzureQueue]:
    """The adapter on the broker's queue, with these `settings` over the broker's connection
    string and the queue's name, and these constructor `options`; closed after."""
    configured = isolated_settings(
        **{
            "servicebus_connection_string": broker.connection_string,
            "queue_name": QUEUE,
            **(settings or {}),
        }
    )
    queue = AzureQueue(configured, **options)  # type: ignore[arg-type]
    try:
        yield queue
    finally:
        await queue.close()


async def next_holder_completes(queue: AzureQueue, body: bytes) -> None:
    """The next session accepted hands out a message with `body`, completed and closed."""
    session = await queue.accept_session(WAIT)
    assert session is not None
    message = await session.receive(WAIT)
    assert message is not None and message.body == body
    await session.complete(message)
    await session.close()


def one_worker(
    handler: object,
    queue: AzureQueue,
    *,
    lock_duration: float,
    backoff: float = 0.0,
    observer: RuntimeObserver = NO_OBSERVER,
) -> Runtime:
    """One session worker on `queue` with `handler`, renewing every third of
    `lock_duration`, a transient failure retried after `backoff` seconds."""
    return Runtime(
        handler,  # type: ignore[arg-type]
        queue,
        concurrency=1,
        retry=RetryPolicy(base_seconds=backoff, max_seconds=backoff),
        lock_duration=lock_duration,
        session_idle=0.2,
        shutdown_grace=1,
        observer=observer,
    )


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


def test_an_accept_waits_for_the_services_answer_not_for_the_sdks_deadline() -> None:
    # Only the service's "no session" answer is None, and the SDK's own deadline on the
    # link (its timeout) is an error: a wait as long as that deadline is shortened so the
    # answer comes first.
    async def body(broker: ServiceBusBroker) -> None:
        async with azure_queue(broker, {"sdk_timeout_seconds": 2.0}) as queue:
            started = time.monotonic()
            assert await queue.accept_session(5.0) is None
            assert time.monotonic() - started < 5.0

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


async def dead_letter_in_order(queue: AzureQueue, bodies: list[bytes]) -> list[int]:
    """One message per session, dead-lettered in the order sent: their sequence numbers."""
    for n, body in enumerate(bodies):
        await queue.send(body, f"conv-{n}")
    held = []
    for _ in bodies:
        session = await queue.accept_session(WAIT)
        assert session is not None
        message = await session.receive(WAIT)
        assert message is not None
        held.append((session, message))
    return [await bury(session, message) for session, message in held]


async def bury(session: object, message: object) -> int:
    await session.dead_letter(message, "schema_invalid", "x")  # type: ignore[attr-defined]
    await session.close()  # type: ignore[attr-defined]
    return message.sequence_number  # type: ignore[attr-defined]


def test_replaying_the_oldest_dead_letter_locks_no_other() -> None:
    # The dead-letter sub-queue hands its messages out oldest first: replaying its head
    # must not receive (lock, then abandon, so count up) the ones behind it.
    async def body(broker: ServiceBusBroker) -> None:
        async with azure_queue(broker) as queue:
            first, *rest = await dead_letter_in_order(queue, [b"a", b"b", b"c"])
            before = {d.sequence_number: d.delivery_count for d in await queue.dead_letters()}
            await queue.replay(first)
            after = {d.sequence_number: d.delivery_count for d in await queue.dead_letters()}
            assert after == {n: before[n] for n in rest}

    on_broker(body, ManualClock())


def test_a_dead_letter_that_arrived_after_a_higher_sequence_number_is_found() -> None:
    # Arrival order in the dead-letter sub-queue is not sequence order: passing a higher
    # sequence number on the way does not mean the wanted one is gone.
    async def body(broker: ServiceBusBroker) -> None:
        async with azure_queue(broker) as queue:
            for n in range(2):
                await queue.send(b"x", f"conv-{n}")
            older = await queue.accept_session(WAIT)
            newer = await queue.accept_session(WAIT)
            assert older is not None and newer is not None
            low, high = await older.receive(WAIT), await newer.receive(WAIT)
            assert low is not None and high is not None
            assert low.sequence_number < high.sequence_number
            await bury(newer, high)
            await bury(older, low)
            await queue.purge(low.sequence_number)
            assert [d.sequence_number for d in await queue.dead_letters()] == [high.sequence_number]

    on_broker(body, ManualClock())


def test_a_dead_letter_locked_by_another_receiver_is_busy_not_missing() -> None:
    from azure.servicebus import ServiceBusSubQueue
    from azure.servicebus.aio import ServiceBusClient

    clock = ManualClock()

    async def body(broker: ServiceBusBroker) -> None:
        async with azure_queue(broker) as queue:
            [only] = await dead_letter_in_order(queue, [b"a"])
            async with ServiceBusClient.from_connection_string(
                broker.connection_string, retry_total=0
            ) as other:
                receiver = other.get_queue_receiver(QUEUE, sub_queue=ServiceBusSubQueue.DEAD_LETTER)
                async with receiver:
                    [taken] = await receiver.receive_messages(1, max_wait_time=WAIT)
                    assert taken.sequence_number == only
                    with pytest.raises(TransientError, match="locked by another receiver"):
                        await queue.purge(only)
            clock.advance(LOCK_SECONDS + 1)  # the other receiver's lock lapses
            await queue.purge(only)
            assert await queue.dead_letters() == []
            with pytest.raises(NotFound):
                await queue.purge(only)

    on_broker(body, clock)


def test_an_accept_waits_while_the_queue_holds_as_many_sessions_as_it_may() -> None:
    # Each session held keeps an AMQP connection: the sessions held, in workers' hands or
    # parked for a delayed abandon, are bounded, and a place is free once one is let go.
    async def body(broker: ServiceBusBroker) -> None:
        async with azure_queue(broker, max_sessions=1) as queue:
            for n in range(2):
                await queue.send(b"x", f"conv-{n}")
            first = await queue.accept_session(WAIT)
            assert first is not None
            assert await queue.accept_session(0.5) is None  # conv-1 waits: one is held
            await first.close()
            second = await queue.accept_session(WAIT)
            assert second is not None
            await second.close()

    on_broker(body, ManualClock())


def test_an_accept_cancelled_while_it_waits_gives_back_its_connection_and_its_place() -> None:
    # The runtime cancels a waiting accept when the worker stops (worker/runtime.py,
    # `_accept`): the receiver the SDK was opening must be closed with its AMQP connection,
    # the place it took given back, and a turn queued afterwards delivered to the next
    # accept as its first delivery.
    async def body(broker: ServiceBusBroker) -> None:
        async with azure_queue(broker, max_sessions=1) as queue:
            baseline = broker.open_connections()
            accept = asyncio.ensure_future(queue.accept_session(WAIT))
            deadline = time.monotonic() + 10
            while broker.open_connections() == baseline and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert broker.open_connections() == baseline + 1  # the accept is waiting
            accept.cancel()
            started = time.monotonic()
            with pytest.raises(asyncio.CancelledError):
                await accept
            assert time.monotonic() - started < 2.0
            assert broker.open_connections(expected=baseline) == baseline
            await queue.send(b"x", "conv-after")
            session = await queue.accept_session(WAIT)  # the one place is free again
            assert session is not None and session.session_id == "conv-after"
            message = await session.receive(WAIT)
            assert message is not None and message.delivery_count == 1
            await session.complete(message)
            await session.close()

    on_broker(body, ManualClock())


def test_an_accept_cancelled_at_any_point_of_its_opening_ends_at_once() -> None:
    # The SDK reads each AMQP frame under asyncio.wait_for, which before Python 3.12 drops a
    # cancellation that arrives as a frame does (CPython gh-86296): a SIGTERM meeting the
    # accept's handshake was lost and the accept ran on to the end of the service's wait
    # (the worker took 16 s to stop). Cancelled at every point of its opening, an accept
    # ends at once, gives back its connection and its place, and the next one works.
    async def body(broker: ServiceBusBroker) -> None:
        async with azure_queue(broker, max_sessions=1) as queue:
            baseline = broker.open_connections()
            slowest = 0.0
            for step in range(CANCEL_POINTS):
                accept = asyncio.ensure_future(queue.accept_session(WAIT))
                await asyncio.sleep(step * CANCEL_STEP_SECONDS)
                accept.cancel()
                started = time.monotonic()
                with pytest.raises(asyncio.CancelledError):
                    await accept
                slowest = max(slowest, time.monotonic() - started)
                assert broker.open_connections(expected=baseline) == baseline
            assert slowest < 2.0, f"a cancelled accept took {slowest:.1f} s to end"
            await queue.send(b"x", "conv-after")
            session = await queue.accept_session(WAIT)  # the one place is free again
            assert session is not None and session.session_id == "conv-after"
            await session.close()

    on_broker(body, ManualClock())


def test_a_dependency_failing_every_turn_does_not_lock_every_conversation() -> None:
    # Every turn fails transiently with a long backoff: each failed delivery's session is
    # parked for the delay, with its own AMQP connection. Unbounded, one worker locked a
    # new conversation about twice a second; bounded, it holds at most two (one in hand,
    # one parked) and every delay is still waited out in full.
    class Failing:
        async def handle(self, message: object) -> object:
            raise TransientError("the store is down")

    async def body(broker: ServiceBusBroker) -> None:
        async with azure_queue(broker, {"concurrency": 1}, use_admin_counts=False) as queue:
            for n in range(12):
                await queue.send(b"{}", f"conv-{n}")
            baseline = broker.open_connections()
            runtime = one_worker(Failing(), queue, lock_duration=LOCK_SECONDS, backoff=30)
            running = asyncio.create_task(runtime.run())
            await asyncio.sleep(4.0)
            parked, connections = len(queue._parked), broker.open_connections()
            runtime.stop()
            await asyncio.wait_for(running, 10.0)
            assert parked <= 2 and connections <= baseline + 2
            assert runtime.stats.retried <= 2  # no delay cut short to make room

    on_broker(body, ManualClock())


def test_a_dead_letter_scan_longer_than_the_lock_ends_instead_of_going_round() -> None:
    # The dead letters passed on the way come back at the head once their locks lapse: the
    # scan received them again and again, and never reached the one wanted.
    import worker.azure.dead_letters as dead_letters

    clock = ManualClock()

    async def body(broker: ServiceBusBroker) -> None:
        async with azure_queue(broker) as queue:
            *ahead, wanted = await dead_letter_in_order(queue, [b"a", b"b", b"c"])
            scanned: list[int | None] = []
            receive = dead_letters.DeadLetterQueue._receive_one

            async def slow_receive(self: object, receiver: object) -> object:
                raw = await receive(self, receiver)  # type: ignore[arg-type]
                scanned.append(raw and raw.sequence_number)
                assert len(scanned) <= 10, f"the scan goes round: {scanned}"
                clock.advance(LOCK_SECONDS + 1)  # the scan outlives every lock it took
                return raw

            dead_letters.DeadLetterQueue._receive_one = slow_receive  # type: ignore[method-assign]
            try:
                with pytest.raises(TransientError, match="came back"):
                    await queue.purge(wanted)
            finally:
                dead_letters.DeadLetterQueue._receive_one = receive  # type: ignore[method-assign]
            assert scanned == [ahead[0], ahead[0]]
            await queue.purge(wanted)  # not lost: a scan within the lock reaches it
            assert wanted not in {d.sequence_number for d in await queue.dead_letters()}

    on_broker(body, clock)


def test_a_dead_letter_scan_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import worker.azure.dead_letters as dead_letters

    monkeypatch.setattr(dead_letters, "MAX_PASSED", 2)

    async def body(broker: ServiceBusBroker) -> None:
        async with azure_queue(broker) as queue:
            *ahead, wanted = await dead_letter_in_order(queue, [b"a", b"b", b"c"])
            with pytest.raises(TransientError, match="within the 2 dead letters ahead"):
                await queue.purge(wanted)
            await queue.purge(ahead[0])
            await queue.purge(wanted)  # one ahead of it now
            assert [d.sequence_number for d in await queue.dead_letters()] == [ahead[1]]

    on_broker(body, ManualClock())


DEAD_LETTERS = f"{QUEUE}/$DeadLetterQueue"


async def service_ends(broker: ServiceBusBroker, service: str, path: str = QUEUE) -> None:
    """Service Bus closes every connection (a gateway restart) or detaches the links on
    `path` (idle for 10 minutes); at least one was open."""
    if service == "closes the connection":
        assert await asyncio.to_thread(broker.force_close) >= 1
    else:
        assert await asyncio.to_thread(broker.force_detach, path) >= 1


@pytest.mark.parametrize("service", ["closes the connection", "detaches the link"])
def test_a_replay_whose_link_the_service_ends_after_the_resend_is_queued_once(
    service: str,
) -> None:
    # The dead letter is re-sent, then its link ends before its completion: a dead letter
    # left in place would be queued a second time by the operator's next replay. The lock
    # outlives its link, and the completion goes over the management link instead.
    async def body(broker: ServiceBusBroker) -> None:
        async with azure_queue(broker) as queue:
            [only] = await dead_letter_in_order(queue, [b"a"])
            send = queue.send

            async def send_then_service_ends(*args: object, **kwargs: object) -> None:
                await send(*args, **kwargs)  # type: ignore[arg-type]
                await service_ends(broker, service, DEAD_LETTERS)

            queue.send = send_then_service_ends  # type: ignore[method-assign]
            await queue.replay(only)
            assert await queue.dead_letters() == []
            assert broker.counts(QUEUE).active == 1
            await next_holder_completes(queue, b"a")
            assert await queue.is_drained()

    on_broker(body, ManualClock())


def test_a_purge_whose_connection_the_service_closes_takes_only_its_dead_letter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The connection closes with the wanted dead letter received and one passed on the way
    # held locked: the wanted one is completed all the same, the passed one comes back.
    import worker.azure.dead_letters as dead_letters

    async def body(broker: ServiceBusBroker) -> None:
        complete = dead_letters.DeadLetterQueue._complete

        async def service_ends_then_complete(self: object, receiver: object, raw: object) -> None:
            await service_ends(broker, "closes the connection")
            await complete(self, receiver, raw)  # type: ignore[arg-type]

        async with azure_queue(broker) as queue:
            ahead, wanted = await dead_letter_in_order(queue, [b"a", b"b"])
            monkeypatch.setattr(
                dead_letters.DeadLetterQueue, "_complete", service_ends_then_complete
            )
            await queue.purge(wanted)
            monkeypatch.undo()
            assert [d.sequence_number for d in await queue.dead_letters()] == [ahead]
            await queue.purge(ahead)  # its lock was let go, not left to lapse
            assert broker.counts(QUEUE).dead_letter == 0

    on_broker(body, ManualClock())


KILLED_HOLDER = """
import asyncio, os, signal, sys
from worker.azure.servicebus import AzureQueue
from worker.settings import Settings

async def main():
    connection, name = sys.argv[1:]
    queue = AzureQueue(
        Settings(env_file=None, servicebus_connection_string=connection, queue_name=name)
    )
    session = await queue.accept_session(10.0)
    message = await session.receive(10.0)
    print(message.delivery_count, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # as an OOM kill: no close, the connection drops

asyncio.run(main())
"""


def test_a_message_whose_holders_are_killed_is_dead_lettered_not_redelivered_for_ever() -> None:
    # Service Bus does not count a delivery whose session closed unsettled, and a killed
    # process's connection closes ("Message sessions", impact of delivery count; the broker
    # releases such a delivery uncounted): the session's own count does.
    async def killed_holder(broker: ServiceBusBroker) -> int:
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            KILLED_HOLDER,
            broker.connection_string,
            QUEUE,
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await child.communicate()
        assert child.returncode == -signal.SIGKILL
        return int(out)

    async def body(broker: ServiceBusBroker) -> None:
        async with azure_queue(broker, max_deliveries=3) as queue:
            await queue.send(b"poison", "conv-1")
            await queue.send(b"next", "conv-1")
            assert [await killed_holder(broker) for _ in range(3)] == [1, 2, 3]
            await next_holder_completes(queue, b"next")
            [dead] = await queue.dead_letters()
            assert dead.reason == "MaxDeliveryCountExceeded"
            assert dead.description.startswith("delivered 3 times")
            assert await queue.is_drained()

    on_broker(body, ManualClock())


def test_a_session_holding_only_state_does_not_keep_the_queue_from_draining() -> None:
    # A worker killed between a verdict and clearing its delivery count leaves the session's
    # state behind, and the session browser lists a session that holds state.
    from azure.servicebus.aio import ServiceBusClient

    async def body(broker: ServiceBusBroker) -> None:
        async with azure_queue(broker) as queue:
            await queue.send(b"x", "conv-1")
            async with (
                ServiceBusClient.from_connection_string(broker.connection_string) as client,
                client.get_queue_receiver(QUEUE, session_id="conv-1") as receiver,
            ):
                await receiver.session.set_state(b'{"seq":1,"began":1}')
                [message] = await receiver.receive_messages(max_wait_time=WAIT)
                assert not await queue.is_drained()  # held: in flight
                await receiver.complete_message(message)
            assert (await queue.stats()).queue_depth == 0
            assert await queue.is_drained()

    on_broker(body, ManualClock())


@pytest.mark.parametrize("call", ["renew_lock", "complete", "receive"])
@pytest.mark.parametrize("service", ["closes the connection", "detaches the link"])
def test_a_session_whose_link_the_service_ends_is_lost_at_its_next_call(
    call: str, service: str
) -> None:
    # Service Bus closes a connection when its gateway restarts, and detaches a link idle
    # for 10 minutes: the session's lock is gone. A closed connection under a management
    # call came out of the SDK as a plain ServiceBusError (no LockLost), and its next call
    # opened a new link: a renewal "worked" while the turn went on without its delivery.
    async def body(broker: ServiceBusBroker) -> None:
        async with azure_queue(broker) as queue:
            await queue.send(b"turn", "conv-1")
            session = await queue.accept_session(WAIT)
            assert session is not None
            message = await session.receive(WAIT)
            assert message is not None
            await service_ends(broker, service)
            with pytest.raises(LockLost):
                match call:
                    case "renew_lock":
                        await session.renew_lock()
                    case "complete":
                        await session.complete(message)
                    case _:
                        await session.receive(0.5)
            with pytest.raises(LockLost):  # and for good: no new link for this session
                await session.renew_lock()
            await session.close()
            # The next holder gets the delivery, as after a worker killed holding it.
            await next_holder_completes(queue, b"turn")
            assert await queue.is_drained()

    on_broker(body, ManualClock())


class FirstDeliveryWaits:
    """A handler whose first delivery waits a minute (how long it ran until cancelled is
    noted); later ones are published at once (their bodies noted)."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled_after: float | None = None
        self.done: list[bytes] = []

    async def handle(self, message: QueueMessage) -> object:
        if not self.started.is_set():
            self.started.set()
            began = time.monotonic()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                self.cancelled_after = time.monotonic() - began
                raise
        self.done.append(message.body)
        return SimpleNamespace(decision="published")


def test_a_turn_whose_connection_the_service_closes_stops_and_is_published_once_again() -> None:
    # The renewal after a gateway restart reports the lock lost: the turn in flight is
    # cancelled before its next step (docs/contract/delivery.md, "Shutdown and locks"), and
    # the redelivery does the work once. Before, the renewal failed "transiently" and the
    # turn ran on to its end without its lock.
    async def body(broker: ServiceBusBroker) -> None:
        async with azure_queue(broker) as queue:
            await queue.send(b"turn", "conv-1")
            handler = FirstDeliveryWaits()
            runtime = one_worker(handler, queue, lock_duration=3.0)  # renewed every 1 s
            running = asyncio.create_task(runtime.run(drain=True))
            await asyncio.wait_for(handler.started.wait(), WAIT)
            await asyncio.to_thread(broker.force_close)
            await asyncio.wait_for(running, 30)
            assert handler.cancelled_after is not None and handler.cancelled_after < 5
            assert handler.done == [b"turn"]
            assert (runtime.stats.lock_lost, runtime.stats.completed) == (1, 1)
            assert broker.counts(QUEUE) == EntityCounts(active=0, dead_letter=0, deferred=0)

    on_broker(body, ManualClock())


def test_a_turn_whose_network_stops_answering_stops_as_its_lock_lapses_and_is_published_once() -> (
    None
):
    # No frame gets through and nothing is closed (a partition): every renewal times out,
    # which says nothing of the lock. Once a lock duration has passed without one, the lock
    # has lapsed at the service and the turn stops; after the network heals, the
    # redelivery publishes it. On the service's clock: its lock expiry is real time.
    lock = 3.0

    async def body(broker: ServiceBusBroker, network: HeldNetwork) -> None:
        through = broker.connection_string_through(network.port)
        settings = {"servicebus_connection_string": through, "sdk_timeout_seconds": 1.0}
        async with azure_queue(broker, settings) as queue:
            await queue.send(b"turn", "conv-1")
            handler = FirstDeliveryWaits()
            runtime = one_worker(handler, queue, lock_duration=lock)
            with structlog.testing.capture_logs() as logs:
                running = asyncio.create_task(runtime.run(drain=True))
                await asyncio.wait_for(handler.started.wait(), WAIT)
                network.hold()
                async with asyncio.timeout(WAIT):
                    while handler.cancelled_after is None:
                        await asyncio.sleep(0.05)
                network.release()
                await asyncio.wait_for(running, 30)
            assert lock / 3 <= handler.cancelled_after < 2 * lock
            assert handler.done == [b"turn"]
            assert (runtime.stats.lock_lost, runtime.stats.completed) == (1, 1)
            [cancelled] = [e for e in logs if e["event"] == "turn_cancelled_on_lock_lost"]
            assert cancelled["error"].startswith("LockLost")
        assert broker.counts(QUEUE) == EntityCounts(active=0, dead_letter=0, deferred=0)

    config = QueueConfig(QUEUE, requires_session=True, lock_duration=lock)
    with ServiceBusBroker([config]) as broker, HeldNetwork(("127.0.0.1", broker.port)) as network:
        asyncio.run(body(broker, network))


class Collects:
    """A handler that records each delivery's body and publishes at once."""

    def __init__(self) -> None:
        self.done: list[bytes] = []

    async def handle(self, message: QueueMessage) -> object:
        self.done.append(message.body)
        return SimpleNamespace(decision="published")


class SilencesBeforeSettling(Collects):
    """Collects, cutting the network off first on the first delivery, so that its
    settlement is what meets the silence (when noted)."""

    def __init__(self, network: HeldNetwork) -> None:
        super().__init__()
        self.network = network
        self.held_at: float | None = None

    async def handle(self, message: QueueMessage) -> object:
        if self.held_at is None:
            self.network.hold()
            self.held_at = time.monotonic()
        return await super().handle(message)


def test_a_settlement_on_a_silent_network_ends_within_the_sdk_timeout_not_a_minute() -> None:
    # The SDK waits its receiver's `timeout` configuration (60 s unless given) for the
    # service to confirm a disposition, then settles again over the management link. Given
    # SDK_TIMEOUT_SECONDS, a settlement that meets a partition ends within twice that and
    # the backstop, and the session worker goes on: a shutdown then fits the replica's
    # termination grace (infra/README.md). What the late disposition does once the network
    # heals is the service's affair; the turn ends published, once or again.
    sdk_timeout, lock = 2.0, 3.0

    async def body(broker: ServiceBusBroker, network: HeldNetwork) -> None:
        through = broker.connection_string_through(network.port)
        settings = {"servicebus_connection_string": through, "sdk_timeout_seconds": sdk_timeout}
        async with azure_queue(broker, settings) as queue:
            await queue.send(b"turn", "conv-1")
            handler = SilencesBeforeSettling(network)
            runtime = one_worker(handler, queue, lock_duration=lock)
            with structlog.testing.capture_logs() as logs:
                running = asyncio.create_task(runtime.run(drain=True))
                async with asyncio.timeout(90):
                    while not any(e["event"] == "session_failed" for e in logs):
                        await asyncio.sleep(0.05)
                assert handler.held_at is not None
                settled_in = time.monotonic() - handler.held_at
                network.release()
                await asyncio.wait_for(running, 30)
            assert settled_in < 2 * sdk_timeout + BACKSTOP_SECONDS + 2
            [failed] = [e for e in logs if e["event"] == "session_failed"]
            assert failed["error"].startswith("TransientError (Service Bus)")
            assert set(handler.done) == {b"turn"}
        assert broker.counts(QUEUE) == EntityCounts(active=0, dead_letter=0, deferred=0)

    config = QueueConfig(QUEUE, requires_session=True, lock_duration=lock)
    with ServiceBusBroker([config]) as broker, HeldNetwork(("127.0.0.1", broker.port)) as network:
        asyncio.run(body(broker, network))


class Releases(Operations):
    """Operations that tell when a session is released."""

    def __init__(self) -> None:
        super().__init__()
        self.released = asyncio.Event()

    def session_released(self) -> None:
        super().session_released()
        self.released.set()


def test_an_idle_worker_on_a_silent_network_names_the_queue_and_takes_turns_once_healed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A partition while the worker waits for sessions: nothing is refused, so only the
    # accept's own bounds end each wait. Readiness must name the queue within them, and the
    # worker must take the next turn once the network heals (a connection left hanging
    # would keep it deaf for good).
    import worker.runtime as runtime_module

    accept_wait, sdk_timeout = 1.0, 4.0  # an empty accept takes its wait and the link's set-up
    monkeypatch.setattr(runtime_module, "ACCEPT_WAIT_SECONDS", accept_wait)

    async def body(broker: ServiceBusBroker, network: HeldNetwork) -> None:
        through = broker.connection_string_through(network.port)
        settings = {"servicebus_connection_string": through, "sdk_timeout_seconds": sdk_timeout}
        async with azure_queue(broker, settings) as queue:
            handler = Collects()
            operations = Releases()
            runtime = one_worker(handler, queue, lock_duration=LOCK_SECONDS, observer=operations)
            running = asyncio.create_task(runtime.run())
            try:
                await queue.send(b"before", "conv-1")
                # Settled and released, so the worker's next call is an accept (a settlement
                # on a silent network waits out the SDK's 60 s outcome wait first).
                await asyncio.wait_for(operations.released.wait(), WAIT)
                assert handler.done == [b"before"]
                network.hold()
                held_at = time.monotonic()
                async with asyncio.timeout(30):
                    while operations.queue_error is None:
                        await asyncio.sleep(0.05)
                # The accept's wait, the SDK's timeout and our backstop, with slack.
                assert time.monotonic() - held_at < accept_wait + sdk_timeout + 5.0 + 5.0
                network.release()
                async with asyncio.timeout(30):
                    while operations.queue_error is not None:
                        await asyncio.sleep(0.05)
                await queue.send(b"after", "conv-2")
                async with asyncio.timeout(30):
                    while handler.done != [b"before", b"after"]:
                        await asyncio.sleep(0.05)
            finally:
                runtime.stop()
                await asyncio.wait_for(running, 30)
        assert broker.counts(QUEUE) == EntityCounts(active=0, dead_letter=0, deferred=0)

    config = QueueConfig(QUEUE, requires_session=True, lock_duration=LOCK_SECONDS)
    with ServiceBusBroker([config]) as broker, HeldNetwork(("127.0.0.1", broker.port)) as network:
        asyncio.run(body(broker, network))


def test_a_publisher_whose_link_or_connection_the_service_ends_sends_on() -> None:
    # The publisher's one sender outlives the 10-minute idle detach and gateway restarts:
    # the SDK opens a new link or connection for the next send, which is not lost.
    from worker.azure.servicebus import AzurePublisher

    async def body(broker: ServiceBusBroker) -> None:
        settings = isolated_settings(
            servicebus_connection_string=broker.connection_string, topic_name="events"
        )
        publisher = AzurePublisher(settings)
        try:
            await publisher.publish("exp_1", b"{}")
            assert await asyncio.to_thread(broker.force_detach, "events") == 1
            await publisher.publish("exp_2", b"{}")
            assert await asyncio.to_thread(broker.force_close) == 1
            await publisher.publish("exp_3", b"{}")
        finally:
            await publisher.close()
        assert broker.counts("events/Subscriptions/all").active == 3

    topic = TopicConfig("events", subscriptions=(SubscriptionConfig("all"),))
    with ServiceBusBroker([topic], clock=ManualClock()) as broker:
        asyncio.run(body(broker))


def test_a_parked_session_whose_connection_the_service_closes_is_let_go_at_its_renewal() -> None:
    # A delivery waiting out a retry's delay keeps its session locked by renewals. Once the
    # service closed the connection, the renewal's plain ServiceBusError ended the parking
    # task with an exception nobody retrieved; it is now the lost lock it is, logged, and
    # the session goes to the next holder.
    async def body(broker: ServiceBusBroker) -> None:
        # A parked session is renewed every second.
        async with azure_queue(broker, {"lock_duration_seconds": 3.0}) as queue:
            await queue.send(b"turn", "conv-1")
            session = await queue.accept_session(WAIT)
            assert session is not None
            message = await session.receive(WAIT)
            assert message is not None
            await session.abandon(message, delay=60)
            await session.close()
            assert len(queue._parked) == 1
            with structlog.testing.capture_logs() as logs:
                await asyncio.to_thread(broker.force_close)
                async with asyncio.timeout(5):
                    while len(queue._parked):
                        await asyncio.sleep(0.05)
            [failed] = [e for e in logs if e["event"] == "parked_session_renewal_failed"]
            assert failed["error"] == "LockLost"
            await next_holder_completes(queue, b"turn")

    on_broker(body, ManualClock())
