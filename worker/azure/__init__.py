"""Azure adapters of every port: Service Bus (queue, publisher), Cosmos DB (store, ledger)
and Blob Storage (blobs). Every SDK call goes through `timeouts.guarded`."""

from worker.azure.backend import open_azure_backend
from worker.azure.blobs import AzureBlobs, AzureBlobUpload
from worker.azure.cosmos import AzureConversationStore, AzureLedger, CosmosAccount
from worker.azure.servicebus import AzurePublisher, AzureQueue, AzureSession

__all__ = [
    "AzureBlobUpload",
    "AzureBlobs",
    "AzureConversationStore",
    "AzureLedger",
    "AzurePublisher",
    "AzureQueue",
    "AzureSession",
    "CosmosAccount",
    "open_azure_backend",
]
