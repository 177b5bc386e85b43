"""The only errors adapters raise outward, so the handler and the runtime never see an SDK type.

- `NotFound` for a missing document, message or blob (the handler decides its fate), and
  `Archived`, a blob in an offline tier that no read reaches until it is rehydrated;
- `TransientError` for throttling, timeouts, 5xx and lost connections (retryable);
- `Conflict` for an optimistic-concurrency loss (ETag mismatch, row already there);
- `LockLost` when a message or session lock expired or was taken.

An error that stays as it is (a malformed key, a refused credential) is named with the service
it came from in an exception note (`name_service`), which the CLI's one line leads with.

A call whose adapter retries on its own can end on a deadline with the reason its tries
failed hidden behind it; the adapter notes how each failed try ended (`note_failed_try`),
and a caller that wants to say so watches (`watching_tries`).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from contextvars import ContextVar


class PortError(Exception):
    """Base of the errors adapters raise."""


class NotFound(PortError):
    """The document, message or blob does not exist (or is not visible yet)."""


class Archived(NotFound):
    """The blob is there but offline: in Blob Storage's archive tier, or being rehydrated
    from it (which takes up to hours). Unreadable until then, like a missing blob."""


class TransientError(PortError):
    """Throttled, timed out, 5xx or connection lost: worth retrying."""


class Conflict(PortError):
    """Someone else wrote first (ETag 412, duplicate id)."""


class LockLost(PortError):
    """The message or session lock expired or was taken: another holder owns the work now."""


_SERVICE_NOTE = "service: "


def name_service(exc: BaseException, service: str) -> None:
    """Note which service an error came from (once: the innermost call knows best)."""
    if service and service_of(exc) is None:
        exc.add_note(_SERVICE_NOTE + service)


def service_of(exc: BaseException) -> str | None:
    """The service `name_service` noted on the error, if any."""
    for note in getattr(exc, "__notes__", ()):
        if isinstance(note, str) and note.startswith(_SERVICE_NOTE):
            return note.removeprefix(_SERVICE_NOTE)
    return None


# A service's error code is an identifier (Blob Storage's x-ms-error-code: InvalidBlockList).
_ERROR_CODE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")


def error_code_of(exc: BaseException) -> str | None:
    """The error code a service answered with (`InvalidBlockList`, `LeaseIdMissing`), as
    plain text: the storage SDK gives an enum member, whose str() is its Python name. None
    when there is none, or it is not an identifier (nothing else is shown)."""
    code = getattr(exc, "error_code", None)
    code = getattr(code, "value", code)
    return code if isinstance(code, str) and _ERROR_CODE.fullmatch(code) else None


class FailedTries:
    """How the last failed try of the calls watched ended, once one has: in words with no
    address or secret in them (`last`: "connection refused", "HTTP 503"), and the error it
    raised, if it raised one."""

    __slots__ = ("error", "last")

    def __init__(self) -> None:
        self.last: str | None = None
        self.error: BaseException | None = None

    def after(self, text: str) -> str:
        """`text`, then how the last failed try ended when one did: "TimeoutError (its last
        try: connection refused)"."""
        return f"{text} (its last try: {self.last})" if self.last else text


# The watches open in this task (and the tasks it starts), outermost first.
_WATCHING: ContextVar[tuple[FailedTries, ...]] = ContextVar("failed_tries", default=())


@contextlib.contextmanager
def watching_tries() -> Iterator[FailedTries]:
    """While inside, each failed try an adapter notes is noted on what this yields."""
    tries = FailedTries()
    token = _WATCHING.set((*_WATCHING.get(), tries))
    try:
        yield tries
    finally:
        _WATCHING.reset(token)


def note_failed_try(how: str, error: BaseException | None = None) -> None:
    """An adapter's report of how one try of a call failed, to every watch open."""
    for tries in _WATCHING.get():
        tries.last, tries.error = how, error
