"""Every port method declares its effect once; call retries and fault injection obey it."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Protocol

import pytest

from worker import ports
from worker.call_retries import retried
from worker.ports import Effect, TransientError, UndeclaredPortCall, declared_calls, port_call
from worker.retry_policy import RetryPolicy
from worker.testing.faults import FaultPlan, faulty_port
from worker.testing.seeding import PublishedEvents, SeedableBlobs, SeedableStore

PORT_PROTOCOLS = [
    ports.Session,
    ports.Consumer,
    ports.Sender,
    ports.DeadLetterOperations,
    ports.Queue,
    ports.ConversationStore,
    ports.Ledger,
    ports.BlobUpload,
    ports.Blobs,
    ports.Publisher,
    SeedableStore,
    SeedableBlobs,
    PublishedEvents,
]


@pytest.mark.parametrize("role", PORT_PROTOCOLS, ids=lambda role: role.__name__)
def test_every_port_method_declares_its_effect(role: type) -> None:
    calls = declared_calls(role)  # raises UndeclaredPortCall for a method without one
    public = {name for name in dir(role) if not name.startswith("_")} - {"session_id"}
    assert set(calls) == public


def test_what_is_repeated_and_what_may_fail_after_taking_effect_is_pinned() -> None:
    """Changing a method's effect changes retries and faults: it must be a visible decision."""
    calls = {
        f"{role.__name__}.{name}": call
        for role in PORT_PROTOCOLS
        for name, call in declared_calls(role).items()
    }
    never_repeated = {name for name, call in calls.items() if not call.effect.repeatable}
    writes = {name for name, call in calls.items() if call.effect.writes}
    assert {n.split(".")[1] for n in never_repeated} == {
        "close",
        "abort",
        "write",
        "commit",
        "replay",
        "purge",
    }
    assert {n.split(".")[1] for n in writes} == {
        "complete",
        "abandon",
        "dead_letter",
        "renew_lock",
        "send",
        "replay",
        "purge",
        "create",
        "put",
        "put_conversation",
        "put_message",
        "publish",
        "write",
        "commit",
    }
    assert calls["Consumer.accept_session"].opens is ports.Session
    assert calls["Blobs.upload"].opens is ports.BlobUpload


class Probe(Protocol):
    @port_call(Effect.READ)
    async def look(self) -> int: ...

    @port_call(Effect.ONCE)
    async def fire(self) -> None: ...

    @port_call(Effect.RELEASE)
    async def close(self) -> None: ...


class Unclear(Protocol):
    @port_call(Effect.READ)
    async def look(self) -> int: ...

    async def poke(self) -> None: ...


class FlakyProbe:
    """Fails each call's first try with a transient error; counts the tries."""

    def __init__(self) -> None:
        self.tries: dict[str, int] = {}

    async def _flaky(self, name: str) -> None:
        self.tries[name] = self.tries.get(name, 0) + 1
        if self.tries[name] == 1:
            raise TransientError("503")

    async def look(self) -> int:
        await self._flaky("look")
        return 7

    async def fire(self) -> None:
        await self._flaky("fire")

    async def close(self) -> None:
        await self._flaky("close")

    async def poke(self) -> None:
        await self._flaky("poke")


def test_a_method_without_a_declaration_is_refused_by_both_wrappers() -> None:
    with pytest.raises(UndeclaredPortCall, match=r"Unclear\.poke"):
        declared_calls(Unclear)
    with pytest.raises(UndeclaredPortCall):
        retried(FlakyProbe(), RetryPolicy.no_waiting(call_attempts=3), Unclear)
    with pytest.raises(UndeclaredPortCall):
        faulty_port(FlakyProbe(), FaultPlan(0.5, 1), "probe", Unclear)


def test_retries_repeat_only_what_is_declared_repeatable() -> None:
    probe = FlakyProbe()
    port = retried(probe, RetryPolicy.no_waiting(call_attempts=3), Probe)

    async def main() -> None:
        assert await port.look() == 7
        with pytest.raises(TransientError):
            await port.fire()
        with pytest.raises(TransientError):
            await port.close()
        with pytest.raises(AttributeError):
            port.poke  # noqa: B018  # not a call of the role the port was wrapped for

    asyncio.run(main())
    assert probe.tries == {"look": 2, "fire": 1, "close": 1}


