"""The retry policy: one piece of data, decided in one place, switched to no waiting in tests."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff between deliveries; dead-letter once `max_attempts` are spent."""

    max_attempts: int = 5
    base_seconds: float = 0.25
    max_seconds: float = 30.0

    def exhausted(self, delivery_count: int) -> bool:
        """Whether the delivery that just failed was the last one allowed."""
        return delivery_count >= self.max_attempts

    def delay(self, delivery_count: int) -> float:
        """Seconds before the next delivery after failed delivery number `delivery_count`."""
        exponent = max(0, delivery_count - 1)
        return min(self.max_seconds, self.base_seconds * (2**exponent))

    @classmethod
    def no_waiting(cls, max_attempts: int = 5) -> RetryPolicy:
        """The same policy without the waiting, for tests."""
        return cls(max_attempts=max_attempts, base_seconds=0.0, max_seconds=0.0)
