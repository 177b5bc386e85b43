"""The Service Bus publisher sends export.published with its application properties, so a
topic subscription can filter on them: proven with the real SDK on the test broker."""

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