def test_a_policy_of_one_try_leaves_the_port_unwrapped() -> None:
    """`EXPORT_WORKER_CALL_ATTEMPTS=1`: every call goes straight to the adapter, no stand-in
    in between (still checked: a role with an undeclared method is refused all the same)."""
    probe = FlakyProbe()
    assert retried(probe, RetryPolicy.no_waiting(call_attempts=1), Probe) is probe
    with pytest.raises(UndeclaredPortCall):
        retried(probe, RetryPolicy.no_waiting(call_attempts=1), Unclear)


def test_faults_spare_releases_and_fail_writes_after_they_took_effect_too() -> None:
    class Quiet:
        def __init__(self) -> None:
            self.done: list[str] = []

        async def look(self) -> int:
            self.done.append("look")
            return 1

        async def fire(self) -> None:
            self.done.append("fire")

        async def close(self) -> None:
            self.done.append("close")

    quiet = Quiet()
    plan = FaultPlan(0.9, seed=5)
    port = faulty_port(quiet, plan, "probe", Probe)

    async def main() -> None:
        for _ in range(200):
            for call in (port.look, port.fire, port.close):
                with contextlib.suppress(TransientError):
                    await call()

    asyncio.run(main())
    assert quiet.done.count("close") == 200
    assert plan.injected["probe.fire:after"] > 0 and plan.injected["probe.fire:before"] > 0
    assert plan.injected["probe.look:before"] > 0 and "probe.look:after" not in plan.injected
    assert not any(key.startswith("probe.close") for key in plan.injected)


def test_a_seeded_plan_fails_the_same_calls_of_an_operation_however_calls_interleave() -> None:
    # Sessions run concurrently, so the order of calls is a matter of timing: across
    # operations, and within one (another session's write may start while this one's is
    # in flight). An operation's n-th call must fail, and how, whatever came between.
    def outcomes(order: list[tuple[str, str, str]]) -> dict[str, str]:
        plan = FaultPlan(0.5, seed=11)
        effects = {"a.get": Effect.READ, "b.put": Effect.IDEMPOTENT}
        seen: dict[str, str] = {}
        pending: dict[str, str] = {}
        for step, operation, call in order:
            try:
                if step == "start":
                    error = plan.before(operation, effects[operation])
                    if error is None:
                        seen[call] = "ok"
                    else:
                        pending[call] = error
                elif call in pending:  # the write took effect; its reply is lost
                    plan.after(operation, pending.pop(call))
            except TransientError as exc:
                seen[call] = f"{step}: {exc}"
        return seen

    reads = [("start", "a.get", f"get {n}") for n in range(40)]
    writes = [(step, "b.put", f"put {n}") for n in range(40) for step in ("start", "end")]
    apart = outcomes(reads + writes)
    # Reads between writes, and every write's reply back after the next write started.
    interleaved: list[tuple[str, str, str]] = []
    for n in range(40):
        interleaved += [reads[n], ("start", "b.put", f"put {n}")]
        if n:
            interleaved.append(("end", "b.put", f"put {n - 1}"))
    interleaved.append(("end", "b.put", "put 39"))
    assert outcomes(interleaved) == apart
    kinds = {text.split(":")[0] for text in apart.values()}
    assert kinds == {"ok", "start", "end"}  # failed before, after, and not at all


def test_enqueue_times_are_written_in_utc_with_z_and_read_back_as_ages() -> None:
    from datetime import UTC, datetime, timedelta, timezone

    from worker.ports.queue import seconds_since, utc_text

    now = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
    east = datetime(2026, 3, 1, 13, 0, 0, tzinfo=timezone(timedelta(hours=2)))
    assert utc_text(east) == "2026-03-01T11:00:00Z"
    assert seconds_since(utc_text(east), now) == 3600.0
    assert seconds_since("2026-03-01T11:59:30", now) == 30.0  # no offset: UTC
    assert seconds_since("2026-03-01T12:00:05+00:00", now) == 0.0  # a clock ahead of ours
    assert seconds_since("", now) is None
    assert seconds_since(None, now) is None
    assert seconds_since("yesterday", now) is None
