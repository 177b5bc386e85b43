"""Locks and shutdown: a turn slower than the lock still completes once; SIGTERM never
leaves a turn half-published (docs/contract/delivery.md).

Lock expiry is wall-clock time on the local queue, so these tests wait for real, but only
seconds: the lock lasts 1 s (renewed every third of it) and the slow turn 4 s. With a 0.3 s
lock, one run of the whole suite on a busy 2-core machine saw the renewal late once (the
loop or a SQLite writer waiting out another's lock for more than 0.2 s), and with a 0.6 s
lock once again (a renewal more than 0.4 s late): the margin is a property of the machine,
not of the rule under test.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path
from typing import Any

from cli_driver import Cli

from worker.handler import TurnHandler
from worker.local.backend import open_local_backend
from worker.ports import Backend, BlobInfo, QueueMessage
from worker.retry_policy import RetryPolicy
from worker.runtime import Runtime
from worker.settings import Settings
from worker.testing.seeding import seed, seeding

PUBLIC = Path(__file__).resolve().parents[1] / "fixtures" / "public"
LOCK_SECONDS = 1.0
SLOW_SECONDS = 4.0


def headline() -> dict[str, Any]:
    return json.loads((PUBLIC / "headline.fixture.json").read_text())


class SlowUploads:
    """Blobs whose uploads take SLOW_SECONDS per chunk written: an export longer than a lock."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def upload(self, path: str, info: BlobInfo) -> Any:
        upload = await self._inner.upload(path, info)
        original = upload.write

        async def slow_write(chunk: bytes) -> None:
            await asyncio.sleep(SLOW_SECONDS)
            await original(chunk)

        upload.write = slow_write
        return upload


class CountingHandler(TurnHandler):
    """A turn handler that counts how often it was called for each message."""

    calls: list[str]

    async def handle(self, message: QueueMessage) -> Any:
        self.calls.append(message.message_id)
        return await super().handle(message)


def test_a_turn_slower_than_the_lock_completes_once_while_another_worker_waits(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    calls: list[str] = []

    def runtime(backend: Backend) -> Runtime:
        handler = CountingHandler(backend, Settings(home=home, backoff_base_seconds=0))
        handler.calls = calls
        return Runtime(
            handler,
            backend.queue,
            concurrency=1,
            retry=RetryPolicy.no_waiting(),
            lock_duration=LOCK_SECONDS,
            session_idle=0.05,
            shutdown_grace=5,
        )

    async def main() -> tuple[Runtime, Runtime, list[dict[str, Any]], list[dict[str, Any]]]:
        seeder = open_local_backend(home, lock_duration=LOCK_SECONDS)
        await seed(seeding(seeder), headline())
        first = open_local_backend(home, lock_duration=LOCK_SECONDS)
        first.blobs = SlowUploads(first.blobs)  # type: ignore[assignment]
        second = open_local_backend(home, lock_duration=LOCK_SECONDS)
        slow, rival = runtime(first), runtime(second)
        slow_run = asyncio.create_task(slow.run(drain=True))
        await asyncio.sleep(0.1)  # the slow worker takes the session first
        await asyncio.wait_for(asyncio.gather(slow_run, rival.run(drain=True)), timeout=30)
        turns = [r.model_dump() for r in await seeder.ledger.list_turns("conv_headline_a")]
        events = await seeder.publisher.sent()
        for backend in (seeder, first, second):
            await backend.close()
        return slow, rival, turns, events

    slow, rival, turns, events = asyncio.run(main())
    # The export took 4 lock durations; renewal kept the message ours throughout.
    assert calls == ["evt_2800cfdc1c241aaebb569216"]
    assert (slow.stats.completed, rival.stats.completed) == (1, 0)
    assert slow.stats.lock_lost == rival.stats.lock_lost == 0
    assert [t["decision"] for t in turns] == ["published"]
    assert len(events) == 1


def _wait_for_staged_upload(home: Path, process: Any, timeout: float = 30) -> None:
    """Until the worker is inside its (slowed) blob write: a staged part file exists."""
    staging = home / "blobs" / ".staging"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read().decode()[-2000:]
        if staging.exists() and any(p.suffix == ".part" for p in staging.iterdir()):
            return
        time.sleep(0.02)
    raise AssertionError("the worker never started its upload")


def _seeded(tmp_path: Path, **env: str) -> Cli:
    home = tmp_path / "home"
    home.mkdir()
    cli = Cli(home, env)
    cli.run("dev", "seed", str(PUBLIC / "headline.fixture.json"))
    return cli


def test_sigterm_mid_export_finishes_the_turn_within_the_grace_period(tmp_path: Path) -> None:
    cli = _seeded(
        tmp_path,
        EXPORT_WORKER_SLOW_POINTS=f"during_blob:{SLOW_SECONDS}",
        EXPORT_WORKER_SHUTDOWN_GRACE_SECONDS="20",
    )
    with cli.started("run") as worker:  # no --drain: only the signal stops it
        _wait_for_staged_upload(cli.home, worker)
        worker.send_signal(signal.SIGTERM)
        stderr = worker.communicate(timeout=20)[1].decode()
    assert worker.returncode == 0
    assert "worker_stopping" in stderr and "turn_abandoned_on_shutdown" not in stderr

    [record] = cli.json("turns", "list", "--conversation", "conv_headline_a")
    assert record["decision"] == "published" and record["event_sent"] is True
    assert len(cli.json("dev", "events")) == 1
    assert list((cli.home / "blobs" / ".staging").iterdir()) == []
    cli.extra_env = {}
    cli.run("run", "--drain")  # nothing left to do: the message was completed
    assert len(cli.json("dev", "events")) == 1


def test_sigterm_past_the_grace_period_abandons_the_turn_and_leaves_nothing_half_done(
    tmp_path: Path,
) -> None:
    cli = _seeded(
        tmp_path,
        EXPORT_WORKER_SLOW_POINTS="during_blob:60",
        EXPORT_WORKER_SHUTDOWN_GRACE_SECONDS="0.5",
    )
    with cli.started("run") as worker:
        _wait_for_staged_upload(cli.home, worker)
        signalled = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        stderr = worker.communicate(timeout=20)[1].decode()
    assert worker.returncode == 0
    assert time.monotonic() - signalled < 0.5 + 3.0
    assert "turn_abandoned_on_shutdown" in stderr

    # Nothing of the turn is visible: no record, no file, no event, no staged part.
    assert cli.json("turns", "list", "--conversation", "conv_headline_a") == []
    assert cli.json("dev", "events") == []
    assert not (cli.home / "blobs" / "exports").exists() or not any(
        p.is_file() for p in (cli.home / "blobs" / "exports").rglob("*")
    )
    assert list((cli.home / "blobs" / ".staging").iterdir()) == []
    assert cli.json("dlq", "list") == []

    # The message went back to the queue: the next worker publishes it, once.
    cli.extra_env = {}
    cli.run("run", "--drain")
    [record] = cli.json("turns", "list", "--conversation", "conv_headline_a")
    assert record["decision"] == "published" and record["event_sent"] is True
    assert len(cli.json("dev", "events")) == 1
