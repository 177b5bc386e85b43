"""How each Azure client authenticates: a connection string / key when one is configured
(development, emulators), else `DefaultAzureCredential` (managed identity in Azure).

Secrets stay in `Secret` (worker/environment.py) until the moment a client is built; they
are never logged, never put in an exception message, never kept on an adapter.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Iterator
from functools import cache
from typing import Any

import certifi
from azure.core.credentials_async import AsyncTokenCredential
from azure.cosmos.aio import CosmosClient
from azure.identity.aio import DefaultAzureCredential
from azure.servicebus.aio import ServiceBusClient
from azure.servicebus.aio.management import ServiceBusAdministrationClient
from azure.storage.blob.aio import BlobServiceClient, ExponentialRetry

from worker.azure.timeouts import BLOB_STORAGE, COSMOS_DB, SERVICE_BUS, note_sdk_try
from worker.ports import name_service
from worker.settings import Settings


class AzureNotConfigured(ValueError):
    """A service is used but neither its endpoint nor its connection string / key is set."""


# What each service needs set, as the refusal names it.
_COSMOS_NEEDS = "EXPORT_WORKER_COSMOS_ENDPOINT"
_BLOB_NEEDS = "EXPORT_WORKER_BLOB_ACCOUNT_URL or EXPORT_WORKER_BLOB_CONNECTION_STRING"
_SERVICEBUS_NEEDS = (
    "EXPORT_WORKER_SERVICEBUS_NAMESPACE or EXPORT_WORKER_SERVICEBUS_CONNECTION_STRING"
)


def missing_settings(settings: Settings, *, servicebus: bool = True) -> list[str]:
    """Every setting the Azure backend lacks (a service's endpoint, or its connection
    string or key), so one run names them all; `servicebus`: whether Service Bus is used."""
    missing = []
    if not settings.cosmos_endpoint:
        missing.append(_COSMOS_NEEDS)
    if settings.blob_connection_string is None and not settings.blob_account_url:
        missing.append(_BLOB_NEEDS)
    if (
        servicebus
        and settings.servicebus_connection_string is None
        and not settings.servicebus_namespace
    ):
        missing.append(_SERVICEBUS_NEEDS)
    return missing


@contextlib.contextmanager
def _building(service: str) -> Iterator[None]:
    """A client the SDK refuses to build (a malformed connection string or key) names its
    service: with two connection strings set, the one line says which one to check. Used as
    a decorator of each builder; a missing setting already names its variable."""
    try:
        yield
    except AzureNotConfigured:
        raise
    except Exception as exc:
        name_service(exc, service)
        raise


def default_credential() -> AsyncTokenCredential:
    """The credential used when no key is configured (close it with the client)."""
    return DefaultAzureCredential()


class NotingRetry(ExponentialRetry):
    """Blob Storage's default retry policy (the SDK's own, its settings unchanged) that notes
    how each failed try ended, so a call our deadline ends can say (`timeouts.guarded`)."""

    def increment(
        self,
        settings: dict[str, Any],
        request: Any,
        response: Any = None,
        error: Any = None,
    ) -> bool:
        note_sdk_try(error, getattr(response, "status_code", None))
        return bool(super().increment(settings, request, response=response, error=error))


@_building(BLOB_STORAGE)
def blob_service(
    settings: Settings, **options: Any
) -> tuple[BlobServiceClient, AsyncTokenCredential | None]:
    """A Blob service client and the token credential it owns (None with a connection string);
    its retries note how each failed try ended (`NotingRetry`)."""
    options.setdefault("retry_policy", NotingRetry())
    if settings.blob_connection_string is not None:
        secret = settings.blob_connection_string.get_secret_value()
        return BlobServiceClient.from_connection_string(secret, **options), None
    if not settings.blob_account_url:
        raise AzureNotConfigured(f"set {_BLOB_NEEDS}")
    credential = default_credential()
    return BlobServiceClient(
        settings.blob_account_url, credential=credential, **options
    ), credential


@_building(COSMOS_DB)
def cosmos_client(
    settings: Settings, **options: Any
) -> tuple[CosmosClient, AsyncTokenCredential | None]:
    """A Cosmos client and the token credential it owns (None with an account key)."""
    if not settings.cosmos_endpoint:
        raise AzureNotConfigured(f"set {_COSMOS_NEEDS}")
    if not settings.cosmos_verify_tls:
        options["connection_verify"] = False  # emulators' self-signed certificates only
    if settings.cosmos_key is not None:
        key = settings.cosmos_key.get_secret_value()
        return CosmosClient(settings.cosmos_endpoint, credential=key, **options), None
    credential = default_credential()
    return CosmosClient(settings.cosmos_endpoint, credential=credential, **options), credential


@cache
def servicebus_tls() -> ssl.SSLContext:
    """The TLS context of every Service Bus connection this process opens: the SDK's own
    settings (TLS client, certifi's CA bundle), built once. Left to the SDK, each AMQP
    connection (one per receiver) loads the CA bundle again: ~50 ms of CPU per turn."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(certifi.where())
    return context


@_building(SERVICE_BUS)
def servicebus_client(
    settings: Settings, credential: AsyncTokenCredential | None = None, **options: Any
) -> tuple[ServiceBusClient, AsyncTokenCredential | None]:
    """A Service Bus client and the token credential it owns (None with a connection
    string, or when `credential`, owned by the caller, is given to share)."""
    options.setdefault("ssl_context", servicebus_tls())
    if settings.servicebus_connection_string is not None:
        secret = settings.servicebus_connection_string.get_secret_value()
        return ServiceBusClient.from_connection_string(secret, **options), None
    if not settings.servicebus_namespace:
        raise AzureNotConfigured(f"set {_SERVICEBUS_NEEDS}")
    if credential is not None:
        return ServiceBusClient(settings.servicebus_namespace, credential, **options), None
    owned = default_credential()
    return ServiceBusClient(settings.servicebus_namespace, owned, **options), owned


def is_development_emulator(settings: Settings) -> bool:
    """Whether Service Bus is a development emulator (`UseDevelopmentEmulator=true`): plain
    AMQP on the connection string's port, which the administration client cannot reach
    (it always speaks HTTPS to the namespace)."""
    secret = settings.servicebus_connection_string
    if secret is None:
        return False
    parts = (part.partition("=") for part in secret.get_secret_value().split(";"))
    return any(
        key.strip().lower() == "usedevelopmentemulator" and value.strip().lower() == "true"
        for key, _, value in parts
    )


@_building(SERVICE_BUS)
def servicebus_admin(
    settings: Settings, credential: AsyncTokenCredential | None, **options: Any
) -> ServiceBusAdministrationClient:
    """The management client (queue runtime counts), authenticated like the data client;
    `options` go to azure-core (a test's `transport`)."""
    if settings.servicebus_connection_string is not None:
        secret = settings.servicebus_connection_string.get_secret_value()
        return ServiceBusAdministrationClient.from_connection_string(secret, **options)
    if not settings.servicebus_namespace or credential is None:
        raise AzureNotConfigured("set EXPORT_WORKER_SERVICEBUS_NAMESPACE")
    return ServiceBusAdministrationClient(settings.servicebus_namespace, credential, **options)
