"""Ledger contract: turn records by (conversation, turn), listed by seq, found by export id."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from schemas.records import TurnRecord
from worker.ports import Ledger


def run(body: Callable[[Ledger], Awaitable[None]], factory: Any) -> None:
    """Open a fresh ledger from the factory and run `body` on it."""

    async def main() -> None:
        async with factory.open() as ledger:
            await body(ledger)

    asyncio.run(main())


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def record(cid: str, turn_id: str, seq: int | None, *, export_id: str | None = None) -> TurnRecord:
    export = None
    if export_id is not None:
        export = {
            "export_id": export_id,
            "blob": f"exports/{cid}/{turn_id}/{export_id}.csv",
            "file_name": "export_20260101_000000.csv",
            "format": "csv",
            "row_count": 3,
            "columns": ["a"],
            "row_source": "action_rows",
            "source_artifacts": [],
            "bytes": 10,
            "sha256": "0" * 64,
            "truncated": False,
        }
    return TurnRecord.model_validate(
        {
            "id": turn_id,
            "conversation_id": cid,
            "turn_id": turn_id,
            "user_id": "u-1",
            "event_id": f"e-{turn_id}",
            "seq": seq,
            "decision": "published" if export else "no_request",
            "format": "csv" if export else None,
            "carried": False,
            "state_after": {"state": "idle", "format": None},
            "export": export,
            "processed_at": "2026-01-01T00:00:00Z",
            "event_sent": export is not None,
        }
    )


def test_get_returns_none_until_put(ledger_factory: Any) -> None:
    async def body(ledger: Ledger) -> None:
        cid = new_id("conv")
        assert await ledger.get(cid, "t1") is None
        stored = record(cid, "t1", 4)
        await ledger.put(stored)
        assert await ledger.get(cid, "t1") == stored
        assert await ledger.get(new_id("conv"), "t1") is None

    run(body, ledger_factory)


def test_put_replaces_the_record_of_the_same_turn(ledger_factory: Any) -> None:
    async def body(ledger: Ledger) -> None:
        cid = new_id("conv")
        unsent = record(cid, "t1", 4, export_id="exp_1").model_copy(update={"event_sent": False})
        await ledger.put(unsent)
        sent = unsent.model_copy(update={"event_sent": True})
        await ledger.put(sent)
        assert await ledger.get(cid, "t1") == sent
        assert [r.id for r in await ledger.list_turns(cid)] == ["t1"]

    run(body, ledger_factory)


def test_put_never_sets_a_sent_record_back_to_not_sent(ledger_factory: Any) -> None:
    """A holder whose lock lapsed may write late: the ledger must not forget the event went
    out (docs/contract/turn-record.md, `event_sent`)."""

    async def body(ledger: Ledger) -> None:
        cid = new_id("conv")
        sent = record(cid, "t1", 4, export_id="exp_1")
        await ledger.put(sent)
        late = sent.model_copy(update={"event_sent": False, "processed_at": "2026-01-02T00:00:00Z"})
        await ledger.put(late)
        assert await ledger.get(cid, "t1") == sent

    run(body, ledger_factory)


def test_create_writes_a_first_record_or_returns_the_one_stored(ledger_factory: Any) -> None:
    """Two holders of one turn: the first record written is the turn's; the other holder
    gets it back and goes on from it (docs/contract/delivery.md, step 3)."""

    async def body(ledger: Ledger) -> None:
        cid = new_id("conv")
        unsent = record(cid, "t1", 4, export_id="exp_1").model_copy(update={"event_sent": False})
        assert await ledger.create(unsent) == unsent
        assert await ledger.create(unsent) == unsent  # a repeat after a lost reply
        other = unsent.model_copy(update={"processed_at": "2026-01-02T00:00:00Z"})
        assert await ledger.create(other) == unsent
        sent = unsent.model_copy(update={"event_sent": True})
        await ledger.put(sent)
        assert await ledger.create(other) == sent
        assert await ledger.get(cid, "t1") == sent

    run(body, ledger_factory)


def test_any_turn_id_the_event_allows_keeps_its_own_record(ledger_factory: Any) -> None:
    """A turn id may hold what a Cosmos item id cannot (`/ \\ ? #`, a tab, a trailing
    space, more than 1,023 bytes): its record is still found by it, names it as `id`, and is
    no other turn's (on Cosmos it is stored under an id of its own)."""

    async def body(ledger: Ledger) -> None:
        cid = new_id("conv")
        odd = ["a/b", "t#1", "t?1", "t\\1", "t\t1", "t 1 ", "é" * 600, "turn-sha256-x"]
        for seq, turn_id in enumerate(odd, start=1):
            first = record(cid, turn_id, seq, export_id=f"exp_{seq}")
            assert await ledger.create(first) == first
            sent = first.model_copy(update={"processed_at": "2026-01-02T00:00:00Z"})
            await ledger.put(sent)
            assert await ledger.get(cid, turn_id) == sent
            assert await ledger.find_export(f"exp_{seq}") == sent
        assert [r.id for r in await ledger.list_turns(cid)] == odd
        assert [r.turn_id for r in await ledger.list_exports(cid)] == odd
        assert await ledger.get(cid, "a") is None

    run(body, ledger_factory)


