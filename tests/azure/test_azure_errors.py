"""SDK errors come out of the Azure adapters as port errors, decided in one place
(worker/azure/timeouts.py); no server is needed to pin the mapping."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
from azure.core import exceptions as core
from azure.cosmos import exceptions as cosmos
from azure.servicebus import exceptions as sb

from worker.azure import timeouts
from worker.azure.messages import decoded_properties
from worker.azure.timeouts import (
    DeadlineExceeded,
    guarded,
    guarded_iter,
    network_reason,
    note_sdk_try,
    port_error,
)
from worker.ports import (
    Archived,
    Conflict,
    LockLost,
    NotFound,
    TransientError,
    error_code_of,
    service_of,
    watching_tries,
)


def http_error(status: int, code: str | None = None) -> core.HttpResponseError:
    error = core.HttpResponseError(message=f"status {status}")
    error.status_code = status
    error.error_code = code
    return error


NOT_FOUND = [
    core.ResourceNotFoundError(message="blob"),
    cosmos.CosmosResourceNotFoundError(status_code=404, message="document"),
    http_error(404, "BlobNotFound"),
    http_error(404, "ContainerNotFound"),
    sb.MessageNotFoundError(message="dead letter"),
]

CONFLICT = [
    cosmos.CosmosAccessConditionFailedError(status_code=412, message="etag"),
    cosmos.CosmosResourceExistsError(status_code=409, message="id taken"),
    core.ResourceModifiedError(message="etag"),
    core.ResourceExistsError(message="exists"),
    http_error(412),
    http_error(409),
    http_error(400, "InvalidBlockList"),  # another writer committed the blob meanwhile
]

TRANSIENT = [
    cosmos.CosmosHttpResponseError(status_code=429, message="throttled"),
    http_error(429),
    http_error(408),
    cosmos.CosmosHttpResponseError(status_code=449, message="retry with"),  # concurrent write
    http_error(500),
    http_error(503, "ServerBusy"),
    core.ServiceRequestError("connect failed"),
    core.ServiceResponseError("connection reset"),
    core.ServiceRequestTimeoutError("connect timeout"),
    core.ServiceResponseTimeoutError("read timeout"),
    core.IncompleteReadError(message="body cut short"),
    aiohttp.ClientConnectionError("refused"),
    aiohttp.ServerDisconnectedError(),
    ConnectionResetError("reset by peer"),
    TimeoutError(),  # our guard's asyncio.TimeoutError
    sb.OperationTimeoutError(),
    sb.ServiceBusConnectionError(message="link detached"),
    sb.ServiceBusCommunicationError(message="dns"),
    sb.ServiceBusServerBusyError(message="busy"),
    sb.ServiceBusQuotaExceededError(message="entity full"),  # not retryable to the SDK
    sb.SessionCannotBeLockedError(message="taken meanwhile"),  # flagged retryable
]

# Refused by Cosmos DB or Blob Storage: a role not yet propagated or a rotated key, retried.
REFUSED = [
    http_error(401),
    http_error(403, "AuthorizationFailure"),
    http_error(403, "AuthorizationPermissionMismatch"),
    cosmos.CosmosHttpResponseError(status_code=403, message="no data-plane role"),
    cosmos.CosmosHttpResponseError(status_code=401, message="bad key"),
]

LOCK_LOST = [
    sb.MessageLockLostError(message="lock expired"),
    sb.SessionLockLostError(message="session lock expired"),
    sb.MessageAlreadySettled(action="complete"),  # a plain ValueError in the SDK
]

# Not worth a retry and not a port condition: the runtime treats these as bugs.
UNCHANGED = [
    http_error(400, "InvalidHeaderValue"),
    sb.ServiceBusAuthenticationError(message="bad key"),
    sb.ServiceBusAuthorizationError(message="no Listen claim"),
    sb.MessagingEntityNotFoundError(message="no such queue"),
    ValueError("a programming error"),
    KeyError("id"),
]


def _id(error: BaseException) -> str:
    status = getattr(error, "status_code", None)
    return f"{type(error).__name__}{'-' + str(status) if status else ''}"


@pytest.mark.parametrize("error", NOT_FOUND, ids=_id)
def test_missing_resources_map_to_not_found(error: Exception) -> None:
    assert isinstance(port_error(error), NotFound)


@pytest.mark.parametrize("error", CONFLICT, ids=_id)
def test_etag_and_existence_races_map_to_conflict(error: Exception) -> None:
    assert isinstance(port_error(error), Conflict)
    assert not isinstance(port_error(error), NotFound)


def archived(code: str) -> core.ResourceExistsError:
    """Blob Storage's answer to a read of an archived blob: what Azurite raises too."""
    error = core.ResourceExistsError(message="This operation is not permitted on an archived blob.")
    error.status_code = 409
    error.error_code = code
    return error


