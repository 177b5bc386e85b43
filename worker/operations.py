"""Operations, wired: the runtime's and the handler's reports become metrics, liveness and
spans; the opened adapters get a reachability check; `/healthz`, `/readyz` and `/metrics`
are served while the worker runs (docs/operations.md).

`Operations` is the one observer of both (`worker/observer.py`): the runtime and the
handler call it and know nothing of Prometheus or OpenTelemetry.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from worker.health import (
    Liveness,
    LivenessBounds,
    ReachabilityCheck,
    Readiness,
    Unreachable,
)
from worker.logs import get_logger
from worker.metrics import Metrics, Recorder, Unexposed
from worker.observer import AttributeValue, Handling, Step
from worker.ports import Backend, LockLost, NotFound, QueueMessage, watching_tries
from worker.settings import Settings
from worker.tracing import Tracing, TurnSpan, configure_tracing

if TYPE_CHECKING:
    from worker.http_server import OperationsServer

# The id every readiness read asks for: nothing is expected there, and "not found" is the
# answer of a dependency that is reachable and lets the worker in.
PROBE_ID = "export-worker-readiness-probe"

MonotonicClock = Callable[[], float]
WallClock = Callable[[], datetime]


def utc_now() -> datetime:
    """The wall clock, in UTC."""
    return datetime.now(UTC)


class Operations:
    """Metrics, liveness and spans, fed by the runtime (`RuntimeObserver`) and the handler
    (`TurnObserver`); also what the receive loop last heard from the queue, for readiness."""

    def __init__(
        self,
        metrics: Recorder | None = None,
        liveness: Liveness | None = None,
        tracing: Tracing | None = None,
        *,
        clock: MonotonicClock = time.monotonic,
        wall_clock: WallClock = utc_now,
    ) -> None:
        self.metrics: Recorder = metrics if metrics is not None else Metrics()
        self.liveness = liveness if liveness is not None else Liveness(clock)
        self.tracing = tracing if tracing is not None else Tracing()
        self._clock = clock
        self._wall_clock = wall_clock
        # The type of the error the last wait for the queue ended with; None once it answers.
        self.queue_error: str | None = None

    @classmethod
    def from_settings(
        cls, settings: Settings, environ: Mapping[str, str] | None = None
    ) -> Operations:
        """Operations with the liveness bounds the settings imply, tracing as the standard
        OTEL_* variables say, and metrics when /metrics is served (`http_port`)."""
        bounds = LivenessBounds(
            # Each adapter call waits at most its own wait plus the SDK timeout; twice that
            # is slack enough for a slow network, and still catches a call that never returns.
            wait_slack_seconds=max(30.0, 2 * settings.sdk_timeout_seconds),
            # After this the session lock is no longer renewed: a turn older is hung.
            max_turn_seconds=settings.max_lock_renewal_seconds,
        )
        env = os.environ if environ is None else environ
        metrics = Metrics() if settings.http_port else Unexposed()
        return cls(metrics, Liveness(bounds=bounds), configure_tracing(env))

    # ---- RuntimeObserver ---------------------------------------------------------------
    def loop_started(self) -> None:
        """The receive loop runs."""
        self.liveness.loop_started()

    @contextlib.contextmanager
    def waiting(self, bound: float) -> Iterator[None]:
        """An idle wait for the queue; how it ends says whether the queue answers (and, when
        it does not, how the adapter's last try failed if it noted it)."""
        with self.liveness.idle_wait(bound), watching_tries() as tries:
            try:
                yield
            except LockLost:  # an answer: the lock is someone else's
                self.queue_error = None
                raise
            except Exception as exc:
                self.queue_error = tries.after(type(exc).__name__)
                self.metrics.queue_wait_failed()
                raise
            self.queue_error = None

    def session_acquired(self) -> None:
        """One more session held."""
        self.metrics.session_acquired()
        self.liveness.progressed()

    def session_released(self) -> None:
        """One session fewer held."""
        self.metrics.session_released()
        self.liveness.progressed()

    def session_lock_lost(self) -> None:
        """A session lock lost outside a delivery."""
        self.metrics.lock_lost()

    @contextlib.contextmanager
    def handling(self, message: QueueMessage) -> Iterator[Handling]:
        """A delivery: its queue wait observed, a turn in flight, the turn's span."""
        self.metrics.handling_started(message.enqueued_at, self._wall_clock())
        with (
            self.liveness.turn(),
            self.tracing.turn(
                message.properties,
                conversation_id=message.session_id,
                message_id=message.message_id,
            ) as span,
        ):
            yield _Handling(self.metrics, span, self._clock)

    # ---- TurnObserver ------------------------------------------------------------------
    def step(self, name: Step, **attributes: AttributeValue) -> AbstractContextManager[None]:
        """A child span of the turn's."""
        return self.tracing.step(name, **attributes)

    def annotate(self, **attributes: AttributeValue | None) -> None:
        """Ids on the turn's span."""
        self.tracing.annotate(**attributes)

    def outgoing(self, properties: Mapping[str, Any]) -> dict[str, Any]:
        """The properties plus the current trace context."""
        return self.tracing.outgoing(properties)

    def export_published(
        self, export_format: str, rows: int, size_bytes: int, occurred_at: str
    ) -> None:
        """An export announced: format, size, end-to-end latency by the wall clock."""
        self.metrics.export_published(
            export_format, rows, size_bytes, occurred_at, self._wall_clock()
        )

    def message_skipped(self) -> None:
        """A stored message skipped (it does not parse; the turn did not need it)."""
        self.metrics.message_skipped()


class _Handling:
    """One delivery's reports; the handling time is taken once, when the handler is done."""

    def __init__(self, metrics: Recorder, span: TurnSpan, clock: MonotonicClock) -> None:
        self._metrics = metrics
        self._span = span
        self._clock = clock
        self._started = clock()
        self._seconds: float | None = None

    def handled(self) -> None:
        """Stop the handling time (the first call counts)."""
        if self._seconds is None:
            self._seconds = self._clock() - self._started

    def _elapsed(self) -> float:
        self.handled()
        assert self._seconds is not None
        return self._seconds

    def completed(self, decision: str) -> None:
        """Completed with a record of `decision`."""
        self._metrics.turn_settled(decision, self._elapsed())
        self._span.annotate(outcome="completed", decision=decision)

    def retried(self) -> None:
        """Abandoned for a retry."""
        self._metrics.retry_scheduled(self._elapsed())
        self._span.annotate(outcome="retried")

    def dead_lettered(self, reason: str) -> None:
        """Dead-lettered with `reason`."""
        self._metrics.dead_lettered(reason, self._elapsed())
        self._span.annotate(outcome="dead_lettered", dead_letter_reason=reason)

    def abandoned(self) -> None:
        """Abandoned on shutdown."""
        self._metrics.abandoned_on_shutdown(self._elapsed())
        self._span.annotate(outcome="abandoned")

    def lock_lost(self) -> None:
        """Lost its lock."""
        self._metrics.lock_lost(self._elapsed())
        self._span.annotate(outcome="lock_lost")


# --------------------------------------------------------------------------------------
# Readiness: can the opened adapters be reached?
# --------------------------------------------------------------------------------------
# Each dependency's read in a readiness check: under the check's own bound (Readiness,
# 5 s), so a slow dependency is named rather than the whole check timing out.
READ_TIMEOUT_SECONDS = 4.0


def reachability_check(
    backend: Backend,
    settings: Settings,
    operations: Operations,
    *,
    read_timeout: float = READ_TIMEOUT_SECONDS,
) -> ReachabilityCheck:
    """The check `/readyz` runs (at most every 10 s): one cheap read per dependency whose
    answer tells "reachable" from "broken" (docs/operations.md, "Readiness checks"):

    - store: the messages of a conversation that does not exist (an empty partition
      query), and a point read of that conversation, whose NotFound is the normal answer;
    - ledger: the turn records of that conversation (an empty partition query: NotFound
      there means the container or database is missing);
    - blobs: whether a blob exists in the artifacts container (False is the normal answer;
      bad credentials or no network raise);
    - queue: no read of its own: what the receive loop's last wait for the queue ended
      with (it asks at least every 15 s while idle). Peeking a session queue needs a
      session lock, and its counts need Manage rights the worker's identity does not have;
    - publisher: not read (a topic sender has nothing to read); a failing publish is
      retried and, in the end, dead-lettered `transient_failure`.

    Each failure raises `Unreachable` naming the dependency and the error's type; a read
    slower than `read_timeout` (an SDK still in its retries) is a `TimeoutError` of that
    dependency, before the whole check's bound would leave /readyz without a name. When the
    adapter noted how its last try failed, that follows: "(its last try: connection
    refused)".
    """

    async def store() -> None:
        async for _ in backend.store.history(PROBE_ID, 0):
            break
        with contextlib.suppress(NotFound):
            await backend.store.get_conversation(PROBE_ID)

    async def ledger() -> None:
        await backend.ledger.list_turns(PROBE_ID)

    async def blobs() -> None:
        await backend.blobs.exists(f"{settings.artifacts_container}/{PROBE_ID}")

    reads = {"store": store, "ledger": ledger, "blobs": blobs}

    async def read(name: str) -> str | None:
        """None when the read answered; else its error's type, and how the last try of the
        adapter's own retries failed when it says ("TimeoutError (its last try: connection
        refused)")."""
        with watching_tries() as tries:
            try:
                async with asyncio.timeout(read_timeout):  # wait_for can drop a cancel
                    await reads[name]()
            except Exception as exc:
                return tries.after(type(exc).__name__)
        return None

    async def check() -> None:
        names = list(reads)
        results = await asyncio.gather(*(read(n) for n in names), return_exceptions=True)
        for name, result in zip(names, results, strict=True):
            if isinstance(result, BaseException):
                raise result  # cancelled: not an answer
            if result is not None:
                raise Unreachable(name, result)
        if operations.queue_error is not None:
            raise Unreachable("queue", operations.queue_error)

    return check


# --------------------------------------------------------------------------------------
# The endpoint
# --------------------------------------------------------------------------------------
@contextlib.asynccontextmanager
async def operations_endpoint(
    settings: Settings, operations: Operations, readiness: Readiness
) -> AsyncIterator[OperationsServer | None]:
    """Serve /healthz, /readyz and /metrics on the configured port while inside; nothing
    when `http_port` is 0."""
    if settings.http_port == 0:
        yield None
        return
    if not isinstance(operations.metrics, Metrics):
        raise TypeError("serving /metrics needs Operations built with Metrics")
    # aiohttp is imported only when the endpoint is served (~0.3 s of start-up otherwise).
    from worker.http_server import start_operations_server

    server = await start_operations_server(
        settings.http_host, settings.http_port, operations.liveness, readiness, operations.metrics
    )
    log = get_logger()
    log.info("operations_endpoint_started", host=settings.http_host, port=server.port)
    try:
        yield server
    finally:
        await server.close()
        log.info("operations_endpoint_stopped")
