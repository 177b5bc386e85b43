"""The runtime maps each outcome to one settlement, in one place (docs/contract/delivery.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from handlers.errors import PermanentError, RetryableError
from worker.local.backend import open_local_backend
from worker.ports import Backend, LockLost, QueueMessage, TransientError
from worker.retry_policy import RetryPolicy
from worker.runtime import Runtime
from worker.settings import Settings


class Record:
    """Stands in for a TurnRecord: the runtime only reads its decision."""

    decision = "published"


class ScriptedHandler:
    """A handler whose outcome per message body is scripted: an exception or a record."""

    def __init__(self, backend: Backend, script: dict[bytes, list[Any]]) -> None:
        self.backend = backend
        self.script = script
        self.calls: list[tuple[bytes, int]] = []

    async def handle(self, message: QueueMessage) -> Any:
        self.calls.append((message.body, message.delivery_count))
        outcomes = self.script[message.body]
        outcome = outcomes.pop(0) if len(outcomes) > 1 else outcomes[0]
        if isinstance(outcome, BaseException):
            raise outcome
        if outcome == "slow":
            await asyncio.sleep(30)
        return Record()


def drain(
    tmp_path: Path, script: dict[bytes, list[Any]], max_attempts: int = 3
) -> tuple[Backend, ScriptedHandler, Runtime, list[Any]]:
    async def main() -> tuple[Backend, ScriptedHandler, Runtime, list[Any]]:
        backend = open_local_backend(tmp_path / "home", lock_duration=60)
        for n, body in enumerate(script):
            await backend.queue.send(body, f"s{n}", message_id=f"m{n}")
        handler = ScriptedHandler(backend, script)
        runtime = Runtime(
            handler,
            backend.queue,
            concurrency=2,
            retry=RetryPolicy.no_waiting(max_attempts),
            lock_duration=60,
            session_idle=0.05,
            shutdown_grace=1,
        )
        await asyncio.wait_for(runtime.run(drain=True), timeout=60)
        dead = await backend.queue.dead_letters()
        await backend.close()
        return backend, handler, runtime, dead

    return asyncio.run(main())


def test_success_completes_the_message(tmp_path: Path) -> None:
    _, handler, runtime, dead = drain(tmp_path, {b"ok": ["done"]})
    assert dead == [] and runtime.stats.completed == 1 and handler.calls == [(b"ok", 1)]


def test_permanent_error_is_dead_lettered_at_once_with_its_reason(tmp_path: Path) -> None:
    _, handler, _, dead = drain(tmp_path, {b"x": [PermanentError("not_authorized", "nope")]})
    assert [(d.reason, d.description, d.delivery_count) for d in dead] == [
        ("not_authorized", "nope", 1)
    ]
    assert len(handler.calls) == 1


def test_retryable_error_is_retried_then_dead_lettered_after_max_attempts(tmp_path: Path) -> None:
    err = RetryableError("artifact_missing", "artifact a/b not found")
    _, handler, runtime, dead = drain(tmp_path, {b"x": [err]}, max_attempts=4)
    assert [c[1] for c in handler.calls] == [1, 2, 3, 4]
    assert [(d.reason, d.delivery_count) for d in dead] == [("artifact_missing", 4)]
    assert runtime.stats.retried == 3


def test_transient_store_error_recovers_before_max_attempts(tmp_path: Path) -> None:
    script = {b"x": [TransientError("429 throttled"), TransientError("503"), "done"]}
    _, handler, runtime, dead = drain(tmp_path, script, max_attempts=5)
    assert dead == [] and runtime.stats.completed == 1 and len(handler.calls) == 3


def test_transient_failures_past_max_attempts_are_dead_lettered_as_transient(
    tmp_path: Path,
) -> None:
    _, _, _, dead = drain(tmp_path, {b"x": [TransientError("timeout")]}, max_attempts=2)
    assert [d.reason for d in dead] == ["transient_failure"]


def test_a_bug_is_handler_error_with_type_and_no_row_data(tmp_path: Path) -> None:
    bug = KeyError("SECRET_ROW_VALUE 12.45")
    _, _, _, dead = drain(tmp_path, {b"x": [bug]})
    [entry] = dead
    assert entry.reason == "handler_error"
    assert entry.description.startswith("KeyError")
    assert "SECRET_ROW_VALUE" not in entry.description and "12.45" not in entry.description


def test_bad_message_never_stops_the_worker_and_good_ones_still_complete(tmp_path: Path) -> None:
    script: dict[bytes, list[Any]] = {
        b"bug": [RuntimeError("boom")],
        b"bad": [PermanentError("schema_invalid", "field 'type'")],
        b"good1": ["done"],
        b"good2": ["done"],
    }
    _, _, runtime, dead = drain(tmp_path, script)
    assert sorted(d.reason for d in dead) == ["handler_error", "schema_invalid"]
    assert runtime.stats.completed == 2


def test_retry_policy_is_data_and_backs_off_exponentially_to_a_cap() -> None:
    policy = RetryPolicy(max_attempts=5, base_seconds=0.5, max_seconds=3)
    assert [policy.delay(n) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 3, 3]
    assert not policy.exhausted(4) and policy.exhausted(5)
    assert RetryPolicy.no_waiting().delay(9) == 0


def test_stop_abandons_in_flight_work_after_the_grace_period(tmp_path: Path) -> None:
    async def main() -> tuple[int, int]:
        backend = open_local_backend(tmp_path / "home", lock_duration=60)
        await backend.queue.send(b"slow", "s", message_id="m")
        handler = ScriptedHandler(backend, {b"slow": ["slow"]})
        runtime = Runtime(
            handler,
            backend.queue,
            concurrency=1,
            retry=RetryPolicy.no_waiting(),
            lock_duration=60,
            session_idle=0.05,
            shutdown_grace=0.2,
        )
        task = asyncio.create_task(runtime.run())
        while not handler.calls:
            await asyncio.sleep(0.01)
        runtime.stop()
        await asyncio.wait_for(task, timeout=10)
        # Redelivered later: still on the queue, not dead-lettered, not completed.
        session = await backend.queue.accept_session(0)
        assert session is not None
        again = await session.receive(0)
        assert again is not None
        await backend.close()
        return runtime.stats.completed, again.delivery_count

    completed, delivery_count = asyncio.run(main())
    assert completed == 0 and delivery_count == 2


def test_settings_drive_the_policy() -> None:
    settings = Settings(max_attempts=7, backoff_base_seconds=0)
    policy = RetryPolicy(settings.max_attempts, settings.backoff_base_seconds, 1)
    assert policy.exhausted(7) and policy.delay(3) == 0


class LockLosingSession:
    """A session whose lock is reported lost at its first renewal, holding one message."""

    session_id = "s"

    def __init__(self, message: QueueMessage) -> None:
        self.message: QueueMessage | None = message
        self.settled: list[str] = []
        self.closed = False

    async def receive(self, max_wait: float) -> QueueMessage | None:
        message, self.message = self.message, None
        return message

    async def renew_lock(self) -> None:
        raise LockLost("the session lock expired at the service")

    async def complete(self, message: QueueMessage) -> None:
        self.settled.append("complete")

    async def abandon(self, message: QueueMessage, delay: float = 0.0) -> None:
        self.settled.append("abandon")

    async def dead_letter(self, message: QueueMessage, reason: str, description: str) -> None:
        self.settled.append("dead_letter")

    async def close(self) -> None:
        self.closed = True


class OneSession:
    """A queue handing out one session, drained once that session is closed."""

    def __init__(self, session: LockLosingSession) -> None:
        self.session: LockLosingSession | None = session
        self.handed = session

    async def accept_session(self, max_wait: float) -> LockLosingSession | None:
        session, self.session = self.session, None
        return session

    async def is_drained(self) -> bool:
        return self.handed.closed


class PublishesAfterAStep:
    """A turn that has a slow step to take before it publishes."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.published = False
        self.cancelled = False

    async def handle(self, message: QueueMessage) -> Any:
        self.started.set()
        try:
            await asyncio.Event().wait()  # the slow step: an export longer than the lock
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        self.published = True
        return Record()


def test_a_lock_lost_at_renewal_stops_the_turn_before_it_publishes() -> None:
    # Another holder takes the turn once the lock is gone: this one must not go on to
    # publish. It is cancelled, its message abandoned (ignored if the lock is truly gone).
    message = QueueMessage(1, "m", "s", b"{}", 1, "2026-01-01T00:00:00+00:00")
    session = LockLosingSession(message)
    handler = PublishesAfterAStep()
    runtime = Runtime(
        handler,
        OneSession(session),  # type: ignore[arg-type]
        concurrency=1,
        retry=RetryPolicy.no_waiting(),
        lock_duration=0.03,
        session_idle=0.05,
        shutdown_grace=30,
    )
    stats = asyncio.run(asyncio.wait_for(runtime.run(drain=True), timeout=10))
    assert handler.cancelled and not handler.published
    assert session.settled == ["abandon"] and session.closed
    assert (stats.lock_lost, stats.completed) == (1, 0)
