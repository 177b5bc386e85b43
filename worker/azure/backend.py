"""Opening the Azure backend: Service Bus, Cosmos DB and Blob Storage adapters together."""

from __future__ import annotations

import contextlib
from typing import Any

from worker.azure.blobs import AzureBlobs
from worker.azure.cosmos import AzureConversationStore, AzureLedger, CosmosAccount
from worker.azure.credentials import AzureNotConfigured, missing_settings
from worker.azure.servicebus import AzurePublisher, AzureQueue
from worker.ports import Backend, Publisher, Queue
from worker.settings import Settings


async def open_azure_backend(
    settings: Settings,
    *,
    queue: Queue | None = None,
    publisher: Publisher | None = None,
    probe: bool = True,
) -> Backend:
    """Every port on Azure; `queue` / `publisher` replace the Service Bus ones (a test's).

    The store and the ledger share one Cosmos client. With `probe` it is opened here, so
    that resources are created (when `cosmos_create_resources`) and bad settings fail
    before any message; without, nothing reaches Cosmos DB until a call needs it (the
    dead-letter commands, which must work while Cosmos DB is down, make none).
    """
    missing = missing_settings(settings, servicebus=queue is None or publisher is None)
    if missing:  # all of them, before a credential or a connection is tried
        raise AzureNotConfigured("set " + "; ".join(missing))
    account = CosmosAccount(settings)
    store = AzureConversationStore(settings, account=account)
    ledger = AzureLedger(settings, account=account)
    opened: list[Any] = [store, ledger]
    try:
        if probe:
            await account.container(settings.turns_container)
        blobs = AzureBlobs(settings)
        opened.append(blobs)
        if queue is None:
            queue = AzureQueue(settings)
            opened.append(queue)
        if publisher is None:
            publisher = AzurePublisher(settings)
    except BaseException:
        for port in reversed(opened):
            with contextlib.suppress(Exception):  # the opening error is the one to report
                await port.close()
        raise
    return Backend(queue=queue, store=store, ledger=ledger, blobs=blobs, publisher=publisher)
