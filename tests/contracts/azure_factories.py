"""Factories of the Azure adapters for the contract suites (see conftest.py for the shape).

Each port runs when its service is reachable, named by environment variables:

- blobs: `EXPORT_WORKER_TEST_BLOB_CONNECTION_STRING` (Azurite: scripts/test-emulated);
- store, ledger: `EXPORT_WORKER_TEST_COSMOS_ENDPOINT`, optional `..._COSMOS_KEY` (any
  base64 string does for cosmosdb-server) and `..._COSMOS_VERIFY_TLS` (default: off for a
  loopback endpoint, on otherwise);
- queue, publisher: `EXPORT_WORKER_TEST_SERVICEBUS`, a connection string with Manage
  rights: every `open()` creates its own queue (sessions on) or topic (with a subscription
  `all`, where what was published is read back) and deletes it after. Without it they run
  on the AMQP test broker (tests/servicebus_broker), in-process: every `open()` starts a
  broker holding just that queue or topic.

Isolation: each `open()` gets a database of its own (Cosmos) or a queue/topic of its own
(Service Bus). Blob tests name unique paths themselves, so blobs share the containers.
No Azure service can fake time: `clock` is None and the time-dependent tests skip, except
on the test broker, whose clock the queue factory hands to the tests.
"""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from worker.azure.blobs import AzureBlobs
from worker.azure.cosmos import AzureConversationStore, AzureLedger, CosmosAccount
from worker.azure.credentials import cosmos_client
from worker.azure.servicebus import AzurePublisher, AzureQueue
from worker.settings import Settings

# The test broker is `tests.servicebus_broker`, importable from the repository root;
# appended, so nothing installed is shadowed.
_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.append(_ROOT)
try:
    from tests.emulated.azure_environment import SUBSCRIPTION, subscription_bodies
    from tests.servicebus_broker import (
        ManualClock,
        QueueConfig,
        ServiceBusBroker,
        SubscriptionConfig,
        TopicConfig,
    )
except ImportError as missing:  # python-qpid-proton is a dev dependency
    _BROKER_MISSING: str | None = f"the test broker cannot start: {missing}"
else:
    _BROKER_MISSING = None

BLOB_ENV = "EXPORT_WORKER_TEST_BLOB_CONNECTION_STRING"
COSMOS_ENV = "EXPORT_WORKER_TEST_COSMOS_ENDPOINT"
COSMOS_KEY_ENV = "EXPORT_WORKER_TEST_COSMOS_KEY"
COSMOS_TLS_ENV = "EXPORT_WORKER_TEST_COSMOS_VERIFY_TLS"
SERVICEBUS_ENV = "EXPORT_WORKER_TEST_SERVICEBUS"
# cosmosdb-server checks no signature, but the SDK needs a base64 key to sign with.
EMULATOR_KEY = "ZXhwb3J0LXdvcmtlci10ZXN0LWtleQ=="
QUEUE_LOCK_SECONDS = 30.0

_NEEDS = {
    "blobs": BLOB_ENV,
    "store": COSMOS_ENV,
    "ledger": COSMOS_ENV,
    "queue": SERVICEBUS_ENV,
    "publisher": SERVICEBUS_ENV,
}


def available(port: str) -> str | None:
    """None when the port's Azure service is configured, else why its tests skip."""
    variable = _NEEDS[port]
    if os.environ.get(variable):
        return None
    if variable == SERVICEBUS_ENV:
        return None if _BROKER_MISSING is None else f"azure {port}: {_BROKER_MISSING}"
    return f"azure {port}: {variable} is not set (scripts/test-emulated sets it)"


def isolated_settings(**values: Any) -> Settings:
    """Settings from explicit values only: no `.env`, nothing from a developer's shell
    beyond the EXPORT_WORKER_ variables the model itself reads."""
    return Settings(env_file=None, **values)


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class _Factory:
    name = "azure"
    wait = 10.0
    empty_wait = 3.0
    clock = None


