"""Liveness and readiness: state the runtime ticks, and verdicts that are pure functions of
that state and a clock (so every rule is tested without waiting).

Liveness answers "should this container be restarted?". The receive loop is alive when it
made progress recently, or when each thing it is doing is still within its own bound: a
turn younger than the longest a turn may take, an idle wait (accepting a session, waiting
for a session's next message) no longer than the wait it asked for plus some slack.
Readiness answers "has this worker opened its adapters, and can it reach them?".
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

import msgspec

Clock = Callable[[], float]  # monotonic seconds
ReachabilityCheck = Callable[[], Awaitable[None]]  # raises when a dependency is unreachable


class Unreachable(Exception):
    """What a reachability check raises to name the dependency that failed and how (the
    type of the error it got, never its text, and how the last try failed when the adapter
    noted it: "TimeoutError (its last try: connection refused)")."""

    def __init__(self, dependency: str, error: str) -> None:
        super().__init__(f"{dependency}: {error}")
        self.dependency = dependency
        self.error = error


class Verdict(msgspec.Struct, frozen=True):
    """A probe's answer: ok or not, a status word saying why, and a few numbers."""

    ok: bool
    status: str
    detail: Mapping[str, Any] = msgspec.field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        """The small JSON object a probe endpoint returns."""
        return {"status": self.status, **self.detail}


# --------------------------------------------------------------------------------------
# Liveness
# --------------------------------------------------------------------------------------
class LivenessBounds(msgspec.Struct, frozen=True):
    """How long each kind of silence may last before the worker counts as hung."""

    # From process start to the receive loop's first tick (opening adapters included).
    start_seconds: float = 120.0
    # Without progress and with nothing in flight or waiting that explains it.
    stall_seconds: float = 120.0
    # How far past its own bound an idle wait may run (slow networks, SDK retries).
    wait_slack_seconds: float = 30.0
    # A turn in flight longer than this is hung; the session lock stops being renewed at
    # MAX_LOCK_RENEWAL_SECONDS anyway, so the runtime passes that setting here.
    max_turn_seconds: float = 3600.0


class LivenessState(msgspec.Struct, frozen=True):
    """A snapshot of what the receive loop is doing, in clock seconds."""

    created_at: float
    started_at: float | None = None
    last_progress_at: float | None = None
    turns_started_at: tuple[float, ...] = ()
    # (started at, the bound the waiter gave) of each idle wait in progress.
    waits: tuple[tuple[float, float], ...] = ()


def liveness_verdict(state: LivenessState, now: float, bounds: LivenessBounds) -> Verdict:
    """Alive or hung, and why: the whole liveness rule, as a function of state and time."""
    if state.started_at is None:
        since_created = now - state.created_at
        detail = {"seconds_since_created": round(since_created, 3)}
        if since_created <= bounds.start_seconds:
            return Verdict(True, "starting", detail)
        return Verdict(False, "not_started", detail)
    if state.turns_started_at:
        oldest = now - min(state.turns_started_at)
        if oldest > bounds.max_turn_seconds:
            return Verdict(False, "turn_overdue", {"oldest_turn_seconds": round(oldest, 3)})
    for started, bound in state.waits:
        if now - started > bound + bounds.wait_slack_seconds:
            overrun = {"wait_seconds": round(now - started, 3), "wait_bound_seconds": bound}
            return Verdict(False, "wait_overrun", overrun)
    last = state.last_progress_at if state.last_progress_at is not None else state.started_at
    since = now - last
    detail = {
        "seconds_since_progress": round(since, 3),
        "turns_in_flight": len(state.turns_started_at),
        "idle_waits": len(state.waits),
    }
    if since <= bounds.stall_seconds:
        return Verdict(True, "progressing", detail)
    if state.turns_started_at:
        return Verdict(True, "busy", detail)
    if state.waits:
        return Verdict(True, "idle", detail)
    return Verdict(False, "stalled", detail)


