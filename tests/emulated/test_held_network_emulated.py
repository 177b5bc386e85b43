"""Blob Storage and Cosmos DB behind a network that stops answering (tests/held_network.py
in front of Azurite and cosmosdb-server): nothing is refused or closed, so only the
worker's own deadline ends a call. It must end as a transient failure that names the
service, and the same client must work again the moment the network heals (a connection
left hanging is not handed to the next call). Run by scripts/test-emulated."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from urllib.parse import urlparse

import pytest

from tests.emulated.azure_environment import (
    COSMOS_ENV,
    COSMOS_KEY_ENV,
    EMULATOR_KEY,
    emulators_missing,
    held_blob_network,
)
from tests.held_network import HeldNetwork
from worker.azure.blobs import AzureBlobs
from worker.ports import TransientError
from worker.settings import Settings

pytestmark = pytest.mark.emulated

SDK_TIMEOUT = 1.0
HEALED_WITHIN = 10.0  # a generous bound: a hanging connection reused would wait for ever


@pytest.fixture(autouse=True)
def _emulators() -> None:
    reason = emulators_missing()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture
def blob_network() -> Iterator[tuple[HeldNetwork, str]]:
    """A held network in front of Azurite, and the connection string through it."""
    with held_blob_network() as held:
        yield held


def test_a_blob_call_on_a_silent_network_ends_at_its_deadline_and_the_client_recovers(
    blob_network: tuple[HeldNetwork, str],
) -> None:
    network, connection = blob_network
    settings = Settings(
        env_file=None,
        backend="azure",
        blob_connection_string=connection,
        sdk_timeout_seconds=SDK_TIMEOUT,
    )
    folder = f"artifacts/held-{uuid.uuid4().hex[:10]}"

    async def read(blobs: AzureBlobs, path: str) -> bytes:
        return b"".join([chunk async for chunk in blobs.read(path)])

    async def main() -> None:
        blobs = AzureBlobs(settings, create_containers=True)
        try:
            await blobs.put(f"{folder}/call_1.json", b'{"rows": [1]}')
            network.hold()
            with pytest.raises(TransientError, match="Blob Storage: no answer within 1 s"):
                await read(blobs, f"{folder}/call_1.json")
            with pytest.raises(TransientError, match="Blob Storage: no answer within 1 s"):
                await blobs.put(f"{folder}/call_2.json", b'{"rows": [2]}')
            network.release()
            async with asyncio.timeout(HEALED_WITHIN):
                assert await read(blobs, f"{folder}/call_1.json") == b'{"rows": [1]}'
                await blobs.put(f"{folder}/call_2.json", b'{"rows": [2]}')
                assert await read(blobs, f"{folder}/call_2.json") == b'{"rows": [2]}'
        finally:
            await blobs.close()

    asyncio.run(main())


def test_a_cosmos_call_on_a_silent_network_ends_at_its_deadline_and_the_client_recovers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import worker.azure.credentials as credentials
    from worker.azure.cosmos import AzureConversationStore

    # cosmosdb-server names its own address as the account's endpoint, and the SDK goes
    # there once it has read the account: kept on the endpoint given, through the network.
    client = credentials.CosmosClient
    monkeypatch.setattr(
        credentials,
        "CosmosClient",
        lambda *args, **options: client(*args, enable_endpoint_discovery=False, **options),
    )
    port = urlparse(os.environ[COSMOS_ENV]).port

    async def main(network: HeldNetwork) -> None:
        settings = Settings(
            env_file=None,
            backend="azure",
            cosmos_endpoint=f"https://127.0.0.1:{network.port}/",
            cosmos_key=os.environ.get(COSMOS_KEY_ENV) or EMULATOR_KEY,
            cosmos_verify_tls=False,
            cosmos_create_resources=True,
            cosmos_database=f"held-{uuid.uuid4().hex[:10]}",
            sdk_timeout_seconds=SDK_TIMEOUT,
        )
        store = AzureConversationStore(settings)
        conversation = {"id": "conv_held", "user_id": "u", "participants": [], "deleted": False}
        try:
            await store.put_conversation(conversation)
            network.hold()
            with pytest.raises(TransientError, match="Cosmos DB: no answer within 1 s"):
                await store.get_conversation("conv_held")
            network.release()
            async with asyncio.timeout(HEALED_WITHIN):
                assert (await store.get_conversation("conv_held"))["id"] == "conv_held"
        finally:
            await store.close()

    with HeldNetwork(("127.0.0.1", int(port or 0))) as network:
        asyncio.run(main(network))
