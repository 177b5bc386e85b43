"""Liveness and readiness rules, on an injected clock: no test waits."""

from __future__ import annotations

import asyncio

import pytest

from worker.health import (
    Liveness,
    LivenessBounds,
    LivenessState,
    Readiness,
    ReadinessState,
    liveness_verdict,
    readiness_verdict,
)

BOUNDS = LivenessBounds(
    start_seconds=60, stall_seconds=30, wait_slack_seconds=5, max_turn_seconds=600
)


class FakeClock:
    """Monotonic seconds that move only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def started(**fields: object) -> LivenessState:
    return LivenessState(created_at=0.0, started_at=10.0, **fields)  # type: ignore[arg-type]


# -- the pure rule ------------------------------------------------------------------------
def test_a_worker_is_alive_while_it_starts_within_the_start_bound() -> None:
    state = LivenessState(created_at=0.0)
    assert liveness_verdict(state, 59.0, BOUNDS).status == "starting"
    late = liveness_verdict(state, 61.0, BOUNDS)
    assert (late.ok, late.status) == (False, "not_started")


def test_recent_progress_is_alive() -> None:
    verdict = liveness_verdict(started(last_progress_at=100.0), 129.0, BOUNDS)
    assert (verdict.ok, verdict.status) == (True, "progressing")


def test_no_progress_and_nothing_in_flight_or_waiting_is_stalled() -> None:
    verdict = liveness_verdict(started(last_progress_at=100.0), 131.0, BOUNDS)
    assert (verdict.ok, verdict.status) == (False, "stalled")
    assert verdict.body() == {
        "status": "stalled",
        "seconds_since_progress": 31.0,
        "turns_in_flight": 0,
        "idle_waits": 0,
    }


def test_a_long_turn_within_its_bound_keeps_the_worker_alive_without_progress() -> None:
    state = started(last_progress_at=100.0, turns_started_at=(100.0,))
    assert liveness_verdict(state, 500.0, BOUNDS).status == "busy"


def test_a_turn_older_than_the_longest_allowed_is_hung() -> None:
    state = started(last_progress_at=700.0, turns_started_at=(100.0, 690.0))
    verdict = liveness_verdict(state, 701.0, BOUNDS)
    assert (verdict.ok, verdict.status) == (False, "turn_overdue")
    assert verdict.detail["oldest_turn_seconds"] == 601.0


def test_an_idle_wait_within_its_bound_is_normal_idling() -> None:
    state = started(last_progress_at=100.0, waits=((120.0, 40.0),))
    assert liveness_verdict(state, 164.0, BOUNDS).status == "idle"


def test_an_idle_wait_past_its_bound_and_slack_is_hung_even_with_recent_progress() -> None:
    state = started(last_progress_at=160.0, waits=((120.0, 40.0),))
    verdict = liveness_verdict(state, 166.0, BOUNDS)
    assert (verdict.ok, verdict.status) == (False, "wait_overrun")


def test_the_loop_start_counts_as_progress() -> None:
    assert liveness_verdict(started(), 39.0, BOUNDS).status == "progressing"
    assert liveness_verdict(started(), 41.0, BOUNDS).status == "stalled"


# -- the tracker the runtime ticks ----------------------------------------------------------
def test_the_tracker_records_turns_and_waits_while_they_last_and_their_end_as_progress() -> None:
    clock = FakeClock()
    live = Liveness(clock, BOUNDS)
    live.loop_started()
    with live.turn():
        clock.advance(100)
        with live.idle_wait(2.0):
            state = live.state()
            assert state.turns_started_at == (1000.0,) and state.waits == ((1100.0, 2.0),)
            assert live.verdict().status == "busy"
        assert live.state().last_progress_at == 1100.0
        clock.advance(50)
    assert live.state() == LivenessState(
        created_at=1000.0, started_at=1000.0, last_progress_at=1150.0
    )
    clock.advance(31)
    assert live.verdict().status == "stalled"


def test_the_tracker_forgets_a_turn_that_raised() -> None:
    clock = FakeClock()
    live = Liveness(clock, BOUNDS)
    live.loop_started()
    with pytest.raises(RuntimeError), live.turn():
        raise RuntimeError("boom")
    assert live.state().turns_started_at == ()


# -- readiness ------------------------------------------------------------------------------
def test_readiness_needs_open_adapters_and_ends_when_they_close() -> None:
    assert readiness_verdict(ReadinessState(), 0.0).status == "not_opened"
    assert readiness_verdict(ReadinessState(opened=True), 0.0).ok
    closed = readiness_verdict(ReadinessState(opened=True, closed=True), 0.0)
    assert (closed.ok, closed.status) == (False, "closed")


class Check:
    """A reachability check scripted to fail with the given exceptions, then pass."""

    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.calls = 0

    async def __call__(self) -> None:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)


def test_an_unreachable_dependency_is_not_ready_and_only_its_error_type_is_shown() -> None:
    clock = FakeClock()
    check = Check(ConnectionError("host secret.example refused"))
    ready = Readiness(check, clock=clock, check_every=10)

    async def main() -> None:
        assert (await ready.verdict()).status == "not_opened" and check.calls == 0
        ready.opened()
        failed = await ready.verdict()
        assert failed.body() == {
            "status": "unreachable",
            "error": "ConnectionError",
            "checked_ago": 0.0,
        }
        clock.advance(9)
        assert (await ready.verdict()).status == "unreachable" and check.calls == 1
        clock.advance(1)
        assert (await ready.verdict()).ok and check.calls == 2
        ready.closed()
        assert (await ready.verdict()).status == "closed" and check.calls == 2

    asyncio.run(main())


def test_a_check_that_does_not_answer_in_time_counts_as_unreachable() -> None:
    async def never() -> None:
        await asyncio.Event().wait()

    async def main() -> None:
        ready = Readiness(never, clock=FakeClock(), check_timeout=0.01)
        ready.opened()
        verdict = await ready.verdict()
        assert (verdict.status, verdict.detail["error"]) == ("unreachable", "TimeoutError")

    asyncio.run(main())


def test_without_a_check_open_adapters_are_ready() -> None:
    async def main() -> None:
        ready = Readiness()
        ready.opened()
        assert (await ready.verdict()).status == "ready"

    asyncio.run(main())
