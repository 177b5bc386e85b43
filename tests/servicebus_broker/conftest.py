"""Fixtures for the broker's own tests: a broker on a manual clock, and SDK clients on it.

Every test gets a fresh broker (isolation by construction) and a client with
`retry_total=0`, so an expected error surfaces at once instead of after SDK backoff.
Senders are opened with `keep_alive=None`: the sync SDK's keep-alive thread sleeps in
1 s steps, and closing a sender waits for it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusClient

from .broker import ServiceBusBroker
from .clock import ManualClock
from .config import QueueConfig, SubscriptionConfig, TopicConfig

LOCK_SECONDS = 30.0
MAX_DELIVERIES = 3
WAIT = 5.0  # for a receive that must succeed
EMPTY_WAIT = 0.3  # for a receive that must come back empty

ENTITIES = (
    QueueConfig(
        "sessions",
        requires_session=True,
        lock_duration=LOCK_SECONDS,
        max_delivery_count=MAX_DELIVERIES,
    ),
    QueueConfig("plain", lock_duration=LOCK_SECONDS, max_delivery_count=MAX_DELIVERIES),
    TopicConfig(
        "events",
        subscriptions=(SubscriptionConfig("all"), SubscriptionConfig("audit")),
        duplicate_detection_window=600.0,
    ),
)


@pytest.fixture
def clock() -> ManualClock:
    """The broker's time, moved only by the test."""
    return ManualClock()


@pytest.fixture
def broker(clock: ManualClock) -> Iterator[ServiceBusBroker]:
    """A running broker with a session queue, a plain queue and a topic."""
    with ServiceBusBroker(ENTITIES, clock=clock) as running:
        yield running


@pytest.fixture
def client(broker: ServiceBusBroker) -> Iterator[ServiceBusClient]:
    """A synchronous SDK client on the broker."""
    with ServiceBusClient.from_connection_string(broker.connection_string, retry_total=0) as sdk:
        yield sdk
