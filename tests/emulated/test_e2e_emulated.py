"""End to end over the emulators: local queue and outbox, Azure Blob (Azurite) and Cosmos
(cosmosdb-server). Every public fixture gives the same records and files as the local
backend. Run by scripts/test-emulated, which starts both servers."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from worker.handler import TurnHandler
from worker.local.backend import open_local_backend
from worker.ports import Backend
from worker.retry_policy import RetryPolicy
from worker.runtime import Runtime
from worker.settings import Settings
from worker.testing.seeding import seed, seeding

pytestmark = pytest.mark.emulated

PUBLIC = Path(__file__).resolve().parents[1] / "fixtures" / "public"
NAMES = ["headline", "clarify_then_answer", "two_small_groups"]
BLOB_ENV = "EXPORT_WORKER_TEST_BLOB_CONNECTION_STRING"
COSMOS_ENV = "EXPORT_WORKER_TEST_COSMOS_ENDPOINT"
EMULATOR_KEY = "ZXhwb3J0LXdvcmtlci10ZXN0LWtleQ=="


def emulated_settings(home: Path) -> Settings:
    if not (os.environ.get(BLOB_ENV) and os.environ.get(COSMOS_ENV)):
        pytest.skip(f"{BLOB_ENV} and {COSMOS_ENV} are set by scripts/test-emulated")
    verify = os.environ.get("EXPORT_WORKER_TEST_COSMOS_VERIFY_TLS", "false").lower() == "true"
    return Settings(  # type: ignore[call-arg]
        _env_file=None,
        home=home,
        backend="azure",
        blob_connection_string=os.environ[BLOB_ENV],
        cosmos_endpoint=os.environ[COSMOS_ENV],
        cosmos_key=os.environ.get("EXPORT_WORKER_TEST_COSMOS_KEY") or EMULATOR_KEY,
        cosmos_database=f"e2e-{uuid.uuid4().hex[:10]}",
        cosmos_create_resources=True,
        cosmos_verify_tls=verify,
        backoff_base_seconds=0.0,
    )


async def process(backend: Backend, settings: Settings, fixture: dict[str, Any]) -> None:
    await seed(seeding(backend), fixture)
    runtime = Runtime(
        TurnHandler(backend, settings),
        backend.queue,
        concurrency=2,
        retry=RetryPolicy.no_waiting(settings.max_attempts),
        lock_duration=60,
        session_idle=0.1,
        shutdown_grace=5,
    )
    await asyncio.wait_for(runtime.run(drain=True), timeout=120)


async def outcome(backend: Backend, conversations: list[str]) -> dict[str, Any]:
    """Records without their processing time, and each export's bytes."""
    records, files = [], {}
    for cid in conversations:
        for stored in await backend.ledger.list_turns(cid):
            record = stored.model_dump(mode="json")
            record.pop("processed_at")
            records.append(record)
            if record["export"]:
                blob = record["export"]["blob"]
                files[blob] = b"".join([c async for c in backend.blobs.read(blob)])
    dead = [(d.reason, d.session_id) for d in await backend.queue.dead_letters()]
    events = await backend.publisher.sent()
    for event in events:
        event.pop("occurred_at")
    return {"records": records, "files": files, "dead": dead, "events": events}


@pytest.mark.parametrize("name", NAMES)
def test_emulated_backend_matches_local_backend(tmp_path: Path, name: str) -> None:
    fixture = json.loads((PUBLIC / f"{name}.fixture.json").read_text())
    expected = json.loads((PUBLIC / f"{name}.expected.json").read_text())
    conversations = expected["conversations"]
    azure_settings = emulated_settings(tmp_path / "azure-home")

    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        from worker.azure.backend import open_azure_backend

        local_settings = Settings(_env_file=None, home=tmp_path / "local")  # type: ignore[call-arg]
        local = open_local_backend(local_settings.home)
        try:
            await process(local, local_settings, fixture)
            want = await outcome(local, conversations)
        finally:
            await local.close()

        sidecar = open_local_backend(tmp_path / "azure-home")
        mixed = await open_azure_backend(
            azure_settings, queue=sidecar.queue, publisher=sidecar.publisher
        )
        try:
            await process(mixed, azure_settings, fixture)
            got = await outcome(mixed, conversations)
        finally:
            await mixed.close()
            await sidecar.store.close()
            await sidecar.ledger.close()
            await sidecar.blobs.close()
        return want, got

    want, got = asyncio.run(main())
    assert got["dead"] == want["dead"] == []
    assert got["records"] == want["records"]
    assert got["files"] == want["files"]
    assert got["events"] == want["events"]
    published = [t for t in expected["turns"].values() if t["decision"] == "published"]
    assert len(got["files"]) == len(published)
