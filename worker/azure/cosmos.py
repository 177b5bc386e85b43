"""Cosmos DB adapters of the `ConversationStore` and `Ledger` ports.

The documents: docs/contract/stored-data.md and turn-record.md.

Containers and partition keys: conversations `/id`, messages `/conversation_id`, turns
`/conversation_id`. Reads are point reads or parameterised queries; every query that can
name its conversation does so in its text *and* as the partition key (the real service
uses the partition key, the emulator only the text).

Throttling: the SDK retries 429s itself, `THROTTLE_RETRIES` times and for at most half of
our per-call deadline (`sdk_timeout_seconds`), so a throttled call fails as a
`TransientError` before the guard fires and the runtime's backoff takes over.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from typing import Any

from azure.core import MatchConditions
from azure.cosmos import PartitionKey
from azure.cosmos.aio import ContainerProxy, CosmosClient, DatabaseProxy

from schemas.records import TurnRecord
from worker.azure.credentials import AzureNotConfigured, cosmos_client
from worker.azure.timeouts import COSMOS_DB, guarded, guarded_iter
from worker.ports import Conflict, NotFound
from worker.settings import Settings

# History reads newest first, a page at a time, and the caller stops early: the handler's
# caps (worker/handler.py MAX_MESSAGES_READ, MAX_TURN_MESSAGES_READ) bound the read, so
# the query has no TOP of its own that could hide a long turn's user message.
PAGE_SIZE = 100
THROTTLE_RETRIES = 5
CONNECTION_RETRIES = 3
PUT_ATTEMPTS = 5
# Turn records whose state this process last saw (an ETag, or ABSENT), so that `put` writes
# without reading first; bounded, oldest forgotten first.
KNOWN_RECORDS = 4096
ABSENT = ""
# A Cosmos item id holds at most 1,023 bytes, none of / \ ? # or a tab or line break, and
# does not end in a space. A turn id Cosmos cannot hold is stored under another id
# (`record_id`): this prefix and the turn id's sha256; `turn_id` keeps the id as given.
_NOT_IN_COSMOS_IDS = re.compile(r"[/\\?#\t\r\n]")
_MAX_ID_BYTES = 1023
ENCODED_ID_PREFIX = "turn-sha256-"
# cosmosdb-server answers a point read of a missing item with a 500 unless this is sent.
EMULATOR_HEADERS = {"x-ms-documentdb-query-enablecrosspartition": "true"}
_SYSTEM_KEYS = ("_rid", "_self", "_etag", "_attachments", "_ts")

HISTORY_QUERY = (
    "SELECT * FROM c WHERE c.conversation_id = @cid AND c.seq <= @max ORDER BY c.seq DESC"
)
TURNS_QUERY = "SELECT * FROM c WHERE c.conversation_id = @cid ORDER BY c.seq"
EXPORTS_QUERY = "SELECT * FROM c WHERE c.conversation_id = @cid AND c.export != null ORDER BY c.seq"
ALL_EXPORTS_QUERY = "SELECT * FROM c WHERE c.export != null"
FIND_EXPORT_QUERY = "SELECT * FROM c WHERE c.export.export_id = @eid"
# Cross-partition, bounded by TOP 1; processed_at is written in one fixed-width UTC form,
# so its string order is time order (the default range index serves the ORDER BY).
LATEST_EXPORT_QUERY = "SELECT TOP 1 * FROM c WHERE c.export != null ORDER BY c.processed_at DESC"


class CosmosAccount:
    """One CosmosClient shared by the store and the ledger, opened on first use and closed
    when its last user releases it."""

    def __init__(self, settings: Settings, *, emulator: bool | None = None) -> None:
        """`emulator` (default: TLS verification off) adds the header cosmosdb-server needs."""
        self._settings = settings
        self.timeout = settings.sdk_timeout_seconds
        self._emulator = (not settings.cosmos_verify_tls) if emulator is None else emulator
        self._client: CosmosClient | None = None
        self._credential: Any = None
        self._containers: dict[str, ContainerProxy] = {}
        self._lock = asyncio.Lock()
        self._users = 0

    def acquire(self) -> CosmosAccount:
        """Count one more user; each user calls `release` once."""
        self._users += 1
        return self

    async def container(self, name: str) -> ContainerProxy:
        """The named container, after the account is opened (and resources created)."""
        if name not in self._containers:
            async with self._lock:
                if name not in self._containers:
                    await self._open()
        return self._containers[name]

    async def _open(self) -> None:
        options: dict[str, Any] = {
            "retry_total": CONNECTION_RETRIES,
            "retry_throttle_total": THROTTLE_RETRIES,
            "retry_throttle_backoff_max": max(1, int(self.timeout / 2)),
        }
        if self._emulator:
            options["headers"] = dict(EMULATOR_HEADERS)
        client, credential = cosmos_client(self._settings, **options)
        try:
            await guarded(client.__aenter__(), self.timeout, COSMOS_DB)
            database = await self._database(client)
        except BaseException:
            await _close(client, credential)
            raise
        self._client, self._credential = client, credential
        for name in self._partition_keys():
            self._containers[name] = database.get_container_client(name)

    def _partition_keys(self) -> dict[str, str]:
        s = self._settings
        return {
            s.conversations_container: "/id",
            s.messages_container: "/conversation_id",
            s.turns_container: "/conversation_id",
        }

    async def _database(self, client: CosmosClient) -> DatabaseProxy:
        """The database; created with its containers first when the settings say so.

        Replicas starting together race on "if not exists": losing (409) means it exists.
        """
        s = self._settings
        database = client.get_database_client(s.cosmos_database)
        if not s.cosmos_create_resources:
            await self._require_containers(database)
            return database
        with contextlib.suppress(Conflict):
            await guarded(
                client.create_database_if_not_exists(s.cosmos_database), self.timeout, COSMOS_DB
            )
        for name, key in self._partition_keys().items():
            with contextlib.suppress(Conflict):
                await guarded(
                    database.create_container_if_not_exists(
                        name, partition_key=PartitionKey(path=key)
                    ),
                    self.timeout,
                    COSMOS_DB,
                )
        return database

    async def _require_containers(self, database: DatabaseProxy) -> None:
        """Read each container's properties once: a misnamed database or container stops the
        process here, named, instead of every turn failing as not found (a metadata read,
        which the worker's data role allows)."""
        names = list(self._partition_keys())
        results = await asyncio.gather(
            *(
                guarded(database.get_container_client(name).read(), self.timeout, COSMOS_DB)
                for name in names
            ),
            return_exceptions=True,
        )
        missing = [n for n, r in zip(names, results, strict=True) if isinstance(r, NotFound)]
        if missing:
            raise AzureNotConfigured(
                f"Cosmos DB database {self._settings.cosmos_database!r} has no container "
                f"{', '.join(map(repr, missing))} (or the database does not exist): create "
                "them (infra/main.bicep) or set EXPORT_WORKER_COSMOS_CREATE_RESOURCES=true"
            )
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def release(self) -> None:
        """Drop one user; the last one closes the client and its credential."""
        self._users -= 1
        if self._users > 0 or self._client is None:
            return
        client, self._client = self._client, None
        self._containers.clear()
        await _close(client, self._credential)

    async def query(
        self, container: str, text: str, parameters: dict[str, Any], partition_key: str | None
    ) -> AsyncIterator[dict[str, Any]]:
        """Run one parameterised query, page by page, each page under the deadline."""
        proxy = await self.container(container)
        options: dict[str, Any] = {
            "parameters": [{"name": k, "value": v} for k, v in parameters.items()],
            "max_item_count": PAGE_SIZE,
        }
        if partition_key is not None:
            options["partition_key"] = partition_key
        pages = proxy.query_items(text, **options).by_page()
        async for page in guarded_iter(pages, self.timeout, COSMOS_DB):
            async for item in guarded_iter(page, self.timeout, COSMOS_DB):
                yield without_system_keys(item)

    async def read(self, container: str, item_id: str, partition_key: str) -> dict[str, Any]:
        """Point-read one document as stored (system keys included); NotFound when missing,
        as it is for an id no document can have (Cosmos answers its read with a 400)."""
        if not holds_id(item_id):
            raise NotFound(f"{COSMOS_DB}: no document can have this id")
        proxy = await self.container(container)
        item: dict[str, Any] = await guarded(
            proxy.read_item(item_id, partition_key=partition_key), self.timeout, COSMOS_DB
        )
        return item

    async def upsert(self, container: str, document: Mapping[str, Any]) -> None:
        """Insert or replace one document."""
        proxy = await self.container(container)
        await guarded(proxy.upsert_item(dict(document)), self.timeout, COSMOS_DB)


async def _close(client: CosmosClient, credential: Any) -> None:
    try:
        await client.close()
    finally:
        if credential is not None:
            await credential.close()


def without_system_keys(document: Mapping[str, Any]) -> dict[str, Any]:
    """The document as the chat service wrote it, without Cosmos's bookkeeping."""
    return {k: v for k, v in document.items() if k not in _SYSTEM_KEYS}


class AzureConversationStore:
    """Conversations and messages, read from the chat service's Cosmos containers."""

    def __init__(self, settings: Settings, *, account: CosmosAccount | None = None) -> None:
        """Share `account` with the ledger to use one client (default: an own one)."""
        self._account = (account or CosmosAccount(settings)).acquire()
        self._conversations = settings.conversations_container
        self._messages = settings.messages_container

    async def get_conversation(self, conversation_id: str) -> dict[str, Any]:
        """Point-read a conversation (partition key = its id); NotFound when missing."""
        doc = await self._account.read(self._conversations, conversation_id, conversation_id)
        return without_system_keys(doc)

    async def get_message(self, conversation_id: str, message_id: str) -> dict[str, Any]:
        """Point-read a message in its conversation's partition; NotFound when missing."""
        doc = await self._account.read(self._messages, message_id, conversation_id)
        return without_system_keys(doc)

    async def history(self, conversation_id: str, max_seq: int) -> AsyncIterator[dict[str, Any]]:
        """Messages with seq <= max_seq, newest first: one partition query, read lazily."""
        params = {"@cid": conversation_id, "@max": max_seq}
        async for doc in self._account.query(
            self._messages, HISTORY_QUERY, params, partition_key=conversation_id
        ):
            yield doc

    async def put_conversation(self, document: Mapping[str, Any]) -> None:
        """Upsert a conversation (fixtures, tests)."""
        await self._account.upsert(self._conversations, document)

    async def put_message(self, document: Mapping[str, Any]) -> None:
        """Upsert a message (fixtures, tests)."""
        await self._account.upsert(self._messages, document)

    async def close(self) -> None:
        """Release the shared client."""
        await self._account.release()


def record_id(turn_id: str) -> str:
    """The item id of a turn's record: the turn id itself when Cosmos can hold it (SPEC 6:
    `id` = `turn_id`), else one it can, the same for the same turn id and never another
    turn's (a turn id that starts with the prefix is encoded too)."""
    if holds_id(turn_id) and not turn_id.startswith(ENCODED_ID_PREFIX):
        return turn_id
    encoded = turn_id.encode("utf-8", "surrogatepass")
    return ENCODED_ID_PREFIX + hashlib.sha256(encoded).hexdigest()


def holds_id(item_id: str) -> bool:
    """Whether Cosmos DB can hold `item_id` as an item id."""
    return (
        0 < len(item_id.encode("utf-8", "surrogatepass")) <= _MAX_ID_BYTES
        and not _NOT_IN_COSMOS_IDS.search(item_id)
        and not item_id.endswith(" ")
    )


def _stored(record: TurnRecord) -> dict[str, Any]:
    doc = record.model_dump()
    doc["id"] = record_id(doc["turn_id"])
    return doc


def _record(doc: Mapping[str, Any]) -> TurnRecord:
    """The record a stored item holds: its `id` is the turn id again."""
    return TurnRecord.model_validate({**without_system_keys(doc), "id": doc.get("turn_id")})


class AzureLedger:
    """Turn records in the `turns` container, written with ETag optimistic concurrency."""

    def __init__(self, settings: Settings, *, account: CosmosAccount | None = None) -> None:
        """Share `account` with the store to use one client (default: an own one)."""
        self._account = (account or CosmosAccount(settings)).acquire()
        self._turns = settings.turns_container
        self._known: OrderedDict[tuple[str, str], str] = OrderedDict()

    async def get(self, conversation_id: str, turn_id: str) -> TurnRecord | None:
        """The turn record, or None."""
        try:
            doc = await self._account.read(self._turns, record_id(turn_id), conversation_id)
        except NotFound:
            self._remember((conversation_id, turn_id), ABSENT)
            return None
        self._remember((conversation_id, turn_id), doc.get("_etag"))
        return _record(doc)

    async def create(self, record: TurnRecord) -> TurnRecord:
        """Create the turn's first record unless one is stored; return the stored record.

        One write when the turn has no record. When it has one, `create_item` fails with
        409 and that record (another holder's, or ours when a reply was lost) is read and
        returned.
        """
        doc = _stored(record)
        proxy = await self._account.container(self._turns)
        key = (doc["conversation_id"], doc["turn_id"])
        self._known.pop(key, None)
        for _ in range(PUT_ATTEMPTS):
            try:
                written = await guarded(proxy.create_item(doc), self._account.timeout, COSMOS_DB)
            except Conflict:
                try:
                    stored = await self._account.read(self._turns, doc["id"], key[0])
                except NotFound:  # never deleted by the worker; created and gone: try again
                    continue
                self._remember(key, stored.get("_etag"))
                return _record(stored)
            self._remember(key, written.get("_etag"))
            return record
        raise Conflict(f"turn record kept changing under {PUT_ATTEMPTS} writes")

    async def put(self, record: TurnRecord) -> None:
        """Write the turn record: replace under the read ETag, or create when absent.

        A stored record whose event went out is kept over ours when ours says it did not
        (`keeps`), so a late writer never makes an announced export look unannounced. A
        lost race (412/409) re-reads and decides again. The first attempt of a record that
        says its event went out skips the read when this process read or wrote the record
        last (`get`, `create`, an earlier `put`): a stale view fails the same way and
        re-reads. Any other record is read first, to be checked against `keeps`.
        """
        doc = _stored(record)
        proxy = await self._account.container(self._turns)
        timeout = self._account.timeout
        key = (doc["conversation_id"], doc["turn_id"])
        known = self._known.pop(key, None)
        if known not in (None, ABSENT) and doc["event_sent"] is not True:
            known = None  # the ETag does not say whether that record's event went out: read
        for attempt in range(PUT_ATTEMPTS):
            current: Mapping[str, Any] | None
            if attempt == 0 and known is not None:
                current = None if known == ABSENT else {"_etag": known}
            else:
                try:
                    current = await self._account.read(self._turns, doc["id"], key[0])
                except NotFound:
                    current = None
                if current is not None and keeps(current, doc):
                    self._remember(key, current.get("_etag"))
                    return
            try:
                if current is None:
                    written = await guarded(proxy.create_item(doc), timeout, COSMOS_DB)
                else:
                    written = await guarded(
                        proxy.replace_item(
                            doc["id"],
                            doc,
                            etag=current["_etag"],
                            match_condition=MatchConditions.IfNotModified,
                        ),
                        timeout,
                        COSMOS_DB,
                    )
                self._remember(key, written.get("_etag"))
                return
            except Conflict:
                continue
        raise Conflict(f"turn record kept changing under {PUT_ATTEMPTS} writes")

    def _remember(self, key: tuple[str, str], etag: str | None) -> None:
        """Keep what a read or write showed of a record (nothing without an ETag)."""
        if etag is None:
            return
        self._known[key] = etag
        self._known.move_to_end(key)
        while len(self._known) > KNOWN_RECORDS:
            self._known.popitem(last=False)

    async def list_turns(self, conversation_id: str) -> list[TurnRecord]:
        """The conversation's turn records ordered by seq (records without one last)."""
        params = {"@cid": conversation_id}
        query = self._account.query(self._turns, TURNS_QUERY, params, partition_key=conversation_id)
        return _records(by_seq([doc async for doc in query]))

    async def list_exports(self, conversation_id: str | None = None) -> list[TurnRecord]:
        """Records with an export, by conversation then seq; without a conversation this is
        a cross-partition query (sorted here: no composite index needed)."""
        if conversation_id is None:
            query = self._account.query(self._turns, ALL_EXPORTS_QUERY, {}, partition_key=None)
        else:
            params = {"@cid": conversation_id}
            query = self._account.query(
                self._turns, EXPORTS_QUERY, params, partition_key=conversation_id
            )
        records = by_seq([doc async for doc in query])
        return _records(sorted(records, key=lambda r: str(r.get("conversation_id", ""))))

    async def find_export(self, export_id: str) -> TurnRecord | None:
        """The turn record holding this export id (a cross-partition query), or None."""
        params = {"@eid": export_id}
        async for doc in self._account.query(
            self._turns, FIND_EXPORT_QUERY, params, partition_key=None
        ):
            return _record(doc)
        return None

    async def latest_export(self) -> TurnRecord | None:
        """The published record processed last: one cross-partition TOP 1 query."""
        async for doc in self._account.query(
            self._turns, LATEST_EXPORT_QUERY, {}, partition_key=None
        ):
            return _record(doc)
        return None

    async def close(self) -> None:
        """Release the shared client."""
        await self._account.release()


def keeps(stored: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether the stored record stays: its event went out and the new one says it did not."""
    return stored.get("event_sent") is True and new.get("event_sent") is not True


def by_seq(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records by seq; Cosmos sorts a null seq first, the ports want it last."""
    return sorted(records, key=lambda r: (r.get("seq") is None, r.get("seq") or 0))


def _records(documents: list[dict[str, Any]]) -> list[TurnRecord]:
    return [_record(doc) for doc in documents]
