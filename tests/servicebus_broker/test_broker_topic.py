"""A topic on the broker, with the synchronous SDK: every subscription gets a copy, and
duplicate detection drops a repeated message id inside its window."""

from __future__ import annotations

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from .broker import ServiceBusBroker
from .clock import ManualClock
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
