"""An accepted Service Bus session (worker/azure/sessions.py) against a stand-in receiver:
one disposition per delivery, our deadline behind the SDK's, the per-message renewal cap,
and delayed abandons parked off the worker's hands. The real SDK on the test broker runs
the queue contract suite (tests/contracts/)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from azure.servicebus import exceptions as sb
from azure.servicebus.aio import ServiceBusClient

from worker.azure.sessions import (
    AzureSession,
    HeldSessions,
    ParkedSessions,
    SessionLimits,
    receiver_shut_down_by,
    settle_deadline,
)
from worker.call_retries import retried
from worker.ports import FIRST_DELIVERY, LockLost, Session, TransientError
from worker.retry_policy import RetryPolicy

EMULATOR = (
    "Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=k;SharedAccessKey=a2V5;"
    "UseDevelopmentEmulator=true"
)


class Clock:
    """Seconds that move only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Receiver:
    """What AzureSession touches of an SDK session receiver, recording every call."""

    def __init__(self, *bodies: bytes) -> None:
        self.queue = [raw(n, body) for n, body in enumerate(bodies, start=1)]
        self.calls: list[str] = []
        self.fail: dict[str, BaseException] = {}
        self.hang: set[str] = set()
        self.answer_after: asyncio.Event | None = None
        self.closed = asyncio.Event()
        self.renewed: dict[int, asyncio.Event] = {}
        # The session state, and the calls that read or write it (kept apart from `calls`,
        # which the settlement tests compare whole).
        self.state: bytes | None = None
        self.state_calls: list[str] = []
        self.session = SimpleNamespace(
            session_id="conv-1",
            renew_lock=self._renew_lock,
            get_state=self._get_state,
            set_state=self._set_state,
        )

    async def _do(self, name: str) -> None:
        self.calls.append(name)
        if name in self.hang:
            await asyncio.Event().wait()
        if self.answer_after is not None:
            await self.answer_after.wait()
        if name in self.fail:
            raise self.fail.pop(name)

    async def receive_messages(self, max_message_count: int, max_wait_time: float) -> list[Any]:
        await self._do("receive")
        return [self.queue.pop(0)] if self.queue else []

    async def complete_message(self, message: Any) -> None:
        await self._do("complete")

    async def abandon_message(self, message: Any) -> None:
        await self._do("abandon")
        message.delivery_count += 1
        self.queue.insert(0, message)

    async def dead_letter_message(self, message: Any, **_: Any) -> None:
        await self._do("dead_letter")

    async def _renew_lock(self, timeout: float) -> None:
        await self._do("renew")
        self.renewed.setdefault(self.calls.count("renew"), asyncio.Event()).set()

    async def renewals(self, count: int) -> None:
        await self.renewed.setdefault(count, asyncio.Event()).wait()

    async def _get_state(self, timeout: float) -> bytes | None:
        self.state_calls.append("get_state")
        if "get_state" in self.fail:
            raise self.fail.pop("get_state")
        return self.state

    async def _set_state(self, state: bytes | None, timeout: float) -> None:
        self.state_calls.append("set_state")
        if "set_state" in self.fail:
            raise self.fail.pop("set_state")
        self.state = state

    async def close(self) -> None:
        self.calls.append("close")
        self.closed.set()


def raw(sequence_number: int, body: bytes) -> Any:
    return SimpleNamespace(
        sequence_number=sequence_number,
        message_id=f"m-{sequence_number}",
        session_id="conv-1",
        body=body,
        delivery_count=0,
        enqueued_time_utc=datetime(2026, 1, 1, tzinfo=UTC),
        application_properties={},
    )


def session_on(
    receiver: Receiver,
    clock: Clock | None = None,
    *,
    timeout: float = 1.0,
    backstop: float = 5.0,
    max_renewal: float = 3600.0,
    parked: list[AzureSession] | None = None,
) -> AzureSession:
    limits = SessionLimits(
        timeout=timeout,
        max_renewal=max_renewal,
        max_abandon_delay=60.0,
        clock=clock or Clock(),
        backstop=backstop,
    )
    park = (parked if parked is not None else []).append
    return AzureSession(receiver, limits, park)  # type: ignore[arg-type]


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_the_sdks_delivery_count_is_converted_to_the_ports_first_delivery() -> None:
    async def main() -> None:
        receiver = Receiver(b"work")
        session = session_on(receiver)
        first = await session.receive(0)
        assert first is not None and first.delivery_count == FIRST_DELIVERY
        await session.abandon(first)
        again = await session.receive(0)
        assert again is not None and again.delivery_count == FIRST_DELIVERY + 1

    run(main())


