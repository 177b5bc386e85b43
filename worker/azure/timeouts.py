"""The guard around every Azure SDK call: our own deadline, and SDK errors as port errors.

The SDKs retry on their own and can still hang (a half-open AMQP link, a stalled socket),
so no call is awaited without `guarded` and a deadline. A Service Bus call is bounded by
the SDK first (its `timeout`, the client's `try_timeout`), and our deadline is a backstop
set `BACKSTOP_SECONDS` beyond that bound, because cancelling an SDK coroutine can leave its
AMQP link mid-frame; when it fires anyway (`DeadlineExceeded`) the adapter discards the SDK
object the call ran on. A Cosmos DB or Blob Storage call is given no SDK timeout: its HTTP
retries (backoffs of 15 s and more, a 65 s read timeout) would outlast the setting, so our
deadline, `SDK_TIMEOUT_SECONDS`, is what ends a slow one (an HTTP request cancelled midway
leaves nothing to discard). Whatever comes out is mapped here, in one place, to the errors the
ports promise (`worker/ports/errors.py`):

- missing document, blob or message (404)                  -> NotFound
- a blob archived or being rehydrated (409 BlobArchived, BlobBeingRehydrated) -> Archived
- ETag mismatch (412), already exists (409), lost block list -> Conflict
- message or session lock expired or taken, message already settled -> LockLost
- throttled (429), 408, Cosmos DB's "retry with" (449), 5xx, connection and read failures,
  our deadline, SDK operation timeouts, retryable Service Bus errors, a Service Bus entity
  at its maximum size -> TransientError
- refused by Cosmos DB or Blob Storage (401, 403)            -> TransientError

A refusal is retried rather than taken for a bug: a role granted to the worker's identity
takes minutes to reach the data plane, so a new deployment's first turns are refused, and
a key rotated under a running worker is refused until the new one is set. Each such turn
is tried again with backoff and, once `MAX_ATTEMPTS` are spent, dead-lettered
`transient_failure` `from ...Error 403`, to be replayed once the access is fixed.

Anything else (a credential that cannot get a token, a missing queue, a programming
error) is left as it is: it is not worth retrying and the runtime treats it as a bug.

A failure to connect says how, in words that carry no address or secret ("ServiceRequestError
(connection refused)"). Blob Storage retries a refused connection for longer than our
deadline, so its retry policy notes how each failed try ended (`note_sdk_try`) and a
deadline that ends such a call says so: "no answer within 30 s (its last try: connection
refused)", not a bare timeout an operator would read as a slow service
(`worker.ports.watching_tries`).
"""

from __future__ import annotations

import asyncio
import errno
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable
from typing import Any, Final, TypeVar

import aiohttp
from azure.core import exceptions as core_errors
from azure.servicebus import exceptions as sb_errors

from worker.ports import (
    Archived,
    Conflict,
    LockLost,
    NotFound,
    TransientError,
    error_code_of,
    name_service,
    note_failed_try,
    watching_tries,
)

T = TypeVar("T")

# How far past the SDK's own bound on a call our deadline lies: long enough that the SDK
# times out first and cleans up after itself, short enough that a hung call is not waited
# on for long.
BACKSTOP_SECONDS = 5.0
# How often an SDK call whose caller was cancelled is cancelled again while it runs on
# (`cancelled_surely`): a cancellation can be lost inside the SDK.
CANCEL_REPEAT_SECONDS = 0.25


class DeadlineExceeded(TransientError):
    """Our deadline, not the SDK's, ended the call: the SDK object it ran on may be
    mid-frame and must not be used again."""


# The services `guarded` names at the head of an error's text (each adapter passes its own),
# so a one-line failure says which one it was.
BLOB_STORAGE: Final = "Blob Storage"
COSMOS_DB: Final = "Cosmos DB"
SERVICE_BUS: Final = "Service Bus"

# 449: Cosmos DB's "retry with", a write that met a concurrent one and is safe to repeat;
# its SDK retries 429 and reads itself, never a write.
_TRANSIENT_STATUS = frozenset({408, 429, 449})
# Refused: a role not yet propagated, a rotated key (the module's docstring).
_REFUSED_STATUS = frozenset({401, 403})
_CONFLICT_STATUS = frozenset({409, 412})
# Blob codes for "someone else committed this blob while we staged": a lost race.
_CONFLICT_CODES = frozenset({"InvalidBlockList", "BlobAlreadyExists", "ConditionNotMet"})
# A 409 that is no write conflict: the blob is offline until someone rehydrates it.
_ARCHIVED_CODES = frozenset({"BlobArchived", "BlobBeingRehydrated"})

_TRANSIENT_TYPES: tuple[type[BaseException], ...] = (
    TimeoutError,  # asyncio.TimeoutError is this class since Python 3.11
    core_errors.ServiceRequestError,  # includes ServiceRequestTimeoutError
    core_errors.ServiceResponseError,  # includes ServiceResponseTimeoutError
    core_errors.IncompleteReadError,  # the connection dropped mid-body
    aiohttp.ClientError,
    ConnectionError,
    sb_errors.OperationTimeoutError,
    sb_errors.ServiceBusConnectionError,
    sb_errors.ServiceBusCommunicationError,
    sb_errors.ServiceBusServerBusyError,
    # Full: the topic or queue at its maximum size (a subscription nobody reads fills a
    # topic; dead letters count too), or the namespace's connections all taken. Not
    # retryable to the SDK, which raises it at once; room is made by a reader or an
    # operator, so it is retried with backoff, then dead-lettered to replay.
    sb_errors.ServiceBusQuotaExceededError,
)

