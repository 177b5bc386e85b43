"""The Service Bus adapter takes its settings from the worker's settings."""

from __future__ import annotations

import asyncio

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
