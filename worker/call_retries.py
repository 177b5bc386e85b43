"""Port calls tried again in place on a transient error, as each port method declares.

`with_call_retries(backend, policy)` wraps every port of a Backend so that a call failing
with `TransientError` is repeated, up to `policy.call_attempts` tries, before the error
reaches the handler or the runtime: what the Azure SDKs do inside every call, given to
every adapter alike. Which calls may be repeated is not decided here: each port method
declares its effect (`worker/ports/calls.py`), and only `READ`, `ACQUIRE` and `IDEMPOTENT`
calls are repeated. A settle repeated after the first took effect finds the lock gone
(`LockLost`, which the runtime expects); a `ONCE` call (an upload's `write` and `commit`,
the operator's `replay` and `purge`) and a `RELEASE` are never repeated in place. What a
call opens (a session, an upload) is wrapped by its own declarations.

A stream (history pages, blob chunks) that fails part-way is opened again and the items
already read are skipped: both streams read stored, unchanging data in a fixed order.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, TypeVar, cast

from worker.ports import (
    Backend,
    Blobs,
    ConversationStore,
    Ledger,
    PortCall,
    Publisher,
    Queue,
    TransientError,
    declared_calls,
)
from worker.retry_policy import RetryPolicy

P = TypeVar("P")


def with_call_retries(backend: Backend, policy: RetryPolicy) -> Backend:
    """The backend with every repeatable port call tried again in place."""
    return Backend(
        queue=retried(backend.queue, policy, Queue),
        store=retried(backend.store, policy, ConversationStore),
        ledger=retried(backend.ledger, policy, Ledger),
        blobs=retried(backend.blobs, policy, Blobs),
        publisher=retried(backend.publisher, policy, Publisher),
    )


def retried(port: P, policy: RetryPolicy, *roles: type) -> P:
    """`port`, its calls of the port Protocols `roles` tried again in place as declared.

    Unchanged when the policy allows one try. UndeclaredPortCall when a role's method
    declares no effect.
    """
    calls = declared_calls(*roles)
    if policy.call_attempts <= 1:
        return port
    # A stand-in that answers the port's calls: typed as the port it wraps.
    return cast(P, _Retrying(port, policy, calls))


class _Retrying:
    """A port whose repeatable calls are tried again in place; other attributes pass through."""

    def __init__(self, inner: Any, policy: RetryPolicy, calls: Mapping[str, PortCall]) -> None:
        self._inner = inner
        self._policy = policy
        self._calls = calls

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        declared = self._calls.get(name)
        if declared is None or not callable(value):
            if callable(value) and not name.startswith("_"):
                raise AttributeError(f"{name} is not a call of the roles this port was opened for")
            return value
        if not declared.effect.repeatable:
            return value
        policy = self._policy

        def call(*args: Any, **kwargs: Any) -> Any:
            first = value(*args, **kwargs)
            again: Callable[[], Any] = lambda: value(*args, **kwargs)  # noqa: E731
            if hasattr(first, "__aiter__"):
                return _RetryingStream(first, again, policy)
            if inspect.isawaitable(first):
                return _repeat(first, again, policy, declared)
            return first

        return call


async def _repeat(first: Any, again: Callable[[], Any], policy: RetryPolicy, call: PortCall) -> Any:
    pending = [first]
    result = await policy.call(lambda: pending.pop() if pending else again())
    if call.opens is not None and result is not None:
        return retried(result, policy, call.opens)  # a session or an upload: its calls too
    return result


class _RetryingStream:
    """An async iterator opened again on a transient error, skipping what was already read."""

    def __init__(self, first: Any, again: Callable[[], Any], policy: RetryPolicy) -> None:
        self._items: AsyncIterator[Any] = first.__aiter__()
        self._again = again
        self._policy = policy
        self._read = 0
        self._skip = 0

    def __aiter__(self) -> _RetryingStream:
        return self

    async def __anext__(self) -> Any:
        failures = 0
        while True:
            try:
                item = await self._items.__anext__()
            except TransientError:
                failures += 1
                if failures >= self._policy.call_attempts:
                    raise
                await self._close()
                await asyncio.sleep(self._policy.call_delay(failures))
                self._items = self._again().__aiter__()
                self._skip = self._read
                continue
            if self._skip:
                self._skip -= 1
                continue
            self._read += 1
            return item

    async def aclose(self) -> None:
        """Close the stream being read."""
        await self._close()

    async def _close(self) -> None:
        close = getattr(self._items, "aclose", None)
        if close is not None:
            with contextlib.suppress(Exception):
                await close()