_CONFIGURATION_TYPES: tuple[type[BaseException], ...] = (
    sb_errors.ServiceBusAuthenticationError,
    sb_errors.ServiceBusAuthorizationError,
)


# How a connection failed, by the first of these the error or what it wraps is; most
# specific first (a refused connection is also a ConnectionError).
_NETWORK_REASONS: Final[tuple[tuple[type[BaseException], str], ...]] = (
    (ConnectionRefusedError, "connection refused"),
    (ConnectionResetError, "connection reset"),
    (ConnectionAbortedError, "connection aborted"),
    (socket.gaierror, "host name not resolved"),
    (ssl.SSLCertVerificationError, "TLS certificate not trusted"),
    (ssl.SSLError, "TLS failed"),
    (aiohttp.ServerDisconnectedError, "server closed the connection"),
    (TimeoutError, "timed out"),
)
# The same by errno, for wrappers that keep the number but not the class (aiohttp's
# ClientConnectorError is an OSError carrying the errno of the one it wraps).
_NETWORK_ERRNOS: Final = {
    errno.ECONNREFUSED: "connection refused",
    errno.ECONNRESET: "connection reset",
    errno.EHOSTUNREACH: "host unreachable",
    errno.ENETUNREACH: "network unreachable",
}
_CHAIN_LIMIT = 8


def network_reason(exc: BaseException | None) -> str | None:
    """How a connection failed ("connection refused", "host name not resolved", "TLS
    failed", ...), read from the error and what it wraps; None when it says nothing of it."""
    chain: list[BaseException] = []
    link = exc
    while link is not None and len(chain) < _CHAIN_LIMIT:  # the bound ends a chain that loops
        chain.append(link)
        inner = getattr(link, "inner_exception", None)  # azure-core keeps the wrapped error
        link = inner if isinstance(inner, BaseException) else link.__cause__ or link.__context__
    for kind, reason in _NETWORK_REASONS:
        if any(isinstance(e, kind) for e in chain):
            return reason
    for e in chain:
        by_number = _NETWORK_ERRNOS.get(getattr(e, "errno", None) or 0)
        if by_number is not None:
            return by_number
    return None


def note_sdk_try(error: BaseException | None, status: int | None) -> None:
    """An SDK retry policy's report of a try that failed, by its error or its HTTP status
    (`worker.ports.note_failed_try`)."""
    if error is not None:
        note_failed_try(network_reason(error) or type(error).__name__, error)
    elif status is not None:
        note_failed_try(f"HTTP {status}")


def port_error(exc: BaseException) -> BaseException:
    """The port error an SDK exception stands for, or the exception itself when none does."""
    if isinstance(exc, NotFound | Conflict | LockLost | TransientError):
        return exc
    if isinstance(exc, sb_errors.MessageLockLostError | sb_errors.SessionLockLostError):
        return LockLost(_describe(exc))
    if isinstance(exc, sb_errors.MessageAlreadySettled):
        # A plain ValueError in the SDK: the delivery is no longer this holder's to settle.
        return LockLost(_describe(exc))
    if isinstance(exc, sb_errors.MessageNotFoundError):
        return NotFound(_describe(exc))
    if isinstance(exc, _TRANSIENT_TYPES):
        return TransientError(_describe(exc))
    if isinstance(exc, core_errors.ClientAuthenticationError) and exc.status_code is None:
        # No status: the identity gave no token, or the key does not sign (AzureSigningError).
        # A refusal, as a 401 or 403 is: retried, then dead-lettered transient_failure, to
        # replay once the identity or key is fixed (not handler_error, which pages as a bug).
        # The SDK's first line says which; it names a credential or the key's form, no secret.
        return TransientError(f"{_describe(exc)}: {_first_line(exc)}")
    if isinstance(exc, core_errors.HttpResponseError):
        return _from_status(exc)
    if isinstance(exc, core_errors.AzureError) and type(exc).__name__ == "CosmosClientTimeoutError":
        return TransientError(_describe(exc))
    if isinstance(exc, _CONFIGURATION_TYPES):
        return exc  # flagged retryable by the SDK, which has already retried: a setup problem
    if isinstance(exc, sb_errors.ServiceBusError) and getattr(exc, "_retryable", False):
        return TransientError(_describe(exc))
    return exc


def refused(exc: BaseException | None) -> bool:
    """Whether an SDK exception is a refusal (401, 403, or an authentication error without a
    status): what a caller with a path that needs fewer rights checks on a `TransientError`'s
    cause or on the exception itself."""
    if isinstance(exc, core_errors.ClientAuthenticationError):
        return True
    return isinstance(exc, core_errors.HttpResponseError) and exc.status_code in _REFUSED_STATUS


