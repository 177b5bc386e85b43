"""The Service Bus publisher on the test broker, through the real SDK: it sends
export.published with its application properties, so a topic subscription can filter on
them, and a topic at its maximum size is a transient failure, not a bug."""

from __future__ import annotations

import asyncio
import json

import pytest
from azure.servicebus import ServiceBusClient
from azure_factories import isolated_settings

from tests.servicebus_broker import ServiceBusBroker, SubscriptionConfig, TopicConfig
from worker.azure.servicebus import AzurePublisher

pytestmark = pytest.mark.servicebus_broker

WAIT = 5.0


def test_the_published_event_carries_its_properties_to_every_subscription() -> None:
    topic = TopicConfig(
        "export-published",
        subscriptions=(SubscriptionConfig("downloads"),),
        duplicate_detection_window=600.0,
    )
    body = json.dumps({"type": "export.published", "export_id": "exp_1"}).encode()
    properties = {
        "type": "export.published",
        "version": 1,
        "conversation_id": "conv_1",
        "format": "csv",
        "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    }
    with ServiceBusBroker([topic]) as broker:
        settings = isolated_settings(
            servicebus_connection_string=broker.connection_string, topic_name=topic.name
        )

        async def send() -> None:
            publisher = AzurePublisher(settings)
            try:
                await publisher.publish("exp_1", body, properties)
            finally:
                await publisher.close()

        asyncio.run(send())
        with (
            ServiceBusClient.from_connection_string(
                broker.connection_string, retry_total=0
            ) as client,
            client.get_subscription_receiver(topic.name, "downloads") as receiver,
        ):
            [message] = receiver.receive_messages(max_wait_time=WAIT)
            receiver.complete_message(message)
    got = {
        (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
        for k, v in (message.application_properties or {}).items()
    }
    assert got == properties
    assert message.message_id == "exp_1"
    assert message.content_type == "application/json"
    assert b"".join(message.body) == body


def test_a_full_topic_is_a_transient_failure_that_says_so_and_passes_once_room_is_made() -> None:
    # A subscription nobody reads fills the topic to its maximum size, and Service Bus
    # refuses every send (amqp:resource-limit-exceeded). The SDK calls it not retryable and
    # it had reached settlement as a bug: each turn dead-lettered handler_error at once.
    from azure.servicebus.exceptions import ServiceBusQuotaExceededError

    from worker.ports import TransientError
    from worker.settlement import where_raised

    topic = TopicConfig(
        "export-published", subscriptions=(SubscriptionConfig("stalled"),), max_size_bytes=3000
    )
    body = json.dumps({"type": "export.published", "file_name": "x" * 1000}).encode()
    with ServiceBusBroker([topic]) as broker:
        settings = isolated_settings(
            servicebus_connection_string=broker.connection_string, topic_name=topic.name
        )

        async def publish(*export_ids: str) -> None:
            publisher = AzurePublisher(settings)
            try:
                for export_id in export_ids:
                    await publisher.publish(export_id, body, {"format": "csv"})
            finally:
                await publisher.close()

        asyncio.run(publish("exp_1", "exp_2"))
        with pytest.raises(TransientError) as full:
            asyncio.run(publish("exp_3"))
        assert isinstance(full.value.__cause__, ServiceBusQuotaExceededError)
        assert where_raised(full.value).endswith(" from ServiceBusQuotaExceededError")
        assert broker.counts(f"{topic.name}/Subscriptions/stalled").active == 2
        with (
            ServiceBusClient.from_connection_string(
                broker.connection_string, retry_total=0
            ) as client,
            client.get_subscription_receiver(topic.name, "stalled") as receiver,
        ):
            for message in receiver.receive_messages(max_message_count=2, max_wait_time=WAIT):
                receiver.complete_message(message)
        asyncio.run(publish("exp_3"))
        assert broker.counts(f"{topic.name}/Subscriptions/stalled").active == 1
