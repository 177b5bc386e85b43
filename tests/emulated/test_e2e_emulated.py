"""End to end on the whole Azure backend over local stand-ins (tests/emulated/
azure_environment.py): Service Bus on the test broker, Blob on Azurite, Cosmos on
cosmosdb-server. Every public fixture gives the same records, file bytes, dead letters
and events as the local backend; the events are read back from a topic subscription."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.emulated.azure_environment import (
    AzureEnvironment,
    azure_environment,
    drain,
    emulators_missing,
)
from worker.local.backend import open_local_backend
from worker.ports import Backend
from worker.settings import Settings
from worker.testing.seeding import seed, seeding

pytestmark = [
    pytest.mark.emulated,
    pytest.mark.skipif(emulators_missing() is not None, reason=str(emulators_missing())),
]

PUBLIC = Path(__file__).resolve().parents[1] / "fixtures" / "public"
# A failing turn's settings: no waiting between deliveries, dead-lettered at the second.
RETRIED_ONCE: dict[str, Any] = {"backoff_base_seconds": 0.0, "max_attempts": 2}
NAMES = sorted(p.name.removesuffix(".fixture.json") for p in PUBLIC.glob("*.fixture.json"))


def fixture(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    given = json.loads((PUBLIC / f"{name}.fixture.json").read_text())
    expected = json.loads((PUBLIC / f"{name}.expected.json").read_text())
    return given, expected


async def process(backend: Backend, settings: Settings, given: dict[str, Any]) -> None:
    """Seed the fixture and drain the queue with the worker's runtime."""
    await seed(seeding(backend), given)
    await drain(backend, settings, timeout=180)


async def records_and_dead(backend: Backend, conversations: list[str]) -> dict[str, Any]:
    """Records without their processing time, and the dead letters."""
    records = []
    for cid in conversations:
        for stored in await backend.ledger.list_turns(cid):
            record = stored.model_dump()
            record.pop("processed_at")
            records.append(record)
    dead = [(d.reason, d.session_id) for d in await backend.queue.dead_letters()]
    return {"records": records, "dead": dead}


def without_time(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events without their publishing time, by export id: two session workers publish
    in either order across conversations."""
    stripped = [{k: v for k, v in e.items() if k != "occurred_at"} for e in events]
    return sorted(stripped, key=lambda e: str(e.get("export_id")))


async def local_outcome(home: Path, given: dict[str, Any], cids: list[str]) -> dict[str, Any]:
    settings = Settings(env_file=None, home=home)
    local = open_local_backend(home)
    try:
        await process(local, settings, given)
        got = await records_and_dead(local, cids)
        got["files"] = {
            r["export"]["blob"]: b"".join([c async for c in local.blobs.read(r["export"]["blob"])])
            for r in got["records"]
            if r["export"]
        }
        got["events"] = without_time(await local.publisher.sent())  # type: ignore[attr-defined]
        return got
    finally:
        await local.close()


@asynccontextmanager
async def azure_backend(
    env: AzureEnvironment, cids: list[str], **overrides: Any
) -> AsyncIterator[tuple[Backend, Settings]]:
    """The Azure backend on the environment's stand-ins, with its settings (`overrides` on
    top), the conversations' blobs cleared first; closed, and the database dropped, after."""
    from worker.azure.backend import open_azure_backend

    settings = env.settings(**overrides)
    await env.clear_blobs(cids)
    backend = await open_azure_backend(settings)
    try:
        yield backend, settings
    finally:
        await backend.close()
        await env.drop_database()


async def azure_outcome(env: AzureEnvironment, given: dict[str, Any], cids: list[str]) -> Any:
    async with azure_backend(env, cids, backoff_base_seconds=0.0) as (backend, settings):
        await process(backend, settings, given)
        got = await records_and_dead(backend, cids)
        got["files"] = await env.export_blobs(cids)
        got["events"] = without_time(await env.events())
    got["active"] = env.active_messages()
    return got


@pytest.mark.parametrize("name", NAMES)
def test_the_azure_backend_matches_the_local_backend(tmp_path: Path, name: str) -> None:
    given, expected = fixture(name)
    cids = expected["conversations"]
    want = asyncio.run(local_outcome(tmp_path / "local", given, cids))
    with azure_environment() as env:
        got = asyncio.run(azure_outcome(env, given, cids))
    assert got["active"] == 0
    assert got["dead"] == want["dead"]
    assert got["records"] == want["records"]
    assert got["files"] == want["files"]  # every file the records name, and no other
    assert got["events"] == want["events"]
    published = [t for t in expected["turns"].values() if t["decision"] == "published"]
    assert len(got["files"]) == len(published) == len(got["events"])


