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
    Unreachable,
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


# -- bounds, exactly ------------------------------------------------------------------------
def test_each_liveness_bound_is_inclusive_and_the_verdicts_say_how_far_they_are() -> None:
    def at(created: float, now: float) -> tuple[str, object]:
        verdict = liveness_verdict(LivenessState(created_at=created), now, BOUNDS)
        return verdict.status, verdict.detail["seconds_since_created"]

    assert at(5.0, 65.0) == ("starting", 60.0)
    assert at(5.0, 65.5) == ("not_started", 60.5)

    turn = started(last_progress_at=700.0, turns_started_at=(100.0,))
    assert liveness_verdict(turn, 700.0, BOUNDS).status == "progressing"  # exactly 600 s
    assert liveness_verdict(turn, 700.5, BOUNDS).detail == {"oldest_turn_seconds": 600.5}

    wait = started(last_progress_at=160.0, waits=((120.0, 40.0),))
    assert liveness_verdict(wait, 165.0, BOUNDS).status == "progressing"  # 40 + 5 exactly
    overrun = liveness_verdict(wait, 165.25, BOUNDS)
    assert overrun.body() == {
        "status": "wait_overrun",
        "wait_seconds": 45.25,
        "wait_bound_seconds": 40.0,
    }

    assert liveness_verdict(started(last_progress_at=100.0), 130.0, BOUNDS).ok  # 30 s exactly


def test_the_default_bounds_are_the_runbooks() -> None:
    # docs/operations.md: start_seconds 120, stall_seconds 120, wait_slack_seconds 30; the
    # runtime passes MAX_LOCK_RENEWAL_SECONDS as max_turn_seconds (an hour by default).
    assert LivenessBounds() == LivenessBounds(
        start_seconds=120.0, stall_seconds=120.0, wait_slack_seconds=30.0, max_turn_seconds=3600.0
    )


def test_the_check_runs_at_most_every_ten_seconds_by_default() -> None:
    clock = FakeClock()
    check = Check()
    ready = Readiness(check, clock=clock)

    async def main() -> None:
        ready.opened()
        assert (await ready.verdict()).ok and check.calls == 1
        clock.advance(9.5)
        assert (await ready.verdict()).ok and check.calls == 1
        clock.advance(0.5)
        assert (await ready.verdict()).ok and check.calls == 2

    asyncio.run(main())


def test_an_unreachable_dependency_is_named_with_how_long_ago_it_was_checked() -> None:
    clock = FakeClock()
    ready = Readiness(clock=clock, check_every=10)

    async def main() -> None:
        # The check often needs the opened adapters: opened() brings it.
        ready.opened(Check(Unreachable("blobs", "TimeoutError")))
        failed = await ready.verdict()
        assert ready.state() == ReadinessState(
            opened=True, checked_at=1000.0, check_error="TimeoutError", dependency="blobs"
        )
        assert failed.body()["dependency"] == "blobs"
        clock.advance(2.5)
        assert (await ready.verdict()).body() == {
            "status": "unreachable",
            "error": "TimeoutError",
            "checked_ago": 2.5,
            "dependency": "blobs",
        }

    asyncio.run(main())
    never_checked = ReadinessState(opened=True, check_error="ConnectionError")
    assert readiness_verdict(never_checked, 50.0).detail["checked_ago"] == 0.0


def test_busy_and_idle_are_healthy_and_unreachable_is_not() -> None:
    busy = liveness_verdict(
        started(last_progress_at=100.0, turns_started_at=(100.0,)), 500.0, BOUNDS
    )
    idle = liveness_verdict(started(last_progress_at=100.0, waits=((120.0, 40.0),)), 164.0, BOUNDS)
    assert (busy.ok, busy.status) == (True, "busy")
    assert (idle.ok, idle.status) == (True, "idle")
    failed = readiness_verdict(ReadinessState(opened=True, check_error="OSError"), 0.0)
    assert (failed.ok, failed.status) == (False, "unreachable")


def test_every_number_a_verdict_shows_is_rounded_to_milliseconds() -> None:
    tiny = 0.0004  # lost in the rounding
    assert liveness_verdict(LivenessState(created_at=0.0), 1.0 + tiny, BOUNDS).detail == {
        "seconds_since_created": 1.0
    }
    progress = liveness_verdict(started(last_progress_at=100.0), 101.0 + tiny, BOUNDS)
    assert progress.detail["seconds_since_progress"] == 1.0
    turn = started(turns_started_at=(100.0,))
    assert liveness_verdict(turn, 701.0 + tiny, BOUNDS).detail == {"oldest_turn_seconds": 601.0}
    wait = started(waits=((120.0, 40.0),))
    assert liveness_verdict(wait, 166.0 + tiny, BOUNDS).detail["wait_seconds"] == 46.0
    checked = ReadinessState(opened=True, checked_at=10.0, check_error="OSError")
    assert (
        readiness_verdict(
            checked,
            11.0 + tiny,
        ).detail["checked_ago"]
        == 1.0
    )


def test_the_check_is_given_five_seconds_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    # docs/operations.md: "run at most every 10 s, 5 s timeout".
    given: list[float | None] = []
    timeout = asyncio.timeout

    def recording(delay: float | None) -> asyncio.Timeout:
        given.append(delay)
        return timeout(delay)

    monkeypatch.setattr(asyncio, "timeout", recording)
    ready = Readiness(Check(), clock=FakeClock())
    ready.opened()
    assert asyncio.run(ready.verdict()).ok and given == [5.0]


def test_a_check_cancelled_as_it_answers_ends_cancelled() -> None:
    # Before Python 3.12, asyncio.wait_for hands back the inner result when a cancellation
    # arrives as the inner call ends (CPython gh-86296): a probe cancelled as the check
    # answered recorded the answer and returned a verdict instead of ending cancelled.
    answered = asyncio.Event()

    async def check() -> None:
        await answered.wait()

    async def main() -> None:
        ready = Readiness(check, clock=FakeClock())
        ready.opened()
        probe = asyncio.create_task(ready.verdict())
        await asyncio.sleep(0)  # the check is waiting for its answer
        answered.set()
        probe.cancel()
        with pytest.raises(asyncio.CancelledError):
            await probe

    asyncio.run(asyncio.wait_for(main(), timeout=10))