def _from_status(exc: core_errors.HttpResponseError) -> BaseException:
    status = exc.status_code
    if isinstance(exc, core_errors.ResourceNotFoundError) or status == 404:
        return NotFound(_describe(exc))
    code = error_code_of(exc)
    if code in _ARCHIVED_CODES:
        return Archived(_describe(exc))
    if (
        isinstance(exc, core_errors.ResourceModifiedError | core_errors.ResourceExistsError)
        or status in _CONFLICT_STATUS
        or code in _CONFLICT_CODES
    ):
        return Conflict(_describe(exc))
    if status is not None and (
        status in _TRANSIENT_STATUS or status in _REFUSED_STATUS or status >= 500
    ):
        return TransientError(_describe(exc))
    return exc


def _first_line(exc: BaseException, limit: int = 200) -> str:
    line = (getattr(exc, "message", None) or str(exc)).strip().split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _describe(exc: BaseException) -> str:
    """Type and status only: SDK messages can echo request URLs, never needed in our errors."""
    status = getattr(exc, "status_code", None)
    code = error_code_of(exc)
    parts = [type(exc).__name__]
    if status is not None:
        parts.append(str(status))
    if code:
        parts.append(code)
    if status is None and not (isinstance(exc, OSError) and type(exc).__module__ == "builtins"):
        reason = network_reason(exc)  # a wrapper's, not what a builtin's name already says
        if reason is not None:
            parts.append(f"({reason})")
    return " ".join(parts)


async def guarded(operation: Awaitable[T], timeout: float, service: str = "") -> T:
    """Await one SDK call within `timeout` seconds; its errors come out as port errors
    (`DeadlineExceeded` when our deadline ended it), their text led by `service` ("Cosmos
    DB", "Blob Storage", "Service Bus") so a one-line failure says which one it was. A
    cancellation of the caller (a stop, our deadline) ends the call (`cancelled_surely`)."""
    deadline = asyncio.timeout(timeout)
    try:
        with watching_tries() as tries:
            async with deadline:
                return await cancelled_surely(operation)
    except TimeoutError as exc:
        if deadline.expired():
            # raised from the last try's error when it raised one, so a dead letter's
            # description ends with it ("from ServiceRequestError from ... ECONNREFUSED")
            text = _of(service, tries.after(f"no answer within {timeout:g} s"))
            raise _named(DeadlineExceeded(text), service) from tries.error or exc
        raise _named(TransientError(_of(service, _describe(exc))), service) from exc
    except Exception as exc:
        reason = network_reason(exc)
        if reason is not None:
            note_failed_try(reason, exc)  # the last try: a watch outside says how it ended
        mapped = port_error(exc)
        if mapped is exc:
            name_service(exc, service)
            raise
        raise _named(type(mapped)(_of(service, str(mapped))), service) from exc


async def cancelled_surely(operation: Awaitable[T]) -> T:
    """Await `operation` (an SDK call) such that cancelling the caller ends it.

    Before Python 3.12, `asyncio.wait_for` hands back the inner result when a cancellation
    arrives just as the inner call completes, and the cancellation is lost (CPython
    gh-86296). The Service Bus SDK's AMQP client awaits every frame it reads that way, so a
    stop that met an arriving frame was dropped and the call ran on: an accept, to the end
    of the service's 15 s wait, inside a SIGTERM's grace period. Here the call runs as a
    task of its own: the caller's cancellation always reaches the caller, and the task is
    cancelled again every `CANCEL_REPEAT_SECONDS` until it ends, for `BACKSTOP_SECONDS` at
    most (then it is left to end alone, unobserved). What it returns after the caller was
    cancelled is dropped; an adapter closes what the call opened, as on any cancellation.
    """
    call = asyncio.ensure_future(operation)
    try:
        return await asyncio.shield(call)
    except asyncio.CancelledError:
        # First: a second cancellation may end the repeats below, and the call's outcome
        # is wanted by nobody either way.
        call.add_done_callback(_outcome_dropped)
        loop = asyncio.get_running_loop()
        give_up = loop.time() + BACKSTOP_SECONDS
        while not call.done() and loop.time() < give_up:
            call.cancel()
            await asyncio.wait((call,), timeout=CANCEL_REPEAT_SECONDS)
        raise


def _outcome_dropped(call: asyncio.Future[Any]) -> None:
    """Mark a call's error as seen: its caller was cancelled and wants no outcome."""
    if not call.cancelled():
        call.exception()


async def guarded_iter(
    items: AsyncIterator[T], timeout: float, service: str = ""
) -> AsyncIterator[T]:
    """Iterate an SDK async iterator (pages, chunks), each step within `timeout` seconds."""
    while True:
        try:
            item = await guarded(items.__anext__(), timeout, service)
        except StopAsyncIteration:
            return
        yield item


def _named(error: BaseException, service: str) -> BaseException:
    """`error`, noted with the service it came from (`name_service`), which a dead letter's
    description names (`settlement.where_raised`): its text is never read there."""
    name_service(error, service)
    return error


def _of(service: str, text: str) -> str:
    return f"{service}: {text}" if service else text
