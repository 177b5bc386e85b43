"""Security checks as tests: authorisation before any read, confinement, no secrets out."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from handlers.errors import PermanentError
from worker import fixtures
from worker.handler import TurnHandler
from worker.local.backend import open_local_backend
from worker.settings import Settings

PUBLIC = Path(__file__).resolve().parents[1] / "fixtures" / "public"


def headline() -> dict[str, Any]:
    return json.loads((PUBLIC / "headline.fixture.json").read_text())


def test_a_forged_event_for_an_already_recorded_turn_is_not_authorized(tmp_path: Path) -> None:
    """The ledger short-cut is for redeliveries: another user naming the turn is a stranger."""
    fixture = headline()
    good = fixture["events"][0]
    forged = {**good, "event_id": "evt_forged", "user_id": "user_mallory"}
    fixture["events"] = [good, forged]

    async def main() -> None:
        backend = open_local_backend(tmp_path / "home", lock_duration=60)
        try:
            await fixtures.seed(backend, fixture)
            handler = TurnHandler(backend, Settings(home=tmp_path / "home"))
            session = await backend.queue.accept_session(0)
            assert session is not None
            first = await session.receive(0)
            assert first is not None
            record = await handler.handle(first)
            assert record.decision == "published"
            await session.complete(first)
            second = await session.receive(0)
            assert second is not None
            with pytest.raises(PermanentError) as raised:
                await handler.handle(second)
            assert raised.value.reason == "not_authorized"
            assert len(await backend.publisher.sent()) == 1
        finally:
            await backend.close()

    asyncio.run(main())