def test_an_archived_artifact_is_dead_lettered_as_missing_saying_it_is_archived() -> None:
    # Blob Storage (Azurite too) answers a read of an archived blob 409 BlobArchived, the
    # status of a write race: the turn must end as a missing artifact to replay once the
    # blob is rehydrated, not as a transient failure, nor a conflict retried in place.
    given, _ = fixture("headline")
    cid = given["conversations"][0]["id"]
    page = next(path for path in given["artifacts"] if "call_7d3a" in path)  # a winning page

    async def main(env: AzureEnvironment) -> tuple[list[Any], list[Any]]:
        async with azure_backend(env, [cid], **RETRIED_ONCE) as (backend, settings):
            await seed(seeding(backend), given)
            await env.archive_blob(page)
            await drain(backend, settings)
            return await backend.queue.dead_letters(), await backend.ledger.list_turns(cid)

    with azure_environment() as env:
        dead, records = asyncio.run(main(env))
        assert env.active_messages() == 0
    described = f"artifact {page} is archived: rehydrate it, then replay"
    assert [(d.reason, d.description, d.delivery_count) for d in dead] == [
        ("artifact_missing", described, 2)
    ]
    assert records == []


def test_a_leased_export_blob_is_retried_then_dead_lettered_naming_the_lease_and_replays() -> None:
    # Someone holds a lease on the export's path (a tool, a copy job): every write is refused
    # 412 LeaseIdMissing. No bug of the turn: it had been dead-lettered handler_error at
    # once, which pages. Now it is retried, dead-lettered transient_failure naming the code,
    # and once the lease is broken its replay publishes the file.
    given, expected = fixture("headline")
    cid = given["conversations"][0]["id"]
    turn = expected["turns"]["turn_headline_a1"]
    path = turn["export"]["blob"]

    async def main(env: AzureEnvironment) -> dict[str, Any]:
        async with azure_backend(env, [cid], **RETRIED_ONCE) as (backend, settings):
            await seed(seeding(backend), given)
            await env.lease_blob(path)
            await drain(backend, settings)
            dead = await backend.queue.dead_letters()
            refused = await backend.ledger.list_turns(cid)
            await env.break_lease(path)
            for letter in dead:
                await backend.queue.replay(letter.sequence_number)
            await drain(backend, settings)
            return {
                "dead": dead,
                "refused": refused,
                "records": await backend.ledger.list_turns(cid),
                "left": await backend.queue.dead_letters(),
                "files": await env.export_blobs([cid]),
                "events": await env.events(),
            }

    with azure_environment() as env:
        got = asyncio.run(main(env))
        assert env.active_messages() == 0
    [letter] = got["dead"]
    assert (letter.reason, letter.delivery_count) == ("transient_failure", 2)
    assert letter.description.startswith("TransientError (Blob Storage) at blobs.py:")
    assert letter.description.endswith(" from Conflict from HttpResponseError 412 LeaseIdMissing")
    assert got["refused"] == [] and got["left"] == []
    [record] = got["records"]
    assert record.decision == "published" and record.export is not None
    assert record.export.blob == path and record.export.row_count == turn["export"]["row_count"]
    data = got["files"][path]
    assert (len(data), hashlib.sha256(data).hexdigest()) == (
        record.export.bytes,
        record.export.sha256,
    )
    assert [event["export_id"] for event in got["events"]] == [record.export.export_id]


def test_a_user_id_past_blob_storages_metadata_bound_is_stored_there_as_its_digest() -> None:
    # The event bounds no user id; the export's blob carries it in its metadata, which Blob
    # Storage holds to 8 KB (Azurite dropped the connection: every delivery ended on our
    # deadline; Azure answers 400 MetadataTooLarge, which had been dead-lettered as a bug).
    from worker.azure.blobs import DIGEST_PREFIX, MAX_METADATA_BYTES

    user = "user_" + "ü" * 9000  # 18 KB of UTF-8, three times that percent-encoded
    given, expected = fixture("headline")
    given = json.loads(json.dumps(given).replace("user_alice", user))
    cid = given["conversations"][0]["id"]
    path = expected["turns"]["turn_headline_a1"]["export"]["blob"]

    async def main(env: AzureEnvironment) -> dict[str, Any]:
        async with azure_backend(env, [cid], **RETRIED_ONCE) as (backend, settings):
            await process(backend, settings, given)
            return {
                "dead": await backend.queue.dead_letters(),
                "records": await backend.ledger.list_turns(cid),
                "info": await backend.blobs.info(path),
            }

    with azure_environment() as env:
        got = asyncio.run(main(env))
    assert got["dead"] == []
    [record] = got["records"]
    assert record.decision == "published" and record.user_id == user
    metadata = dict(got["info"].metadata)
    assert metadata["user_id"] == DIGEST_PREFIX + hashlib.sha256(user.encode()).hexdigest()
    assert metadata["conversation_id"] == cid and metadata["row_count"] == "900"
    assert sum(len(name) + len(value) for name, value in metadata.items()) < MAX_METADATA_BYTES
