"""The runtime and the handler report every point of a message's life to the operations
observer: metrics by decision, outcome and reason, liveness, spans, and the readiness check."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace
from spans import traced, turn_spans

from handlers.errors import PermanentError, RetryableError
from worker.handler import TurnHandler
from worker.health import Liveness, Readiness, Unreachable
from worker.local.backend import open_local_backend
from worker.local.outbox import LocalOutbox
from worker.metrics import Metrics, Unexposed
from worker.operations import (
    READ_TIMEOUT_SECONDS,
    Operations,
    operations_endpoint,
    reachability_check,
)
from worker.ports import (
    Backend,
    LockLost,
    NotFound,
    QueueMessage,
    TransientError,
    note_failed_try,
)
from worker.retry_policy import RetryPolicy
from worker.runtime import Runtime
from worker.settings import Settings
from worker.testing.seeding import event_body, seed, seeding

PUBLIC = Path(__file__).resolve().parents[1] / "fixtures" / "public"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SENDER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{SENDER_SPAN}-01"


def headline() -> dict[str, Any]:
    return json.loads((PUBLIC / "headline.fixture.json").read_text())


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def runtime_for(handler: Any, backend: Backend, operations: Operations, **kw: Any) -> Runtime:
    return Runtime(
        handler,
        backend.queue,
        concurrency=2,
        retry=RetryPolicy.no_waiting(kw.pop("max_attempts", 3)),
        lock_duration=60,
        session_idle=0.05,
        shutdown_grace=kw.pop("shutdown_grace", 5),
        observer=operations,
    )


def drained(
    tmp_path: Path,
    operations: Operations,
    prepare: Callable[[Backend], Awaitable[None]],
    handler: Callable[[Backend], Any] | None = None,
) -> Backend:
    """Prepare a fresh local home, drain it with a real (or given) handler, close it."""

    async def main() -> Backend:
        home = tmp_path / "home"
        backend = open_local_backend(home, lock_duration=60)
        try:
            await prepare(backend)
            settings = Settings(env_file=None, home=home)
            chosen = (
                handler(backend) if handler else TurnHandler(backend, settings, observer=operations)
            )
            runtime = runtime_for(chosen, backend, operations)
            await asyncio.wait_for(runtime.run(drain=True), timeout=60)
        finally:
            await backend.close()
        return backend

    return asyncio.run(main())


def test_each_turn_is_counted_by_decision_with_its_handling_time_queue_wait_and_export(
    tmp_path: Path,
) -> None:
    fixture = headline()
    occurred = datetime.fromisoformat(fixture["events"][0]["occurred_at"].replace("Z", "+00:00"))
    metrics = Metrics()
    operations = Operations(metrics, wall_clock=lambda: occurred + timedelta(seconds=42))

    async def prepare(backend: Backend) -> None:
        await seed(seeding(backend), fixture)
        await backend.queue.send(b"not json", "conv_bad")  # dead-lettered schema_invalid

    drained(tmp_path, operations, prepare)
    assert sample(metrics, "export_worker_turns_total", decision="published") == 1
    assert sample(metrics, "export_worker_dead_letters_total", reason="schema_invalid") == 1
    duration = "export_worker_turn_duration_seconds_count"
    assert sample(metrics, duration, outcome="completed") == 1
    assert sample(metrics, duration, outcome="dead_lettered") == 1
    assert sample(metrics, "export_worker_queue_wait_seconds_count") == 2
    assert sample(metrics, "export_worker_exports_total", format="csv") == 1
    assert sample(metrics, "export_worker_export_rows_sum") == 900
    assert sample(metrics, "export_worker_export_bytes_sum") > 0
    assert sample(metrics, "export_worker_end_to_end_seconds_sum") == 42
    assert sample(metrics, "export_worker_sessions_held") == 0  # every session released
    assert operations.liveness.state().started_at is not None
    assert operations.liveness.verdict().ok


class Scripted:
    """A handler whose outcomes per body are scripted: an exception, or a record."""

    def __init__(self, script: dict[bytes, list[Any]]) -> None:
        self.script = script

    async def handle(self, message: QueueMessage) -> Any:
        outcome = self.script[message.body].pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return type("Record", (), {"decision": outcome})()


def test_retries_lost_locks_and_dead_letters_are_counted_and_on_their_spans(
    tmp_path: Path,
) -> None:
    metrics = Metrics()
    operations, exporter, provider = traced(metrics)
    script: dict[bytes, list[Any]] = {
        b"flaky": [RetryableError("artifact_missing", "not yet"), "no_request"],
        b"stolen": [LockLost("the session moved on"), "no_request"],  # then redelivered
        b"broken": [PermanentError("schema_invalid", "turn_id: missing")],
    }

    async def prepare(backend: Backend) -> None:
        for n, body in enumerate(script):
            await backend.queue.send(body, f"s{n}")

    drained(tmp_path, operations, prepare, handler=lambda _: Scripted(script))
    duration = "export_worker_turn_duration_seconds_count"
    assert sample(metrics, "export_worker_retries_total") == 1
    assert sample(metrics, duration, outcome="retried") == 1
    assert sample(metrics, "export_worker_turns_total", decision="no_request") == 2
    assert sample(metrics, "export_worker_dead_letters_total", reason="schema_invalid") == 1
    assert sample(metrics, "export_worker_dead_letters_total", reason="handler_error") == 0
    assert sample(metrics, "export_worker_lock_lost_total") == 1
    assert sample(metrics, duration, outcome="lock_lost") == 1
    outcomes = sorted(
        (a["export_worker.outcome"], a.get("export_worker.dead_letter_reason"))
        for a in turn_spans(exporter)
    )
    assert outcomes == [
        ("completed", None),
        ("completed", None),
        ("dead_lettered", "schema_invalid"),
        ("lock_lost", None),
        ("retried", None),
    ]
    provider.shutdown()


def test_a_turn_past_the_shutdown_grace_is_counted_as_abandoned(tmp_path: Path) -> None:
    metrics = Metrics()
    operations, exporter, provider = traced(metrics)
    started = asyncio.Event()

    class Slow:
        async def handle(self, message: QueueMessage) -> Any:
            started.set()
            await asyncio.Event().wait()  # never finishes on its own

    async def main() -> None:
        backend = open_local_backend(tmp_path / "home", lock_duration=60)
        await backend.queue.send(b"slow", "s")
        runtime = runtime_for(Slow(), backend, operations, shutdown_grace=0)
        task = asyncio.create_task(runtime.run())
        await asyncio.wait_for(started.wait(), timeout=10)
        runtime.stop()
        await asyncio.wait_for(task, timeout=10)
        await backend.close()

    asyncio.run(main())
    duration = "export_worker_turn_duration_seconds_count"
    assert sample(metrics, duration, outcome="abandoned") == 1
    assert sample(metrics, duration, outcome="completed") == 0
    assert [a["export_worker.outcome"] for a in turn_spans(exporter)] == ["abandoned"]
    provider.shutdown()


def test_a_session_taken_or_let_go_is_progress_for_liveness() -> None:
    now = [100.0]
    operations = Operations(Unexposed(), Liveness(lambda: now[0]))
    operations.loop_started()
    now[0] = 130.0
    operations.session_acquired()
    assert operations.liveness.state().last_progress_at == 130.0
    now[0] = 170.0
    operations.session_released()
    assert operations.liveness.state().last_progress_at == 170.0


def test_a_session_lock_lost_between_deliveries_is_counted() -> None:
    metrics = Metrics()
    Operations(metrics).session_lock_lost()
    assert sample(metrics, "export_worker_lock_lost_total") == 1


def test_a_turn_continues_the_senders_trace_with_child_steps_and_its_event_carries_the_context(
    tmp_path: Path,
) -> None:
    fixture = headline()
    operations, exporter, provider = traced(Metrics())
    event = fixture["events"][0]

    async def prepare(backend: Backend) -> None:
        await seed(seeding(backend), {**fixture, "events": []})
        await backend.queue.send(
            event_body(event),
            event["conversation_id"],
            message_id=event["event_id"],
            properties={"traceparent": TRACEPARENT},
        )

    drained(tmp_path, operations, prepare)
    spans = exporter.get_finished_spans()
    [turn] = [s for s in spans if s.name == "turn"]
    assert f"{turn.context.trace_id:032x}" == TRACE_ID
    assert f"{turn.parent.span_id:016x}" == SENDER_SPAN
    attributes = dict(turn.attributes)
    assert attributes["export_worker.conversation_id"] == event["conversation_id"]
    assert attributes["export_worker.turn_id"] == event["turn_id"]
    assert attributes["export_worker.event_id"] == event["event_id"]
    assert attributes["export_worker.decision"] == "published"
    assert attributes["export_worker.outcome"] == "completed"
    export_id = attributes["export_worker.export_id"]
    turn_id = turn.context.span_id
    children = [s for s in spans if s.parent is not None and s.parent.span_id == turn_id]
    names = [s.name for s in children]
    assert {"read", "fetch", "upload", "publish"} <= set(names)
    assert sorted(s.attributes["export_worker.source"] for s in children if s.name == "read") == [
        "conversation",
        "ledger",
        "messages",
    ]
    [publish] = [s for s in children if s.name == "publish"]
    sent_with = f"00-{TRACE_ID}-{publish.context.span_id:016x}-01"

    async def properties() -> dict[str, Any]:
        outbox = LocalOutbox(tmp_path / "home" / "worker.db")
        try:
            return await outbox.sent_properties(str(export_id))
        finally:
            await outbox.close()

    assert asyncio.run(properties()) == {
        "type": "export.published",
        "version": 1,
        "conversation_id": event["conversation_id"],
        "format": "csv",
        "traceparent": sent_with,
        "Diagnostic-Id": sent_with,
    }
    provider.shutdown()


# ---- readiness ------------------------------------------------------------------------
class Failing:
    """Wraps an adapter; the named calls raise `error`."""

    def __init__(self, inner: Any, error: Exception, *names: str) -> None:
        self._inner, self._error, self._names = inner, error, names

    def __getattr__(self, name: str) -> Any:
        if name not in self._names:
            return getattr(self._inner, name)
        error = self._error

        if name == "history":

            async def stream(*args: Any, **kwargs: Any) -> Any:
                raise error
                yield  # an async generator, like the port's

            return stream

        async def call(*args: Any, **kwargs: Any) -> Any:
            raise error

        return call


def check_with(
    tmp_path: Path,
    change: Callable[[Backend], Backend],
    queue_error: Any = None,
    read_timeout: float = READ_TIMEOUT_SECONDS,
) -> Any:
    """Run the reachability check on a local backend changed by `change`; its error or None.
    The check is given twice its reads' bound: a read that outlasts it fails the test."""

    async def main() -> Any:
        backend = open_local_backend(tmp_path / "home", lock_duration=60)
        operations = Operations()
        if queue_error is not None:
            with pytest.raises(type(queue_error)), operations.waiting(1.0):
                raise queue_error
        try:
            settings = Settings(env_file=None)
            check = reachability_check(
                change(backend), settings, operations, read_timeout=read_timeout
            )
            await asyncio.wait_for(check(), 2 * read_timeout)
        except Unreachable as exc:
            return exc.dependency, exc.error
        finally:
            await backend.close()
        return None

    return asyncio.run(main())


