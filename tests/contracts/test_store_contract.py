"""Conversation store contract: point reads, partition isolation, bounded newest-first history."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from worker.ports import ConversationStore, NotFound


def run(body: Callable[[ConversationStore], Awaitable[None]], factory: Any) -> None:
    """Open a fresh store from the factory and run `body` on it."""

    async def main() -> None:
        async with factory.open() as store:
            await body(store)

    asyncio.run(main())


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def conversation(cid: str, **extra: Any) -> dict[str, Any]:
    return {"id": cid, "user_id": "u-1", "participants": [], "deleted": False, **extra}


def message(cid: str, seq: int, **extra: Any) -> dict[str, Any]:
    return {
        "id": f"{cid}-m{seq:04d}",
        "conversation_id": cid,
        "turn_id": f"t{seq // 4}",
        "seq": seq,
        "role": "user",
        "content": f"message {seq}",
        "created_at": "2026-01-01T00:00:00Z",
        **extra,
    }


async def collect(store: ConversationStore, cid: str, max_seq: int) -> list[int]:
    return [doc["seq"] async for doc in store.history(cid, max_seq)]


def test_point_reads_return_what_was_put(store_factory: Any) -> None:
    async def body(store: ConversationStore) -> None:
        cid = new_id("conv")
        await store.put_conversation(conversation(cid, participants=["u-2"]))
        await store.put_message(message(cid, 1))
        got = await store.get_conversation(cid)
        assert (got["id"], got["user_id"], got["participants"]) == (cid, "u-1", ["u-2"])
        got_message = await store.get_message(cid, f"{cid}-m0001")
        assert (got_message["seq"], got_message["content"]) == (1, "message 1")

    run(body, store_factory)


def test_missing_documents_raise_not_found(store_factory: Any) -> None:
    async def body(store: ConversationStore) -> None:
        cid = new_id("conv")
        with pytest.raises(NotFound):
            await store.get_conversation(cid)
        await store.put_conversation(conversation(cid))
        with pytest.raises(NotFound):
            await store.get_message(cid, "no-such-message")

    run(body, store_factory)


@pytest.mark.parametrize("odd", ["a/b", "a?b", "a#b", "a\\b", "trailing ", "\u00e9" * 600])
def test_an_id_no_cosmos_document_can_have_is_not_found(store_factory: Any, odd: str) -> None:
    """Cosmos DB refuses such ids (a point read answers 400), so the chat service could
    never have stored them there: not found, on both backends, never a bug."""

    async def body(store: ConversationStore) -> None:
        cid = new_id("conv")
        with pytest.raises(NotFound):
            await store.get_conversation(f"{cid}{odd}")
        await store.put_conversation(conversation(cid))
        with pytest.raises(NotFound):
            await store.get_message(cid, f"m{odd}")

    run(body, store_factory)


def test_put_replaces_the_document(store_factory: Any) -> None:
    async def body(store: ConversationStore) -> None:
        cid = new_id("conv")
        await store.put_conversation(conversation(cid))
        await store.put_conversation(conversation(cid, deleted=True))
        assert (await store.get_conversation(cid))["deleted"] is True
        await store.put_message(message(cid, 1))
        await store.put_message(message(cid, 1, deleted=True, content=""))
        got = await store.get_message(cid, f"{cid}-m0001")
        assert (got["deleted"], got["content"]) == (True, "")
        assert await collect(store, cid, 10) == [1]

    run(body, store_factory)


def test_a_message_is_read_only_in_its_own_partition(store_factory: Any) -> None:
    async def body(store: ConversationStore) -> None:
        mine, other = new_id("conv"), new_id("conv")
        await store.put_message(message(mine, 1))
        with pytest.raises(NotFound):
            await store.get_message(other, f"{mine}-m0001")

    run(body, store_factory)


def test_history_is_newest_first_and_bounded_by_max_seq(store_factory: Any) -> None:
    async def body(store: ConversationStore) -> None:
        cid, neighbour = new_id("conv"), new_id("conv")
        # Stored out of order, across several pages, next to another conversation.
        for seq in [*range(130, 0, -2), *range(1, 131, 2)]:
            await store.put_message(message(cid, seq))
        for seq in range(1, 20):
            await store.put_message(message(neighbour, seq))
        assert await collect(store, cid, 120) == list(range(120, 0, -1))
        assert await collect(store, cid, 10_000) == list(range(130, 0, -1))
        assert await collect(store, cid, 0) == []
        assert await collect(store, new_id("conv"), 100) == []
        assert await collect(store, neighbour, 5) == [5, 4, 3, 2, 1]

    run(body, store_factory)


def test_history_holds_every_message_however_long_the_conversation(store_factory: Any) -> None:
    # The reader bounds what it reads (the handler's caps); a store that cut the history
    # short on its own (a query's TOP) would hide the user message of a turn of thousands
    # of tool messages, which the handler reads on to once a point read finds it.
    async def body(store: ConversationStore) -> None:
        cid = new_id("conv")
        for start in range(1, 2_201, 100):
            batch = range(start, start + 100)
            await asyncio.gather(*(store.put_message(message(cid, seq)) for seq in batch))
        seqs = await collect(store, cid, 2_150)
        assert seqs == list(range(2_150, 0, -1))

    run(body, store_factory)


def test_history_holds_every_message_of_a_seq_stored_twice(store_factory: Any) -> None:
    # Never in valid data (a conversation's seqs are unique), but a store that paged on seq
    # alone would drop such messages at a page boundary, silently.
    async def body(store: ConversationStore) -> None:
        cid = new_id("conv")
        await store.put_message(message(cid, 1))
        for n in range(120):
            await store.put_message({**message(cid, 7), "id": f"{cid}-twin{n:03d}"})
        await store.put_message(message(cid, 8))
        docs = [doc async for doc in store.history(cid, 8)]
        assert [doc["seq"] for doc in docs] == [8, *[7] * 120, 1]
        assert len({doc["id"] for doc in docs}) == 122

    run(body, store_factory)


def test_history_returns_whole_documents_deleted_ones_too(store_factory: Any) -> None:
    async def body(store: ConversationStore) -> None:
        cid = new_id("conv")
        await store.put_message(message(cid, 1))
        await store.put_message(message(cid, 2, role="tool", deleted=True, results=[]))
        docs = [doc async for doc in store.history(cid, 2)]
        assert [(d["seq"], d["role"], d.get("deleted", False)) for d in docs] == [
            (2, "tool", True),
            (1, "user", False),
        ]
        assert docs[0]["results"] == []

    run(body, store_factory)


def test_history_holds_a_message_whose_seq_has_a_fraction(store_factory: Any) -> None:
    # Cosmos DB's query compares numbers: a fractional seq is read (and the handler refuses
    # it, schema_invalid); the local store once left it out, which ended the turn no_rows.
    async def body(store: ConversationStore) -> None:
        cid = new_id("conv")
        for seq in (1, 2, 4):
            await store.put_message(message(cid, seq))
        await store.put_message({**message(cid, 3), "id": f"{cid}-half", "seq": 2.5})
        assert await collect(store, cid, 4) == [4, 2.5, 2, 1]

    run(body, store_factory)


@pytest.mark.parametrize("seq", [None, "3", True, "missing"])
def test_a_message_without_a_numeric_seq_is_never_in_a_history(
    store_factory: Any, seq: Any
) -> None:
    # Cosmos DB's `c.seq <= @max` is undefined for a string, a bool, null or no seq, so the
    # query leaves such a message out; the local store must too (a bool is not the number 1).
    async def body(store: ConversationStore) -> None:
        cid = new_id("conv")
        for number in (1, 2, 4):
            await store.put_message(message(cid, number))
        odd = {**message(cid, 3), "id": f"{cid}-odd"}
        if seq == "missing":
            del odd["seq"]
        else:
            odd["seq"] = seq
        await store.put_message(odd)
        assert await collect(store, cid, 4) == [4, 2, 1]
        assert (await store.get_message(cid, f"{cid}-odd"))["content"] == "message 3"

    run(body, store_factory)


def test_a_caller_may_stop_reading_history_early(store_factory: Any) -> None:
    async def body(store: ConversationStore) -> None:
        cid = new_id("conv")
        for seq in range(1, 121):
            await store.put_message(message(cid, seq))
        first: list[int] = []
        async for doc in store.history(cid, 120):
            first.append(doc["seq"])
            if len(first) == 3:
                break
        assert first == [120, 119, 118]
        assert (await store.get_message(cid, f"{cid}-m0120"))["seq"] == 120

    run(body, store_factory)


# ---- local adapter only --------------------------------------------------------------
def test_local_history_reads_one_page_when_the_caller_stops_early(tmp_path: Any) -> None:
    from worker.local.store import HISTORY_PAGE_SIZE, LocalConversationStore

    async def main() -> None:
        store = LocalConversationStore(tmp_path / "worker.db")
        for seq in range(1, HISTORY_PAGE_SIZE * 3 + 1):
            await store.put_message(message("c", seq))
        reads = 0
        original = store._db.read

        async def counted(work: Any) -> Any:
            nonlocal reads
            reads += 1
            return await original(work)

        store._db.read = counted  # type: ignore[method-assign]
        async for doc in store.history("c", HISTORY_PAGE_SIZE * 3):
            if doc["seq"] == HISTORY_PAGE_SIZE * 3 - 5:
                break
        assert reads == 1
        reads = 0
        assert len([doc async for doc in store.history("c", HISTORY_PAGE_SIZE * 3)]) == 150
        assert reads == 4  # three full pages, then an empty one
        await store.close()

    asyncio.run(main())


@pytest.mark.parametrize(
    ("document", "key"),
    [
        ({"conversation_id": "c", "seq": 1}, "id"),
        ({"id": "m1", "seq": 1}, "conversation_id"),
        ({"id": "", "conversation_id": "c", "seq": 1}, "id"),
        ({"id": "m1", "conversation_id": 7, "seq": 1}, "conversation_id"),
    ],
)
def test_local_store_refuses_a_message_without_its_keys(
    tmp_path: Any, document: dict[str, Any], key: str
) -> None:
    """`dev seed` of such a fixture stops with the key it lacks, and stores nothing."""
    from worker.local.store import LocalConversationStore

    async def main() -> None:
        store = LocalConversationStore(tmp_path / "worker.db")
        with pytest.raises(ValueError, match=f"non-empty string {key!r}"):
            await store.put_message(document)
        with pytest.raises(ValueError, match="non-empty string 'id'"):
            await store.put_conversation({"user_id": "u-1"})
        await store.put_message(message("c", 1))
        assert await collect(store, "c", 10) == [1]
        await store.close()

    asyncio.run(main())


def test_local_store_refuses_calls_once_closed(tmp_path: Any) -> None:
    from worker.local.store import LocalConversationStore

    async def main() -> None:
        store = LocalConversationStore(tmp_path / "worker.db")
        await store.put_conversation(conversation("c"))
        await store.close()
        with pytest.raises(RuntimeError, match="closed"):
            await store.get_conversation("c")

    asyncio.run(main())
