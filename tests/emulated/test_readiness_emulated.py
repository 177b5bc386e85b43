"""The readiness check on the Azure adapters (cosmosdb-server, Azurite): reachable as
deployed, and a Cosmos container deleted under a running worker, a rejected storage key or
storage behind a network that stops answering named as unreachable; a misnamed database or
container refused when the backend opens.
Run by scripts/test-emulated, which starts both servers."""

from __future__ import annotations

import asyncio
import base64
import os
import re
import uuid
from pathlib import Path

import pytest

from tests.emulated.azure_environment import (
    BLOB_ENV,
    COSMOS_ENV,
    COSMOS_KEY_ENV,
    COSMOS_TLS_ENV,
    EMULATOR_KEY,
    emulators_missing,
    held_blob_network,
)
from tests.held_network import HeldNetwork
from worker.health import Unreachable
from worker.local.backend import open_local_backend
from worker.operations import Operations, reachability_check
from worker.settings import Settings

pytestmark = pytest.mark.emulated


def emulated_settings(home: Path) -> Settings:
    """The Azure settings for Cosmos and Blob on the running emulators (the queue and the
    outbox stay local: readiness reads no Service Bus entity)."""
    reason = emulators_missing()
    if reason is not None:
        pytest.skip(reason)
    verify = os.environ.get(COSMOS_TLS_ENV, "false").lower() == "true"
    return Settings(
        env_file=None,
        home=home,
        backend="azure",
        blob_connection_string=os.environ[BLOB_ENV],
        cosmos_endpoint=os.environ[COSMOS_ENV],
        cosmos_key=os.environ.get(COSMOS_KEY_ENV) or EMULATOR_KEY,
        cosmos_database=f"ready-{uuid.uuid4().hex[:10]}",
        cosmos_create_resources=True,
        cosmos_verify_tls=verify,
    )


def check(home: Path, settings: Settings) -> tuple[str, str] | None:
    """Open the Azure adapters (the queue and outbox local), run the check; what failed."""

    async def main() -> tuple[str, str] | None:
        from worker.azure.backend import open_azure_backend

        sidecar = open_local_backend(home)
        backend = await open_azure_backend(
            settings, queue=sidecar.queue, publisher=sidecar.publisher
        )
        try:
            await reachability_check(backend, settings, Operations())()
        except Unreachable as exc:
            return exc.dependency, exc.error
        finally:
            await backend.close()
            for port in (sidecar.store, sidecar.ledger, sidecar.blobs):
                await port.close()
        return None

    return asyncio.run(main())


def test_the_emulated_azure_adapters_are_reachable(tmp_path: Path) -> None:
    assert check(tmp_path / "home", emulated_settings(tmp_path / "home")) is None


def check_after(home: Path, settings: Settings, dropped: str) -> tuple[str, str] | None:
    """As `check`, with the container `dropped` deleted after the backend opened."""

    async def main() -> tuple[str, str] | None:
        from worker.azure.backend import open_azure_backend
        from worker.azure.cosmos import EMULATOR_HEADERS
        from worker.azure.credentials import cosmos_client

        sidecar = open_local_backend(home)
        backend = await open_azure_backend(
            settings, queue=sidecar.queue, publisher=sidecar.publisher
        )
        client, _ = cosmos_client(settings, headers=dict(EMULATOR_HEADERS))
        try:
            async with client:
                database = client.get_database_client(settings.cosmos_database)
                await database.delete_container(dropped)
            await reachability_check(backend, settings, Operations())()
        except Unreachable as exc:
            return exc.dependency, exc.error
        finally:
            await backend.close()
            for port in (sidecar.store, sidecar.ledger, sidecar.blobs):
                await port.close()
        return None

    return asyncio.run(main())


@pytest.mark.parametrize(
    ("container", "dependency"),
    [("turns_container", "ledger"), ("messages_container", "store")],
)
def test_a_cosmos_container_gone_while_running_is_unreachable_not_an_empty_answer(
    tmp_path: Path, container: str, dependency: str
) -> None:
    settings = emulated_settings(tmp_path / "home")
    name = getattr(settings, container)
    assert check_after(tmp_path / "home", settings, name) == (dependency, "NotFound")


@pytest.mark.parametrize("container", ["turns_container", "messages_container"])
def test_a_missing_cosmos_container_stops_the_backend_opening_named(
    tmp_path: Path, container: str
) -> None:
    from worker.azure.backend import open_azure_backend
    from worker.azure.credentials import AzureNotConfigured

    settings = emulated_settings(tmp_path / "home")
    check(tmp_path / "home", settings)  # creates the database and the named containers
    misnamed = settings.replace(
        **{container: "no-such-container", "cosmos_create_resources": False}
    )
    sidecar = open_local_backend(tmp_path / "home")

    async def main() -> None:
        with pytest.raises(AzureNotConfigured) as refused:
            await open_azure_backend(misnamed, queue=sidecar.queue, publisher=sidecar.publisher)
        text = str(refused.value)
        assert "'no-such-container'" in text and misnamed.cosmos_database in text
        assert "EXPORT_WORKER_COSMOS_CREATE_RESOURCES" in text

    try:
        asyncio.run(main())
    finally:
        for port in (sidecar.store, sidecar.ledger, sidecar.blobs):
            asyncio.run(port.close())