def replaced(**ports: Any) -> Callable[[Backend], Backend]:
    def change(backend: Backend) -> Backend:
        return replace(backend, **{k: v(backend) for k, v in ports.items()})

    return change


def test_an_open_local_backend_is_reachable(tmp_path: Path) -> None:
    assert check_with(tmp_path, lambda b: b) is None


@pytest.mark.parametrize(
    ("port", "call", "error", "expected"),
    [
        ("store", "get_conversation", TransientError("503"), ("store", "TransientError")),
        ("store", "history", PermissionError("denied"), ("store", "PermissionError")),
        # An empty partition query answers NotFound only when the container is missing.
        ("ledger", "list_turns", NotFound("no container"), ("ledger", "NotFound")),
        ("blobs", "exists", TransientError("reset"), ("blobs", "TransientError")),
    ],
)
def test_a_dependency_that_fails_its_read_is_named_with_the_errors_type(
    tmp_path: Path, port: str, call: str, error: Exception, expected: tuple[str, str]
) -> None:
    change = replaced(**{port: lambda b: Failing(getattr(b, port), error, call)})
    assert check_with(tmp_path, change) == expected


def test_each_read_is_bounded_inside_the_whole_checks_bound_as_documented() -> None:
    check_bound = inspect.signature(Readiness).parameters["check_timeout"].default
    assert (READ_TIMEOUT_SECONDS, check_bound) == (4.0, 5.0)  # docs/operations.md
    text = " ".join(
        (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text().split()
    )
    assert "each within 4 s" in text and "inside the check's 5 s" in text


def test_a_read_cancelled_under_the_check_is_not_taken_for_an_answer(tmp_path: Path) -> None:
    cancelled = replaced(blobs=lambda b: Failing(b.blobs, asyncio.CancelledError(), "exists"))
    with pytest.raises(asyncio.CancelledError):
        check_with(tmp_path, cancelled)


def test_a_dependency_slower_than_its_read_bound_is_named_not_the_whole_check(
    tmp_path: Path,
) -> None:
    # A check that outlasted Readiness's bound said only TimeoutError, with no dependency.
    class Slow:
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

        async def list_turns(self, conversation_id: str) -> Any:
            await asyncio.sleep(5)

    slow = replaced(ledger=lambda b: Slow(b.ledger))
    assert check_with(tmp_path, slow, read_timeout=0.1) == ("ledger", "TimeoutError")


def test_a_missing_conversation_is_the_normal_answer_of_a_reachable_store(tmp_path: Path) -> None:
    change = replaced(store=lambda b: Failing(b.store, NotFound("none"), "get_conversation"))
    assert check_with(tmp_path, change) is None


def test_the_queue_is_unreachable_while_the_receive_loops_last_wait_failed(tmp_path: Path) -> None:
    assert check_with(tmp_path, lambda b: b, TransientError("amqp detached")) == (
        "queue",
        "TransientError",
    )
    # A lost lock is an answer from the queue, not a failure to reach it.
    assert check_with(tmp_path, lambda b: b, LockLost("taken")) is None


def test_the_queues_failure_says_how_the_adapters_last_try_failed() -> None:
    # A namespace refusing connections read "queue: TransientError", as a slow one does.
    operations = Operations()
    with pytest.raises(TransientError), operations.waiting(1.0):
        note_failed_try("connection refused")
        raise TransientError("Service Bus: ServiceBusConnectionError (connection refused)")
    assert operations.queue_error == "TransientError (its last try: connection refused)"
    with pytest.raises(TransientError), operations.waiting(1.0):
        raise TransientError("the next wait noted no try")
    assert operations.queue_error == "TransientError"


@pytest.mark.parametrize("answer", [None, LockLost("the session is someone else's")])
def test_a_wait_that_answers_clears_the_queues_failure(answer: LockLost | None) -> None:
    # A message, nothing, or LockLost (the lock is someone else's): each is an answer.
    metrics = Metrics()
    operations = Operations(metrics)
    with pytest.raises(TransientError), operations.waiting(1.0):
        raise TransientError("timeout")
    assert operations.queue_error == "TransientError"
    passed_on = pytest.raises(LockLost) if answer else contextlib.nullcontext()
    with passed_on, operations.waiting(1.0):
        if answer is not None:
            raise answer
    assert operations.queue_error is None
    assert operations.liveness.state().waits == ()
    # Only the failure is counted: the turn metrics see nothing while the queue is down.
    assert sample(metrics, "export_worker_queue_errors_total") == 1


def test_a_deliverys_handling_time_is_its_clocks_difference() -> None:
    now = [1000.0]
    metrics = Metrics()
    operations = Operations(metrics, clock=lambda: now[0])
    message = QueueMessage(
        sequence_number=1,
        message_id="m",
        session_id="s",
        body=b"{}",
        delivery_count=1,
        enqueued_at="2026-12-05T10:00:00Z",
    )
    with operations.handling(message) as handling:
        now[0] = 1002.5
        handling.handled()
        now[0] = 1010.0  # settling is not handling
        handling.completed("published")
    assert sample(metrics, "export_worker_turn_duration_seconds_sum", outcome="completed") == 2.5


@pytest.mark.parametrize(("sdk_timeout", "slack"), [(10.0, 30.0), (15.0, 30.0), (40.0, 80.0)])
def test_liveness_bounds_follow_the_sdk_timeout_and_the_lock_renewal_cap(
    sdk_timeout: float, slack: float
) -> None:
    settings = Settings(
        env_file=None, sdk_timeout_seconds=sdk_timeout, max_lock_renewal_seconds=1234
    )
    bounds = Operations.from_settings(settings, environ={}).liveness.bounds
    assert bounds.wait_slack_seconds == slack
    assert bounds.max_turn_seconds == 1234


def test_the_observer_is_the_runtimes_only_link_to_prometheus() -> None:
    source = (Path(__file__).resolve().parents[2] / "worker" / "runtime.py").read_text()
    handler = (Path(__file__).resolve().parents[2] / "worker" / "handler.py").read_text()
    for text in (source, handler):
        assert "prometheus" not in text and "opentelemetry" not in text
        assert "worker.metrics" not in text and "worker.health" not in text


def port_settings(port: int) -> Settings:
    return Settings(env_file=None, http_port=port)


def test_metrics_are_kept_only_when_the_endpoint_serves_them() -> None:
    served = Operations.from_settings(port_settings(9109), environ={})
    unserved = Operations.from_settings(port_settings(0), environ={})
    assert isinstance(served.metrics, Metrics)
    assert isinstance(unserved.metrics, Unexposed)


def test_serving_metrics_that_were_not_kept_is_refused() -> None:
    settings = port_settings(9109)  # refused before anything listens
    operations = Operations(Unexposed())

    async def serve() -> None:
        async with operations_endpoint(settings, operations, Readiness()):
            pass

    with pytest.raises(TypeError):
        asyncio.run(serve())


def test_a_dependency_read_that_failed_says_how_its_adapters_last_try_failed(
    tmp_path: Path,
) -> None:
    # An adapter that retries on its own (Blob Storage's SDK) notes how each try failed; the
    # read's bound ends it mid-backoff, and "TimeoutError" alone read as a slow service.
    class Retrying:
        def __init__(self, inner: Any, backoff: float = 5.0) -> None:
            self._inner, self._backoff = inner, backoff

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

        async def exists(self, path: str) -> bool:
            note_failed_try("connection refused")
            await asyncio.sleep(self._backoff)
            return False

    retrying = replaced(blobs=lambda b: Retrying(b.blobs))
    assert check_with(tmp_path, retrying, read_timeout=0.1) == (
        "blobs",
        "TimeoutError (its last try: connection refused)",
    )
    change = replaced(
        store=lambda b: Failing(b.store, TransientError("x"), "get_conversation"),
        blobs=lambda b: Retrying(b.blobs, backoff=0),
    )
    # each read says only its own tries: the store's failure is not the blobs' refusal
    assert check_with(tmp_path, change) == ("store", "TransientError")
