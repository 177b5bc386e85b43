"""The Cosmos ledger's write rules, on an in-memory container that answers as Cosmos does
(409 on a taken id, 412 on a stale ETag, 404 on a missing item), so they are pinned without
an emulator; the contract suite (tests/contracts) pins the same rules on the emulator.

Two ledgers on one container stand for two holders of a turn in two processes.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from azure.core import MatchConditions
from azure.cosmos import exceptions as cosmos

from schemas.records import TurnRecord
from worker.azure.cosmos import AzureLedger, CosmosAccount
from worker.settings import Settings
from worker.testing.records import a_turn_record

TURNS = "turns"


class Container:
    """The item calls the ledger makes, with Cosmos's answers; counts the writes."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], dict[str, Any]] = {}
        self.writes = 0
        self._etags = itertools.count(1)

    def _stored(self, doc: dict[str, Any]) -> dict[str, Any]:
        item = {**doc, "_etag": f'"{next(self._etags)}"', "_ts": 1}
        self.items[(doc["conversation_id"], doc["id"])] = item
        self.writes += 1
        return dict(item)

    async def create_item(self, doc: dict[str, Any]) -> dict[str, Any]:
        if (doc["conversation_id"], doc["id"]) in self.items:
            raise cosmos.CosmosResourceExistsError(status_code=409, message="id taken")
        return self._stored(doc)

    async def replace_item(
        self, item: str, doc: dict[str, Any], *, etag: str, match_condition: MatchConditions
    ) -> dict[str, Any]:
        assert match_condition is MatchConditions.IfNotModified
        current = self.items.get((doc["conversation_id"], item))
        if current is None:
            raise cosmos.CosmosResourceNotFoundError(status_code=404, message="gone")
        if current["_etag"] != etag:
            raise cosmos.CosmosAccessConditionFailedError(status_code=412, message="etag")
        return self._stored(doc)

    async def read_item(self, item: str, *, partition_key: str) -> dict[str, Any]:
        current = self.items.get((partition_key, item))
        if current is None:
            raise cosmos.CosmosResourceNotFoundError(status_code=404, message="missing")
        return dict(current)


def ledger_on(container: Container) -> AzureLedger:
    settings = Settings(env_file=None, backend="azure", turns_container=TURNS)
    account = CosmosAccount(settings, emulator=False)
    account._containers[TURNS] = container  # type: ignore[assignment]
    return AzureLedger(settings, account=account)


def published(processed_at: str, *, sent: bool) -> TurnRecord:
    base = a_turn_record("c1", "t1", seq=1)
    return base.model_copy(
        update={"decision": "published", "processed_at": processed_at, "event_sent": sent}
    )


def test_a_first_record_never_replaces_one_another_holder_wrote() -> None:
    async def main() -> None:
        container = Container()
        a, b = ledger_on(container), ledger_on(container)
        assert await a.get("c1", "t1") is None  # A read "absent", then stalled
        b_first = published("2026-01-01T00:00:05.000000Z", sent=False)
        assert await b.get("c1", "t1") is None
        assert await b.create(b_first) == b_first
        a_first = published("2026-01-01T00:00:00.000000Z", sent=False)
        assert await a.create(a_first) == b_first  # A goes on from B's record
        b_sent = b_first.model_copy(update={"event_sent": True})
        await b.put(b_sent)
        assert await a.create(a_first) == b_sent
        assert (
            TurnRecord.model_validate(
                {k: v for k, v in container.items[("c1", "t1")].items() if not k.startswith("_")}
            )
            == b_sent
        )

    asyncio.run(main())


def test_a_late_put_never_sets_a_sent_record_back_to_not_sent() -> None:
    async def main() -> None:
        container = Container()
        a, b = ledger_on(container), ledger_on(container)
        first = published("2026-01-01T00:00:00.000000Z", sent=False)
        assert await a.create(first) == first  # A remembers the ETag it wrote
        sent = first.model_copy(update={"event_sent": True})
        await b.put(sent)
        await a.put(first)  # late, with a stale ETag: 412, re-read, kept
        await b.put(first)  # current ETag known to B: read first, kept
        fresh = ledger_on(container)
        assert await fresh.get("c1", "t1") == sent

    asyncio.run(main())


def test_the_happy_path_writes_twice_without_reading() -> None:
    async def main() -> None:
        container = Container()
        ledger = ledger_on(container)
        reads = 0
        read_item = container.read_item

        async def counted(item: str, *, partition_key: str) -> dict[str, Any]:
            nonlocal reads
            reads += 1
            return await read_item(item, partition_key=partition_key)

        container.read_item = counted  # type: ignore[method-assign]
        assert await ledger.get("c1", "t1") is None
        first = published("2026-01-01T00:00:00.000000Z", sent=False)
        await ledger.create(first)
        await ledger.put(first.model_copy(update={"event_sent": True}))
        assert (container.writes, reads) == (2, 1)  # the ledger check's read only

    asyncio.run(main())
