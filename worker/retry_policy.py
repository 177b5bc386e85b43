"""The retry policy: one piece of data, decided in one place, switched to no waiting in tests.

Two levels, one policy. A port call that fails with a transient error (throttled, timed out,
5xx, connection lost) is tried again in place, up to `call_attempts` tries with a short
backoff: what the Azure SDKs do inside every call, given to every adapter alike
(`worker/call_retries.py`). Only when a call still fails does the delivery fail; the runtime
then abandons the message with the delivery backoff, and dead-letters it once
`max_attempts` deliveries are spent (docs/contract/delivery.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import msgspec

from worker.ports import FIRST_DELIVERY, TransientError

if TYPE_CHECKING:
    from worker.settings import Settings

T = TypeVar("T")


class RetryPolicy(msgspec.Struct, frozen=True):
    """Exponential backoff between deliveries; dead-letter once `max_attempts` are spent."""

    max_attempts: int = 5
    base_seconds: float = 0.25
    max_seconds: float = 30.0
    # Tries of one port call failing transiently before the delivery fails.
    call_attempts: int = 4

    def exhausted(self, delivery_count: int) -> bool:
        """Whether the delivery that just failed was the last one allowed."""
        return _attempts(delivery_count) >= self.max_attempts

    def delay(self, delivery_count: int) -> float:
        """Seconds before the next delivery after failed delivery number `delivery_count`."""
        return doubling(max(0, _attempts(delivery_count) - 1), self.base_seconds, self.max_seconds)

    def call_delay(self, failures: int) -> float:
        """Seconds before trying a port call again in place after its `failures`-th failure."""
        return self.delay(failures) / 4

    async def call(self, operation: Callable[[], Awaitable[T]]) -> T:
        """Await `operation()`; on a transient error, again in place (`call_attempts` tries)."""
        failures = 0
        while True:
            try:
                return await operation()
            except TransientError:
                failures += 1
                if failures >= self.call_attempts:
                    raise
                await asyncio.sleep(self.call_delay(failures))

    @classmethod
    def from_settings(cls, settings: Settings) -> RetryPolicy:
        """The policy the settings describe."""
        return cls(
            max_attempts=settings.max_attempts,
            base_seconds=settings.backoff_base_seconds,
            max_seconds=settings.backoff_max_seconds,
            call_attempts=settings.call_attempts,
        )

    @classmethod
    def no_waiting(cls, max_attempts: int = 5, call_attempts: int = 4) -> RetryPolicy:
        """The same policy without the waiting, for tests."""
        return cls(
            max_attempts=max_attempts,
            base_seconds=0.0,
            max_seconds=0.0,
            call_attempts=call_attempts,
        )


def doubling(step: int, base: float, cap: float) -> float:
    """`base` doubled `step` times, at most `cap`: every backoff of the worker."""
    return min(cap, base * 2.0**step)


def _attempts(delivery_count: int) -> int:
    """Deliveries made so far, the one that just failed included."""
    return delivery_count - FIRST_DELIVERY + 1