def test_a_settlement_that_failed_is_not_sent_again_by_the_call_retries() -> None:
    # The SDK has already recovered what it could (outcome wait, management-link
    # re-settlement): a second disposition for the same delivery is never sent.
    async def main() -> None:
        receiver = Receiver(b"work")
        session = retried(session_on(receiver), RetryPolicy.no_waiting(call_attempts=4), Session)
        message = await session.receive(0)
        assert message is not None
        receiver.fail["complete"] = sb.ServiceBusConnectionError(message="link detached")
        with pytest.raises(LockLost):
            await session.complete(message)
        assert receiver.calls.count("complete") == 1

    run(main())


def test_a_settlement_slower_than_the_sdk_timeout_is_not_cut_by_our_deadline() -> None:
    # 7.15 waits up to 60 s for the outcome, then settles again over the management link
    # (bounded by try_timeout): our deadline must lie past both.
    async def main() -> None:
        receiver = Receiver(b"work")
        session = session_on(receiver, timeout=0.001)
        message = await session.receive(0)
        assert message is not None
        receiver.answer_after = asyncio.Event()
        asyncio.get_running_loop().call_later(0.05, receiver.answer_after.set)
        await session.complete(message)
        assert receiver.calls[-1] == "complete"

    run(main())


def test_our_settle_deadline_outlasts_the_sdks_settlement_recovery() -> None:
    # Pins the SDK's figures this adapter relies on: the outcome wait is the receiver's
    # `timeout` configuration (a minute unless the receiver is given one, as the adapter's
    # are), the management-link re-settlement is bounded by try_timeout.
    client = ServiceBusClient.from_connection_string(EMULATOR, try_timeout=30.0)
    assert client.get_queue_receiver("q", session_id="conv-1")._config.timeout == 60
    config = client.get_queue_receiver("q", session_id="conv-1", timeout=30.0)._config
    assert (config.timeout, config.try_timeout) == (30.0, 30.0)
    assert settle_deadline(30.0) > config.timeout + config.try_timeout


def test_a_call_cut_by_our_deadline_gives_the_session_up() -> None:
    async def main() -> None:
        receiver = Receiver(b"work")
        session = session_on(receiver, timeout=0.001, backstop=0.0)
        receiver.hang.add("receive")
        with pytest.raises(LockLost):
            await session.receive(0)
        calls = len(receiver.calls)
        with pytest.raises(LockLost):
            await session.renew_lock()  # the receiver may be mid-frame: not used again
        assert len(receiver.calls) == calls

    run(main())


def test_lock_renewal_is_capped_per_message_not_from_the_session_accept() -> None:
    async def main() -> None:
        clock = Clock()
        receiver = Receiver(b"first", b"second")
        session = session_on(receiver, clock, max_renewal=100.0)
        clock.now += 500  # the session was held idle for long: no message counts yet
        await session.renew_lock()
        first = await session.receive(0)
        assert first is not None
        clock.now += 99
        await session.renew_lock()
        clock.now += 2
        with pytest.raises(LockLost, match="maximum lock renewal"):
            await session.renew_lock()
        await session.complete(first)
        second = await session.receive(0)
        assert second is not None
        clock.now += 50
        await session.renew_lock()  # 50 s into the second message
        assert receiver.calls.count("renew") == 3

    run(main())


def test_a_delayed_abandon_parks_the_delivery_without_any_call() -> None:
    async def main() -> None:
        clock = Clock()
        receiver = Receiver(b"first", b"second")
        parked: list[AzureSession] = []
        session = session_on(receiver, clock, parked=parked)
        message = await session.receive(0)
        assert message is not None
        calls = list(receiver.calls)
        await session.abandon(message, delay=20.0)
        assert receiver.calls == calls  # nothing sent: nothing a retry could repeat
        assert await session.receive(0) is None  # held back, the session still checked
        await session.close()
        assert parked == [session] and "close" not in receiver.calls
        clock.now += 21
        assert await session.receive(0) is not None  # due: abandoned, then received again
        assert receiver.calls.count("abandon") == 1

    run(main())