# ---- Blob Storage ----------------------------------------------------------------------
class AzureBlobsFactory(_Factory):
    """AzureBlobs on the configured account; containers are created on first write."""

    @asynccontextmanager
    async def open(self) -> AsyncIterator[AzureBlobs]:
        """Blob storage with containers created when missing."""
        settings = isolated_settings(blob_connection_string=os.environ[BLOB_ENV])
        blobs = AzureBlobs(settings, create_containers=True)
        try:
            yield blobs
        finally:
            await blobs.close()


# ---- Cosmos DB -------------------------------------------------------------------------
def cosmos_settings(database: str) -> Settings:
    """Settings for a Cosmos test database that the adapters create."""
    endpoint = os.environ[COSMOS_ENV]
    verify = os.environ.get(COSMOS_TLS_ENV)
    if verify is None:
        verify_tls = urlparse(endpoint).hostname not in {"127.0.0.1", "localhost", "::1"}
    else:
        verify_tls = verify.lower() in {"1", "true", "yes"}
    return isolated_settings(
        cosmos_endpoint=endpoint,
        cosmos_key=os.environ.get(COSMOS_KEY_ENV) or EMULATOR_KEY,
        cosmos_database=database,
        cosmos_create_resources=True,
        cosmos_verify_tls=verify_tls,
    )


async def drop_database(settings: Settings) -> None:
    """Delete a test database (best effort: the emulator forgets it anyway)."""
    client, credential = cosmos_client(settings)
    try:
        with contextlib.suppress(Exception):  # a test's own failure is the one to report
            async with client:
                await client.delete_database(settings.cosmos_database)
    finally:
        if credential is not None:
            await credential.close()


class AzureStoreFactory(_Factory):
    """AzureConversationStore on a database of its own."""

    @asynccontextmanager
    async def open(self) -> AsyncIterator[AzureConversationStore]:
        """A fresh, empty store."""
        settings = cosmos_settings(_unique("store"))
        store = AzureConversationStore(settings, account=CosmosAccount(settings))
        try:
            yield store
        finally:
            await store.close()
            await drop_database(settings)


class AzureLedgerFactory(_Factory):
    """AzureLedger on a database of its own."""

    @asynccontextmanager
    async def open(self) -> AsyncIterator[AzureLedger]:
        """A fresh, empty ledger."""
        settings = cosmos_settings(_unique("ledger"))
        ledger = AzureLedger(settings, account=CosmosAccount(settings))
        try:
            yield ledger
        finally:
            await ledger.close()
            await drop_database(settings)


# ---- Service Bus -----------------------------------------------------------------------
def servicebus_settings(**values: Any) -> Settings:
    """Settings naming the test namespace by its connection string."""
    return isolated_settings(servicebus_connection_string=os.environ[SERVICEBUS_ENV], **values)


@asynccontextmanager
async def _entity(kind: str) -> AsyncIterator[str]:
    """A queue (sessions on) or a topic (duplicate detection on, one subscription `all`) of
    its own, deleted after."""
    from azure.servicebus.aio.management import ServiceBusAdministrationClient

    name = _unique(f"contract-{kind}")
    admin = ServiceBusAdministrationClient.from_connection_string(os.environ[SERVICEBUS_ENV])
    async with admin:
        if kind == "queue":
            await admin.create_queue(
                name,
                requires_session=True,
                lock_duration=timedelta(seconds=QUEUE_LOCK_SECONDS),
                max_delivery_count=10,
            )
        else:
            await admin.create_topic(
                name,
                requires_duplicate_detection=True,
                duplicate_detection_history_time_window=timedelta(minutes=10),
            )
            await admin.create_subscription(name, SUBSCRIPTION)
        try:
            yield name
        finally:
            delete = admin.delete_queue if kind == "queue" else admin.delete_topic
            with contextlib.suppress(Exception):  # leave the test's own failure visible
                await delete(name)


class AzureQueueFactory(_Factory):
    """AzureQueue on a session-enabled queue created for each `open()`."""

    lock_duration = QUEUE_LOCK_SECONDS

    @asynccontextmanager
    async def open(self) -> AsyncIterator[AzureQueue]:
        """A fresh, empty queue."""
        async with _entity("queue") as name:
            queue = AzureQueue(servicebus_settings(queue_name=name))
            try:
                yield queue
            finally:
                await queue.close()


