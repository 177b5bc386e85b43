"""The runtime maps each outcome to one settlement, in one place (docs/contract/delivery.md)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import structlog

from handlers.errors import PermanentError, RetryableError
from worker.local.backend import open_local_backend
from worker.observer import NO_OBSERVER, NoObserver
from worker.ports import Backend, LockLost, QueueMessage, TransientError
from worker.retry_policy import RetryPolicy
from worker.runtime import ACCEPT_WAIT_SECONDS, DRAIN_POLL_SECONDS, DrainGaveUp, Runtime
from worker.settings import Settings


class Record:
    """Stands in for a TurnRecord: the runtime only reads its decision."""

    decision = "published"


class ScriptedHandler:
    """A handler whose outcome per message body is scripted: an exception, a record (any
    object with a `decision`), "slow", or anything else for a published `Record`."""

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
        if hasattr(outcome, "decision"):
            return outcome
        if outcome == "slow":
            await asyncio.sleep(30)
        return Record()


def runtime_for(handler: Any, queue: Any, **settings: Any) -> Runtime:
    """A runtime with these tests' usual settings; `settings` overrides them."""
    usual: dict[str, Any] = {
        "concurrency": 1,
        "retry": RetryPolicy.no_waiting(),
        "lock_duration": 60,
        "session_idle": 0.05,
        "shutdown_grace": 0.2,
    }
    return Runtime(handler, queue, **{**usual, **settings})