def test_parked_sessions_are_released_when_due_and_at_once_when_the_queue_closes() -> None:
    async def main() -> None:
        clock = Clock()
        lot = ParkedSessions(lock_duration=10800.0, poll=0.001)
        due_soon, due_late = Receiver(b"a"), Receiver(b"b")
        for receiver, delay in ((due_soon, 5.0), (due_late, 50.0)):
            session = session_on(receiver, clock)
            message = await session.receive(0)
            assert message is not None
            await session.abandon(message, delay)
            lot.park(session)
        clock.now += 6
        await asyncio.wait_for(due_soon.closed.wait(), 5.0)
        assert due_soon.calls[-2:] == ["abandon", "close"]
        assert "abandon" not in due_late.calls
        await lot.close()  # SIGTERM: the rest of the delay is not waited out
        assert due_late.calls[-2:] == ["abandon", "close"] and len(lot) == 0

    run(main())


async def parked_for_30_seconds(receiver: Receiver, lot: ParkedSessions) -> None:
    """`receiver`'s first message abandoned with a 30 s delay, its session parked in `lot`."""
    session = session_on(receiver, Clock())
    message = await session.receive(0)
    assert message is not None
    await session.abandon(message, 30.0)
    lot.park(session)


def test_a_parked_session_keeps_its_lock_renewed() -> None:
    async def main() -> None:
        lot = ParkedSessions(lock_duration=0.03, poll=0.001)
        receiver = Receiver(b"a")
        await parked_for_30_seconds(receiver, lot)
        await asyncio.wait_for(receiver.renewals(2), 5.0)
        assert "abandon" not in receiver.calls
        await lot.close()

    run(main())


def test_a_parked_session_outlasts_a_failed_renewal_but_not_a_lost_lock() -> None:
    # Renewals come every third of the lock duration: one that fails transiently (and
    # leaves the receiver's link open) leaves two more before the lock lapses, and the delay
    # is kept (docs/contract/delivery.md).
    async def main() -> None:
        lot = ParkedSessions(lock_duration=0.03, poll=0.001)
        receiver = Receiver(b"a")
        receiver.fail["renew"] = sb.OperationTimeoutError(message="management link timed out")
        await parked_for_30_seconds(receiver, lot)
        await asyncio.wait_for(receiver.renewals(3), 5.0)
        assert "abandon" not in receiver.calls and len(lot) == 1
        receiver.fail["renew"] = sb.SessionLockLostError(message="lock lost")
        await asyncio.wait_for(receiver.closed.wait(), 5.0)  # let go, though not yet due
        await lot.close()

    run(main())


def test_a_parked_session_whose_renewals_fail_for_a_lock_duration_is_let_go() -> None:
    # A network that stopped answering times every renewal out, and none says the lock is
    # lost; once a whole lock duration has passed without one that worked, the lock has
    # lapsed at the service, and holding the session on would keep its place for nothing.
    class Silent(Receiver):
        async def _renew_lock(self, timeout: float) -> None:
            self.calls.append("renew")
            raise sb.OperationTimeoutError(message="management link timed out")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        lot = ParkedSessions(lock_duration=0.3, poll=0.001)
        receiver = Silent(b"a")
        parked_at = loop.time()
        await parked_for_30_seconds(receiver, lot)
        await asyncio.wait_for(receiver.closed.wait(), 5.0)  # let go, though not yet due
        assert loop.time() - parked_at >= 0.3
        assert receiver.calls.count("renew") >= 3
        assert receiver.calls[-2:] == ["abandon", "close"]
        await lot.close()
        assert len(lot) == 0

    run(main())


def test_a_receive_waits_for_a_parked_delivery_falling_due_within_its_wait() -> None:
    async def main() -> None:
        clock = Clock()
        receiver = Receiver(b"retry me")
        session = session_on(receiver, clock)
        message = await session.receive(0)
        assert message is not None
        await session.abandon(message, delay=20.0)

        def time_passes() -> None:
            clock.now += 20

        asyncio.get_running_loop().call_later(0.05, time_passes)
        again = await session.receive(max_wait=5.0)
        assert again is not None and again.delivery_count == message.delivery_count + 1

    run(main())


