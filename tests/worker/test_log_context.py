"""Every line logged about a message names it and its turn, bound once (structlog contextvars)."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.contextvars import merge_contextvars
from structlog.testing import LogCapture

from worker import logs
from worker.handler import TurnHandler
from worker.local.backend import open_local_backend
from worker.ports import QueueMessage
from worker.retry_policy import RetryPolicy
from worker.runtime import Runtime
from worker.settings import Settings
from worker.testing.seeding import seed, seeding

PUBLIC = Path(__file__).resolve().parents[1] / "fixtures" / "public"
MESSAGE_IDS = ("session_id", "message_id", "sequence_number", "delivery_count")
TURN_IDS = ("conversation_id", "turn_id", "event_id")


@pytest.fixture
def captured() -> Iterator[LogCapture]:
    """Log lines as the worker's configuration merges them: contextvars first."""
    capture = LogCapture()
    structlog.configure(processors=[merge_contextvars, capture])
    try:
        yield capture
    finally:
        structlog.reset_defaults()


def run_once(tmp_path: Path, fixture: dict[str, Any], handler: Any = None) -> None:
    async def main() -> None:
        home = tmp_path / "home"
        backend = open_local_backend(home, lock_duration=60)
        try:
            await seed(seeding(backend), fixture)
            runtime = Runtime(
                handler or TurnHandler(backend, Settings(home=home)),
                backend.queue,
                concurrency=1,
                retry=RetryPolicy.no_waiting(max_attempts=2),
                lock_duration=60,
                session_idle=0.05,
                shutdown_grace=1,
            )
            await asyncio.wait_for(runtime.run(drain=True), timeout=60)
        finally:
            await backend.close()

    asyncio.run(main())


def test_retry_and_dead_letter_lines_carry_the_message_and_turn_ids(
    tmp_path: Path, captured: LogCapture
) -> None:
    fixture = json.loads((PUBLIC / "headline.fixture.json").read_text())
    fixture["artifacts"] = {}  # artifact_missing: retried once, then dead-lettered
    run_once(tmp_path, fixture)
    event = fixture["events"][0]
    lines = {e["event"]: e for e in captured.entries}
    for name, delivery in (("turn_retry_scheduled", 1), ("message_dead_lettered", 2)):
        line = lines[name]
        assert all(key in line for key in MESSAGE_IDS + TURN_IDS), (name, line)
        assert line["delivery_count"] == delivery
        assert (line["conversation_id"], line["turn_id"], line["event_id"]) == (
            event["conversation_id"],
            event["turn_id"],
            event["event_id"],
        )
        assert line["session_id"] == event["conversation_id"]
        assert line["message_id"] == event["event_id"]


def test_a_handler_bug_is_logged_with_the_message_ids_and_without_its_text(
    tmp_path: Path,
) -> None:
    class Buggy:
        async def handle(self, message: QueueMessage) -> Any:
            raise KeyError("SECRET_ROW_VALUE 12.45")

    out = io.StringIO()
    logs.configure(level="info", stream=out, pretty=False)  # the worker's own renderer
    fixture = json.loads((PUBLIC / "headline.fixture.json").read_text())
    run_once(tmp_path, fixture, Buggy())
    assert "SECRET_ROW_VALUE" not in out.getvalue()
    entries = [json.loads(text) for text in out.getvalue().splitlines()]
    [line] = [e for e in entries if e["event"] == "handler_failed"]
    assert all(key in line for key in MESSAGE_IDS)
    assert line["error"].startswith("KeyError at ")
    assert line["exception"]["type"] == "KeyError"  # its frames, never its text
