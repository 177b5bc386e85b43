"""Every port call tried again in place on a transient error, by the one retry policy.

`with_call_retries(backend, policy)` wraps each port of a Backend (and the sessions the queue
hands out) so that a call failing with `TransientError` is repeated up to
`policy.call_attempts` tries before the error reaches the handler or the runtime. Every call
repeated is idempotent by contract: reads, upserts (`ledger.put`), a publish with its
message id, settling a message (a repeat after the first took effect finds the lock gone:
`LockLost`, which the runtime already expects).

Not repeated in place: an upload's `write` and `commit` (a chunk written twice would corrupt
the file; the handler starts the whole upload again instead), and the operator's `replay`
and `purge` (a lost reply is reported, not repeated). A stream (history pages, blob
chunks) that fails part-way is opened again and the items already read are skipped: both
streams read stored, unchanging data in a fixed order.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

from worker.ports import Backend, TransientError
from worker.retry_policy import RetryPolicy

NOT_REPEATED = frozenset({"close", "replay", "purge", "abort"})


def with_call_retries(backend: Backend, policy: RetryPolicy) -> Backend:
    """The backend with every port call tried again in place (unchanged when 1 try is allowed)."""
    if policy.call_attempts <= 1:
        return backend
    return Backend(
        queue=_Retrying(backend.queue, policy),
        store=_Retrying(backend.store, policy),
        ledger=_Retrying(backend.ledger, policy),
        blobs=_Retrying(backend.blobs, policy),
        publisher=_Retrying(backend.publisher, policy),
    )


class _Retrying:
    """A port whose calls are tried again in place; attributes pass through."""

    def __init__(self, inner: Any, policy: RetryPolicy) -> None:
        self._inner = inner
        self._policy = policy

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name in NOT_REPEATED or name.startswith("_") or not callable(value):
            return value
        policy = self._policy

        def call(*args: Any, **kwargs: Any) -> Any:
            first = value(*args, **kwargs)
            again: Callable[[], Any] = lambda: value(*args, **kwargs)  # noqa: E731
            if hasattr(first, "__aiter__"):
                return _RetryingStream(first, again, policy)
            if inspect.isawaitable(first):
                return _repeat(first, again, policy, wrap=name == "accept_session")
            return first

        return call


async def _repeat(first: Any, again: Callable[[], Any], policy: RetryPolicy, *, wrap: bool) -> Any:
    pending = [first]
    result = await policy.call(lambda: pending.pop() if pending else again())
    if wrap and result is not None:
        return _Retrying(result, policy)  # a session: receive and settle are port calls too
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
