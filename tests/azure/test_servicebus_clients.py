"""How the Service Bus adapter sets up the SDK: which client retries, what bounds each
call, and a sender replaced after our deadline cut a send short. No broker needed."""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import pytest
from azure.servicebus import ServiceBusMessage
from azure.servicebus.exceptions import OperationTimeoutError
from azure_factories import isolated_settings

from worker.azure.credentials import servicebus_tls
from worker.azure.servicebus import AzureQueue, Sending, _open_or_time_out
from worker.ports import TransientError

EMULATOR = (
    "Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=k;SharedAccessKey=a2V5;"
    "UseDevelopmentEmulator=true"
)


def test_sessions_are_accepted_without_sdk_retries_and_everything_else_keeps_them() -> None:
    # An accept that finds no session surfaces as a retryable timeout: on the sessions'
    # client it is not retried (retry_total=0, a per-receiver value is refused by the SDK);
    # the sender, the dead-letter receivers and the session browser keep the SDK's 3.
    settings = isolated_settings(servicebus_connection_string=EMULATOR, sdk_timeout_seconds=12.0)

    async def main() -> None:
        queue = AzureQueue(settings)
        try:
            sessions, others = queue._sessions_client._config, queue._client._config
            assert (sessions.retry_total, others.retry_total) == (0, 3)
            # Every attempt, link acquisition included, is bounded by the SDK itself.
            assert sessions.try_timeout == others.try_timeout == 12.0
        finally:
            await queue.close()

    asyncio.run(main())


def test_every_service_bus_client_shares_one_verifying_tls_context() -> None:
    # The SDK builds a context per AMQP connection (one per receiver) when given none,
    # loading the CA bundle each time; ours is built once and verifies as the SDK's would.
    settings = isolated_settings(servicebus_connection_string=EMULATOR)

    async def main() -> None:
        queue = AzureQueue(settings)
        try:
            contexts = {id(queue._sessions_client._ssl_context), id(queue._client._ssl_context)}
            assert contexts == {id(servicebus_tls())}
        finally:
            await queue.close()

    asyncio.run(main())
    context = servicebus_tls()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] > 0


class Sender:
    """An SDK sender stand-in whose sends hang when told to."""

    def __init__(self, hang: bool) -> None:
        self.hang = hang
        self.sent: list[Any] = []
        self.closed = False

    async def send_messages(self, message: Any, timeout: float) -> None:
        if self.hang:
            await asyncio.Event().wait()
        self.sent.append(message)

    async def close(self) -> None:
        self.closed = True


def test_a_send_cut_short_by_our_deadline_replaces_the_sender() -> None:
    # Cancelled mid-frame, a sender's link state is unknown: it is closed, never reused.
    opened: list[Sender] = []

    def open_sender() -> Any:
        opened.append(Sender(hang=not opened))
        return opened[-1]

    async def main() -> None:
        sending = Sending(open_sender, timeout=0.001, backstop=0.0)
        with pytest.raises(TransientError):
            await sending.send(ServiceBusMessage(b"first"))
        await sending.send(ServiceBusMessage(b"again"))
        assert len(opened) == 2 and opened[0].closed and len(opened[1].sent) == 1

    asyncio.run(main())


def test_an_accept_cut_by_the_sdks_own_deadline_is_an_error_not_an_empty_queue() -> None:
    # A namespace that takes the connection and never answers: the SDK's deadline on
    # acquiring the link fires (an OperationTimeoutError without the service's condition).
    # Read as "no session", the worker would look idle and stay ready while cut off.
    async def main() -> None:
        server = await asyncio.start_server(lambda reader, writer: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        settings = isolated_settings(
            servicebus_connection_string=EMULATOR.replace("5672", str(port)),
            sdk_timeout_seconds=1.0,
        )
        queue = AzureQueue(settings, use_admin_counts=False)
        try:
            with pytest.raises(TransientError):
                await queue.accept_session(0.5)
        finally:
            await queue.close()
            server.close()

    asyncio.run(main())


class Opening:
    """A NEXT_AVAILABLE_SESSION receiver stand-in whose open raises `error`."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    async def __aenter__(self) -> None:
        raise self.error


def sdk_timeout(cause: BaseException | None) -> OperationTimeoutError:
    """The OperationTimeoutError azure-servicebus raises once its retries are spent: a new
    one, raised from the last attempt's error."""
    error = OperationTimeoutError(message="operation timed out")
    error.__cause__ = cause
    return error


def no_session() -> OperationTimeoutError:
    """The error azure-servicebus builds from the service's detach: its condition kept."""
    return OperationTimeoutError(message="no session", condition=b"com.microsoft:timeout")


@pytest.mark.parametrize("error", [sdk_timeout(no_session()), no_session()])
def test_only_the_services_timeout_condition_means_no_session(error: BaseException) -> None:
    assert asyncio.run(_open_or_time_out(Opening(error))) is False  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "error",
    [
        sdk_timeout(None),
        sdk_timeout(OperationTimeoutError(message="Timed out waiting for the AMQP link to open.")),
        sdk_timeout(OperationTimeoutError(message="busy", condition=b"com.microsoft:server-busy")),
    ],
)
def test_any_other_timeout_of_an_accept_is_raised(error: BaseException) -> None:
    with pytest.raises(OperationTimeoutError):
        asyncio.run(_open_or_time_out(Opening(error)))  # type: ignore[arg-type]