def test_a_missing_cosmos_database_stops_the_backend_opening_named(tmp_path: Path) -> None:
    from worker.azure.backend import open_azure_backend
    from worker.azure.credentials import AzureNotConfigured

    settings = emulated_settings(tmp_path / "home").replace(cosmos_create_resources=False)
    sidecar = open_local_backend(tmp_path / "home")

    async def main() -> None:
        with pytest.raises(AzureNotConfigured, match="does not exist"):
            await open_azure_backend(settings, queue=sidecar.queue, publisher=sidecar.publisher)

    try:
        asyncio.run(main())
    finally:
        for port in (sidecar.store, sidecar.ledger, sidecar.blobs):
            asyncio.run(port.close())


def test_a_storage_key_the_account_rejects_is_unreachable(tmp_path: Path) -> None:
    settings = emulated_settings(tmp_path / "home")
    assert settings.blob_connection_string is not None
    wrong = base64.b64encode(b"not the account key").decode()
    real = settings.blob_connection_string.get_secret_value()
    connection = re.sub(r"AccountKey=[^;]+", f"AccountKey={wrong}", real)
    rejected = settings.replace(blob_connection_string=connection)
    failed = check(tmp_path / "home", rejected)
    assert failed is not None and failed[0] == "blobs" and failed[1] != "NotFound"


def test_a_refused_storage_call_is_retried_not_taken_for_a_bug(tmp_path: Path) -> None:
    """A 403 (a rotated key, a role not yet propagated) is a TransientError naming the
    service and the status: the turn is retried, then dead-lettered `transient_failure`."""
    from worker.azure.blobs import AzureBlobs
    from worker.ports import TransientError

    settings = emulated_settings(tmp_path / "home")
    assert settings.blob_connection_string is not None
    wrong = base64.b64encode(b"not the account key").decode()
    real = settings.blob_connection_string.get_secret_value()
    rejected = settings.replace(
        blob_connection_string=re.sub(r"AccountKey=[^;]+", f"AccountKey={wrong}", real)
    )

    async def main() -> None:
        blobs = AzureBlobs(rejected)
        try:
            with pytest.raises(TransientError, match=r"^Blob Storage: .* 403"):
                await blobs.exists(f"{rejected.artifacts_container}/refused.json")
        finally:
            await blobs.close()

    asyncio.run(main())


@pytest.mark.parametrize("block_size", [1 << 20, 4])  # one Put Blob; staged blocks
def test_a_write_to_a_missing_container_is_refused_as_the_deployments_to_fix(
    tmp_path: Path, block_size: int
) -> None:
    """Without COSMOS_CREATE_RESOURCES the exports container must exist. A write to a
    missing one answers 404: a TransientError that says what to do (retried, then
    `transient_failure`, replayed once it exists), never a NotFound the turn takes for a bug."""
    from worker.azure.blobs import AzureBlobs
    from worker.ports import BlobInfo, TransientError
    from worker.settlement import where_raised

    settings = emulated_settings(tmp_path / "home").replace(cosmos_create_resources=False)
    missing = f"missing-{uuid.uuid4().hex[:12]}"

    async def main() -> None:
        blobs = AzureBlobs(settings, block_size=block_size)
        try:
            upload = await blobs.upload(f"{missing}/c/t/x.csv", BlobInfo("text/csv", "x.csv", {}))
            with pytest.raises(TransientError, match="container to write to does not exist") as e:
                await upload.write(b"a,b\n1,2\n")
                await upload.commit()
            # what the dead letter's description ends with (operations.md)
            assert where_raised(e.value).endswith(
                " from NotFound from ResourceNotFoundError 404 ContainerNotFound"
            )
            with pytest.raises(TransientError, match="COSMOS_CREATE_RESOURCES=true"):
                await blobs.put(f"{missing}/c/t/x.json", b"{}")
        finally:
            await blobs.close()

    asyncio.run(main())


def test_storage_behind_a_silent_network_is_unreachable_by_name_and_ready_once_it_heals(
    tmp_path: Path,
) -> None:
    """A partition answers nothing: the check's own read bound, not the SDK's retries (or
    the whole check's bound, which would name nothing), says which dependency is gone; the
    same adapters answer again once the network heals."""
    from worker.azure.backend import open_azure_backend

    settings = emulated_settings(tmp_path / "home")
    read_timeout = 1.0

    async def main(network: HeldNetwork, through: Settings) -> None:
        sidecar = open_local_backend(tmp_path / "home")
        backend = await open_azure_backend(
            through, queue=sidecar.queue, publisher=sidecar.publisher
        )
        check = reachability_check(backend, through, Operations(), read_timeout=read_timeout)
        try:
            await check()
            network.hold()
            started = asyncio.get_running_loop().time()
            with pytest.raises(Unreachable) as unreachable:
                await check()
            waited = asyncio.get_running_loop().time() - started
            assert (unreachable.value.dependency, unreachable.value.error) == (
                "blobs",
                "TimeoutError",
            )
            assert read_timeout <= waited < read_timeout + 2
            network.release()
            async with asyncio.timeout(10):
                await check()
        finally:
            network.release()
            await backend.close()
            for port in (sidecar.store, sidecar.ledger, sidecar.blobs):
                await port.close()

    with held_blob_network() as (network, connection):
        asyncio.run(main(network, settings.replace(blob_connection_string=connection)))
