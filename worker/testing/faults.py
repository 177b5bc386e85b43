"""Fault injection: any port failing the way Azure services fail when they are busy or far away.

`with_faults(backend, plan)` wraps every port of a Backend: the queue and the sessions it
hands out, the conversation store, the ledger, the blobs and the uploads they start, the
publisher. Each call then fails, with probability `plan.rate` (seeded), as `TransientError`
carrying the text of an error the Azure SDKs raise and retry: a timeout, a 429, a 503, a
connection reset. A stream fails per request it makes: a blob download when it opens (the
SDK retries its range requests inside), a history at each page of `HISTORY_PAGE` messages.

How a call fails follows its declared effect (`worker/ports/calls.py`): a call that changes
nothing, or only acquires a lock, fails before it reaches the service; a call that writes
fails either before, or after the service applied it (the reply was lost), half of each, so
the retry that follows repeats an effect that already happened, which is what idempotent
publishing must absorb (docs/contract/delivery.md); a release never fails.

Reliability tests only: the CLI passes it to `open_backend` when `EXPORT_WORKER_FAULT_RATE`
is above 0 (`worker/testing/settings.py`), and says so in a warning at start.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from worker.ports import (
    Backend,
    Blobs,
    BlobUpload,
    ConversationStore,
    Effect,
    Ledger,
    PortCall,
    Publisher,
    Queue,
    Session,
    TransientError,
    declared_calls,
)

P = TypeVar("P")

ERRORS = (
    "ServiceRequestTimeoutError: the operation timed out",
    "(429) TooManyRequests: request rate is large, retry after 10 ms",
    "(503) ServiceUnavailable: the server is busy",
    "ServiceRequestError: [Errno 104] Connection reset by peer",
    "ServiceBusConnectionError: the AMQP link was detached",
)
# Items a history gets per request: a page of messages (Cosmos and SQLite alike).
HISTORY_PAGE = 50
# The names a session's and an upload's calls are counted under (`session.complete`, ...).
_OPENED_NAMES: dict[type, str] = {Session: "session", BlobUpload: "upload"}


class FaultPlan:
    """Seeded draws: which call fails, how, and when; counts what it did.

    Each operation (`ledger.put`, `blobs.read`, ...) draws from a stream of its own, seeded
    from the plan's seed and its name, and every draw of a call is made when the call
    starts (a write failing after it took effect gets its error then, raised when the
    write returns): its n-th call fails, and how, whatever the other calls around it, so a
    seeded run fails the same calls of each operation however its concurrent sessions
    interleave (one stream for all made that a matter of timing)."""

    def __init__(self, rate: float, seed: int | None = None) -> None:
        if not 0 <= rate < 1:
            raise ValueError("fault rate must be in [0, 1)")
        self.rate = rate
        self._seed = seed
        self._streams: dict[str, random.Random] = {}
        self.calls: Counter[str] = Counter()
        self.injected: Counter[str] = Counter()

    def before(self, operation: str, effect: Effect) -> str | None:
        """Count a call; raise now if it fails before reaching the service. A text: the
        error to raise (`after`) once the write has taken effect, its reply lost."""
        self.calls[operation] += 1
        draws = self._draws(operation)
        if draws.random() >= self.rate:
            return None
        lose_the_reply = effect.writes and draws.random() < 0.5
        error = draws.choice(ERRORS)
        if lose_the_reply:
            return error
        self.injected[f"{operation}:before"] += 1
        raise TransientError(error)

    def after(self, operation: str, error: str) -> None:
        """Raise `error` (drawn by `before`) for a write that took effect but whose reply
        was lost."""
        self.injected[f"{operation}:after"] += 1
        raise TransientError(error)

    def _draws(self, operation: str) -> random.Random:
        stream = self._streams.get(operation)
        if stream is None:
            seed = None if self._seed is None else f"{self._seed}:{operation}"
            stream = self._streams[operation] = random.Random(seed)
        return stream


def with_faults(backend: Backend, plan: FaultPlan) -> Backend:
    """The backend with every port call failing as `plan` draws (see the module docstring)."""
    return Backend(
        queue=faulty_port(backend.queue, plan, "queue", Queue),
        store=faulty_port(backend.store, plan, "store", ConversationStore),
        ledger=faulty_port(backend.ledger, plan, "ledger", Ledger),
        blobs=faulty_port(backend.blobs, plan, "blobs", Blobs),
        publisher=faulty_port(backend.publisher, plan, "publisher", Publisher),
    )


def faulty_port(port: P, plan: FaultPlan, name: str, role: type) -> P:
    """`port` with its calls of `role` failing as declared; UndeclaredPortCall if one is not."""
    # A stand-in that answers the port's calls: typed as the port it wraps.
    return cast(P, _Faulty(port, plan, name, declared_calls(role)))


class _Faulty:
    """A port (or a session, or an upload) whose calls may fail; attributes pass through."""

    def __init__(
        self, inner: Any, plan: FaultPlan, name: str, calls: Mapping[str, PortCall]
    ) -> None:
        self._inner = inner
        self._plan = plan
        self._name = name
        self._calls = calls

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._inner, attr)
        declared = self._calls.get(attr)
        if declared is None or not callable(value):
            if callable(value) and not attr.startswith("_"):
                raise AttributeError(f"{attr} is not a call of the role this port was opened for")
            return value
        if declared.effect is Effect.RELEASE:  # releasing resources: never failed
            return value
        operation = f"{self._name}.{attr}"
        plan = self._plan

        def call(*args: Any, **kwargs: Any) -> Any:
            result = value(*args, **kwargs)
            if hasattr(result, "__aiter__"):
                per_request = HISTORY_PAGE if attr == "history" else None
                return _FaultyStream(result, plan, operation, declared.effect, per_request)
            if hasattr(result, "__await__"):
                return _faulty_call(result, plan, operation, declared)
            return result

        return call


async def _faulty_call(pending: Any, plan: FaultPlan, operation: str, declared: PortCall) -> Any:
    try:
        fail_after = plan.before(operation, declared.effect)
    except TransientError:
        close = getattr(pending, "close", None)
        if close is not None:
            close()  # never awaited: nothing reached the service
        raise
    result = await pending
    if fail_after is not None:
        plan.after(operation, fail_after)
    if declared.opens is not None and result is not None:
        # What the call opened fails alike, under its own name (a session, an upload).
        return faulty_port(result, plan, _OPENED_NAMES[declared.opens], declared.opens)
    return result


class _FaultyStream:
    """An async iterator that may fail when opened, and before every `per_request` items."""

    def __init__(
        self, inner: Any, plan: FaultPlan, operation: str, effect: Effect, per_request: int | None
    ) -> None:
        self._inner = inner.__aiter__()
        self._plan = plan
        self._operation = operation
        self._effect = effect
        self._per_request = per_request
        self._items = 0

    def __aiter__(self) -> _FaultyStream:
        return self

    async def __anext__(self) -> Any:
        if self._items == 0 or (self._per_request and self._items % self._per_request == 0):
            self._plan.before(self._operation, self._effect)
        self._items += 1
        return await self._inner.__anext__()

    async def aclose(self) -> None:
        """Close the wrapped stream."""
        close = getattr(self._inner, "aclose", None)
        if close is not None:
            await close()