@pytest.mark.parametrize("code", ["BlobArchived", "BlobBeingRehydrated"])
def test_a_read_of_an_archived_blob_maps_to_archived_not_a_write_conflict(code: str) -> None:
    # A 409 like a write race, but no retry in place reads it: it is offline for hours.
    for error in (archived(code), http_error(409, code)):
        mapped = port_error(error)
        assert isinstance(mapped, Archived) and isinstance(mapped, NotFound)
        assert not isinstance(mapped, Conflict)
        assert str(mapped) == f"{type(error).__name__} 409 {code}"


def test_a_storage_error_code_is_named_as_the_service_sent_it() -> None:
    # The storage SDK sets error_code to an enum member, whose str() is its Python name: the
    # descriptions read "StorageErrorCode.BLOB_ARCHIVED" where the service said BlobArchived.
    from azure.storage.blob import StorageErrorCode

    error = archived("BlobArchived")
    error.error_code = StorageErrorCode.BLOB_ARCHIVED
    mapped = port_error(error)
    assert isinstance(mapped, Archived) and str(mapped) == "ResourceExistsError 409 BlobArchived"
    assert error_code_of(error) == "BlobArchived"
    assert error_code_of(http_error(400, "InvalidBlockList")) == "InvalidBlockList"
    for unshown in (None, "", "two words", "x" * 65, 409, "Code\nwith a line"):
        assert error_code_of(http_error(409, unshown)) is None  # type: ignore[arg-type]
    assert str(port_error(http_error(409, "two words"))) == "HttpResponseError 409"


@pytest.mark.parametrize("error", TRANSIENT, ids=_id)
def test_throttling_timeouts_5xx_and_connection_loss_map_to_transient(error: Exception) -> None:
    assert isinstance(port_error(error), TransientError)


@pytest.mark.parametrize("error", REFUSED, ids=_id)
def test_refused_data_plane_calls_map_to_transient(error: Exception) -> None:
    mapped = port_error(error)
    assert isinstance(mapped, TransientError)
    assert str(error.status_code) in str(mapped)  # type: ignore[attr-defined]


def test_an_authentication_error_without_a_status_is_refused_and_says_which() -> None:
    # No token from the identity, or an account key that does not sign: refused as a 401 or
    # 403 is (retried, then transient_failure to replay), never handler_error, which pages as
    # a bug. Its first line says which credential or what is wrong with the key.
    from azure.storage.blob._shared.authentication import AzureSigningError

    cases = {
        core.ClientAuthenticationError(
            message="DefaultAzureCredential failed to retrieve a token.\nAttempted: …"
        ): "ClientAuthenticationError: DefaultAzureCredential failed to retrieve a token.",
        AzureSigningError(message="Invalid base64-encoded string: number of data characters"): (
            "AzureSigningError: Invalid base64-encoded string: number of data characters"
        ),
        core.ClientAuthenticationError(message="x" * 300): "ClientAuthenticationError: "
        + "x" * 199
        + "…",
    }
    for error, text in cases.items():
        mapped = port_error(error)
        assert isinstance(mapped, TransientError) and str(mapped) == text


@pytest.mark.parametrize("error", LOCK_LOST, ids=_id)
def test_lost_message_and_session_locks_map_to_lock_lost(error: Exception) -> None:
    assert isinstance(port_error(error), LockLost)


@pytest.mark.parametrize("error", UNCHANGED, ids=_id)
def test_other_errors_are_left_as_they_are(error: Exception) -> None:
    assert port_error(error) is error


