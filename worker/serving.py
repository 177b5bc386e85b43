"""`export-worker run`, assembled: the operations endpoint, the backend, the handler and the
runtime, opened in that order and closed in the reverse one.

The endpoint opens first, so a probe gets an answer while the adapters are still opening
(`/healthz` says `starting`, `/readyz` says `not_opened`), and closes last, so `/readyz`
says `closed` while the runtime shuts down.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from worker.backends import open_backend
from worker.checkpoints import Checkpoint, no_checkpoint
from worker.environment import SettingsError
from worker.health import Readiness
from worker.logs import get_logger
from worker.operations import Operations, operations_endpoint, reachability_check
from worker.ports import Backend, QueueMessage
from worker.retry_policy import RetryPolicy
from worker.runtime import MessageHandler, RunStats, Runtime
from worker.scratch import sweep
from worker.settings import Settings

if TYPE_CHECKING:  # the record's struct is imported by the turns that build one
    from schemas.records import TurnRecord


async def serve(
    settings: Settings,
    operations: Operations,
    *,
    drain: bool = False,
    concurrency: int | None = None,
    checkpoint: Checkpoint = no_checkpoint,
    inject: Callable[[Backend], Backend] | None = None,
) -> RunStats:
    """Run the worker until stopped (or drained), reporting to `operations`."""
    check_attempts(settings)
    if concurrency is not None:
        # The queue bounds the sessions it holds by the concurrency (worker/azure/sessions.py).
        settings = settings.replace(concurrency=concurrency)
    readiness = Readiness()
    async with operations_endpoint(settings, operations, readiness):
        backend = await open_backend(settings, inject=inject)
        try:
            readiness.opened(reachability_check(backend, settings, operations))
            # What killed workers left in the temporary folder (worker/scratch.py).
            swept = await asyncio.to_thread(sweep)
            if swept:
                get_logger().info("scratch_swept", removed=swept)

            def turn_handler() -> MessageHandler:
                from worker.handler import TurnHandler

                return TurnHandler(backend, settings, checkpoint=checkpoint, observer=operations)

            runtime = Runtime(
                BuiltOnFirstMessage(turn_handler),
                backend.queue,
                concurrency=settings.concurrency,
                retry=RetryPolicy.from_settings(settings),
                lock_duration=settings.lock_duration_seconds,
                session_idle=settings.session_idle_seconds,
                shutdown_grace=settings.shutdown_grace_seconds,
                observer=operations,
                on_stop=readiness.closed,  # no new traffic is taken during the grace period
                drain_give_up=settings.drain_give_up_seconds,
            )
            return await runtime.run(drain=drain)
        finally:
            readiness.closed()
            await backend.close()


class BuiltOnFirstMessage:
    """The turn handler, built (and the decision core, `handlers/`, imported) when the first
    message arrives: a worker whose queue is empty never pays for it (~0.1 s of start-up
    on a small machine, issue 10's start-up goal)."""

    def __init__(self, build: Callable[[], MessageHandler]) -> None:
        self._build = build
        self._handler: MessageHandler | None = None

    async def handle(self, message: QueueMessage) -> TurnRecord:
        """Build the handler if this is the first message, then let it handle the message."""
        if self._handler is None:
            self._handler = self._build()  # no await in between: built once
        return await self._handler.handle(message)


def check_attempts(settings: Settings) -> None:
    """Refuse MAX_ATTEMPTS past the local queue's delivery limit: the queue would dead-letter
    first, as MaxDeliveryCountExceeded, and the turn's own reason (conversation_not_found,
    ...) would be lost. Only the consumer checks: the operator's commands (dlq, turns,
    send) work with any value, so a bad setting never locks out the tools that recover."""
    if settings.backend != "local":
        return  # the queue's maxDeliveryCount is the deployment's (infra/main.bicep)
    from worker.ports import MAX_DELIVERY_COUNT

    if settings.max_attempts > MAX_DELIVERY_COUNT:
        raise SettingsError(
            f"invalid settings: {settings.PREFIX}MAX_ATTEMPTS must be at most "
            f"{MAX_DELIVERY_COUNT} on the local backend (its queue's delivery limit)"
        )
