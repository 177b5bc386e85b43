"""Transient faults on every port call: every turn still ends exactly once, with its decision.

The design (docs/contract/delivery.md: transient causes retry with backoff and are never
dead-lettered for a transient cause before `max_attempts`). At a 20% fault rate on every
call a published turn makes about 15 port calls per delivery, so a delivery succeeds with
probability
0.8**15 = 0.035: retrying whole deliveries alone would dead-letter 0.965**5 = 84% of the
turns at `max_attempts` 5 (and would need about 390 attempts to bring that under 1e-6).
So transient errors are absorbed where the Azure SDKs absorb them, per call:
`worker/call_retries.py` tries each port call again in place (`call_attempts`), and an upload
(whose chunks cannot be repeated) starts again whole from the spool. Only a call that
still fails fails the delivery, which the runtime retries with backoff up to
`max_attempts`. With `call_attempts` 6 a delivery fails when one of its ~15 calls fails 6
times running (15 x 0.2**6 = 1e-3) or its upload (a chunk and the commit: 1 - 0.8**2 = 0.36
per try) fails 6 times (0.36**6 = 2e-3): about 3e-3 per delivery, so a turn is spuriously
dead-lettered after 5 deliveries with probability about (3e-3)**5 = 2e-13. Writes fail half
of the time after they took effect, so every repeat also exercises idempotent publishing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from worker.backends import open_backend
from worker.call_retries import with_call_retries
from worker.handler import TurnHandler
from worker.local.backend import open_local_backend
from worker.ports import TransientError
from worker.retry_policy import RetryPolicy
from worker.runtime import Runtime
from worker.settings import Settings
from worker.testing.faults import FaultPlan, with_faults
from worker.testing.records import a_turn_record
from worker.testing.seeding import seed as load_fixture
from worker.testing.seeding import seeding
from worker.testing.settings import HarnessSettings

RATE = 0.2
CALL_ATTEMPTS = 6


@pytest.mark.parametrize("seed", [3, 4])
def test_twenty_percent_faults_on_every_call_lose_nothing_and_double_nothing(
    tmp_path: Path, seed: int
) -> None:
    from chaos_turns import generate
    from crash_harness import Home, Options, verify

    generated = generate(40, 8, seed, big_every=0)
    home = tmp_path / "home"
    policy = RetryPolicy.no_waiting(max_attempts=5, call_attempts=CALL_ATTEMPTS)
    settings = Settings(home=home, backoff_base_seconds=0, call_attempts=CALL_ATTEMPTS)

    async def main() -> FaultPlan:
        clean = open_local_backend(home, lock_duration=60)
        await load_fixture(seeding(clean), generated.fixture)
        await clean.close()
        plan = FaultPlan(RATE, seed)
        faulty = with_faults(open_local_backend(home, lock_duration=60), plan)
        backend = with_call_retries(faulty, policy)
        runtime = Runtime(
            TurnHandler(backend, settings),
            backend.queue,
            concurrency=4,
            retry=policy,
            lock_duration=60,
            session_idle=0.05,
            shutdown_grace=5,
        )
        try:
            await asyncio.wait_for(runtime.run(drain=True), timeout=120)
        finally:
            await backend.close()
        return plan

    plan = asyncio.run(main())
    # The faults really were everywhere, before and after writes took effect.
    assert plan.injected.total() >= 0.1 * plan.calls.total()
    for operation in ("ledger.put", "publisher.publish", "store.get_message", "blobs.read"):
        assert any(key.startswith(operation) for key in plan.injected), operation
    assert any(key.endswith(":after") for key in plan.injected)

    verdict = verify(Home(home, Options(turns=40, conversations=8, kills=0, seed=seed)), generated)
    assert verdict.problems == []
    assert (verdict.lost, verdict.duplicates) == (0, 0)
    assert verdict.dead_letters == verdict.planted


def test_a_fault_rate_in_the_settings_wraps_the_backend_and_says_so(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", call_attempts=1)
    inject = HarnessSettings(fault_rate=0.5, fault_seed=1).fault_injection()

    async def main() -> int:
        backend = await open_backend(settings, inject=inject)
        failures = 0
        try:
            for _ in range(40):
                try:
                    await backend.ledger.get("c", "t")
                except TransientError:
                    failures += 1
        finally:
            await backend.close()
        return failures

    with capture_logs() as logs:
        failures = asyncio.run(main())
    assert 5 < failures < 35
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["fault_injection_enabled"]


def test_a_call_is_tried_again_in_place_and_a_stream_resumes_where_it_failed(
    tmp_path: Path,
) -> None:
    """A repeat after a write took effect is absorbed; a stream skips what it already gave."""
    cid = "conv_long"
    messages = [
        {
            "id": f"m{seq:03d}",
            "conversation_id": cid,
            "turn_id": f"t{seq}",
            "seq": seq,
            "role": "user",
            "created_at": "2026-11-20T09:00:00Z",
            "content": "hello",
        }
        for seq in range(1, 131)
    ]

    async def main() -> None:
        clean = open_local_backend(tmp_path / "home", lock_duration=60)
        await load_fixture(seeding(clean), {"messages": messages})
        plan = FaultPlan(0.3, 5)
        faulty = with_faults(open_local_backend(tmp_path / "home", lock_duration=60), plan)
        backend = with_call_retries(faulty, RetryPolicy.no_waiting(call_attempts=30))
        newest_first = [m["id"] for m in reversed(messages)]
        try:
            for _ in range(20):
                # Three pages of 50: each request may fail; a resumed read skips what it gave.
                assert [m["id"] async for m in backend.store.history(cid, 10**6)] == newest_first
                await backend.publisher.publish("exp_1", b"{}")
                await backend.ledger.put(a_turn_record(cid, "t", seq=1))
            assert len(await clean.publisher.sent()) == 1
            assert len(await clean.ledger.list_turns(cid)) == 1
            assert plan.injected["publisher.publish:after"] > 0
            assert plan.injected["store.history:before"] > 10
        finally:
            await backend.close()
            await clean.close()

    asyncio.run(main())