def test_a_body_with_no_bytes_form_reaches_the_handler_to_be_dead_lettered() -> None:
    # An AMQP sequence section comes back as lists (its strings as bytes): json.dumps had
    # raised in receive, after the SDK locked the message and before the runtime held it,
    # so it was never settled and came back, uncounted, ahead of its session's turns.
    async def main() -> None:
        receiver = Receiver()
        message = raw(1, b"")
        message.body = iter([[b"turn.completed"]])
        message.application_properties = {b"k\xff": b"v\xfe"}
        receiver.queue = [message]
        received = await session_on(receiver).receive(0)
        assert received is not None
        assert received.body == b"" and received.properties == {"k\ufffd": "v\ufffd"}

    asyncio.run(main())


def test_a_settlement_with_an_unknown_outcome_gives_the_session_up() -> None:
    # The message may still be locked to this session: handing out the one behind it would
    # let it overtake (FIFO inside a session).
    async def main() -> None:
        receiver = Receiver(b"turn-1", b"turn-2")
        session = session_on(receiver)
        first = await session.receive(0)
        assert first is not None
        receiver.fail["abandon"] = sb.OperationTimeoutError(message="management link timed out")
        with pytest.raises(TransientError):
            await session.abandon(first)
        with pytest.raises(LockLost):
            await session.receive(0)

    asyncio.run(main())


# ---- the session's own delivery count -------------------------------------------------
# Service Bus does not count a delivery whose session closed unsettled, and a killed
# worker's connection closes ("Message sessions", impact of delivery count): the session
# counts its deliveries in its state, or a message that kills every holder would come back
# for ever (docs/contract/delivery.md).
def count_of(receiver: Receiver) -> tuple[int, int] | None:
    state = receiver.state
    if state is None:
        return None
    decoded = json.loads(state)
    return decoded["seq"], decoded["began"]


def count_state(seq: int, began: int) -> bytes:
    return json.dumps({"seq": seq, "began": began}).encode()


def test_a_delivery_is_counted_in_the_session_state_before_it_is_handed_out() -> None:
    async def main() -> None:
        receiver = Receiver(b"turn-1", b"turn-2")
        session = session_on(receiver)
        first = await session.receive(0)
        assert first is not None and first.delivery_count == FIRST_DELIVERY
        assert count_of(receiver) == (1, 1)
        assert receiver.state_calls == ["get_state", "set_state"]  # read once per session
        await session.complete(first)
        assert receiver.state is None  # a verdict: the state, which outlives messages, cleared
        second = await session.receive(0)
        assert second is not None and count_of(receiver) == (2, 1)
        assert receiver.state_calls == ["get_state"] + ["set_state"] * 3
        receiver.fail["set_state"] = sb.ServiceBusServerBusyError(message="server busy")
        await session.dead_letter(second, "handler_error", "boom")  # the verdict stands
        assert count_of(receiver) == (2, 1)
        await session.close()
        assert receiver.state is None  # cleared on the way out instead

    run(main())


def test_deliveries_whose_holders_were_killed_count_toward_the_port_count() -> None:
    async def main() -> None:
        receiver = Receiver(b"turn-1")
        receiver.state = count_state(1, 3)  # three holders began it and died unsettled
        session = session_on(receiver)
        message = await session.receive(0)
        assert message is not None and message.delivery_count == 4
        assert count_of(receiver) == (1, 4)
        await session.abandon(message)  # Service Bus counts an abandon too: not twice here
        again = await session.receive(0)
        assert again is not None and again.delivery_count == 5

    run(main())


def test_a_message_begun_max_deliveries_times_is_dead_lettered_and_the_next_handed_out() -> None:
    async def main() -> None:
        receiver = Receiver(b"poison", b"turn-2")
        receiver.state = count_state(1, 10)
        session = session_on(receiver)
        message = await session.receive(0)
        assert message is not None and message.body == b"turn-2"
        assert message.delivery_count == FIRST_DELIVERY
        assert receiver.calls == ["receive", "dead_letter", "receive"]
        assert count_of(receiver) == (2, 1)

    run(main())


def test_a_session_closed_with_its_delivery_unsettled_takes_the_count_back() -> None:
    # As Service Bus releases it: the next holder gets it with the count it had.
    async def main() -> None:
        receiver = Receiver(b"turn-1")
        receiver.state = count_state(1, 2)
        session = session_on(receiver)
        assert await session.receive(0) is not None
        assert count_of(receiver) == (1, 3)
        await session.close()
        assert count_of(receiver) == (1, 2)
        fresh = Receiver(b"turn-1")
        first = session_on(fresh)
        assert await first.receive(0) is not None
        await first.close()
        assert fresh.state is None

    run(main())


