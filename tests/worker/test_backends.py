"""The Service Bus adapter takes its settings from the worker's settings."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from worker.azure.servicebus import AzureQueue
from worker.settings import Settings

# A development connection string: building the client opens no connection.
EMULATOR = (
    "Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=k;SharedAccessKey=c2VjcmV0;"
    "UseDevelopmentEmulator=true"
)


def test_the_maximum_lock_renewal_setting_caps_each_message_on_service_bus() -> None:
    settings = Settings(
        env_file=None,
        backend="azure",
        servicebus_connection_string=EMULATOR,
        max_lock_renewal_seconds=900,
    )

    async def main() -> float:
        queue = AzureQueue(settings)
        try:
            return queue._limits.max_renewal
        finally:
            await queue.close()

    assert asyncio.run(main()) == 900


def test_the_azure_backend_names_every_missing_setting_before_it_connects() -> None:
    # One run names them all (it named one a run, and with Cosmos set tried its credential
    # before mentioning Blob Storage or Service Bus).
    from worker.azure.backend import open_azure_backend
    from worker.azure.credentials import AzureNotConfigured

    def refusal(**given: str) -> str:
        settings = Settings(env_file=None, backend="azure", **given)
        with pytest.raises(AzureNotConfigured) as refused:
            asyncio.run(open_azure_backend(settings))
        return str(refused.value)

    blob = "EXPORT_WORKER_BLOB_ACCOUNT_URL or EXPORT_WORKER_BLOB_CONNECTION_STRING"
    servicebus = "EXPORT_WORKER_SERVICEBUS_NAMESPACE or EXPORT_WORKER_SERVICEBUS_CONNECTION_STRING"
    assert refusal() == f"set EXPORT_WORKER_COSMOS_ENDPOINT; {blob}; {servicebus}"
    assert refusal(cosmos_endpoint="https://127.0.0.1:9/") == f"set {blob}; {servicebus}"
    assert refusal(servicebus_connection_string=EMULATOR) == (
        f"set EXPORT_WORKER_COSMOS_ENDPOINT; {blob}"
    )


def test_the_worker_refuses_more_attempts_than_the_local_queue_delivers(tmp_path: Path) -> None:
    # Past the queue's limit, it dead-letters first (MaxDeliveryCountExceeded) and the turn's
    # own reason is lost: refused before a message is taken.
    from worker.environment import SettingsError
    from worker.ports import MAX_DELIVERY_COUNT
    from worker.serving import check_attempts

    def checked(attempts: int, backend: str = "local") -> None:
        check_attempts(
            Settings(env_file=None, home=tmp_path, backend=backend, max_attempts=attempts)
        )

    checked(MAX_DELIVERY_COUNT)
    checked(MAX_DELIVERY_COUNT + 5, backend="azure")  # the deployment's queue decides there
    with pytest.raises(SettingsError, match=f"MAX_ATTEMPTS must be at most {MAX_DELIVERY_COUNT}"):
        checked(MAX_DELIVERY_COUNT + 1)