def test_port_errors_pass_through_unchanged() -> None:
    for error in (NotFound("x"), Conflict("x"), LockLost("x"), TransientError("x")):
        assert port_error(error) is error


def test_a_mapped_error_names_the_type_and_status_but_not_the_sdk_message() -> None:
    error = http_error(503, "ServerBusy")
    error.message = "https://acct.blob.core.windows.net/x?sig=SECRET failed"
    mapped = port_error(error)
    assert str(mapped) == "HttpResponseError 503 ServerBusy"
    assert "SECRET" not in str(mapped)


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_guarded_returns_the_result() -> None:
    async def answer() -> int:
        return 42

    assert run(guarded(answer(), timeout=1.0)) == 42


def test_guarded_raises_the_port_error_with_the_sdk_error_as_cause() -> None:
    sdk_error = cosmos.CosmosResourceNotFoundError(status_code=404, message="gone")

    async def fails() -> None:
        raise sdk_error

    with pytest.raises(NotFound) as caught:
        run(guarded(fails(), timeout=1.0))
    assert caught.value.__cause__ is sdk_error


def test_guarded_turns_a_hanging_call_into_a_transient_error_naming_our_deadline() -> None:
    async def main() -> None:
        never = asyncio.Event()
        await guarded(never.wait(), timeout=0)  # the deadline has passed at once

    with pytest.raises(DeadlineExceeded):
        run(main())


def test_a_timeout_raised_inside_the_call_is_transient_but_not_our_deadline() -> None:
    async def times_out() -> None:
        raise TimeoutError("the SDK's own socket timeout")

    with pytest.raises(TransientError) as caught:
        run(guarded(times_out(), timeout=5.0))
    assert not isinstance(caught.value, DeadlineExceeded)


def test_guarded_leaves_unmapped_errors_alone() -> None:
    async def fails() -> None:
        raise sb.ServiceBusAuthenticationError(message="bad key")

    with pytest.raises(sb.ServiceBusAuthenticationError):
        run(guarded(fails(), timeout=1.0))


class SwallowsCancels:
    """An SDK call that drops the first `lost` cancellations it is sent, as the SDK's
    frame reads under asyncio.wait_for do before Python 3.12 when a frame arrives with
    the cancellation, and then runs on (an accept: to the end of the service's wait)."""

    def __init__(self, lost: int, runs_on: float = 30.0) -> None:
        self.lost = lost
        self.runs_on = runs_on
        self.cancels = 0
        self.ended = False

    async def call(self) -> str:
        try:
            while True:
                try:
                    await asyncio.sleep(self.runs_on)
                    return "answered"
                except asyncio.CancelledError:
                    self.cancels += 1
                    if self.cancels > self.lost:
                        raise
        finally:
            self.ended = True


def test_cancelling_the_caller_ends_an_sdk_call_that_lost_the_cancellation() -> None:
    sdk = SwallowsCancels(lost=2)

    async def main() -> float:
        caller = asyncio.ensure_future(guarded(sdk.call(), 60.0, "Service Bus"))
        await asyncio.sleep(0.05)
        caller.cancel()
        started = asyncio.get_running_loop().time()
        with pytest.raises(asyncio.CancelledError):
            await caller
        return asyncio.get_running_loop().time() - started

    took = run(main())
    assert sdk.ended and sdk.cancels == 3
    assert took < 2.0


def test_our_deadline_ends_an_sdk_call_that_lost_its_cancellation() -> None:
    sdk = SwallowsCancels(lost=1)

    async def main() -> None:
        await guarded(sdk.call(), 0.1, "Service Bus")

    with pytest.raises(DeadlineExceeded):
        run(main())
    assert sdk.ended and sdk.cancels == 2


def test_a_call_that_keeps_losing_cancellations_is_left_after_the_backstop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(timeouts, "BACKSTOP_SECONDS", 0.3)
    sdk = SwallowsCancels(lost=10**6, runs_on=1.0)

    async def main() -> bool:
        caller = asyncio.ensure_future(guarded(sdk.call(), 60.0))
        await asyncio.sleep(0.05)
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            async with asyncio.timeout(2.0):  # the backstop, not this, ends the wait
                await caller
        left_running = not sdk.ended
        await asyncio.sleep(1.1)  # it ends alone, unobserved, with its own answer
        return left_running

    assert run(main()) is True
    assert sdk.ended and sdk.cancels >= 2