def test_a_session_state_not_ours_is_counted_from_one() -> None:
    async def main() -> None:
        receiver = Receiver(b"turn-1")
        receiver.state = b"\xff not json"
        message = await session_on(receiver).receive(0)
        assert message is not None and message.delivery_count == FIRST_DELIVERY
        assert count_of(receiver) == (1, 1)

    run(main())


@pytest.mark.parametrize(
    ("failure", "raised"),
    [
        (sb.ServiceBusServerBusyError(message="server busy"), TransientError),
        # The SDK closed the receiver's link: the session's lock went with it.
        (sb.ServiceBusConnectionError(message="connection closed"), LockLost),
    ],
)
def test_a_delivery_whose_count_was_not_written_is_not_handed_out(
    failure: Exception, raised: type[Exception]
) -> None:
    async def main() -> None:
        receiver = Receiver(b"turn-1")
        receiver.fail["set_state"] = failure
        session = session_on(receiver)
        with pytest.raises(raised):
            await session.receive(0)
        await session.close()  # the message goes to the next holder, unsettled, uncounted
        assert receiver.calls == ["receive", "close"]
        assert receiver.state is None

    run(main())


def test_a_stop_as_a_place_is_given_back_stops_the_wait_for_one() -> None:
    # A stop cancels an accept waiting for a place; the cancellation must not be lost when
    # a place is given back in the same instant (asyncio.wait_for before Python 3.12 drops
    # it, so the place was taken and an accept opened after the stop). Cancelled some turns
    # of the event loop after the give-back, a wait still waiting ends cancelled, holding
    # nothing; one that already took the place keeps it.
    async def stopped_after(turns: int) -> bool:
        places = HeldSessions(limit=1)
        assert await places.take(0.0)
        waiting = asyncio.ensure_future(places.take(30.0))
        await asyncio.sleep(0.01)
        places.give_back()
        for _ in range(turns):
            await asyncio.sleep(0)
        still_waiting = not waiting.done()
        waiting.cancel()
        if still_waiting:
            with pytest.raises(asyncio.CancelledError):
                await waiting
            assert len(places) == 0
        else:
            assert waiting.result() is True and len(places) == 1
        return still_waiting

    async def main() -> list[bool]:
        return [await stopped_after(turns) for turns in range(4)]

    assert asyncio.run(main())[0] is True  # at least the give-back's own turn was a stop


@pytest.mark.parametrize(
    ("error", "shut"),
    [
        # The SDK closes the receiver's link after these (its `shutdown_handler` flag): a
        # plain ServiceBusError is what a connection the service closed under a management
        # call becomes.
        (sb.ServiceBusError("Handler failed: Management Operation error occurred."), True),
        (sb.ServiceBusConnectionError(message="connection closed"), True),
        (sb.ServiceBusCommunicationError(message="socket closed"), True),
        (sb.SessionCannotBeLockedError(message="taken by another receiver"), True),
        # These leave the link, and the lock, as they were.
        (sb.OperationTimeoutError(message="timed out"), False),
        (sb.ServiceBusServerBusyError(message="busy"), False),
        (sb.MessageLockLostError(message="message lock lost"), False),
        (ValueError("not an SDK error"), False),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, Exception) else str(value),
)
def test_an_sdk_error_that_closed_the_receivers_link_is_found_raised_or_as_the_cause(
    error: Exception, shut: bool
) -> None:
    assert (receiver_shut_down_by(error) is error) is shut
    try:
        raise TransientError("Service Bus: as the port says it") from error
    except TransientError as mapped:
        assert (receiver_shut_down_by(mapped) is error) is shut


def test_a_call_after_which_the_sdk_closed_the_receiver_loses_the_session_for_good() -> None:
    async def main() -> None:
        receiver = Receiver(b"turn-1")
        session = session_on(receiver)
        held = await session.receive(0)
        assert held is not None
        receiver.fail["renew"] = sb.ServiceBusError("Handler failed: Management Operation error.")
        with pytest.raises(LockLost, match="the SDK closed its receiver after ServiceBusError"):
            await session.renew_lock()
        # The failure was one call's; the SDK's next call would open a new link: not made.
        with pytest.raises(LockLost):
            await session.complete(held)
        calls = list(receiver.calls)
        await session.close()
        assert receiver.calls == [*calls, "close"]  # nothing settled or counted back

    run(main())