class AzurePublisherFactory(_Factory):
    """AzurePublisher on a topic created for each `open()`, read back from its subscription."""

    topic = ""

    async def published(self, publisher: AzurePublisher) -> list[dict[str, Any]]:
        """What the subscription got (a topic itself cannot be listed)."""
        return await subscription_bodies(os.environ[SERVICEBUS_ENV], self.topic)

    @asynccontextmanager
    async def open(self) -> AsyncIterator[AzurePublisher]:
        """A publisher on a fresh topic."""
        async with _entity("topic") as name:
            self.topic = name
            publisher = AzurePublisher(servicebus_settings(topic_name=name))
            try:
                yield publisher
            finally:
                await publisher.close()


# ---- Service Bus on the test broker -------------------------------------------------------
class BrokerQueueFactory(_Factory):
    """AzureQueue on a broker started for each `open()`, on this factory's manual clock
    (the adapter measures delayed abandons on it too).

    `is_drained` and `stats` count over AMQP: the SDK's administration client speaks HTTPS
    to the connection string's host and port, which the broker does not serve
    (tests/servicebus_broker/README.md), and the adapter knows it from the connection
    string's `UseDevelopmentEmulator=true`."""

    lock_duration = QUEUE_LOCK_SECONDS
    empty_wait = 1.0

    def __init__(self) -> None:
        self.clock = ManualClock()

    @asynccontextmanager
    async def open(self) -> AsyncIterator[AzureQueue]:
        """A fresh, empty queue (sessions on) on a broker of its own."""
        name = _unique("contract-queue")
        config = QueueConfig(
            name, requires_session=True, lock_duration=QUEUE_LOCK_SECONDS, max_delivery_count=10
        )
        with ServiceBusBroker([config], clock=self.clock) as broker:
            settings = isolated_settings(
                servicebus_connection_string=broker.connection_string, queue_name=name
            )
            queue = AzureQueue(settings, clock=self.clock.now)
            try:
                yield queue
            finally:
                await queue.close()


class BrokerPublisherFactory(_Factory):
    """AzurePublisher on a broker started for each `open()` (duplicate detection on), read
    back from the topic's subscription."""

    empty_wait = 1.0
    topic = ""
    connection_string = ""

    async def published(self, publisher: AzurePublisher) -> list[dict[str, Any]]:
        """What the subscription got (a topic itself cannot be listed)."""
        return await subscription_bodies(self.connection_string, self.topic)

    @asynccontextmanager
    async def open(self) -> AsyncIterator[AzurePublisher]:
        """A publisher on a fresh topic."""
        self.topic = name = _unique("contract-topic")
        config = TopicConfig(
            name,
            subscriptions=(SubscriptionConfig(SUBSCRIPTION),),
            duplicate_detection_window=600.0,
        )
        with ServiceBusBroker([config]) as broker:
            self.connection_string = broker.connection_string
            settings = isolated_settings(
                servicebus_connection_string=broker.connection_string, topic_name=name
            )
            publisher = AzurePublisher(settings)
            try:
                yield publisher
            finally:
                await publisher.close()


def blobs_factory() -> AzureBlobsFactory:
    """The Blob Storage factory."""
    return AzureBlobsFactory()


def store_factory() -> AzureStoreFactory:
    """The Cosmos conversation store factory."""
    return AzureStoreFactory()


def ledger_factory() -> AzureLedgerFactory:
    """The Cosmos ledger factory."""
    return AzureLedgerFactory()


def queue_factory() -> AzureQueueFactory | BrokerQueueFactory:
    """The Service Bus queue factory: the live namespace when configured, else the broker."""
    return AzureQueueFactory() if os.environ.get(SERVICEBUS_ENV) else BrokerQueueFactory()


def publisher_factory() -> AzurePublisherFactory | BrokerPublisherFactory:
    """The Service Bus publisher factory: the live namespace when configured, else the broker."""
    if os.environ.get(SERVICEBUS_ENV):
        return AzurePublisherFactory()
    return BrokerPublisherFactory()