class FailsOnCancel:
    """An SDK call that, cancelled, fails with an error of its own instead (a connection
    torn down under it), a little later."""

    async def call(self) -> str:
        try:
            await asyncio.sleep(30.0)
        except asyncio.CancelledError:
            await asyncio.sleep(0.3)
            raise ConnectionResetError("torn down") from None
        return "answered"


def test_a_call_failing_after_its_caller_was_cancelled_twice_leaves_no_unseen_error() -> None:
    # The second cancellation reaches the caller while it still repeats the first to the
    # call: the call's later error was asked for by nobody and must not be reported as
    # "exception was never retrieved".
    unseen: list[dict[str, Any]] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: unseen.append(ctx))
        caller = asyncio.ensure_future(guarded(FailsOnCancel().call(), 60.0))
        await asyncio.sleep(0.05)
        caller.cancel()
        await asyncio.sleep(0.05)
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        await asyncio.sleep(0.5)  # the call fails alone
        gc.collect()
        await asyncio.sleep(0)

    run(main())
    assert unseen == []


def test_guarded_iter_maps_an_error_between_pages() -> None:
    async def pages() -> AsyncIterator[int]:
        yield 1
        raise http_error(503)

    async def main() -> list[int]:
        seen = []
        async for page in guarded_iter(pages(), timeout=1.0):
            seen.append(page)
        return seen

    with pytest.raises(TransientError):
        run(main())


def test_guarded_iter_ends_with_the_iterator() -> None:
    async def pages() -> AsyncIterator[int]:
        for page in (1, 2, 3):
            yield page

    async def main() -> list[int]:
        return [page async for page in guarded_iter(pages(), timeout=1.0)]

    assert run(main()) == [1, 2, 3]


def test_dead_letter_bookkeeping_is_not_a_message_property() -> None:
    raw = SimpleNamespace(
        application_properties={
            b"k": b"v",
            b"replay_count": 2,
            b"DeadLetterReason": b"schema_invalid",
            b"DeadLetterErrorDescription": b"not JSON",
        }
    )
    assert decoded_properties(raw) == {"k": "v", "replay_count": 2}  # type: ignore[arg-type]


def test_a_guarded_calls_errors_are_led_by_the_service_it_called() -> None:
    # A one-line CLI failure ("export-worker: TransientError: ServiceRequestError") said
    # nothing of which service could not be reached.
    async def unreachable() -> None:
        raise core.ServiceRequestError("Cannot connect to host cosmos:443")

    async def missing() -> None:
        raise cosmos.CosmosResourceNotFoundError(status_code=404, message="container")

    async def silent() -> None:
        await asyncio.sleep(5)

    with pytest.raises(TransientError) as transient:
        run(guarded(unreachable(), 1.0, "Cosmos DB"))
    assert str(transient.value) == "Cosmos DB: ServiceRequestError"
    with pytest.raises(NotFound) as not_found:
        run(guarded(missing(), 1.0, "Blob Storage"))
    assert str(not_found.value) == "Blob Storage: CosmosResourceNotFoundError 404"
    with pytest.raises(DeadlineExceeded) as deadline:
        run(guarded(silent(), 0.05, "Service Bus"))
    assert str(deadline.value) == "Service Bus: no answer within 0.05 s"
    # and noted, for a dead letter's description, which never reads an error's text
    assert [service_of(e.value) for e in (transient, not_found, deadline)] == [
        "Cosmos DB",
        "Blob Storage",
        "Service Bus",
    ]
    with pytest.raises(TransientError) as unnamed:
        run(guarded(unreachable(), 1.0))  # no service named: the error as before
    assert (str(unnamed.value), service_of(unnamed.value)) == ("ServiceRequestError", None)


