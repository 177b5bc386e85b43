"""Each way a handler ends maps to one fate (docs/contract/delivery.md), decided without asyncio."""

from __future__ import annotations

import errno

import pytest

from handlers.errors import PermanentError, RetryableError
from worker.ports import TransientError, name_service
from worker.retry_policy import RetryPolicy
from worker.settlement import (
    MAX_DESCRIPTION,
    Abandon,
    Complete,
    DeadLetter,
    settle,
    where_raised,
)

POLICY = RetryPolicy(max_attempts=3, base_seconds=0.5, max_seconds=10)


def raised(exc: BaseException) -> BaseException:
    """`exc` with a traceback, as the handler's task hands it over."""
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_success_completes() -> None:
    assert settle(None, 1, POLICY) == Complete()


def test_a_permanent_error_is_dead_lettered_at_once_with_its_reason() -> None:
    failure = PermanentError("not_authorized", "the user is neither owner nor participant")
    assert settle(failure, 1, POLICY) == DeadLetter(
        "not_authorized", "the user is neither owner nor participant"
    )


@pytest.mark.parametrize(
    "failure", [RetryableError("artifact_missing", "artifact a/b not found"), TransientError("429")]
)
def test_retryable_and_transient_failures_back_off_until_max_attempts(
    failure: BaseException,
) -> None:
    assert [settle(failure, n, POLICY) for n in (1, 2)] == [
        Abandon(0.5, getattr(failure, "reason", "transient_failure")),
        Abandon(1.0, getattr(failure, "reason", "transient_failure")),
    ]
    assert isinstance(settle(failure, 3, POLICY), DeadLetter)


def test_exhausted_retryable_error_keeps_its_reason_and_description() -> None:
    failure = RetryableError("turn_not_found", "the turn's reply is not visible")
    assert settle(failure, 3, POLICY) == DeadLetter(
        "turn_not_found", "the turn's reply is not visible"
    )


def test_an_exhausted_transient_port_error_is_transient_failure_described_by_type() -> None:
    fate = settle(raised(TransientError("(503) https://secret.example/sig=abc")), 3, POLICY)
    assert isinstance(fate, DeadLetter) and fate.reason == "transient_failure"
    assert fate.description.startswith("TransientError at test_settlement.py:")
    assert "secret" not in fate.description


def test_a_bug_is_handler_error_with_its_type_and_place_and_never_its_message() -> None:
    fate = settle(raised(KeyError("SECRET_ROW_VALUE 12.45")), 1, POLICY)
    assert isinstance(fate, DeadLetter) and fate.reason == "handler_error"
    assert fate.description.startswith("KeyError at test_settlement.py:")
    assert "SECRET_ROW_VALUE" not in fate.description and "12.45" not in fate.description


def test_a_bug_is_placed_where_it_was_raised_not_where_it_was_caught() -> None:
    def deepest() -> None:
        raise KeyError("k")  # the line the description names

    def middle() -> None:
        deepest()

    try:
        middle()
    except KeyError as caught:
        failure = caught
    line = deepest.__code__.co_firstlineno + 1
    assert where_raised(failure) == f"KeyError at test_settlement.py:{line}"


def test_descriptions_are_kept_short() -> None:
    fate = settle(PermanentError("schema_invalid", "x" * 5000), 1, POLICY)
    assert isinstance(fate, DeadLetter) and len(fate.description) == MAX_DESCRIPTION
    # docs/contract/delivery.md: "at most 480 characters"; one that fits is kept whole.
    assert MAX_DESCRIPTION == 480
    fits = settle(PermanentError("schema_invalid", "y" * 480), 1, POLICY)
    assert isinstance(fits, DeadLetter) and fits.description == "y" * 480


def test_a_port_error_is_described_by_what_it_was_raised_from_never_by_its_text() -> None:
    # Every port error is raised by the same line of the adapters' guard: without its cause
    # a Cosmos DB 429 and a Service Bus timeout read the same in `dlq list`.
    from azure.core.exceptions import HttpResponseError
    from azure.servicebus.exceptions import ServiceBusServerBusyError

    throttled = HttpResponseError("Request rate is large: row SECRET_ROW_VALUE")
    throttled.status_code = 429
    for cause, named in (
        (throttled, " from HttpResponseError 429"),
        (
            ServiceBusServerBusyError(message="busy: SECRET_ROW_VALUE"),
            " from ServiceBusServerBusyError",
        ),
    ):
        failure = TransientError("HttpResponseError 429 SECRET_ROW_VALUE")
        failure.__cause__ = cause
        fate = settle(raised(failure), 3, POLICY)
        assert isinstance(fate, DeadLetter) and fate.reason == "transient_failure"
        assert fate.description.startswith("TransientError at test_settlement.py:")
        assert fate.description.endswith(named)
        assert "SECRET_ROW_VALUE" not in fate.description


