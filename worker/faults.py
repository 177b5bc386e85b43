"""Fault injection: any port failing the way Azure services fail when they are busy or far away.

`with_faults(backend, rate, seed)` wraps every port of a Backend: the queue and the sessions it
hands out, the conversation store, the ledger, the blobs and the uploads they start, the
publisher. Each call then fails, with probability `rate` (seeded), as `TransientError`
carrying the text of an error the Azure SDKs raise and retry: a timeout, a 429, a 503, a
connection reset. A stream fails per request it makes: a blob download when it opens (the
SDK retries its range requests inside), a history at each page of `HISTORY_PAGE` messages.

A read fails before it reaches the service. A write fails either before it reaches the
service, or after the service applied it (the reply was lost), half of each: the retry that
follows repeats an effect that already happened, which is what idempotent publishing must
absorb (SPEC section 9).

Reliability tests only: `open_backend` wraps the backend when `fault_rate` > 0 and says so
in a warning at start.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from worker.ports import Backend, TransientError

ERRORS = (
    "ServiceRequestTimeoutError: the operation timed out",
    "(429) TooManyRequests: request rate is large, retry after 10 ms",
    "(503) ServiceUnavailable: the server is busy",
    "ServiceRequestError: [Errno 104] Connection reset by peer",
    "ServiceBusConnectionError: the AMQP link was detached",
)
# Calls that change something: a fault may come after the change took effect.
WRITES = frozenset(
    {
        "send",
        "complete",
        "abandon",
        "dead_letter",
        "renew_lock",
        "replay",
        "purge",
        "put",
        "put_conversation",
        "put_message",
        "publish",
        "write",
        "commit",
    }
)
# Never failed: releasing resources, and dropping a staged upload (no service call).
SPARED = frozenset({"close", "abort"})
# Items a history gets per request: a page of messages (Cosmos and SQLite alike).
HISTORY_PAGE = 50


class FaultPlan:
    """Seeded draws: which call fails, how, and when; counts what it did."""

    def __init__(self, rate: float, seed: int | None = None) -> None:
        if not 0 <= rate < 1:
            raise ValueError("fault rate must be in [0, 1)")
        self.rate = rate
        self._draws = random.Random(seed)
        self.calls: Counter[str] = Counter()
        self.injected: Counter[str] = Counter()

    def before(self, operation: str) -> bool:
        """Count a call; raise now if it fails before reaching the service. True: fail after."""
        self.calls[operation] += 1
        if self._draws.random() >= self.rate:
            return False
        if operation.rsplit(".", 1)[-1] in WRITES and self._draws.random() < 0.5:
            return True
        self._fail(operation, "before")
        return False

    def after(self, operation: str) -> None:
        """Raise for a write that took effect but whose reply was lost."""
        self._fail(operation, "after")

    def _fail(self, operation: str, when: str) -> None:
        self.injected[f"{operation}:{when}"] += 1
        raise TransientError(self._draws.choice(ERRORS))


def with_faults(backend: Backend, rate: float, seed: int | None = None) -> Backend:
    """The backend with every port call failing at `rate` (see the module docstring)."""
    plan = FaultPlan(rate, seed)
    faulty = Backend(
        queue=_Faulty(backend.queue, plan, "queue"),
        store=_Faulty(backend.store, plan, "store"),
        ledger=_Faulty(backend.ledger, plan, "ledger"),
        blobs=_Faulty(backend.blobs, plan, "blobs"),
        publisher=_Faulty(backend.publisher, plan, "publisher"),
    )
    faulty.fault_plan = plan  # type: ignore[attr-defined]
    return faulty


class _Faulty:
    """A port (or a session, or an upload) whose calls may fail; attributes pass through."""

    def __init__(self, inner: Any, plan: FaultPlan, name: str) -> None:
        self._inner = inner
        self._plan = plan
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._inner, attr)
        if attr in SPARED or attr.startswith("_") or not callable(value):
            return value
        operation = f"{self._name}.{attr}"
        plan = self._plan

        def call(*args: Any, **kwargs: Any) -> Any:
            result = value(*args, **kwargs)
            if hasattr(result, "__aiter__"):
                per_request = HISTORY_PAGE if attr == "history" else None
                return _FaultyStream(result, plan, operation, per_request)
            if hasattr(result, "__await__"):
                return _faulty_call(result, plan, operation, attr)
            return result

        return call


async def _faulty_call(pending: Any, plan: FaultPlan, operation: str, attr: str) -> Any:
    try:
        fail_after = plan.before(operation)
    except TransientError:
        close = getattr(pending, "close", None)
        if close is not None:
            close()  # never awaited: nothing reached the service
        raise
    result = await pending
    if fail_after:
        plan.after(operation)
    if attr == "accept_session" and result is not None:
        return _Faulty(result, plan, "session")
    if attr == "upload":
        return _Faulty(result, plan, "upload")
    return result


class _FaultyStream:
    """An async iterator that may fail when opened, and before every `per_request` items."""

    def __init__(
        self, inner: Any, plan: FaultPlan, operation: str, per_request: int | None
    ) -> None:
        self._inner = inner.__aiter__()
        self._plan = plan
        self._operation = operation
        self._per_request = per_request
        self._items = 0

    def __aiter__(self) -> _FaultyStream:
        return self

    async def __anext__(self) -> Any:
        if self._items == 0 or (self._per_request and self._items % self._per_request == 0):
            self._plan.before(self._operation)
        self._items += 1
        return await self._inner.__anext__()

    async def aclose(self) -> None:
        """Close the wrapped stream."""
        close = getattr(self._inner, "aclose", None)
        if close is not None:
            await close()
