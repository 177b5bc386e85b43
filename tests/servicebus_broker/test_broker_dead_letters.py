"""The dead-letter sub-queue and browsing on the broker, with the synchronous SDK:
dead-lettering with a reason, receiving and peeking dead letters, peeking by sequence
number, and settlement over the management link (deferral and receive by number)."""

from __future__ import annotations

import pytest
from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)
from azure.servicebus.exceptions import MessageLockLostError

from .broker import EntityCounts, ServiceBusBroker
from .clock import ManualClock
from .conftest import EMPTY_WAIT, LOCK_SECONDS, WAIT

pytestmark = pytest.mark.servicebus_broker


def send_plain(client: ServiceBusClient, *bodies: bytes) -> None:
    with client.get_queue_sender("plain", keep_alive=None) as sender:
        for n, body in enumerate(bodies):
            sender.send_messages(ServiceBusMessage(body, message_id=f"m-{n}"))


def test_dead_letter_keeps_reason_and_description_on_the_dead_lettered_copy(
    client: ServiceBusClient, broker: ServiceBusBroker
) -> None:
    send_plain(client, b"bad")
    with client.get_queue_receiver("plain") as receiver:
        [message] = receiver.receive_messages(max_wait_time=WAIT)
        receiver.dead_letter_message(message, reason="schema_invalid", error_description="no id")
    assert broker.counts("plain") == EntityCounts(active=0, dead_letter=1, deferred=0)
    with client.get_queue_receiver("plain", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        [dead] = dlq.receive_messages(max_wait_time=WAIT)
        assert (dead.dead_letter_reason, dead.dead_letter_error_description) == (
            "schema_invalid",
            "no id",
        )
        assert (dead.sequence_number, dead.message_id) == (message.sequence_number, "m-0")
        assert dead.delivery_count == 0
        dlq.complete_message(dead)
    assert broker.counts("plain") == EntityCounts(active=0, dead_letter=0, deferred=0)


def test_peeking_the_dead_letter_queue_locks_nothing(client: ServiceBusClient) -> None:
    send_plain(client, b"a", b"b")
    with client.get_queue_receiver("plain") as receiver:
        for message in receiver.receive_messages(max_message_count=2, max_wait_time=WAIT):
            receiver.dead_letter_message(message, reason="r", error_description="d")
    with client.get_queue_receiver("plain", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        peeked = dlq.peek_messages(max_message_count=10, sequence_number=1)
        assert [m.message_id for m in peeked] == ["m-0", "m-1"]
        assert [m.dead_letter_reason for m in peeked] == ["r", "r"]
        assert len(dlq.receive_messages(max_message_count=2, max_wait_time=WAIT)) == 2


def test_peek_starts_at_the_given_sequence_number_and_sees_locked_messages(
    client: ServiceBusClient,
) -> None:
    send_plain(client, b"1", b"2", b"3", b"4")
    with client.get_queue_receiver("plain") as receiver:
        locked = receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)
        assert [m.sequence_number for m in locked] == [1]
        peeked = receiver.peek_messages(max_message_count=2, sequence_number=1)
        assert [m.sequence_number for m in peeked] == [1, 2]
        later = receiver.peek_messages(max_message_count=10, sequence_number=3)
        assert [b"".join(m.body) for m in later] == [b"3", b"4"]
        assert receiver.peek_messages(max_message_count=10, sequence_number=5) == []


def test_an_expired_message_lock_redelivers_with_one_more_delivery(
    client: ServiceBusClient, clock: ManualClock
) -> None:
    send_plain(client, b"work")
    with client.get_queue_receiver("plain") as receiver:
        [first] = receiver.receive_messages(max_wait_time=WAIT)
        clock.advance(LOCK_SECONDS + 1)
        [again] = receiver.receive_messages(max_wait_time=WAIT)
        assert (again.sequence_number, again.delivery_count) == (first.sequence_number, 1)
        with pytest.raises(MessageLockLostError):
            receiver.complete_message(first)
        receiver.complete_message(again)


def test_renewing_a_message_lock_outlives_the_lock_duration(
    client: ServiceBusClient, clock: ManualClock
) -> None:
    send_plain(client, b"long work")
    with client.get_queue_receiver("plain") as receiver:
        [message] = receiver.receive_messages(max_wait_time=WAIT)
        for _ in range(3):
            clock.advance(LOCK_SECONDS * 0.75)
            receiver.renew_message_lock(message)
        receiver.complete_message(message)
        assert receiver.receive_messages(max_wait_time=EMPTY_WAIT) == []


def test_a_deferred_message_is_received_by_number_and_settled_over_the_management_link(
    client: ServiceBusClient, broker: ServiceBusBroker
) -> None:
    send_plain(client, b"later", b"now")
    with client.get_queue_receiver("plain") as receiver:
        [first] = receiver.receive_messages(max_wait_time=WAIT)
        receiver.defer_message(first)
        [second] = receiver.receive_messages(max_wait_time=WAIT)
        assert b"".join(second.body) == b"now"
        receiver.complete_message(second)
        assert broker.counts("plain") == EntityCounts(active=0, dead_letter=0, deferred=1)
        [deferred] = receiver.receive_deferred_messages([first.sequence_number])
        assert b"".join(deferred.body) == b"later"
        # A deferred message is settled with update-disposition on $management.
        receiver.dead_letter_message(deferred, reason="gave_up", error_description="late")
    assert broker.counts("plain") == EntityCounts(active=0, dead_letter=1, deferred=0)


def test_receive_and_delete_removes_the_message_on_delivery(
    client: ServiceBusClient, broker: ServiceBusBroker
) -> None:
    send_plain(client, b"once")
    with client.get_queue_receiver(
        "plain", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
    ) as receiver:
        [message] = receiver.receive_messages(max_wait_time=WAIT)
        assert b"".join(message.body) == b"once"
    assert broker.counts("plain").active == 0