def drain(
    tmp_path: Path,
    script: dict[bytes, list[Any]],
    max_attempts: int = 3,
    *,
    queue: Callable[[Any], Any] = lambda queue: queue,
    concurrency: int = 2,
    on_stop: Callable[[], None] | None = None,
) -> tuple[Backend, ScriptedHandler, Runtime, list[Any]]:
    """Send each scripted body on a session of its own and drain them; `queue` wraps the
    local queue the runtime is given (`runtime.queue`)."""

    async def main() -> tuple[Backend, ScriptedHandler, Runtime, list[Any]]:
        backend = open_local_backend(tmp_path / "home", lock_duration=60)
        for n, body in enumerate(script):
            await backend.queue.send(body, f"s{n}", message_id=f"m{n}")
        handler = ScriptedHandler(backend, script)
        runtime = runtime_for(
            handler,
            queue(backend.queue),
            concurrency=concurrency,
            retry=RetryPolicy.no_waiting(max_attempts),
            shutdown_grace=1,
            on_stop=on_stop,
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


def test_the_runs_counts_add_up_its_settlements_and_decisions(tmp_path: Path) -> None:
    # What `run` prints on exit, and the worker_stopped line.
    class Decided:
        decision = "no_request"

    err = RetryableError("artifact_missing", "not yet")
    script: dict[bytes, list[Any]] = {
        b"p1": ["done"],
        b"p2": ["done"],
        b"flaky": [err, "done"],
        b"bad": [PermanentError("schema_invalid", "turn_id: missing")],
        b"ask": [Decided()],
    }

    stats = drain(tmp_path, script)[2].stats
    assert (stats.completed, stats.dead_lettered, stats.retried, stats.lock_lost) == (4, 1, 1, 0)
    assert stats.by_decision == {"published": 3, "no_request": 1}


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


def test_a_description_with_a_lone_surrogate_is_dead_lettered_escaped(tmp_path: Path) -> None:
    # An artifact name from the history can hold one; storing it had failed every time.
    error = PermanentError("artifact_invalid", "artifact artifacts/c/t/x\udc80.json: not JSON")
    _, handler, _, dead = drain(tmp_path, {b"x": [error], b"ok": ["done"]})
    assert [(d.reason, d.description) for d in dead] == [
        ("artifact_invalid", "artifact artifacts/c/t/x\\udc80.json: not JSON")
    ]
    assert len(handler.calls) == 2


def test_a_verdict_the_queue_always_refuses_counts_its_deliveries_until_dead_lettered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A settlement that fails is abandoned (counted), not released uncounted by the
    session's close: otherwise it came back for ever, ahead of its conversation's turns."""
    from worker.local.queue import LocalSession
    from worker.ports import MAX_DELIVERY_COUNT, MAX_DELIVERY_REASON

    async def refuse(self: LocalSession, message: QueueMessage, reason: str, text: str) -> None:
        raise RuntimeError("the queue refused the verdict")

    monkeypatch.setattr(LocalSession, "dead_letter", refuse)
    script: dict[bytes, list[Any]] = {b"x": [PermanentError("schema_invalid", "no")]}
    script[b"ok"] = ["done"]
    _, handler, runtime, dead = drain(tmp_path, script)
    assert [(d.reason, d.delivery_count) for d in dead] == [
        (MAX_DELIVERY_REASON, MAX_DELIVERY_COUNT)
    ]
    assert [count for body, count in handler.calls if body == b"x"] == list(
        range(1, MAX_DELIVERY_COUNT + 1)
    )
    assert runtime.stats.completed == 1


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
        stopped: list[int] = []
        runtime = runtime_for(
            handler,
            backend.queue,
            on_stop=lambda: stopped.append(len(handler.calls)),
        )
        task = asyncio.create_task(runtime.run())
        while not handler.calls:
            await asyncio.sleep(0.01)
        runtime.stop()
        runtime.stop()
        # on_stop (serve() closes readiness with it) runs once, at once: the turn is still
        # in its grace. /readyz had said ready through the whole grace period.
        assert stopped == [1] and not task.done()
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


def test_without_drain_an_empty_queue_is_served_until_stopped_and_signals_are_given_back(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        backend = open_local_backend(tmp_path / "home", lock_duration=60)
        runtime = runtime_for(
            ScriptedHandler(backend, {}),
            backend.queue,
        )
        task = asyncio.create_task(runtime.run())
        await asyncio.sleep(0.3)
        assert not task.done()  # nothing queued is no reason to stop: a worker waits
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL  # SIGTERM stops it
        runtime.stop()
        await asyncio.wait_for(task, timeout=10)
        # Once run returns, SIGTERM and SIGINT are the process's own again.
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        await backend.close()

    asyncio.run(main())


def test_settings_drive_the_policy() -> None:
    settings = Settings(max_attempts=7, backoff_base_seconds=0)
    policy = RetryPolicy(settings.max_attempts, settings.backoff_base_seconds, 1)
    assert policy.exhausted(7) and policy.delay(3) == 0


class OneSession:
    """A queue handing out one session, drained once that session is closed."""

    def __init__(self, session: KeptSession) -> None:
        self.session: KeptSession | None = session
        self.handed = session

    async def accept_session(self, max_wait: float) -> KeptSession | None:
        session, self.session = self.session, None
        return session

    async def is_drained(self) -> bool:
        return self.handed.closed


def test_a_lock_lost_at_renewal_stops_the_turn_before_it_publishes() -> None:
    # Another holder takes the turn once the lock is gone: this one must not go on to
    # publish. It is cancelled, its message abandoned (ignored if the lock is truly gone).
    events: list[str] = []
    handler = TakesItsTime(3600, events)  # an export longer than the lock
    session, runtime = on_one_session(
        handler,
        events,
        session_type=LockLosingSession,
        observer=NO_OBSERVER,
        lock_duration=0.03,
        shutdown_grace=30,
    )
    with structlog.testing.capture_logs() as logs:
        stats = asyncio.run(asyncio.wait_for(runtime.run(drain=True), timeout=10))
    assert not handler.finished
    assert session.events == ["cancelled", "abandon"] and session.closed
    assert (stats.lock_lost, stats.completed) == (1, 0)
    # The log says why: where the renewal's LockLost was raised, never its text.
    [cancelled] = [e for e in logs if e["event"] == "turn_cancelled_on_lock_lost"]
    assert re.fullmatch(r"LockLost at test_runtime\.py:\d+", cancelled["error"])


def test_a_lock_no_renewal_extends_for_its_duration_stops_the_turn_as_lapsed() -> None:
    # Every renewal fails without saying the lock is lost (a network that stopped
    # answering times each one out): once a lock duration has passed since the lock was
    # last extended, it has lapsed at the queue and another holder may take the turn.
    events: list[str] = []
    handler = TakesItsTime(3600, events)
    session, runtime = on_one_session(
        handler,
        events,
        session_type=RenewalFailingSession,
        observer=NO_OBSERVER,
        lock_duration=0.3,
        shutdown_grace=30,
    )
    with structlog.testing.capture_logs() as logs:
        began = time.monotonic()
        stats = asyncio.run(asyncio.wait_for(runtime.run(drain=True), timeout=10))
        took = time.monotonic() - began
    assert not handler.finished and took >= 0.3
    assert session.events == ["cancelled", "abandon"] and session.closed
    assert (stats.lock_lost, stats.completed) == (1, 0)
    failed = [e for e in logs if e["event"] == "lock_renewal_failed"]
    assert len(failed) >= 2 and len(failed) == session.renewals
    [cancelled] = [e for e in logs if e["event"] == "turn_cancelled_on_lock_lost"]
    assert re.fullmatch(r"LockLost at runtime\.py:\d+ from TransientError", cancelled["error"])


def test_a_renewal_failing_now_and_then_does_not_stop_the_turn() -> None:
    # Each failure is followed by a renewal that works within the lock's duration.
    session, events, runtime = one_turn(
        TakesItsTime(0.8), session_type=EveryOtherRenewalFailing, lock_duration=0.3
    )
    assert session.renewals >= 4 and "complete" in events
    assert (runtime.stats.lock_lost, runtime.stats.completed) == (0, 1)


class KeptSession:
    """A session holding one message whose lock is always renewed; what the runtime does
    to it goes into `events`, in order."""

    session_id = "s"

    def __init__(
        self, message: QueueMessage, events: list[str], refuse: Exception | None = None
    ) -> None:
        self.message: QueueMessage | None = message
        self.events = events
        self.refuse = refuse  # what complete raises, if anything
        self.renewals = 0
        self.closed = False

    async def receive(self, max_wait: float) -> QueueMessage | None:
        message, self.message = self.message, None
        return message

    async def renew_lock(self) -> None:
        self.renewals += 1

    async def complete(self, message: QueueMessage) -> None:
        self.events.append("complete")
        if self.refuse is not None:
            raise self.refuse

    async def abandon(self, message: QueueMessage, delay: float = 0.0) -> None:
        self.events.append("abandon")

    async def dead_letter(self, message: QueueMessage, reason: str, description: str) -> None:
        self.events.append("dead_letter")

    async def close(self) -> None:
        self.closed = True


class LockLosingSession(KeptSession):
    """A session whose lock is reported lost at its first renewal, holding one message."""

    async def renew_lock(self) -> None:
        raise LockLost("the session lock expired at the service")


class RenewalFailingSession(KeptSession):
    """A session whose every renewal fails transiently, holding one message."""

    async def renew_lock(self) -> None:
        self.renewals += 1
        raise TransientError("Service Bus: no answer within 30 s")


class EveryOtherRenewalFailing(KeptSession):
    """A session whose odd renewals fail transiently, holding one message."""

    async def renew_lock(self) -> None:
        self.renewals += 1
        if self.renewals % 2:
            raise TransientError("Service Bus: the service is busy")


class TakesItsTime:
    """A turn that takes `seconds`, then is recorded; its cancellation is written down."""

    def __init__(self, seconds: float, events: list[str] | None = None) -> None:
        self.seconds = seconds
        self.events = events if events is not None else []
        self.started = asyncio.Event()
        self.finished = False

    async def handle(self, message: QueueMessage) -> Any:
        self.started.set()
        try:
            await asyncio.sleep(self.seconds)
        except asyncio.CancelledError:
            self.events.append("cancelled")
            raise
        self.finished = True
        return Record()

    @property
    def cancelled(self) -> bool:
        """Whether the turn was cancelled."""
        return "cancelled" in self.events


class HandlingEvents:
    """A delivery's handling reports, written into `events`."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def handled(self) -> None:
        self.events.append("handled")

    def completed(self, decision: str) -> None:
        self.events.append(f"completed:{decision}")

    def retried(self) -> None:
        self.events.append("retried")

    def dead_lettered(self, reason: str) -> None:
        self.events.append("dead_lettered")

    def abandoned(self) -> None:
        self.events.append("abandoned")

    def lock_lost(self) -> None:
        self.events.append("lock_lost")


class HandlingSpy(NoObserver):
    """Writes the handling's reports into the same `events` as the session's settlement."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def session_lock_lost(self) -> None:
        self.events.append("session_lock_lost")

    @contextlib.contextmanager
    def handling(self, message: QueueMessage) -> Iterator[Any]:
        yield HandlingEvents(self.events)


def on_one_session(
    handler: Any,
    events: list[str],
    *,
    session_type: type[KeptSession] = KeptSession,
    refuse: Exception | None = None,
    **settings: Any,
) -> tuple[KeptSession, Runtime]:
    """A runtime whose queue hands out one session holding one message; the session's
    settlements and the handling's reports go into `events`."""
    message = QueueMessage(1, "m", "s", b"{}", 1, "2026-01-01T00:00:00Z")
    session = session_type(message, events, refuse)
    observed = {"observer": HandlingSpy(events), **settings}
    return session, runtime_for(handler, OneSession(session), **observed)


def one_turn(handler: Any, **settings: Any) -> tuple[KeptSession, list[str], Runtime]:
    """Drain one message through `handler` on a session that keeps its lock."""
    events: list[str] = []
    session, runtime = on_one_session(handler, events, **{"shutdown_grace": 0.1, **settings})
    asyncio.run(asyncio.wait_for(runtime.run(drain=True), timeout=10))
    return session, events, runtime


def test_a_session_lock_lost_while_receiving_is_counted_logged_and_reported() -> None:
    class LostOnReceive(KeptSession):
        async def receive(self, max_wait: float) -> QueueMessage | None:
            raise LockLost("the session lock expired at the service")

    handler = TakesItsTime(0)
    with structlog.testing.capture_logs() as logs:
        session, events, runtime = one_turn(handler, session_type=LostOnReceive)
    assert not handler.started.is_set() and events == ["session_lock_lost"]
    assert runtime.stats.lock_lost == 1 and session.closed
    [lost] = [e for e in logs if e["event"] == "session_lock_lost"]
    assert re.fullmatch(r"LockLost at test_runtime\.py:\d+", lost["error"])


def test_a_turn_longer_than_the_shutdown_grace_completes_when_nothing_stops_the_worker() -> None:
    handler = TakesItsTime(0.4)
    session, events, runtime = one_turn(handler, shutdown_grace=0.05)
    assert handler.finished and not handler.cancelled
    assert events == ["handled", "complete", "completed:published"]
    assert runtime.stats.completed == 1 and session.closed


@pytest.mark.parametrize("queued", [0, 3])
def test_a_drained_run_stops_through_stop_so_readiness_hears_of_it_once(
    tmp_path: Path, queued: int
) -> None:
    stops: list[str] = []
    script: dict[bytes, list[Any]] = {f"ok{n}".encode(): ["done"] for n in range(queued)}
    with structlog.testing.capture_logs() as logs:
        _, _, runtime, _ = drain(tmp_path, script, on_stop=lambda: stops.append("stop"))
    assert runtime.stats.completed == queued and stops == ["stop"]
    # A clean drain: every session let go on its empty receive, nothing to warn about.
    assert [e["event"] for e in logs if e["log_level"] != "info"] == []


def test_a_complete_the_queue_fails_is_abandoned_and_the_session_let_go() -> None:
    # The delivery counts (a verdict that always fails ends dead-lettered), and the
    # session is released rather than served on.
    with structlog.testing.capture_logs() as logs:
        session, events, runtime = one_turn(TakesItsTime(0), refuse=TransientError("down"))
    assert events == ["handled", "complete", "abandon"]
    assert [e["event"] for e in logs if e["event"] == "session_failed"] == ["session_failed"]
    assert runtime.stats.completed == 0 and session.closed


def test_a_complete_refused_for_a_lost_lock_is_not_abandoned_as_well() -> None:
    with structlog.testing.capture_logs() as logs:
        _, events, runtime = one_turn(TakesItsTime(0), refuse=LockLost("gone"))
    assert events == ["handled", "complete", "lock_lost"]
    assert "message_lock_lost" in [e["event"] for e in logs]
    assert (runtime.stats.lock_lost, runtime.stats.completed) == (1, 0)


def test_a_drain_check_that_fails_is_asked_again_after_a_pause_not_taken_for_empty(
    tmp_path: Path,
) -> None:
    class FailsOnce:
        def __init__(self, queue: Any) -> None:
            self._queue = queue
            self.checks: list[float] = []

        def __getattr__(self, name: str) -> Any:
            return getattr(self._queue, name)

        async def is_drained(self) -> bool:
            self.checks.append(time.monotonic())
            if len(self.checks) == 1:
                raise TransientError("the queue did not answer")
            drained: bool = await self._queue.is_drained()
            return drained

    with structlog.testing.capture_logs() as logs:
        _, handler, runtime, _ = drain(tmp_path, {b"ok": ["done"]}, queue=FailsOnce, concurrency=1)
    queue = runtime.queue
    assert isinstance(queue, FailsOnce)
    assert handler.calls == [(b"ok", 1)]  # a failed check is "not drained": served on
    [failed] = [e for e in logs if e["event"] == "drain_check_failed"]
    assert failed["error"].startswith("TransientError at test_runtime.py:")
    assert queue.checks[1] - queue.checks[0] >= 0.9  # a pause of a second, not a spin


def test_the_handling_time_stops_before_the_settlement() -> None:
    # The duration metric is the turn's work; a slow complete must not be counted in it.
    _, events, _ = one_turn(TakesItsTime(0))
    assert events.index("handled") < events.index("complete")


def test_the_lock_is_renewed_a_third_of_its_duration_apart_while_the_turn_runs() -> None:
    session, _, _ = one_turn(TakesItsTime(0.5), lock_duration=0.3)
    # Every 0.1 s over half a second: about 5, however slow this machine is today; a
    # renewer that did not wait would have called thousands of times.
    assert 1 <= session.renewals <= 8


def test_a_turn_past_the_grace_is_cancelled_not_left_running_after_its_abandon() -> None:
    async def main() -> tuple[bool, bool, list[str]]:
        events: list[str] = []
        handler = TakesItsTime(30, events)
        _, runtime = on_one_session(handler, events, shutdown_grace=0.05)
        task = asyncio.create_task(runtime.run())
        await asyncio.wait_for(handler.started.wait(), timeout=10)
        runtime.stop()
        await asyncio.wait_for(task, timeout=10)
        # Read while the loop runs: asyncio.run cancels what is left when it ends.
        return handler.cancelled, handler.finished, events

    cancelled, finished, events = asyncio.run(main())
    # Cancelled before the abandon, not left running: another worker may take the turn
    # the moment it is abandoned.
    assert cancelled and not finished
    assert events == ["handled", "cancelled", "abandon", "abandoned"]


class SpySession:
    """A session whose receive waits are written down (everything else is the real one's)."""

    def __init__(self, session: Any, waits: list[tuple[str, float]]) -> None:
        self._session = session
        self._waits = waits

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    async def receive(self, max_wait: float) -> QueueMessage | None:
        self._waits.append((self._session.session_id, max_wait))
        message: QueueMessage | None = await self._session.receive(max_wait)
        return message


class SpyQueue:
    """A queue whose accept waits and receive waits are written down."""

    def __init__(self, queue: Any) -> None:
        self._queue = queue
        self.accept_waits: list[float] = []
        self.receive_waits: list[tuple[str, float]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)

    async def accept_session(self, max_wait: float) -> Any:
        self.accept_waits.append(max_wait)
        session = await self._queue.accept_session(max_wait)
        return None if session is None else SpySession(session, self.receive_waits)


def spied_drain(tmp_path: Path, sends: list[tuple[bytes, str]]) -> tuple[SpyQueue, list[bytes]]:
    """Drain `sends` (body, session) with one worker whose idle wait is far too long to
    pay: a run that held an empty session would not end within the test's bound."""

    async def main() -> tuple[SpyQueue, list[bytes]]:
        backend = open_local_backend(tmp_path / "home", lock_duration=60)
        for n, (body, session_id) in enumerate(sends):
            await backend.queue.send(body, session_id, message_id=f"m{n}")
        handler = ScriptedHandler(backend, {body: ["done"] for body, _ in sends})
        queue = SpyQueue(backend.queue)
        runtime = runtime_for(
            handler,
            queue,
            session_idle=600,
            shutdown_grace=1,
        )
        await asyncio.wait_for(runtime.run(drain=True), timeout=60)
        await backend.close()
        return queue, [body for body, _ in handler.calls]

    return asyncio.run(main())


def test_a_session_is_released_at_once_when_nothing_more_is_queued_on_it(tmp_path: Path) -> None:
    sends = [(b"a1", "a"), (b"b1", "b"), (b"a2", "a"), (b"c1", "c")]
    queue, handled = spied_drain(tmp_path, sends)
    # FIFO inside a session; one worker, so the sessions come one after another.
    assert handled.index(b"a1") < handled.index(b"a2") and sorted(handled) == sorted(
        b for b, _ in sends
    )
    # Each session waits for the head it was accepted for, then never waits again: session
    # a delivers a2 at once (already queued) and every session is let go on an empty receive.
    waits: dict[str, list[float]] = {}
    for session_id, wait in queue.receive_waits:
        waits.setdefault(session_id, []).append(wait)
    assert waits == {"a": [600, 0.0, 0.0], "b": [600, 0.0], "c": [600, 0.0]}


def test_drain_asks_whether_the_queue_is_empty_before_it_waits_for_a_session(
    tmp_path: Path,
) -> None:
    queue, handled = spied_drain(tmp_path, [(b"x", "s")])
    assert handled == [b"x"]
    assert queue.accept_waits and all(wait == 0.0 for wait in queue.accept_waits)
    empty, nothing = spied_drain(tmp_path / "empty", [])
    # An empty queue is seen as drained before any accept.
    assert nothing == [] and empty.accept_waits == []


def test_drain_polls_gently_while_a_retry_waits_out_its_backoff(tmp_path: Path) -> None:
    # With nothing deliverable and nothing in flight, an accept that found nothing was
    # tried again at once: a core spun for the whole backoff.
    async def main() -> tuple[SpyQueue, ScriptedHandler, float]:
        backend = open_local_backend(tmp_path / "home", lock_duration=60)
        await backend.queue.send(b"x", "s", message_id="m")
        err = RetryableError("artifact_missing", "not yet")
        handler = ScriptedHandler(backend, {b"x": [err, "done"]})
        queue = SpyQueue(backend.queue)
        runtime = runtime_for(
            handler,
            queue,
            retry=RetryPolicy(max_attempts=3, base_seconds=1.0),
            shutdown_grace=1,
        )
        started = asyncio.get_running_loop().time()
        await asyncio.wait_for(runtime.run(drain=True), timeout=30)
        await backend.close()
        return queue, handler, asyncio.get_running_loop().time() - started

    queue, handler, took = asyncio.run(main())
    assert [count for _, count in handler.calls] == [1, 2] and took >= 0.9
    assert len(queue.accept_waits) < 1.5 * took / DRAIN_POLL_SECONDS


def test_an_error_outside_the_port_errors_on_accept_does_not_end_the_run() -> None:
    # An SDK error the adapter let through (a token fetch that failed: ServiceBusError, not
    # retryable) ended run() with worker_failed, cutting off the other sessions' turns.
    calls: list[float] = []

    class Queue:
        async def accept_session(self, max_wait: float) -> None:
            calls.append(max_wait)
            if len(calls) == 1:
                raise RuntimeError("Handler failed: ClientAuthenticationError")
            runtime.stop()

        async def is_drained(self) -> bool:
            return False

    runtime = accepting_runtime(Queue())
    asyncio.run(asyncio.wait_for(runtime.run(), timeout=10))
    assert len(calls) == 2


class NoMessages:
    """The handler of a run in which no message is accepted."""

    async def handle(self, message: QueueMessage) -> Any:
        raise AssertionError("no message was accepted")


def accepting_runtime(queue: Any, *, concurrency: int = 1, observer: Any = NO_OBSERVER) -> Runtime:
    """A runtime over `queue` whose accepts are the test's subject."""
    return Runtime(
        NoMessages(),
        queue,
        concurrency=concurrency,
        retry=RetryPolicy.no_waiting(),
        lock_duration=30,
        session_idle=0.1,
        shutdown_grace=1,
        observer=observer,
    )


def test_a_stop_ends_waiting_accepts_at_once_and_lets_them_clean_up() -> None:
    # An idle worker's accept waits ACCEPT_WAIT_SECONDS (a new AMQP connection each on
    # Service Bus, so long waits); SIGTERM must not wait for it to come back empty. The
    # accepts are cancelled, and run() returns only once each has cleaned up.
    waits: list[float] = []
    cleaned: list[float] = []

    class Idle:
        async def accept_session(self, max_wait: float) -> None:
            waits.append(max_wait)
            try:
                await asyncio.sleep(max_wait)
            except asyncio.CancelledError:
                await asyncio.sleep(0.05)  # closing a receiver takes a round trip
                cleaned.append(max_wait)
                raise

    runtime = accepting_runtime(Idle(), concurrency=2)

    async def main() -> float:
        task = asyncio.create_task(runtime.run())
        while len(waits) < 2:
            await asyncio.sleep(0.01)
        stopped = asyncio.get_running_loop().time()
        runtime.stop()
        await asyncio.wait_for(task, timeout=5)
        return asyncio.get_running_loop().time() - stopped

    took = asyncio.run(main())
    assert waits == [ACCEPT_WAIT_SECONDS] * 2
    assert ACCEPT_WAIT_SECONDS >= 10
    assert cleaned == waits and took < 1.0


def test_a_waiting_accept_that_fails_still_tells_readiness_how_its_last_try_failed() -> None:
    # The accept runs as a task of its own (so that a stop can cancel it); the failed try
    # the adapter notes inside it must still reach the readiness probe's queue state.
    from worker.operations import Operations
    from worker.ports.errors import note_failed_try

    class Refusing:
        async def accept_session(self, max_wait: float) -> None:
            note_failed_try("connection refused")
            runtime.stop()
            raise TransientError("Service Bus: unreachable")

    operations = Operations()
    runtime = accepting_runtime(Refusing(), observer=operations)
    asyncio.run(asyncio.wait_for(runtime.run(), timeout=5))
    assert operations.queue_error == "TransientError (its last try: connection refused)"


def raise_unreachable() -> None:
    """Fail as the Service Bus adapter does when the connection is refused underneath."""
    try:
        raise ConnectionRefusedError(111, "refused")
    except ConnectionRefusedError as exc:
        raise TransientError("Service Bus: unreachable") from exc


class FailingQueue:
    """A queue whose accepts, "is it drained?" checks and receives fail (a connection
    refused underneath) or answer as scripted, call by call: an accept "fail"s, finds
    nothing ("empty", also once its script is played) or hands out a "session"; a check
    "fail"s, says "not yet", or says "drained" (once its own script is played: drained when
    the accepts' is too); a receive "fail"s, finds nothing ("none", also once its script is
    played) or delivers a "message", which the handler completes. Time passes only in the
    runtime's pauses, on `clock`."""

    def __init__(
        self, accepts: list[str], checks: list[str], receives: tuple[str, ...] = ()
    ) -> None:
        self.accepts = accepts
        self.checks = checks
        self.receives = list(receives)
        self.calls: list[tuple[str, float]] = []
        self.clock = 0.0

    def _next(self, call: str, script: list[str]) -> str:
        self.calls.append((call, self.clock))
        outcome = script.pop(0) if script else ""
        if outcome == "fail":
            raise_unreachable()
        return outcome

    async def accept_session(self, max_wait: float) -> ScriptedSession | None:
        outcome = self._next("accept", self.accepts)
        return ScriptedSession(self) if outcome == "session" else None

    async def is_drained(self) -> bool:
        outcome = self._next("drained?", self.checks)
        return outcome == "drained" or (outcome == "" and not self.accepts)


class ScriptedSession(KeptSession):
    """A session of a `FailingQueue`, receiving as its `receives` script says."""

    def __init__(self, queue: FailingQueue) -> None:
        super().__init__(QueueMessage(1, "m", "s", b"ok", 1, "2026-01-01T00:00:00Z"), [])
        self.queue = queue

    async def receive(self, max_wait: float) -> QueueMessage | None:
        outcome = self.queue._next("receive", self.queue.receives)
        return self.message if outcome == "message" else None

    async def close(self) -> None:
        self.queue.calls.append(("close", self.queue.clock))


def test_failed_accepts_back_off_and_name_their_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    # Service Bus down: each session worker retried its accept every second, one log line a
    # second each, naming only the wrapper. The waits now double up to a cap, and the line
    # says what was underneath.
    from worker import runtime as runtime_module

    pauses: list[float] = []

    async def pause(self: Runtime, seconds: float) -> None:
        pauses.append(seconds)

    monkeypatch.setattr(Runtime, "_pause", pause)
    queue = FailingQueue(accepts=["fail"] * 8 + ["empty", "fail", "fail"], checks=[])
    runtime = Runtime(
        ScriptedHandler(None, {}),  # type: ignore[arg-type]
        queue,  # type: ignore[arg-type]
        concurrency=1,
        retry=RetryPolicy.no_waiting(),
        lock_duration=60,
        session_idle=0.05,
        shutdown_grace=1,
    )
    with structlog.testing.capture_logs() as logs:
        asyncio.run(asyncio.wait_for(runtime.run(drain=True), timeout=10))
    cap = runtime_module.ACCEPT_RETRY_MAX_SECONDS
    failed = [entry for entry in logs if entry["event"] == "session_accept_failed"]
    # An accept that works (finding nothing) starts the waits over.
    assert [entry["retry_in"] for entry in failed] == [min(cap, 2.0**n) for n in range(8)] + [1, 2]
    assert set(pauses) >= {entry["retry_in"] for entry in failed}
    assert failed[0]["error"].startswith("TransientError at ")
    assert failed[0]["error"].endswith("from ConnectionRefusedError ECONNREFUSED")


def test_a_pause_cancelled_as_the_stop_arrives_ends_cancelled() -> None:
    # Before Python 3.12, asyncio.wait_for hands back the inner result when a cancellation
    # arrives as the inner wait ends (CPython gh-86296): a pause cancelled in the same
    # moment as the stop returned as if it had run its course.
    async def main() -> None:
        runtime = Runtime(
            ScriptedHandler(None, {}),  # type: ignore[arg-type]
            FailingQueue(accepts=[], checks=[]),  # type: ignore[arg-type]
            concurrency=1,
            retry=RetryPolicy.no_waiting(),
            lock_duration=60,
            session_idle=0.05,
            shutdown_grace=1,
        )
        pause = asyncio.create_task(runtime._pause(30))
        await asyncio.sleep(0)  # the pause is waiting
        runtime.stop()
        pause.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pause

    asyncio.run(asyncio.wait_for(main(), timeout=10))


def on_queue_clock(
    queue: FailingQueue, monkeypatch: pytest.MonkeyPatch, give_up: float, **settings: Any
) -> tuple[Runtime, list[float], list[str]]:
    """A runtime on `queue` whose pauses pass on the queue's clock: the runtime, the pauses
    and what `on_stop` heard."""
    pauses: list[float] = []
    stops: list[str] = []

    async def pause(self: Runtime, seconds: float) -> None:
        pauses.append(seconds)
        queue.clock += seconds

    monkeypatch.setattr(Runtime, "_pause", pause)
    monkeypatch.setattr(Runtime, "_now", lambda self: queue.clock)
    runtime = runtime_for(
        ScriptedHandler(None, {b"ok": ["done"]}),  # type: ignore[arg-type]
        queue,
        drain_give_up=give_up,
        on_stop=lambda: stops.append("stop"),
        **settings,
    )
    return runtime, pauses, stops


class GaveUp(NamedTuple):
    """How a drain on a queue clock ended: its `drain_gave_up` line, DrainGaveUp's text,
    every line logged, the runtime's pauses and what `on_stop` heard."""

    line: dict[str, Any]
    text: str
    logs: list[dict[str, Any]]
    pauses: list[float]
    stops: list[str]


def drained_until_it_gives_up(queue: FailingQueue, monkeypatch: pytest.MonkeyPatch) -> GaveUp:
    """Drain `queue` with a give-up time of 8 s, which it must reach."""
    runtime, pauses, stops = on_queue_clock(queue, monkeypatch, give_up=8.0)
    with structlog.testing.capture_logs() as logs, pytest.raises(DrainGaveUp) as raised:
        asyncio.run(asyncio.wait_for(runtime.run(drain=True), timeout=10))
    [line] = [entry for entry in logs if entry["event"] == "drain_gave_up"]
    return GaveUp(line, str(raised.value), logs, pauses, stops)


def test_a_drain_whose_queue_fails_every_call_gives_up_and_raises_drain_gave_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A batch job's drain cannot learn that an unreachable queue is empty: it retried for
    # ever. Once a kind of call has failed every time for the give-up time, it gives up at
    # that kind's next failure (an accept's wait is cut to what is left of its time), and
    # stops as on SIGTERM (readiness hears of it once).
    queue = FailingQueue(accepts=["fail"] * 100, checks=["fail"] * 100)
    ended = drained_until_it_gives_up(queue, monkeypatch)
    # Checks pause a second, accepts 1, 2, 4, ... s; each kind timed from its own first
    # failure, and no accept waits past its give-up time.
    assert queue.calls == [
        ("drained?", 0.0),
        ("accept", 1.0),
        ("drained?", 2.0),
        ("accept", 3.0),
        ("drained?", 5.0),
        ("accept", 6.0),  # its 4 s cut to the 3 left of the accepts' 8
        ("drained?", 9.0),
    ]
    assert ended.pauses == [1.0, 1.0, 1.0, 2.0, 1.0, 3.0, 0.0]
    gave_up = ended.line
    assert gave_up["log_level"] == "error" and gave_up["failing_seconds"] == 9.0
    assert gave_up["call"] == "empty-queue check"
    assert gave_up["error"].endswith("from ConnectionRefusedError ECONNREFUSED")
    assert ended.text == (
        "every empty-queue check failed for 9 s while draining "
        f"(its last error: {gave_up['error']})"
    )
    assert ended.stops == ["stop"]
    assert [entry["event"] for entry in ended.logs][-1] == "worker_stopped"


def test_a_drain_whose_accepts_all_fail_gives_up_while_its_checks_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Service Bus's counts come over HTTPS, its sessions over AMQP: with only the latter
    # blocked, every check said "not yet", which started the give-up time over, and the
    # drain retried its accepts for ever.
    queue = FailingQueue(accepts=["fail"] * 100, checks=["not yet"] * 100)
    ended = drained_until_it_gives_up(queue, monkeypatch)
    assert (ended.line["call"], ended.line["failing_seconds"]) == ("session accept", 8.0)
    assert ended.text.startswith("every session accept failed for 8 s while draining")
    assert [at for call, at in queue.calls if call == "accept"] == [0.0, 1.0, 3.0, 7.0, 8.0]
    assert [at for call, at in queue.calls if call == "drained?"] == [0.0, 1.0, 3.0, 7.0, 8.0]


def test_a_drain_whose_receives_all_fail_gives_up_though_its_accepts_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A session accepted, its receive failing, the session let go: each accept that worked
    # (or another session worker's that found nothing) started the give-up time over, and
    # the drain looped for ever, five sessions a second. The receives are now timed on
    # their own, and each failure in a row waits twice as long before the next accept, the
    # session let go first.
    accepts = ["session", "empty"] * 50
    queue = FailingQueue(accepts=accepts, checks=["not yet"] * 100, receives=["fail"] * 100)
    ended = drained_until_it_gives_up(queue, monkeypatch)
    assert (ended.line["call"], ended.line["failing_seconds"]) == ("receive", 8.1)
    assert ended.text.startswith("every receive failed for 8 s while draining")
    failed = [entry for entry in ended.logs if entry["event"] == "session_failed"]
    # Doubling from 0.2 s, the last wait cut to what is left of the 8 s.
    assert [round(entry["retry_in"], 2) for entry in failed] == [0.2, 0.4, 0.8, 1.6, 3.2, 1.55, 0]
    assert all(entry["error"].endswith("ECONNREFUSED") for entry in failed)
    # Each session closed as its receive failed: the wait comes after, not holding it.
    held = [(call, at) for call, at in queue.calls if call in ("receive", "close")]
    assert held == [(call, at) for _, at in held[::2] for call in ("receive", "close")]
    assert len(held) == 2 * len(failed)


@pytest.mark.parametrize(
    ("accepts", "checks", "receives"),
    [
        (["fail", "fail", "fail", "empty"] + ["fail"] * 100, ["not yet"] * 7 + ["drained"], []),
        (["empty"] * 100, ["fail"] * 5 + ["not yet"] + ["fail"] * 5 + ["drained"], []),
        (["session"] * 100, ["not yet"] * 100, ["fail"] * 5 + ["none"] + ["fail"] * 5 + [""]),
        (["fail", "fail", "session", "fail", "fail"], ["fail"] * 6 + ["drained"], ["message"]),
    ],
    ids=[
        "an accept that answers",
        "a check that answers",
        "a receive that answers",
        "a message delivered, every kind",
    ],
)
def test_a_queue_call_that_works_starts_the_drains_give_up_time_over(
    monkeypatch: pytest.MonkeyPatch, accepts: list[str], checks: list[str], receives: list[str]
) -> None:
    # Failures on both sides of one call of their kind that worked (or of a message
    # delivered): longer than the give-up time in all, never as long in a row.
    queue = FailingQueue(accepts, checks, tuple(receives))
    runtime, _, stops = on_queue_clock(queue, monkeypatch, give_up=8.0)
    with structlog.testing.capture_logs() as logs:
        stats = asyncio.run(asyncio.wait_for(runtime.run(drain=True), timeout=10))
    assert "drain_gave_up" not in [entry["event"] for entry in logs]
    assert stats.completed == receives.count("message") and stops == ["stop"]
    assert queue.clock > 8.0 and not queue.checks


def test_a_drain_stopped_by_a_signal_while_its_queue_fails_exits_as_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A SIGTERM is the run's end: a check failing after it, even at the give-up time, does
    # not turn it into a failure, and no call follows it.
    queue = FailingQueue(accepts=["fail"] * 100, checks=["fail"] * 100)
    runtime, _, stops = on_queue_clock(queue, monkeypatch, give_up=8.0)
    original = queue.is_drained

    async def signalled_at_the_give_up_time() -> bool:
        if queue.clock >= 8.0:
            runtime.stop()
        return await original()

    queue.is_drained = signalled_at_the_give_up_time  # type: ignore[method-assign]
    with structlog.testing.capture_logs() as logs:
        asyncio.run(asyncio.wait_for(runtime.run(drain=True), timeout=10))
    assert "drain_gave_up" not in [entry["event"] for entry in logs]
    assert queue.calls[-1] == ("drained?", 9.0) and stops == ["stop"]


def test_without_drain_a_failing_queue_is_tried_past_the_give_up_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A long-running worker waits out an outage however long it lasts (readiness says so).
    queue = FailingQueue(accepts=["fail"] * 12, checks=[])
    runtime, pauses, stops = on_queue_clock(queue, monkeypatch, give_up=10.0)
    original = queue.accept_session

    async def accept_until_played(max_wait: float) -> None:
        if not queue.accepts:
            runtime.stop()
        await original(max_wait)

    queue.accept_session = accept_until_played  # type: ignore[method-assign]
    with structlog.testing.capture_logs() as logs:
        asyncio.run(asyncio.wait_for(runtime.run(), timeout=10))
    assert "drain_gave_up" not in [entry["event"] for entry in logs]
    assert pauses == [min(60.0, 2.0**n) for n in range(12)]  # no wait cut short either
    assert len(queue.calls) == 13 and stops == ["stop"]


def test_every_accept_and_receive_that_fails_is_counted_for_operators(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A queue that does not answer delivers nothing, so no turn metric moves and the
    # backlog alert (on queue waits observed at delivery) stays silent; this counter moves.
    from worker.metrics import Metrics
    from worker.operations import Operations

    metrics = Metrics()
    queue = FailingQueue(["fail", "session", "fail", "session"], [], ("fail", "message"))
    runtime, _, _ = on_queue_clock(queue, monkeypatch, give_up=60.0, observer=Operations(metrics))
    stats = asyncio.run(asyncio.wait_for(runtime.run(drain=True), timeout=10))
    assert stats.completed == 1
    assert metrics.registry.get_sample_value("export_worker_queue_errors_total") == 3
