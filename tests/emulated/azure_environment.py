"""The whole Azure backend on local stand-ins, for the emulated end-to-end tests and the
crash harness: Service Bus on the AMQP test broker (tests/servicebus_broker, started here,
in-process, and stopped with the environment), Blob Storage on Azurite and Cosmos DB on
cosmosdb-server (started by scripts/test-emulated, named by the EXPORT_WORKER_TEST_*
variables it exports).

Each environment has a broker of its own (queue `turn-completed`, sessions on; topic
`export-published` with duplicate detection and one subscription `all`, which is where
the events are read back) and a Cosmos database of its own. Blob containers keep their
names (`artifacts`, `exports`: fixture paths and recorded blob paths name them), so the
blobs of the conversations a test uses are deleted first (`clear_blobs`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from azure.core.exceptions import ResourceExistsError
from azure.servicebus.aio import ServiceBusClient
from azure.storage.blob.aio import BlobLeaseClient, BlobServiceClient

from tests.held_network import HeldNetwork
from tests.servicebus_broker import (
    ManualClock,
    QueueConfig,
    ServiceBusBroker,
    SubscriptionConfig,
    TopicConfig,
)
from worker.handler import TurnHandler
from worker.ports import Backend
from worker.retry_policy import RetryPolicy
from worker.runtime import Runtime
from worker.settings import Settings

BLOB_ENV = "EXPORT_WORKER_TEST_BLOB_CONNECTION_STRING"
COSMOS_ENV = "EXPORT_WORKER_TEST_COSMOS_ENDPOINT"
COSMOS_KEY_ENV = "EXPORT_WORKER_TEST_COSMOS_KEY"
COSMOS_TLS_ENV = "EXPORT_WORKER_TEST_COSMOS_VERIFY_TLS"
# cosmosdb-server checks no signature, but the SDK needs a base64 key to sign with.
EMULATOR_KEY = "ZXhwb3J0LXdvcmtlci10ZXN0LWtleQ=="
QUEUE = "turn-completed"
TOPIC = "export-published"
SUBSCRIPTION = "all"
PEEK_PAGE = 100


async def subscription_bodies(
    connection_string: str, topic: str, subscription: str = SUBSCRIPTION
) -> list[dict[str, Any]]:
    """The JSON bodies on a topic's subscription, oldest first (peeked: reading them
    changes nothing)."""
    found: list[dict[str, Any]] = []
    client = ServiceBusClient.from_connection_string(connection_string)
    async with client, client.get_subscription_receiver(topic, subscription) as receiver:
        start = 1
        while True:
            page = await receiver.peek_messages(PEEK_PAGE, sequence_number=start)
            if not page:
                return found
            found.extend(json.loads(b"".join(message.body)) for message in page)
            start = (page[-1].sequence_number or start) + 1


@contextmanager
def held_blob_network() -> Iterator[tuple[HeldNetwork, str]]:
    """A held network in front of Azurite (tests/held_network.py), and the connection
    string (BLOB_ENV's) that goes through it."""
    connection = os.environ[BLOB_ENV]
    endpoint = re.search(r"BlobEndpoint=([^;]+)", connection)
    assert endpoint is not None
    port = urlparse(endpoint.group(1)).port
    with HeldNetwork(("127.0.0.1", int(port or 0))) as network:
        yield network, connection.replace(f":{port}/", f":{network.port}/")


def emulators_missing() -> str | None:
    """Why the environment cannot be built here, or None."""
    missing = [name for name in (BLOB_ENV, COSMOS_ENV) if not os.environ.get(name)]
    if missing:
        return f"{' and '.join(missing)} not set (scripts/test-emulated sets them)"
    return None


@dataclass
class AzureEnvironment:
    """One isolated Azure backend on the stand-ins."""

    broker: ServiceBusBroker
    clock: ManualClock | None
    values: dict[str, str]  # the EXPORT_WORKER_ settings, as environment variables

    def settings(self, **overrides: Any) -> Settings:
        """The worker's settings on this environment (no `.env`, nothing else)."""
        values: dict[str, Any] = {
            name.removeprefix("EXPORT_WORKER_").lower(): value
            for name, value in self.values.items()
        }
        values.update(overrides)
        return Settings(env_file=None, **values)

    def env(self, **overrides: str) -> dict[str, str]:
        """A CLI process's environment: the caller's, minus any EXPORT_WORKER_ variable,
        plus this environment's settings."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("EXPORT_WORKER_")}
        env.update(self.values)
        env.update(overrides)
        return env

    def active_messages(self) -> int:
        """Messages queued or locked on the queue (the broker's own count)."""
        return self.broker.counts(QUEUE).active

    async def events(self) -> list[dict[str, Any]]:
        """The export.published bodies on the subscription, oldest first."""
        return await subscription_bodies(self.broker.connection_string, TOPIC)

    async def export_blobs(self, conversations: Iterable[str]) -> dict[str, bytes]:
        """Every blob under the conversations' export folders: `exports/...` path → bytes."""
        container = self.values["EXPORT_WORKER_EXPORTS_CONTAINER"]
        found: dict[str, bytes] = {}
        async with self._blob_service() as service:
            client = service.get_container_client(container)
            if not await client.exists():
                return found
            for cid in conversations:
                async for blob in client.list_blobs(name_starts_with=f"{cid}/"):
                    data = await (await client.download_blob(blob.name)).readall()
                    found[f"{container}/{blob.name}"] = data
        return found

    async def clear_blobs(self, conversations: Iterable[str]) -> None:
        """Delete the conversations' artifacts and exports left by an earlier run."""
        names = (
            self.values["EXPORT_WORKER_ARTIFACTS_CONTAINER"],
            self.values["EXPORT_WORKER_EXPORTS_CONTAINER"],
        )
        async with self._blob_service() as service:
            for name in names:
                client = service.get_container_client(name)
                if not await client.exists():
                    continue
                for cid in conversations:
                    async for blob in client.list_blobs(name_starts_with=f"{cid}/"):
                        await client.delete_blob(blob.name)

    async def archive_blob(self, path: str) -> None:
        """Move the blob at `container/name` to the archive tier (offline until rehydrated)."""
        container, _, name = path.partition("/")
        async with self._blob_service() as service:
            await service.get_blob_client(container, name).set_standard_blob_tier("Archive")

    async def lease_blob(self, path: str) -> None:
        """Take a lease that never lapses on the blob at `container/name` (an empty one when
        nothing is there): a write without the lease id is refused, 412 LeaseIdMissing."""
        container, _, name = path.partition("/")
        async with self._blob_service() as service:
            with contextlib.suppress(ResourceExistsError):
                await service.create_container(container)
            blob = service.get_blob_client(container, name)
            if not await blob.exists():
                await blob.upload_blob(b"")
            await blob.acquire_lease(lease_duration=-1)

    async def break_lease(self, path: str) -> None:
        """Break the blob's lease at once, as an operator does (`az storage blob lease break`)."""
        container, _, name = path.partition("/")
        async with self._blob_service() as service:
            blob = service.get_blob_client(container, name)
            await BlobLeaseClient(blob).break_lease(lease_break_period=0)

    async def drop_database(self) -> None:
        """Delete this environment's Cosmos database (best effort)."""
        from worker.azure.credentials import cosmos_client

        client, _ = cosmos_client(self.settings())
        async with client:
            try:
                await client.delete_database(self.values["EXPORT_WORKER_COSMOS_DATABASE"])
            except Exception:  # the emulator forgets it anyway; a test's own failure matters
                return

    def _blob_service(self) -> BlobServiceClient:
        return BlobServiceClient.from_connection_string(os.environ[BLOB_ENV])


@contextmanager
def azure_environment(
    *,
    lock_duration: float = 60.0,
    max_delivery_count: int = 10,
    manual_clock: bool = False,
) -> Iterator[AzureEnvironment]:
    """A fresh broker and database on the running emulators (see the module docstring)."""
    reason = emulators_missing()
    if reason is not None:
        raise RuntimeError(reason)
    clock = ManualClock() if manual_clock else None
    entities = [
        QueueConfig(
            QUEUE,
            requires_session=True,
            lock_duration=lock_duration,
            max_delivery_count=max_delivery_count,
        ),
        TopicConfig(
            TOPIC,
            subscriptions=(SubscriptionConfig(SUBSCRIPTION),),
            duplicate_detection_window=600.0,
        ),
    ]
    with ServiceBusBroker(entities, clock=clock) as broker:
        yield AzureEnvironment(broker, clock, _values(broker, lock_duration))


def _values(broker: ServiceBusBroker, lock_duration: float) -> dict[str, str]:
    endpoint = os.environ[COSMOS_ENV]
    verify = os.environ.get(COSMOS_TLS_ENV)
    if verify is None:
        verify = str(urlparse(endpoint).hostname not in {"127.0.0.1", "localhost", "::1"})
    return {
        "EXPORT_WORKER_BACKEND": "azure",
        "EXPORT_WORKER_SERVICEBUS_CONNECTION_STRING": broker.connection_string,
        "EXPORT_WORKER_QUEUE_NAME": QUEUE,
        "EXPORT_WORKER_TOPIC_NAME": TOPIC,
        "EXPORT_WORKER_BLOB_CONNECTION_STRING": os.environ[BLOB_ENV],
        "EXPORT_WORKER_ARTIFACTS_CONTAINER": "artifacts",
        "EXPORT_WORKER_EXPORTS_CONTAINER": "exports",
        "EXPORT_WORKER_COSMOS_ENDPOINT": endpoint,
        "EXPORT_WORKER_COSMOS_KEY": os.environ.get(COSMOS_KEY_ENV) or EMULATOR_KEY,
        "EXPORT_WORKER_COSMOS_VERIFY_TLS": verify.lower(),
        "EXPORT_WORKER_COSMOS_DATABASE": f"e2e-{uuid.uuid4().hex[:10]}",
        "EXPORT_WORKER_COSMOS_CREATE_RESOURCES": "true",
        "EXPORT_WORKER_LOCK_DURATION_SECONDS": str(lock_duration),
    }


async def drain(backend: Backend, settings: Settings, timeout: float = 120.0) -> None:
    """Run the worker's runtime on `backend` until its queue is drained (no retry waits)."""
    runtime = Runtime(
        TurnHandler(backend, settings),
        backend.queue,
        concurrency=2,
        retry=RetryPolicy.no_waiting(settings.max_attempts),
        lock_duration=settings.lock_duration_seconds,
        session_idle=0.1,
        shutdown_grace=5,
    )
    await asyncio.wait_for(runtime.run(drain=True), timeout=timeout)
