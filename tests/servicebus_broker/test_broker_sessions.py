"""Sessions on the broker, driven by the synchronous Service Bus SDK: accepting, one holder
at a time, FIFO, delivery counts, lock expiry and renewal, the max delivery count. The
asyncio SDK covers named sessions, the session browser and session state
(test_broker_async.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from azure.servicebus import (
    NEXT_AVAILABLE_SESSION,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiver,
    ServiceBusSubQueue,
)
from azure.servicebus.exceptions import (
    OperationTimeoutError,
    SessionCannotBeLockedError,
    SessionLockLostError,
)

from .broker import ServiceBusBroker
from .clock import ManualClock
from .conftest import EMPTY_WAIT, LOCK_SECONDS, MAX_DELIVERIES, WAIT

pytestmark = pytest.mark.servicebus_broker


def send(client: ServiceBusClient, session_id: str, *bodies: bytes) -> None:
    with client.get_queue_sender("sessions", keep_alive=None) as sender:
        for body in bodies:
            sender.send_messages(ServiceBusMessage(body, session_id=session_id))


def next_session(client: ServiceBusClient, wait: float = WAIT) -> ServiceBusReceiver:
    receiver = client.get_queue_receiver(
        "sessions", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=wait
    )
    receiver.__enter__()
    return receiver


def receive_one(receiver: ServiceBusReceiver) -> object:
    received = receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)
    assert len(received) == 1, "a deliverable message was not delivered"
    return received[0]


def test_a_message_keeps_body_message_id_and_application_properties(
    client: ServiceBusClient,
) -> None:
    with client.get_queue_sender("sessions", keep_alive=None) as sender:
        sender.send_messages(
            ServiceBusMessage(
                b'{"a": 1}',
                session_id="s1",
                message_id="m-1",
                application_properties={"kind": "turn", "n": 7},
                content_type="application/json",
            )
        )
    with next_session(client) as receiver:
        message = receive_one(receiver)
        assert b"".join(message.body) == b'{"a": 1}'
        assert (message.message_id, message.session_id, message.content_type) == (
            "m-1",
            "s1",
            "application/json",
        )
        assert message.application_properties == {b"kind": b"turn", b"n": 7}
        assert message.sequence_number == 1
        assert message.enqueued_time_utc is not None
        receiver.complete_message(message)


def test_next_available_accepts_a_session_and_echoes_its_id(
    client: ServiceBusClient, clock: ManualClock
) -> None:
    send(client, "conv-a", b"x")
    with next_session(client) as receiver:
        assert receiver.session.session_id == "conv-a"
        expected = datetime.fromtimestamp(clock.now() + LOCK_SECONDS, UTC)
        assert abs(receiver.session.locked_until_utc - expected) < timedelta(seconds=1)


def test_a_held_session_cannot_be_locked_by_a_second_receiver(client: ServiceBusClient) -> None:
    send(client, "busy", b"x")
    with next_session(client), pytest.raises(SessionCannotBeLockedError):
        client.get_queue_receiver("sessions", session_id="busy").__enter__()


def test_next_available_times_out_when_every_session_is_held(client: ServiceBusClient) -> None:
    send(client, "only", b"x")
    with next_session(client), pytest.raises(OperationTimeoutError):
        next_session(client, wait=EMPTY_WAIT)


def test_messages_of_a_session_arrive_in_send_order(client: ServiceBusClient) -> None:
    with client.get_queue_sender("sessions", keep_alive=None) as sender:
        for n in range(4):
            sender.send_messages(ServiceBusMessage(f"a{n}".encode(), session_id="a"))
            sender.send_messages(ServiceBusMessage(f"b{n}".encode(), session_id="b"))
    with client.get_queue_receiver("sessions", session_id="a") as receiver:
        bodies = []
        for _ in range(4):
            message = receive_one(receiver)
            bodies.append(b"".join(message.body))
            receiver.complete_message(message)
        assert bodies == [b"a0", b"a1", b"a2", b"a3"]


def test_delivery_count_is_zero_first_and_one_after_an_abandon(client: ServiceBusClient) -> None:
    send(client, "s", b"work")
    with next_session(client) as receiver:
        first = receive_one(receiver)
        assert first.delivery_count == 0
        receiver.abandon_message(first)
        again = receive_one(receiver)
        assert (again.sequence_number, again.delivery_count) == (first.sequence_number, 1)
        assert again.lock_token != first.lock_token


def test_an_expired_session_lock_redelivers_with_one_more_delivery(
    client: ServiceBusClient, clock: ManualClock
) -> None:
    send(client, "s", b"work")
    crashed = next_session(client)
    first = receive_one(crashed)
    clock.advance(LOCK_SECONDS + 1)
    with next_session(client) as successor:
        assert successor.session.session_id == "s"
        again = receive_one(successor)
        assert (again.message_id, again.delivery_count) == (first.message_id, 1)
    with pytest.raises(SessionLockLostError):
        crashed.complete_message(first)
    crashed.close()


def test_receiving_after_the_session_lock_expired_raises_session_lock_lost(
    client: ServiceBusClient, clock: ManualClock
) -> None:
    send(client, "s", b"one", b"two")
    receiver = next_session(client)
    receive_one(receiver)
    clock.advance(LOCK_SECONDS + 1)
    with pytest.raises(SessionLockLostError):
        receiver.receive_messages(max_wait_time=WAIT)
    receiver.close()


def test_renewing_the_session_lock_keeps_the_session(
    client: ServiceBusClient, clock: ManualClock
) -> None:
    send(client, "s", b"long work")
    with next_session(client) as receiver:
        message = receive_one(receiver)
        for _ in range(3):
            clock.advance(LOCK_SECONDS * 0.75)
            renewed = receiver.session.renew_lock()
            expected = datetime.fromtimestamp(clock.now() + LOCK_SECONDS, UTC)
            assert abs(renewed - expected) < timedelta(seconds=1)
        receiver.complete_message(message)


def test_max_delivery_count_moves_the_message_to_the_dead_letter_queue(
    client: ServiceBusClient, broker: ServiceBusBroker
) -> None:
    send(client, "s", b"poison")
    with next_session(client) as receiver:
        for attempt in range(MAX_DELIVERIES):
            message = receive_one(receiver)
            assert message.delivery_count == attempt
            receiver.abandon_message(message)
        assert receiver.receive_messages(max_wait_time=EMPTY_WAIT) == []
    with client.get_queue_receiver("sessions", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        dead = receive_one(dlq)
        assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"
        assert dead.delivery_count == MAX_DELIVERIES
        assert dead.session_id == "s"
    assert broker.counts("sessions") == broker.counts("sessions").__class__(0, 1, 0)


def test_closing_a_session_returns_its_messages_without_counting_a_delivery(
    client: ServiceBusClient,
) -> None:
    send(client, "s", b"unsettled")
    with next_session(client) as receiver:
        receive_one(receiver)
    with next_session(client) as successor:
        assert receive_one(successor).delivery_count == 0