def test_turns_are_listed_by_seq_per_conversation(ledger_factory: Any) -> None:
    async def body(ledger: Ledger) -> None:
        cid, other = new_id("conv"), new_id("conv")
        for turn_id, seq in [("t3", 30), ("t1", 2), ("t2", 11), ("t10", 100)]:
            await ledger.put(record(cid, turn_id, seq))
        await ledger.put(record(other, "t0", 1))
        assert [r.id for r in await ledger.list_turns(cid)] == ["t1", "t2", "t3", "t10"]
        assert [r.id for r in await ledger.list_turns(other)] == ["t0"]
        assert await ledger.list_turns(new_id("conv")) == []

    run(body, ledger_factory)


def test_list_exports_holds_only_published_records(ledger_factory: Any) -> None:
    async def body(ledger: Ledger) -> None:
        cid, other = new_id("conv"), new_id("conv")
        await ledger.put(record(cid, "t2", 20, export_id="exp_b"))
        await ledger.put(record(cid, "t1", 10, export_id="exp_a"))
        await ledger.put(record(cid, "t3", 30))
        await ledger.put(record(other, "t1", 5, export_id="exp_c"))
        mine = await ledger.list_exports(cid)
        assert [r.export.export_id for r in mine] == ["exp_a", "exp_b"]
        everything = await ledger.list_exports()
        ours = [r.export.export_id for r in everything if r.conversation_id in {cid, other}]
        assert sorted(ours) == ["exp_a", "exp_b", "exp_c"]
        assert all(r.export is not None for r in everything)
        by_conversation = [r for r in everything if r.conversation_id == cid]
        assert [r.id for r in by_conversation] == ["t1", "t2"]

    run(body, ledger_factory)


def test_find_export_returns_the_record_holding_it(ledger_factory: Any) -> None:
    async def body(ledger: Ledger) -> None:
        cid = new_id("conv")
        export_id = f"exp_{uuid.uuid4().hex[:20]}"
        stored = record(cid, "t1", 10, export_id=export_id)
        await ledger.put(stored)
        await ledger.put(record(cid, "t2", 20))
        assert await ledger.find_export(export_id) == stored
        assert await ledger.find_export(f"exp_{uuid.uuid4().hex[:20]}") is None

    run(body, ledger_factory)


def test_latest_export_is_the_published_record_processed_last(ledger_factory: Any) -> None:
    def at(cid: str, turn_id: str, seq: int, processed_at: str, export: bool) -> TurnRecord:
        export_id = f"exp_{uuid.uuid4().hex[:20]}" if export else None
        made = record(cid, turn_id, seq, export_id=export_id)
        return made.model_copy(update={"processed_at": processed_at})

    async def body(ledger: Ledger) -> None:
        assert await ledger.latest_export() is None
        cid, other = new_id("conv"), new_id("conv")
        await ledger.put(at(cid, "t1", 1, "2026-11-20T09:00:00.000000Z", export=True))
        newest = at(other, "t1", 1, "2026-11-21T08:00:00.500000Z", export=True)
        await ledger.put(newest)
        await ledger.put(at(cid, "t2", 2, "2026-11-21T07:59:59.999999Z", export=True))
        # Processed later, but without an export: not what `last_export_at` reports.
        await ledger.put(at(cid, "t3", 3, "2026-11-22T00:00:00.000000Z", export=False))
        assert await ledger.latest_export() == newest

    run(body, ledger_factory)


# ---- local adapter only --------------------------------------------------------------
def test_local_turns_without_seq_come_last_in_insertion_order(tmp_path: Any) -> None:
    from worker.local.store import LocalLedger

    async def main() -> None:
        ledger = LocalLedger(tmp_path / "worker.db")
        await ledger.put(record("c", "late-b", None))
        await ledger.put(record("c", "t2", 2))
        await ledger.put(record("c", "late-a", None))
        await ledger.put(record("c", "t1", 1))
        await ledger.put(
            record("c", "late-b", None).model_copy(update={"event_sent": True})
        )  # keeps its place
        assert [r.id for r in await ledger.list_turns("c")] == [
            "t1",
            "t2",
            "late-b",
            "late-a",
        ]
        await ledger.close()

    asyncio.run(main())


def test_local_ledger_refuses_calls_once_closed(tmp_path: Any) -> None:
    from worker.local.store import LocalLedger

    async def main() -> None:
        ledger = LocalLedger(tmp_path / "worker.db")
        assert await ledger.get("c", "t1") is None
        await ledger.close()
        with pytest.raises(RuntimeError, match="closed"):
            await ledger.get("c", "t1")

    asyncio.run(main())