def test_a_description_names_the_error_code_blob_storage_gave_after_its_status() -> None:
    # A 403 AuthorizationFailure (a network rule) and AuthorizationPermissionMismatch (a
    # missing role) are fixed in different places, and a 412 reads the same for a lease and
    # an ETag. The storage SDK gives a code it knows as an enum member, others as text.
    from azure.core.exceptions import HttpResponseError
    from azure.storage.blob import StorageErrorCode

    for status, code, named in (
        (412, StorageErrorCode.LEASE_ID_MISSING, "412 LeaseIdMissing"),
        (403, "AuthorizationPermissionMismatch", "403 AuthorizationPermissionMismatch"),
        (403, "not an identifier: SECRET_ROW_VALUE", "403"),
    ):
        refused = HttpResponseError("This request is not authorized: SECRET_ROW_VALUE")
        refused.status_code = status
        refused.error_code = code  # type: ignore[attr-defined]
        failure = TransientError("refused")
        failure.__cause__ = refused
        assert where_raised(failure) == f"TransientError from HttpResponseError {named}"


def test_a_description_names_a_bounded_chain_of_causes() -> None:
    failure: BaseException = ValueError("root")
    for _ in range(10):
        outer = TransientError("again")
        outer.__cause__ = failure
        failure = outer
    assert where_raised(failure) == "TransientError" + " from TransientError" * 3


def test_a_description_names_each_cause_in_the_order_it_was_raised_from() -> None:
    # docs/contract/delivery.md: "from NotFound from ResourceNotFoundError 404".
    from azure.core.exceptions import ResourceNotFoundError

    missing = ResourceNotFoundError("container SECRET missing")
    missing.status_code = 404
    not_found = KeyError("SECRET")
    not_found.__cause__ = missing
    failure = TransientError("upload failed")
    failure.__cause__ = not_found
    assert where_raised(failure) == ("TransientError from KeyError from ResourceNotFoundError 404")


def test_a_description_names_the_service_an_adapter_noted_on_the_error_or_a_cause() -> None:
    # "DeadlineExceeded at timeouts.py:254 from TimeoutError" said nothing of which of three
    # services gave no answer; the adapters' guard notes it (`name_service`).
    deadline = TransientError("Blob Storage: no answer within 30 s SECRET")
    name_service(deadline, "Blob Storage")
    deadline.__cause__ = TimeoutError()
    assert where_raised(deadline) == "TransientError (Blob Storage) from TimeoutError"
    retried = TransientError("turn failed")
    retried.__cause__ = deadline  # the service of the first cause that names one
    assert where_raised(retried) == (
        "TransientError (Blob Storage) from TransientError from TimeoutError"
    )
    fate = settle(raised(deadline), 5, POLICY)
    assert isinstance(fate, DeadLetter)
    assert fate.description.startswith("TransientError (Blob Storage) at test_settlement.py:")
    assert "SECRET" not in fate.description


def test_where_raised_without_a_traceback_is_the_type_alone() -> None:
    assert where_raised(ValueError("row 12.45")) == "ValueError"


def test_a_full_disk_is_named_by_its_errno_never_by_its_path() -> None:
    failure = TransientError("no space left on a disk the turn writes")
    failure.__cause__ = OSError(errno.ENOSPC, "No space left on device", "/tmp/rows-SECRET")
    fate = settle(raised(failure), 3, POLICY)
    assert isinstance(fate, DeadLetter) and fate.reason == "transient_failure"
    assert fate.description.endswith(" from OSError ENOSPC")
    assert "SECRET" not in fate.description and "/tmp" not in fate.description
    assert where_raised(OSError("no errno")) == "OSError"
    unknown = TransientError("an errno this platform has no name for")
    unknown.__cause__ = OSError(99999, "made up", "/tmp/rows-SECRET")
    assert where_raised(unknown) == "TransientError from OSError"


def test_the_policy_built_in_place_has_the_documented_defaults() -> None:
    # docs/contract/configuration.md: MAX_ATTEMPTS 5, BACKOFF_BASE_SECONDS 0.25,
    # BACKOFF_MAX_SECONDS 30, CALL_ATTEMPTS 4; a RetryPolicy() made without settings (the
    # handler's own tests, a library caller) must not drift from what the worker runs with.
    from worker.settings import Settings

    assert RetryPolicy() == RetryPolicy.from_settings(Settings(environ={}))
    assert RetryPolicy() == RetryPolicy(
        max_attempts=5, base_seconds=0.25, max_seconds=30.0, call_attempts=4
    )


def test_a_port_call_is_tried_call_attempts_times_in_place_with_a_quarter_of_the_backoff(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio

    slept: list[float] = []

    async def no_sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", no_sleep)
    policy = RetryPolicy(max_attempts=5, base_seconds=0.4, max_seconds=1.0, call_attempts=3)
    tries = 0

    async def always_fails() -> int:
        nonlocal tries
        tries += 1
        raise TransientError("throttled")

    with pytest.raises(TransientError):
        asyncio.run(policy.call(always_fails))
    assert tries == 3
    # After failure n the wait is delay(n) / 4: 0.4 / 4, then 0.8 / 4 (capped at 1.0 / 4).
    assert slept == [pytest.approx(0.1), pytest.approx(0.2)]

    tries = 0

    async def fails_twice() -> int:
        nonlocal tries
        tries += 1
        if tries < 3:
            raise TransientError("throttled")
        return 7

    assert asyncio.run(policy.call(fails_twice)) == 7 and tries == 3
