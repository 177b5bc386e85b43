"""What becomes of a queue message once its handler is done: one pure function.

The contract: docs/contract/delivery.md, "Failures".

`settle(failure, delivery_count, policy)` maps how the handler ended to one fate, and
nothing else decides it:

- no failure: `Complete`;
- `PermanentError`: `DeadLetter` at once, with the error's reason;
- `RetryableError` or a port's `TransientError`: `Abandon` with the delivery backoff, or
  `DeadLetter` with the reason (`transient_failure` for a port error) once
  `policy.max_attempts` deliveries are spent;
- anything else is a bug: `DeadLetter` `handler_error`, described by the exception's type
  and where it was raised. Never by its message: an exception's text may hold row values.

A description also names the types of the exceptions the failure was raised from (with an
HTTP status and the service's error code when they are given, or an OS error's errno name):
every port error is raised in the same few places of an adapter, and only its cause tells a
Cosmos DB 429 from a Service Bus timeout, or a full disk from another.

A lost lock is not given here: the message is no longer this holder's to settle (the
runtime counts it and lets the lock lapse). The runtime performs the settlement.
"""

from __future__ import annotations

import errno

import msgspec

from handlers.errors import ExportError, PermanentError, RetryableError
from worker.ports import TransientError, error_code_of, service_of
from worker.retry_policy import RetryPolicy

# A description is one line an operator reads in `dlq list`: kept short.
MAX_DESCRIPTION = 480
# How many causes of a failure its description names.
MAX_CAUSES = 3


class Complete(msgspec.Struct, frozen=True):
    """Remove the message: its work is done."""


class Abandon(msgspec.Struct, frozen=True):
    """Release the message for redelivery after `delay` seconds."""

    delay: float
    reason: str  # why it failed this time (for the log)


class DeadLetter(msgspec.Struct, frozen=True):
    """Move the message to the dead-letter queue."""

    reason: str
    description: str


Settlement = Complete | Abandon | DeadLetter


def settle(failure: BaseException | None, delivery_count: int, policy: RetryPolicy) -> Settlement:
    """The fate of a message whose handler ended with `failure` (None: it succeeded)."""
    match failure:
        case None:
            return Complete()
        case PermanentError(reason=reason, description=description):
            return _dead_letter(reason, description)
        case RetryableError() | TransientError():
            if isinstance(failure, ExportError):
                reason, description = failure.reason, failure.description
            else:
                reason, description = "transient_failure", where_raised(failure)
            if policy.exhausted(delivery_count):
                return _dead_letter(reason, description)
            return Abandon(policy.delay(delivery_count), reason)
        case _:
            return _dead_letter("handler_error", where_raised(failure))


def where_raised(exc: BaseException) -> str:
    """The exception's type, the service it came from when an adapter noted one (`(Blob
    Storage)`), and the file and line that raised it, then the types of what it was raised
    from (`from ServiceBusServerBusyError`, `from CosmosHttpResponseError 429`, `from
    HttpResponseError 403 AuthorizationPermissionMismatch`); never a message."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f" at {tb.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno}" if tb else ""
    service = service_of(exc)
    causes: list[str] = []
    cause = exc.__cause__
    while cause is not None and len(causes) < MAX_CAUSES:
        service = service or service_of(cause)
        status = getattr(cause, "status_code", None)
        shown = f" {status}" if isinstance(status, int) and not isinstance(status, bool) else ""
        if (service_code := error_code_of(cause)) is not None:
            shown += f" {service_code}"  # what Blob Storage said: 412 LeaseIdMissing
        code = cause.errno if isinstance(cause, OSError) else None
        if code is not None and code in errno.errorcode:
            shown = f" {errno.errorcode[code]}"  # ENOSPC: a name, never a path
        causes.append(f" from {type(cause).__name__}{shown}")
        cause = cause.__cause__
    named = f" ({service})" if service else ""
    return f"{type(exc).__name__}{named}{where}{''.join(causes)}"


def _dead_letter(reason: str, description: str) -> DeadLetter:
    # A name taken from the event or the history may hold a lone surrogate, which neither
    # SQLite nor AMQP can store: the dead letter would fail, and the message come back.
    text = description.encode("utf-8", "backslashreplace").decode("utf-8")
    return DeadLetter(reason, text[:MAX_DESCRIPTION])