class Liveness:
    """What the receive loop ticks: start, progress, idle waits and turns in flight."""

    def __init__(self, clock: Clock = time.monotonic, bounds: LivenessBounds | None = None) -> None:
        self._clock = clock
        self.bounds = bounds or LivenessBounds()
        self._created_at = clock()
        self._started_at: float | None = None
        self._last_progress_at: float | None = None
        self._turns: dict[int, float] = {}
        self._waits: dict[int, tuple[float, float]] = {}
        self._tokens = itertools.count()

    def loop_started(self) -> None:
        """The receive loop is running (adapters are open)."""
        self._started_at = self._clock()

    def progressed(self) -> None:
        """The receive loop moved on: a session accepted or released, a message settled."""
        self._last_progress_at = self._clock()

    @contextlib.contextmanager
    def idle_wait(self, bound: float) -> Iterator[None]:
        """Around a wait that should return within `bound` seconds, message or not; its
        return is progress."""
        token = next(self._tokens)
        self._waits[token] = (self._clock(), bound)
        try:
            yield
        finally:
            del self._waits[token]
            self.progressed()

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        """Around one delivery, from handling to settlement; its end is progress."""
        token = next(self._tokens)
        self._turns[token] = self._clock()
        try:
            yield
        finally:
            del self._turns[token]
            self.progressed()

    def state(self) -> LivenessState:
        """A frozen snapshot of the loop's state."""
        return LivenessState(
            created_at=self._created_at,
            started_at=self._started_at,
            last_progress_at=self._last_progress_at,
            turns_started_at=tuple(self._turns.values()),
            waits=tuple(self._waits.values()),
        )

    def verdict(self) -> Verdict:
        """The liveness verdict now."""
        return liveness_verdict(self.state(), self._clock(), self.bounds)


# --------------------------------------------------------------------------------------
# Readiness
# --------------------------------------------------------------------------------------
class ReadinessState(msgspec.Struct, frozen=True):
    """Whether the adapters are open, and the last reachability check's result."""

    opened: bool = False
    closed: bool = False
    checked_at: float | None = None
    check_error: str | None = None  # a failed check's `Unreachable.error`, never an error's text
    dependency: str | None = None  # which dependency failed, when the check says


def readiness_verdict(state: ReadinessState, now: float) -> Verdict:
    """Ready or not, and why: the whole readiness rule."""
    if state.closed:
        return Verdict(False, "closed")
    if not state.opened:
        return Verdict(False, "not_opened")
    if state.check_error is not None:
        age = 0.0 if state.checked_at is None else round(now - state.checked_at, 3)
        detail: dict[str, Any] = {"error": state.check_error, "checked_ago": age}
        if state.dependency is not None:
            detail["dependency"] = state.dependency
        return Verdict(False, "unreachable", detail)
    return Verdict(True, "ready")


class Readiness:
    """Adapters opened / closed, plus a cheap reachability check run at most every
    `check_every` seconds (probes come often; the dependencies should not feel them)."""

    def __init__(
        self,
        check: ReachabilityCheck | None = None,
        *,
        clock: Clock = time.monotonic,
        check_every: float = 10.0,
        check_timeout: float = 5.0,
    ) -> None:
        self._check = check
        self._clock = clock
        self._check_every = check_every
        self._check_timeout = check_timeout
        self._state = ReadinessState()
        self._checking = asyncio.Lock()

    def opened(self, check: ReachabilityCheck | None = None) -> None:
        """The adapters are open: the worker may report ready; `check` (when given)
        replaces the reachability check, which often needs the opened adapters."""
        if check is not None:
            self._check = check
        self._state = ReadinessState(opened=True)

    def closed(self) -> None:
        """The adapters are closing or closed: never ready again."""
        self._state = ReadinessState(opened=self._state.opened, closed=True)

    def state(self) -> ReadinessState:
        """A frozen snapshot."""
        return self._state

    async def verdict(self) -> Verdict:
        """Run the reachability check when its last result is stale, then judge."""
        async with self._checking:
            if self._due():
                await self._run_check()
        return readiness_verdict(self._state, self._clock())

    def _due(self) -> bool:
        s = self._state
        if self._check is None or not s.opened or s.closed:
            return False
        return s.checked_at is None or self._clock() - s.checked_at >= self._check_every

    async def _run_check(self) -> None:
        assert self._check is not None
        error: str | None = None
        dependency: str | None = None
        try:
            async with asyncio.timeout(self._check_timeout):  # wait_for can drop a cancel
                await self._check()
        except Unreachable as exc:
            error, dependency = exc.error, exc.dependency
        except Exception as exc:  # any failure means "not reachable"; only its type is kept
            error = type(exc).__name__
        if not self._state.closed:
            self._state = ReadinessState(
                opened=True, checked_at=self._clock(), check_error=error, dependency=dependency
            )