def test_an_error_raised_as_it_is_names_its_service_in_the_cli_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # With two connection strings set, "ValueError: Connection string is either blank or
    # malformed." said nothing of which one to check; a refused credential said no service.
    from worker.azure.cosmos import CosmosAccount
    from worker.azure.credentials import blob_service, servicebus_client
    from worker.cli import main
    from worker.ports import service_of
    from worker.settings import Settings

    garbage = "garbage;AccountKey=SECRET999"
    settings = Settings(
        backend="azure",
        cosmos_endpoint="https://127.0.0.1:9/",
        cosmos_key="not base64!",
        blob_connection_string=garbage,
        servicebus_connection_string=garbage,
    )
    for service, build in {"Blob Storage": blob_service, "Service Bus": servicebus_client}.items():
        with pytest.raises(ValueError) as refused:
            build(settings)
        assert service_of(refused.value) == service
        assert "SECRET999" not in str(refused.value)
    # The Cosmos client takes a bad key and refuses it on its first request: the opening.
    with pytest.raises(ValueError) as refused:
        run(CosmosAccount(settings).container(settings.turns_container))
    assert service_of(refused.value) == "Cosmos DB"

    async def refusing() -> None:
        raise core.ClientAuthenticationError("DefaultAzureCredential failed to retrieve a token")

    with pytest.raises(TransientError) as caught:  # refused: retried, as a 401 or 403 is
        run(guarded(refusing(), 1.0, "Cosmos DB"))
    assert str(caught.value).startswith("Cosmos DB: ")

    def failing(*_: Any, **__: Any) -> None:
        raise caught.value

    import worker.cli as cli_module

    original = cli_module.cli.main
    cli_module.cli.main = failing  # type: ignore[method-assign]
    try:
        with pytest.raises(SystemExit) as exited:
            main([])
    finally:
        cli_module.cli.main = original  # type: ignore[method-assign]
    assert exited.value.code == 1
    assert capsys.readouterr().err == (
        "export-worker: TransientError: Cosmos DB: "
        "ClientAuthenticationError: DefaultAzureCredential failed to retrieve a token\n"
    )


# --- how a connection failed, in words with no address ---------------------------------------


def _connector_error(cause: OSError) -> core.ServiceRequestError:
    """What azure-core raises when aiohttp cannot connect: the SDK error wrapping aiohttp's,
    which wraps the socket's."""
    try:
        try:
            raise cause
        except OSError as socket_error:
            key = SimpleNamespace(host="h", port=1, ssl=False)
            raise aiohttp.ClientConnectorError(key, socket_error) from socket_error  # type: ignore[arg-type]
    except aiohttp.ClientConnectorError as connector:
        return core.ServiceRequestError(connector, error=connector)


CONNECTION_FAILURES = [
    (ConnectionRefusedError(111, "Connect call failed"), "connection refused"),
    (socket.gaierror(-2, "Name or service not known"), "host name not resolved"),
    (OSError(errno.EHOSTUNREACH, "No route to host"), "host unreachable"),
    (ssl.SSLCertVerificationError(1, "certificate verify failed"), "TLS certificate not trusted"),
    (ssl.SSLError(1, "wrong version number"), "TLS failed"),
]
RESET = core.ServiceResponseError("reset", error=ConnectionResetError(104, "reset"))


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        *((_connector_error(cause), reason) for cause, reason in CONNECTION_FAILURES),
        (RESET, "connection reset"),
        (aiohttp.ServerDisconnectedError(), "server closed the connection"),
        (core.ServiceRequestTimeoutError("connect", error=TimeoutError()), "timed out"),
        (core.ServiceRequestError("no cause"), None),
        (http_error(503), None),
    ],
)
def test_a_connection_failure_is_named_by_how_it_failed(
    error: BaseException, reason: str | None
) -> None:
    assert network_reason(error) == reason


def test_a_connection_failures_reason_is_read_through_a_chain_that_loops() -> None:
    first, second = core.ServiceRequestError("a"), ConnectionRefusedError(111, "refused")
    first.inner_exception = None
    first.__cause__ = second
    second.__context__ = first  # a loop: read to the bound, not forever
    assert network_reason(first) == "connection refused"


def test_a_connection_failures_reason_is_read_at_most_eight_errors_deep() -> None:
    def wrapped(depth: int) -> BaseException:
        error: BaseException = ConnectionRefusedError(111, "refused")
        for _ in range(depth - 1):
            error = core.ServiceRequestError("wrapper", error=error)
        return error

    assert network_reason(wrapped(8)) == "connection refused"
    assert network_reason(wrapped(9)) is None


