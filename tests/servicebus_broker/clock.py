"""The broker's sense of time: UTC seconds since the epoch, from a clock object.

Message time (enqueued times, lock expiry, the duplicate-detection window) reads this
clock, so a test that runs the broker in-process can move time with `ManualClock.advance`
instead of sleeping. Waits on the wire (how long an attach for the next available session
may stay pending) run on real time: the client waits in real time too.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """What the broker reads the time from."""

    def now(self) -> float:
        """UTC seconds since the epoch."""
        ...


class SystemClock:
    """The machine's clock."""

    def now(self) -> float:
        """UTC seconds since the epoch, as the machine tells it."""
        return time.time()


class ManualClock:
    """A clock that moves only when told to; it starts at the machine's current time so
    timestamps the broker hands out still look like today to the client."""

    def __init__(self, start: float | None = None) -> None:
        self._now = time.time() if start is None else start
        # advance() is called from the test's thread while the broker reads on its own.
        self._guard = threading.Lock()

    def now(self) -> float:
        """The current (frozen) time."""
        with self._guard:
            return self._now

    def advance(self, seconds: float) -> None:
        """Move time forward; locks that run out meanwhile expire at the broker's next step."""
        if seconds < 0:
            raise ValueError("time only moves forward")
        with self._guard:
            self._now += seconds
