"""A service that refuses the connection is named as refusing it, not as slow: Blob Storage
retries a refused connection for longer than our deadline (backoffs of 15 s and more), and
its deadline's text said only "no answer within 30 s". Real SDK clients, aimed at a port on
127.0.0.1 that is bound but not listening, so every connection is refused at once; no
server is needed."""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.storage.blob.aio import ExponentialRetry
from msgspec.structs import replace

from worker.azure.blobs import AzureBlobs
from worker.azure.cosmos import CosmosAccount
from worker.azure.credentials import NotingRetry
from worker.azure.timeouts import DeadlineExceeded
from worker.health import Unreachable
from worker.local.backend import open_local_backend
from worker.operations import Operations, reachability_check
from worker.ports import TransientError
from worker.settings import Settings
from worker.settlement import where_raised

# Azurite's well-known development account key (public; in Azure's documentation).
_DEV_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A port on 127.0.0.1 bound and never listened on: a connection to it is refused, and
    no other process can take the port while the test runs."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as bound:
        bound.bind(("127.0.0.1", 0))
        yield bound.getsockname()[1]


def settings_for(port: int, tmp_path: Path, timeout: float) -> Settings:
    return Settings(
        env_file=None,
        home=tmp_path / "home",
        backend="azure",
        blob_connection_string=(
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
            f"AccountKey={_DEV_KEY};BlobEndpoint=http://127.0.0.1:{port}/devstoreaccount1;"
        ),
        cosmos_endpoint=f"https://127.0.0.1:{port}/",
        cosmos_key="ZXhwb3J0LXdvcmtlci10ZXN0LWtleQ==",
        cosmos_verify_tls=False,
        sdk_timeout_seconds=timeout,
    )


def test_blob_storage_refusing_the_connection_says_so_when_our_deadline_ends_the_call(
    refusing_port: int, tmp_path: Path
) -> None:
    async def main() -> DeadlineExceeded:
        blobs = AzureBlobs(settings_for(refusing_port, tmp_path, timeout=1.0))
        try:
            with pytest.raises(DeadlineExceeded) as caught:
                await blobs.exists("artifacts/a.json")
        finally:
            await blobs.close()
        return caught.value

    error = asyncio.run(main())
    assert str(error) == "Blob Storage: no answer within 1 s (its last try: connection refused)"
    # a dead letter's description (types, errno, the service) ends with the refusal too
    assert re.fullmatch(
        r"DeadlineExceeded \(Blob Storage\) at timeouts\.py:\d+ from ServiceRequestError"
        r" from ClientConnectorError ECONNREFUSED from ConnectionRefusedError ECONNREFUSED",
        where_raised(error),
    ), where_raised(error)


def test_cosmos_db_refusing_the_connection_says_so(refusing_port: int, tmp_path: Path) -> None:
    async def main() -> str:
        account = CosmosAccount(settings_for(refusing_port, tmp_path, timeout=10.0)).acquire()
        try:
            with pytest.raises(TransientError) as caught:
                await account.container("messages")
        finally:
            await account.release()
        return str(caught.value)

    assert asyncio.run(main()) == "Cosmos DB: ServiceRequestError (connection refused)"


def test_readiness_names_a_refused_blob_storage_by_how_its_last_try_failed(
    refusing_port: int, tmp_path: Path
) -> None:
    # /readyz said "blobs: TimeoutError": the SDK was still in its backoff when the read's
    # bound ended it, and nothing said the endpoint refused every connection.
    async def main() -> tuple[str, str]:
        settings = settings_for(refusing_port, tmp_path, timeout=30.0)
        local = open_local_backend(tmp_path / "home", lock_duration=60)
        blobs = AzureBlobs(settings)
        check = reachability_check(
            replace(local, blobs=blobs), settings, Operations(), read_timeout=1.0
        )
        try:
            with pytest.raises(Unreachable) as caught:
                await check()
        finally:
            await blobs.close()
            await local.close()
        return caught.value.dependency, caught.value.error

    assert asyncio.run(main()) == ("blobs", "TimeoutError (its last try: connection refused)")


def test_the_blob_clients_retry_policy_is_the_sdks_default_one_that_notes_its_tries(
    tmp_path: Path,
) -> None:
    sdk_default = ExponentialRetry()
    blobs = AzureBlobs(settings_for(1, tmp_path, timeout=1.0))
    policy = blobs._service._config.retry_policy
    assert isinstance(policy, NotingRetry)
    fields = (
        "initial_backoff",
        "increment_base",
        "random_jitter_range",
        "total_retries",
        "connect_retries",
        "read_retries",
        "status_retries",
        "retry_to_secondary",
    )
    assert [getattr(policy, f) for f in fields] == [getattr(sdk_default, f) for f in fields]
    asyncio.run(blobs.close())


def test_service_bus_refusing_the_connection_says_so_and_readiness_names_it(
    refusing_port: int, tmp_path: Path
) -> None:
    from worker.azure.servicebus import AzureQueue

    settings = Settings(
        env_file=None,
        home=tmp_path / "home",
        backend="azure",
        servicebus_connection_string=(
            f"Endpoint=sb://127.0.0.1:{refusing_port}/;SharedAccessKeyName=k;"
            "SharedAccessKey=a2V5;UseDevelopmentEmulator=true"
        ),
        sdk_timeout_seconds=5.0,
    )

    async def main() -> tuple[str, str | None]:
        queue, operations = AzureQueue(settings), Operations()
        try:
            with pytest.raises(TransientError) as caught, operations.waiting(0.0):
                await queue.accept_session(0.0)
        finally:
            await queue.close()
        return str(caught.value), operations.queue_error

    assert asyncio.run(main()) == (
        "Service Bus: ServiceBusConnectionError (connection refused)",
        "TransientError (its last try: connection refused)",
    )