def test_a_wrapped_connection_failure_says_how_after_its_type_a_builtin_says_it_once() -> None:
    # "Cosmos DB: ServiceRequestError" did not say the endpoint refused the connection, and
    # an operator could not tell a wrong port from a slow service.
    refused = _connector_error(ConnectionRefusedError(111, "Connect call failed ('10.0.0.9', 443)"))

    async def fails(error: BaseException) -> None:
        raise error

    with pytest.raises(TransientError) as caught:
        run(guarded(fails(refused), 1.0, "Cosmos DB"))
    assert str(caught.value) == "Cosmos DB: ServiceRequestError (connection refused)"
    assert "10.0.0.9" not in str(caught.value)
    with pytest.raises(TransientError) as builtin:
        run(guarded(fails(ConnectionRefusedError(111, "x")), 1.0, "Cosmos DB"))
    assert str(builtin.value) == "Cosmos DB: ConnectionRefusedError"
    raw = _connector_error(ConnectionRefusedError(111, "x")).inner_exception  # aiohttp's own
    assert str(port_error(raw)) == "ClientConnectorError (connection refused)"
    answered = http_error(503)  # a status: the server answered, whatever came before
    answered.__cause__ = ConnectionResetError(104, "reset")
    assert str(port_error(answered)) == "HttpResponseError 503"


def test_our_deadline_says_how_the_sdks_last_failed_try_ended() -> None:
    async def retrying() -> None:
        note_sdk_try(_connector_error(ConnectionRefusedError(111, "refused")), None)
        note_sdk_try(None, 503)  # the last one is what is said
        await asyncio.sleep(5)  # the SDK's backoff before its next try

    with pytest.raises(DeadlineExceeded) as caught:
        run(guarded(retrying(), 0.05, "Blob Storage"))
    assert str(caught.value) == "Blob Storage: no answer within 0.05 s (its last try: HTTP 503)"
    assert isinstance(caught.value.__cause__, TimeoutError)  # a status raised nothing

    refused = _connector_error(ConnectionRefusedError(111, "refused"))

    async def refusing() -> None:
        note_sdk_try(refused, None)
        await asyncio.sleep(5)

    with pytest.raises(DeadlineExceeded) as caught:
        run(guarded(refusing(), 0.05, "Blob Storage"))
    assert caught.value.__cause__ is refused  # what a dead letter's description ends with


def test_a_failed_try_is_said_only_by_the_call_it_was_part_of() -> None:
    async def refused() -> None:
        note_sdk_try(_connector_error(ConnectionRefusedError(111, "refused")), None)
        raise core.ServiceRequestError("x")

    async def main() -> str:
        with contextlib.suppress(TransientError):
            await guarded(refused(), 1.0, "Blob Storage")
        with watching_tries() as tries:
            with pytest.raises(DeadlineExceeded) as caught:
                await guarded(asyncio.sleep(5), 0.05, "Blob Storage")
            assert tries.last is None
        return str(caught.value)

    assert run(main()) == "Blob Storage: no answer within 0.05 s"


def test_a_call_that_fails_on_a_connection_notes_it_for_a_watch_outside() -> None:
    async def main() -> str | None:
        with watching_tries() as tries:
            with contextlib.suppress(TransientError):
                await guarded(_raise(_connector_error(ConnectionRefusedError(111, "r"))), 1.0)
            return tries.last

    assert run(main()) == "connection refused"


async def _raise(error: BaseException) -> None:
    raise error


def test_operations_md_lists_every_way_a_try_can_be_said_to_have_failed() -> None:
    from worker.azure import timeouts

    text = " ".join(
        (Path(__file__).resolve().parents[2] / "docs/operations.md").read_text().split()
    )
    listed = text.split("the other words are ", 1)[1].split(", or the SDK error's type", 1)[0]
    words = {w.strip("`") for w in listed.replace(", ", ",").split(",")}
    reasons = {r for _, r in timeouts._NETWORK_REASONS} | set(timeouts._NETWORK_ERRNOS.values())
    assert words == (reasons - {"connection refused"}) | {"HTTP <status>"}
