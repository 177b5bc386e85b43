"""A topic on the broker, with the synchronous SDK: every subscription gets a copy,
duplicate detection drops a repeated message id inside its window, and a topic (or queue)
at its maximum size refuses a send."""

from __future__ import annotations

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusQuotaExceededError

from .broker import ServiceBusBroker
from .clock import ManualClock
from .config import QueueConfig, SubscriptionConfig, TopicConfig
from .conftest import EMPTY_WAIT, WAIT

pytestmark = pytest.mark.servicebus_broker


def publish(client: ServiceBusClient, *messages: ServiceBusMessage) -> None:
    with client.get_topic_sender("events", keep_alive=None) as sender:
        for message in messages:
            sender.send_messages(message)


def test_every_subscription_gets_a_copy_with_its_properties(client: ServiceBusClient) -> None:
    publish(
        client,
        ServiceBusMessage(b"{}", message_id="exp-1", application_properties={"type": "export"}),
    )
    for subscription in ("all", "audit"):
        with client.get_subscription_receiver("events", subscription) as receiver:
            [message] = receiver.receive_messages(max_wait_time=WAIT)
            assert (message.message_id, message.application_properties) == (
                "exp-1",
                {b"type": b"export"},
            )
            receiver.complete_message(message)


def test_the_same_message_id_twice_in_the_window_is_one_message(
    client: ServiceBusClient, broker: ServiceBusBroker
) -> None:
    publish(
        client,
        ServiceBusMessage(b"first", message_id="exp-1"),
        ServiceBusMessage(b"resend", message_id="exp-1"),
        ServiceBusMessage(b"other", message_id="exp-2"),
    )
    assert broker.counts("events/Subscriptions/all").active == 2
    with client.get_subscription_receiver("events", "all") as receiver:
        received = receiver.receive_messages(max_message_count=5, max_wait_time=WAIT)
        assert [b"".join(m.body) for m in received] == [b"first", b"other"]


def test_the_same_message_id_after_the_window_is_a_new_message(
    client: ServiceBusClient, broker: ServiceBusBroker, clock: ManualClock
) -> None:
    publish(client, ServiceBusMessage(b"first", message_id="exp-1"))
    clock.advance(601)
    publish(client, ServiceBusMessage(b"again", message_id="exp-1"))
    assert broker.counts("events/Subscriptions/audit").active == 2


def test_a_message_id_over_128_characters_is_refused_by_the_sdk_before_sending(
    client: ServiceBusClient, broker: ServiceBusBroker
) -> None:
    with pytest.raises(ValueError, match="128"):
        ServiceBusMessage(b"x", message_id="e" * 129)
    publish(client, ServiceBusMessage(b"x", message_id="e" * 128))
    with client.get_subscription_receiver("events", "all") as receiver:
        [message] = receiver.receive_messages(max_wait_time=WAIT)
        assert message.message_id == "e" * 128
        receiver.complete_message(message)
        assert receiver.receive_messages(max_wait_time=EMPTY_WAIT) == []


def test_a_topic_at_its_maximum_size_refuses_a_send_until_a_subscription_makes_room(
    client: ServiceBusClient, broker: ServiceBusBroker
) -> None:
    # A topic whose subscriptions nobody reads fills up: Service Bus rejects the send with
    # amqp:resource-limit-exceeded, which the SDK raises as ServiceBusQuotaExceededError.
    broker.add(
        TopicConfig("small", subscriptions=(SubscriptionConfig("all"),), max_size_bytes=2000)
    )
    with client.get_topic_sender("small", keep_alive=None) as sender:
        sender.send_messages(ServiceBusMessage(b"x" * 1000, message_id="exp-1"))
        with pytest.raises(ServiceBusQuotaExceededError, match="maximum entity size"):
            sender.send_messages(ServiceBusMessage(b"y" * 1000, message_id="exp-2"))
        assert broker.counts("small/Subscriptions/all").active == 1
        with client.get_subscription_receiver("small", "all") as receiver:
            [message] = receiver.receive_messages(max_wait_time=WAIT)
            receiver.complete_message(message)
        sender.send_messages(ServiceBusMessage(b"y" * 1000, message_id="exp-2"))
    assert broker.counts("small/Subscriptions/all").active == 1


def test_a_queues_dead_letters_count_in_its_size(
    client: ServiceBusClient, broker: ServiceBusBroker
) -> None:
    broker.add(QueueConfig("bounded", max_size_bytes=2000))
    with client.get_queue_sender("bounded", keep_alive=None) as sender:
        sender.send_messages(ServiceBusMessage(b"x" * 1000))
        with client.get_queue_receiver("bounded") as receiver:
            [message] = receiver.receive_messages(max_wait_time=WAIT)
            receiver.dead_letter_message(message, reason="poison")
        assert broker.counts("bounded").dead_letter == 1
        with pytest.raises(ServiceBusQuotaExceededError):
            sender.send_messages(ServiceBusMessage(b"y" * 1000))
