"""The turn handler shell on the local backend, in process: effects, their order, their fates."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import errno
import hashlib
import io
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import defusedxml.ElementTree as DET
import msgspec
import openpyxl
import pytest
import structlog
from spans import traced, turn_spans

from handlers import turn as story
from handlers.errors import PermanentError, RetryableError
from handlers.serialisers.csv_file import PlainCsvBatch
from tests.chat import CID, Chat, samples
from worker.checkpoints import CHECKPOINTS
from worker.digest_file import DigestFile
from worker.handler import TurnHandler
from worker.local.backend import open_local_backend
from worker.metrics import Metrics, Unexposed
from worker.observer import NO_OBSERVER, TurnObserver
from worker.operations import Operations
from worker.ports import Archived, Backend, QueueMessage, TransientError
from worker.settings import Settings
from worker.spool import RowSpool
from worker.testing.seeding import seed, seeding

PUBLIC = Path(__file__).resolve().parents[1] / "fixtures" / "public"


def headline() -> dict[str, Any]:
    return json.loads((PUBLIC / "headline.fixture.json").read_text())


def run(
    tmp_path: Path,
    fixture: dict[str, Any],
    body: Callable[[Backend, TurnHandler, QueueMessage], Awaitable[Any]],
    **settings: Any,
) -> Any:
    """Seed a fixture into a fresh local backend, receive its first event, call `body`."""

    async def main() -> Any:
        backend = open_local_backend(tmp_path / "home", lock_duration=60)
        try:
            await seed(seeding(backend), fixture)
            session = await backend.queue.accept_session(0)
            assert session is not None
            message = await session.receive(0)
            assert message is not None
            handler = TurnHandler(backend, Settings(home=tmp_path / "home", **settings))
            return await body(backend, handler, message)
        finally:
            await backend.close()

    return asyncio.run(main())


def with_event(fixture: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**fixture, "events": [{**fixture["events"][0], **changes}]}


async def blob_bytes(backend: Backend, path: str) -> bytes:
    return b"".join([chunk async for chunk in backend.blobs.read(path)])


def exported(tmp_path: Path, fixture: dict[str, Any]) -> tuple[Any, bytes]:
    """The record of a fixture's first turn, handled on a fresh home, and its file's bytes."""

    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> Any:
        record = await handler.handle(message)
        assert record.export is not None
        return record, await blob_bytes(backend, record.export.blob)

    return run(tmp_path, copy.deepcopy(fixture), body)  # type: ignore[no-any-return]


def long_history_then_a_csv(fillers: int) -> dict[str, Any]:
    """50 samples fetched, `fillers` turns of talk, then "export that as csv" (limit 60)."""
    chat = Chat()
    chat.user("get the battery history")
    chat.tools(("get_battery", samples(50)))
    chat.reply("I have 50 samples.")
    for n in range(fillers):
        chat.user(f"question {n}")
        chat.reply("answer")
    chat.user("export that as csv")
    chat.reply("Here it is.")
    event = chat.event(history_limit=60)
    return {
        "conversations": [{"id": CID, "user_id": "u1"}],
        "messages": chat.messages,
        "artifacts": chat.artifacts,
        "events": [{**msgspec.to_builtins(event), "occurred_at": "2026-11-20T09:01:39Z"}],
    }


@pytest.mark.parametrize(("limit_max", "decision"), [(40, "no_rows"), (60, "published")])
def test_a_history_limit_max_above_40_is_read_as_far_as_the_window_reaches(
    tmp_path: Path, limit_max: int, decision: str
) -> None:
    # The result sits 43 messages before the turn: inside a window of 60, outside one of 40.
    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> Any:
        return await handler.handle(message)

    fixture = long_history_then_a_csv(fillers=20)
    record = run(tmp_path, fixture, body, history_limit_max=limit_max)
    assert record.decision == decision
    if decision == "published":
        assert (record.export.row_source, record.export.row_count) == ("prior_turn", 50)


@pytest.mark.parametrize("fmt", ["json", "xml", "xlsx"])
def test_every_export_format_is_written_and_parses_back(tmp_path: Path, fmt: str) -> None:
    fixture = headline()
    word = {"json": "a json file", "xml": "xml", "xlsx": "an excel sheet"}[fmt]
    fixture["messages"][0]["content"] = f"Retrieve the BatteryVoltage1 history and create {word}"

    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> None:
        record = await handler.handle(message)
        assert record.decision == "published" and record.export is not None
        assert record.export.format == fmt and record.event_sent
        data = await blob_bytes(backend, record.export.blob)
        assert (record.export.bytes, record.export.sha256) == (
            len(data),
            hashlib.sha256(data).hexdigest(),
        )
        info = await backend.blobs.info(record.export.blob)
        assert info.file_name.endswith(f".{fmt}")
        assert (
            info.content_type
            == {
                "json": "application/json",
                "xml": "application/xml",
                "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            }[fmt]
        )
        assert info.metadata["row_count"] == "900"
        if fmt == "json":
            rows = json.loads(data)
            assert len(rows) == 900 and rows[0]["value"] == 12.45
        elif fmt == "xml":
            root = DET.fromstring(data)
            assert len(root) == 900 and root[0].find("value").text == "12.45"
        else:
            sheet = openpyxl.load_workbook(io.BytesIO(data)).active
            assert sheet.max_row == 901 and sheet["C2"].value == 12.45

    run(tmp_path, fixture, body)


def test_deleted_conversation_is_recorded_and_no_message_is_read(tmp_path: Path) -> None:
    fixture = headline()
    fixture["conversations"][0]["deleted"] = True
    fixture["messages"] = []

    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> None:
        record = await handler.handle(message)
        assert record.decision == "conversation_deleted" and record.export is None
        assert record.state_after.state == "idle" and record.format is None
        assert record.carried is False and record.seq is None

    run(tmp_path, fixture, body)


def test_foreign_user_is_not_authorized(tmp_path: Path) -> None:
    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> None:
        with pytest.raises(PermanentError) as caught:
            await handler.handle(message)
        assert caught.value.reason == "not_authorized"
        assert await backend.ledger.get("conv_headline_a", "turn_headline_a1") is None

    run(tmp_path, with_event(headline(), user_id="mallory"), body)


@pytest.mark.parametrize("turn_id", ["..", ".", "turn\\a1", "turn\x00a1"])
def test_a_turn_id_that_cannot_be_a_blob_folder_is_schema_invalid_before_anything_is_read(
    tmp_path: Path, turn_id: str
) -> None:
    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> None:
        with pytest.raises(PermanentError) as caught:
            await handler.handle(message)
        assert caught.value.reason == "schema_invalid"
        assert "turn_id" in str(caught.value)
        assert await backend.blobs.exists("exports/conv_headline_a/x") is False
        assert await backend.ledger.list_turns("conv_headline_a") == []

    fixture = with_event(headline(), turn_id=turn_id)
    for message in fixture["messages"]:  # the turn is there: only the blob path fails
        if message["turn_id"] == "turn_headline_a1":
            message["turn_id"] = turn_id
    run(tmp_path, fixture, body)


def schema_invalid(says: str) -> Callable[[Backend, TurnHandler, QueueMessage], Awaitable[None]]:
    """A `run` body: the headline turn is refused as schema_invalid, saying `says`, and
    nothing is recorded."""

    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> None:
        with pytest.raises(PermanentError) as caught:
            await handler.handle(message)
        assert caught.value.reason == "schema_invalid"
        assert says in str(caught.value)
        assert await backend.ledger.list_turns("conv_headline_a") == []

    return body


def test_a_message_of_the_turn_with_a_fractional_seq_is_schema_invalid(tmp_path: Path) -> None:
    # The local store once left such a message out of the history, so its results went
    # unseen and the turn reached back or ended no_rows; Cosmos DB's query returns it.
    fixture = headline()
    turn = [m for m in fixture["messages"] if m["turn_id"] == "turn_headline_a1"]
    tool = next(m for m in turn if m["role"] == "tool")
    before = max(m["seq"] for m in turn if m["seq"] < tool["seq"])
    tool["seq"] = before + 0.5
    run(tmp_path, fixture, schema_invalid("'seq'"))


def test_a_turns_user_message_that_does_not_parse_is_schema_invalid_not_skipped(
    tmp_path: Path,
) -> None:
    # Skipped like an earlier turn's bad message, it would leave the turn without its
    # request: read back past it to the cap, then retried as not found, for nothing.
    fixture = headline()
    event = fixture["events"][0]
    user = next(m for m in fixture["messages"] if m["id"] == event["user_message_id"])
    user["role"] = "robot"
    # The description names the document to mend, and its field.
    run(tmp_path, fixture, schema_invalid(f"stored message {user['id']} invalid: field 'role'"))


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"conversation_id": "conv_missing"}, "conversation_not_found"),
        ({"reply_message_id": "msg_missing"}, "turn_not_found"),
        ({"user_message_id": "msg_missing"}, "turn_not_found"),
    ],
)
def test_not_found_yet_is_retryable_with_its_reason(
    tmp_path: Path, change: dict[str, str], reason: str
) -> None:
    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> None:
        with pytest.raises(RetryableError) as caught:
            await handler.handle(message)
        assert caught.value.reason == reason

    run(tmp_path, with_event(headline(), **change), body)


class CountingStore:
    """The store, with the documents its history hands out counted."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.read = 0
        self.point_reads: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def get_message(self, conversation_id: str, message_id: str) -> Any:
        self.point_reads.append(message_id)
        return await self._inner.get_message(conversation_id, message_id)

    async def history(self, conversation_id: str, max_seq: int) -> AsyncIterator[Any]:
        async for document in self._inner.history(conversation_id, max_seq):
            self.read += 1
            yield document


def counted_reads(
    tmp_path: Path,
    fixture: dict[str, Any],
    observer: TurnObserver = NO_OBSERVER,
    **settings: Any,
) -> tuple[Any, int, list[str]]:
    """The outcome of handling the fixture's first event (a record or the error raised),
    how many stored messages its history read handed out, and its point reads."""

    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> Any:
        store = CountingStore(backend.store)
        handler.backend = msgspec.structs.replace(backend, store=store)
        handler.observer = observer
        try:
            outcome = await handler.handle(message)
        except RetryableError as exc:
            outcome = exc
        return outcome, store.read, store.point_reads

    return run(tmp_path, fixture, body, **settings)  # type: ignore[no-any-return]


@pytest.mark.parametrize(("limit_max", "read"), [(40, 42), (60, 62)])
def test_the_history_is_read_no_further_than_the_turn_and_its_window(
    tmp_path: Path, limit_max: int, read: int
) -> None:
    # 400 messages of talk before the request; the reply, its user message, then the
    # window (the event asks 60, HISTORY_LIMIT_MAX allows limit_max; the look-back is 40).
    record, reads, _ = counted_reads(
        tmp_path, long_history_then_a_csv(fillers=200), history_limit_max=limit_max
    )
    assert record.decision == "no_rows" and reads == read


def test_a_skipped_message_is_not_counted_in_the_window(tmp_path: Path) -> None:
    # A stored message that does not parse and is not the turn's is skipped: the window
    # still holds 40 messages that do, so the read takes one more document.
    fixture = long_history_then_a_csv(fillers=200)
    messages = fixture["messages"]
    bad = {**messages[-10], "id": "msg_unreadable", "turn_id": "turn_other", "role": "robot"}
    messages.insert(len(messages) - 10, bad)
    for seq, message in enumerate(messages, start=1):
        message["seq"] = seq
    metrics = Metrics()
    with structlog.testing.capture_logs() as logs:
        record, reads, _ = counted_reads(tmp_path, fixture, observer=Operations(metrics))
    assert (record.decision, reads) == ("no_rows", 43)
    skipped = [e for e in logs if e["event"] == "stored_message_skipped"]
    assert [e["skipped_message_id"] for e in skipped] == ["msg_unreadable"]
    # Counted for an alert: the chat service writes messages the worker cannot read.
    assert metrics.registry.get_sample_value("export_worker_stored_messages_skipped_total") == 1


class OddDocumentsStore(CountingStore):
    """The store, with `odd` handed out by the history just before the turn's user message."""

    def __init__(self, inner: Any, before: str, odd: list[Any]) -> None:
        super().__init__(inner)
        self._before, self._odd = before, odd

    async def history(self, conversation_id: str, max_seq: int) -> AsyncIterator[Any]:
        async for document in self._inner.history(conversation_id, max_seq):
            yield document
            if document["id"] == self._before:
                for odd in self._odd:
                    yield odd


@pytest.mark.parametrize(
    ("odd", "shown"),
    [
        ({"id": "msg_old", "role": "robot"}, "msg_old"),
        ({"id": "msg\nforged_line", "role": "robot"}, "'msg\\nforged_line'"),
        ({"id": 41, "role": "robot"}, "41"),
        ({"id": "", "role": "robot"}, "''"),
        ({"role": "robot"}, "None"),
        ({"id": "m" * 500, "role": "robot"}, "m" * 128),
        (["not", "a", "document"], "None"),
    ],
)
def test_a_skipped_documents_id_is_logged_as_one_printable_line(
    tmp_path: Path, odd: Any, shown: str
) -> None:
    # Earlier turns' documents, after the user message (newest first): skipped, not a bug.
    fixture = headline()
    user_id = fixture["events"][0]["user_message_id"]

    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> Any:
        handler.backend = msgspec.structs.replace(
            backend, store=OddDocumentsStore(backend.store, user_id, [odd])
        )
        return await handler.handle(message)

    with structlog.testing.capture_logs() as logs:
        record = run(tmp_path, fixture, body)
    assert record.decision == "published"
    skipped = [e["skipped_message_id"] for e in logs if e["event"] == "stored_message_skipped"]
    assert skipped == [shown]


def test_a_turns_message_with_an_odd_id_is_named_in_one_printable_line(tmp_path: Path) -> None:
    fixture = headline()
    call = next(m for m in fixture["messages"] if m["role"] == "assistant" and m["tool_calls"])
    call["deleted"] = None
    call["id"] = "msg\tcalls"
    run(tmp_path, fixture, schema_invalid("stored message 'msg\\tcalls' invalid: field 'deleted'"))


def test_an_artifact_path_with_a_newline_is_described_in_one_line(tmp_path: Path) -> None:
    # Inside the conversation's folder, so read (and not found): the description, which
    # `dlq list` prints as one line, shows the path by its repr.
    fixture = headline()
    result = next(
        r
        for m in fixture["messages"]
        if m["role"] == "tool"
        for r in m["results"]
        if r["name"] == "list_parameter_history"
    )
    result["artifact"] = result["artifact"].replace(".json", "\nforged: line.json")

    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> None:
        with pytest.raises(RetryableError) as caught:
            await handler.handle(message)
        assert caught.value.reason == "artifact_missing"
        assert caught.value.description == f"artifact {result['artifact']!r} not found"
        assert "\n" not in caught.value.description

    run(tmp_path, fixture, body)


class ArchivedBlobs:
    """The blob store, with the blobs under `archived` offline, as Blob Storage's archive
    tier keeps them."""

    def __init__(self, inner: Any, archived: set[str]) -> None:
        self._inner, self._archived = inner, archived

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def read(self, path: str, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
        if path in self._archived:
            raise Archived("ResourceExistsError 409 BlobArchived")
        async for chunk in self._inner.read(path, chunk_size):
            yield chunk


def test_an_archived_artifact_is_retried_as_missing_saying_it_is_archived(tmp_path: Path) -> None:
    # Not "not found", which sends an operator looking for a blob that is there, and not a
    # transient failure: it stays offline until rehydrated, then the dead letter is replayed.
    fixture = headline()
    page = next(path for path in fixture["artifacts"] if "call_7d3a" in path)  # a winning page

    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> None:
        handler.backend = msgspec.structs.replace(
            backend, blobs=ArchivedBlobs(backend.blobs, {page})
        )
        with pytest.raises(RetryableError) as caught:
            await handler.handle(message)
        assert caught.value.reason == "artifact_missing"
        assert caught.value.description == f"artifact {page} is archived: rehydrate it, then replay"

    run(tmp_path, fixture, body)


def test_a_turn_without_a_skipped_message_counts_none(tmp_path: Path) -> None:
    metrics = Metrics()
    record, _, _ = counted_reads(tmp_path, headline(), observer=Operations(metrics))
    assert record.decision == "published"
    assert metrics.registry.get_sample_value("export_worker_stored_messages_skipped_total") == 0


def test_the_read_cap_ends_a_look_back_past_a_user_message_already_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("worker.handler.MAX_MESSAGES_READ", 10)
    fixture = long_history_then_a_csv(fillers=200)
    record, reads, point_reads = counted_reads(tmp_path, fixture, history_limit_max=60)
    # No point read of the user message to ask whether to read on: it was among the ten.
    assert (record.decision, reads) == ("no_rows", 10)
    assert point_reads == [fixture["events"][0]["reply_message_id"]]


@pytest.mark.parametrize("cap", [1, 2, 3])
def test_a_turn_not_found_within_the_read_cap_stops_at_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cap: int
) -> None:
    monkeypatch.setattr("worker.handler.MAX_MESSAGES_READ", cap)
    missing = with_event(headline(), user_message_id="msg_missing")
    error, reads, _ = counted_reads(tmp_path / "missing", missing)
    assert (error.reason, reads) == ("turn_not_found", cap)
    monkeypatch.setattr("worker.handler.MAX_TURN_MESSAGES_READ", cap + 1)
    # A user message stored after the reply is no reason to read further back.
    later = headline()
    later["messages"].append({**later["messages"][0], "id": "msg_later", "seq": 8})
    error, reads, _ = counted_reads(
        tmp_path / "later", with_event(later, user_message_id="msg_later")
    )
    assert (error.reason, reads) == ("turn_not_found", cap)
    # A user message stored older than the cap reads on, still bounded: past
    # MAX_TURN_MESSAGES_READ, it is not there.
    error, reads, _ = counted_reads(tmp_path / "too_long", headline())
    assert (error.reason, reads) == ("turn_not_found", cap + 1)


@pytest.mark.parametrize("cap", [1, 2, 3])
def test_a_turn_longer_than_the_read_cap_is_read_to_its_user_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cap: int
) -> None:
    """A turn of thousands of tool messages passes MAX_MESSAGES_READ before its user
    message: a point read finds the user message older, and the turn is read to it (it was
    retried as turn_not_found, then dead-lettered). One that is not there keeps the cap:
    test_a_turn_not_found_within_the_read_cap_stops_at_it."""
    expected, expected_bytes = exported(tmp_path / "default", headline())
    monkeypatch.setattr("worker.handler.MAX_MESSAGES_READ", cap)
    record, data = exported(tmp_path / "capped", headline())
    assert data == expected_bytes
    assert record.model_dump(exclude={"processed_at"}) == expected.model_dump(
        exclude={"processed_at"}
    )


def test_an_artifact_replaced_while_read_is_retried_not_taken_for_a_bug(tmp_path: Path) -> None:
    # Blob Storage answers 412 when the blob's ETag changes between the ranges of one read:
    # the Conflict had reached settlement as a bug (dead-lettered handler_error at once).
    from worker.ports import Conflict, TransientError
    from worker.retry_policy import RetryPolicy
    from worker.settlement import Abandon, settle

    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> None:
        def replaced(path: str) -> Any:
            async def chunks() -> Any:
                yield b"{"
                raise Conflict("the blob changed: 412 ConditionNotMet")

            return chunks()

        backend.blobs.read = replaced  # type: ignore[method-assign]
        with pytest.raises(TransientError) as caught:
            await handler.handle(message)
        assert isinstance(settle(caught.value, 1, RetryPolicy()), Abandon)

    run(tmp_path, headline(), body)


def test_missing_artifact_is_retryable_and_never_replaced_by_the_citation(tmp_path: Path) -> None:
    fixture = headline()
    del fixture["artifacts"][
        "artifacts/conv_headline_a/turn_headline_a1/call_7d3a59796e9b1e2968dba4d6.json"
    ]

    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> None:
        with pytest.raises(RetryableError) as caught:
            await handler.handle(message)
        assert caught.value.reason == "artifact_missing"
        assert await backend.ledger.get("conv_headline_a", "turn_headline_a1") is None

    run(tmp_path, fixture, body)


@pytest.mark.parametrize(
    ("stored", "says"),
    [
        (b"\x00not json", "is not JSON"),
        (b"5", "invalid: field 'document': Expected `object`, got `int`"),
        (b"[1, 2]", "invalid: field 'document': Expected `object`, got `array`"),
    ],
)
def test_artifact_that_is_not_an_artifact_is_dead_lettered_as_invalid(
    tmp_path: Path, stored: bytes, says: str
) -> None:
    fixture = headline()

    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> None:
        path = "artifacts/conv_headline_a/turn_headline_a1/call_7d3a59796e9b1e2968dba4d6.json"
        await backend.blobs.put(path, stored)
        with pytest.raises(PermanentError) as caught:
            await handler.handle(message)
        assert caught.value.reason == "artifact_invalid"
        assert caught.value.description.startswith(f"artifact {path} {says}")
        assert "12.45" not in caught.value.description

    run(tmp_path, fixture, body)


@pytest.mark.parametrize("over", [0, 1])
def test_an_artifact_past_the_size_cap_is_invalid_one_at_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, over: int
) -> None:
    fixture = headline()

    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> None:
        sizes = [len(await blob_bytes(backend, path)) for path in fixture["artifacts"]]
        assert max(sizes) > 10_000  # a winning page's 450 rows: it is read
        monkeypatch.setattr("worker.handler.MAX_ARTIFACT_BYTES", max(sizes) - over)
        if not over:
            assert (await handler.handle(message)).decision == "published"
            return
        with pytest.raises(PermanentError) as caught:
            await handler.handle(message)
        assert caught.value.reason == "artifact_invalid"
        assert caught.value.description.endswith(" is too large")

    run(tmp_path, fixture, body)


@pytest.mark.parametrize(
    ("fmt", "word", "unit"),
    [
        ("csv", "a csv", "V\ufffd"),  # U+FFFD: UTF-8 cannot hold a lone surrogate
        ("json", "a json file", "V\ud800"),  # written as the same \ud800 escape
        ("xml", "xml", "V"),  # XML 1.0 cannot hold it: dropped
        ("xlsx", "an excel sheet", "V\ufffd"),
    ],
)
def test_a_lone_surrogate_in_an_artifact_is_exported_as_its_format_writes_it(
    tmp_path: Path, fmt: str, word: str, unit: str
) -> None:
    """JSON may escape half a surrogate pair (`"\\ud800"`); the row is data, not a bug."""
    fixture = headline()
    fixture["messages"][0]["content"] = f"Retrieve the BatteryVoltage1 history and create {word}"
    pages = {  # copies: the fixture seeds as it is, these replace the two pages after
        path: copy.deepcopy(artifact)
        for path, artifact in fixture["artifacts"].items()
        if artifact["name"] == "list_parameter_history"
    }
    for artifact in pages.values():
        for item in artifact["result"]["items"][3:6]:  # past the 3 rows the reply pasted
            item["unit"] = "V\ud800"
    first, second = pages.values()
    second["result"]["items"].append(dict(first["result"]["items"][3]))  # a repeat: dropped

    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> None:
        for path, artifact in pages.items():  # escaped: the seeding's UTF-8 cannot hold it
            await backend.blobs.put(path, json.dumps(artifact).encode("ascii"))
        record = await handler.handle(message)
        assert record.decision == "published" and record.export is not None
        assert record.export.format == fmt and record.export.row_count == 900
        data = await blob_bytes(backend, record.export.blob)
        if fmt == "csv":
            lines = data.decode("utf-8").splitlines()
            assert lines[4].endswith(f",{unit}") and lines[1].endswith(",V")
        elif fmt == "json":
            assert b'"V\\ud800"' in data and json.loads(data)[3]["unit"] == unit
        elif fmt == "xml":
            assert DET.fromstring(data)[3].find("unit").text == unit
        else:
            sheet = openpyxl.load_workbook(io.BytesIO(data)).active
            assert sheet["D5"].value == unit and sheet["D2"].value == "V"

    run(tmp_path, fixture, body)


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_a_lone_surrogate_in_a_key_is_published_and_announced(tmp_path: Path, fmt: str) -> None:
    """The column's name goes into the record and the event, which are UTF-8: it had failed
    the announcement after the file was written and the record stored (handler_error)."""
    fixture = headline()
    fixture["messages"][0]["content"] = f"Retrieve the BatteryVoltage1 history as {fmt}"
    pages = {
        path: copy.deepcopy(artifact)
        for path, artifact in fixture["artifacts"].items()
        if artifact["name"] == "list_parameter_history"
    }
    for artifact in pages.values():
        for item in artifact["result"]["items"]:
            item["unit\ud800"] = item.pop("unit")

    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> None:
        for path, artifact in pages.items():
            await backend.blobs.put(path, json.dumps(artifact).encode("ascii"))
        record = await handler.handle(message)
        assert record.decision == "published" and record.event_sent
        assert record.export is not None and "unit\ufffd" in record.export.columns
        [sent] = await backend.publisher.sent()
        assert "unit\ufffd" in sent["columns"]

    run(tmp_path, fixture, body)


def test_over_the_size_cap_is_too_large_and_leaves_no_file(tmp_path: Path) -> None:
    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> None:
        record = await handler.handle(message)
        assert record.decision == "too_large" and record.export is None
        assert record.format == "csv"
        exports = tmp_path / "home" / "blobs" / "exports"
        assert not exports.exists() or not [p for p in exports.rglob("*") if p.is_file()]
        staging = tmp_path / "home" / "blobs" / ".staging"
        assert not staging.exists() or not list(staging.iterdir())
        assert await backend.publisher.sent() == []

    run(tmp_path, headline(), body, max_export_bytes=10_000)


def test_more_columns_than_a_sheet_holds_is_too_large_not_a_dead_letter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """files.md: a workbook that cannot hold the rows' columns is `too_large`, like one that
    cannot hold their rows (the writer's ValueError had dead-lettered the turn)."""
    from handlers.serialisers import xlsx_file

    monkeypatch.setattr(xlsx_file, "MAX_XLSX_COLUMNS", 3)  # the headline's rows have 4
    fixture = headline()
    fixture["messages"][0]["content"] = "Retrieve the BatteryVoltage1 history as an excel sheet"

    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> None:
        record = await handler.handle(message)
        assert record.decision == "too_large" and record.export is None
        assert record.format == "xlsx"
        assert await backend.publisher.sent() == []

    run(tmp_path, fixture, body)


def wide_headline(columns: int) -> dict[str, Any]:
    """The headline turn, a few of its history rows holding `columns` more long-named keys."""
    fixture = headline()
    for artifact in fixture["artifacts"].values():
        if artifact["name"] == "list_parameter_history":
            for item in artifact["result"]["items"][-3:]:
                item.update((f"sensor reading {n:05d} " + "x" * 60, n) for n in range(columns))
    return fixture


async def too_large_with_nothing_written(tmp_path: Path, backend: Backend, record: Any) -> None:
    """The turn ended `too_large`: no export recorded, no file left, no event sent."""
    assert record.decision == "too_large" and record.export is None
    exports = tmp_path / "home" / "blobs" / "exports"
    assert not exports.exists() or not [p for p in exports.rglob("*") if p.is_file()]
    assert await backend.publisher.sent() == []


@pytest.mark.parametrize("cap", [None, 2_000_000])
def test_an_export_its_event_could_not_carry_is_too_large_before_its_file_is_written(
    tmp_path: Path, cap: int | None
) -> None:
    """3,000 long column names make an export.published of ~250 KB, past what a Service Bus
    standard message holds: decided `too_large` before anything is written, not a record
    whose announcement fails for ever; a topic that carries it (MAX_EVENT_BYTES) gets it."""

    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> None:
        record = await handler.handle(message)
        if cap is None:
            await too_large_with_nothing_written(tmp_path, backend, record)
        else:
            assert record.decision == "published" and record.export is not None
            (sent,) = await backend.publisher.sent()
            assert len(sent["columns"]) == 3004

    settings = {} if cap is None else {"max_event_bytes": cap}
    run(tmp_path, wide_headline(3000), body, **settings)


@pytest.mark.parametrize("cap", [None, 100_000])
def test_an_export_its_record_could_not_hold_is_too_large_before_its_file_is_written(
    tmp_path: Path, cap: int | None
) -> None:
    """The turn record names every column (and every group and artifact): 1,500 long
    column names make a record of ~130 KB. Past the record cap the turn is `too_large`
    before anything is written, not an upload whose record the store refuses at every
    delivery; under it, the export is published."""

    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> None:
        record = await handler.handle(message)
        if cap is not None:
            await too_large_with_nothing_written(tmp_path, backend, record)
        else:
            assert record.decision == "published" and record.export is not None
            assert len(record.export.columns) == 1504
            assert len(record.model_dump_json()) > 100_000

    settings = {} if cap is None else {"max_record_bytes": cap}
    run(tmp_path, wide_headline(1500), body, **settings)


def test_a_tool_name_holding_a_lone_surrogate_is_recorded_not_taken_for_a_bug(
    tmp_path: Path,
) -> None:
    # json.loads keeps a stored message's "\ud800" escape as a lone surrogate; the name
    # reaches the record's selection groups, which the record size cap measures.
    fixture = headline()
    for message in fixture["messages"]:
        for item in [*(message.get("tool_calls") or []), *(message.get("results") or [])]:
            if item["name"] == "list_parameter_history":
                item["name"] += "\ud800"

    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> None:
        record = await handler.handle(message)
        assert record.decision == "published" and record.export is not None
        assert "list_parameter_history\ud800" in [g.action for g in record.export.selection.groups]

    run(tmp_path, fixture, body)


@pytest.mark.parametrize(("code", "fate"), [(errno.ENOSPC, TransientError), (errno.EBADF, OSError)])
def test_a_full_disk_is_transient_another_os_error_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, fate: type[Exception]
) -> None:
    """A turn whose spool (or digest file, or local blob) finds the disk full is tried again
    later, as a throttled store is; any other OS error is a bug, dead-lettered as one."""

    def full(*_: Any) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(RowSpool, "extend", full)

    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> None:
        with pytest.raises(fate) as raised:
            await handler.handle(message)
        assert type(raised.value) is fate
        if fate is TransientError:
            assert isinstance(raised.value.__cause__, OSError)
        assert await backend.ledger.get("conv_headline_a", "turn_headline_a1") is None

    run(tmp_path, headline(), body)


def test_a_published_turn_passes_each_named_point_of_the_sequence_in_order(
    tmp_path: Path,
) -> None:
    # The crash harness stops the worker at these points: one skipped is a crash window
    # nobody tests (worker/checkpoints.py, docs/contract/delivery.md).
    passed: list[str] = []

    async def checkpoint(name: str) -> None:
        if not passed or passed[-1] != name:  # during_blob: once per staged chunk
            passed.append(name)

    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> None:
        handler.checkpoint = checkpoint
        assert (await handler.handle(message)).decision == "published"

    run(tmp_path, headline(), body)
    assert passed == list(CHECKPOINTS)


def test_published_turn_is_completed_at_once_without_reading(tmp_path: Path) -> None:
    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> None:
        with structlog.testing.capture_logs() as logs:
            first = await handler.handle(message)
        assert "turn_already_recorded" not in [e["event"] for e in logs]
        reads: list[str] = []
        original = backend.store.get_conversation

        async def counting(cid: str) -> dict[str, Any]:
            reads.append(cid)
            return await original(cid)

        backend.store.get_conversation = counting  # type: ignore[method-assign]
        with structlog.testing.capture_logs() as logs:
            again = await handler.handle(message)
        assert again == first and reads == []
        assert len(await backend.publisher.sent()) == 1
        # Said once, and only for a turn that needed nothing more.
        assert [e["event"] for e in logs] == ["turn_already_recorded"]

    run(tmp_path, headline(), body)


def test_crash_between_record_and_event_converges_on_redelivery(tmp_path: Path) -> None:
    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> None:
        original = backend.publisher.publish

        async def crash(message_id: str, data: bytes, properties: Any = None) -> None:
            raise ConnectionResetError("lost the topic")

        backend.publisher.publish = crash  # type: ignore[method-assign]
        with pytest.raises(ConnectionResetError):
            await handler.handle(message)
        stored = await backend.ledger.get("conv_headline_a", "turn_headline_a1")
        assert stored is not None and stored.decision == "published"
        assert stored.event_sent is False

        backend.publisher.publish = original  # type: ignore[method-assign]
        # The redelivery writes no blob: its span learns the export's id at the publish.
        operations, exporter, provider = traced(Unexposed())
        handler.observer = operations
        with operations.handling(message):
            record = await handler.handle(message)
        assert record.event_sent is True
        assert record.export == stored.export and stored.export is not None
        sent = await backend.publisher.sent()
        assert [e["export_id"] for e in sent] == [stored.export.export_id]
        [turn] = turn_spans(exporter)
        assert turn["export_worker.export_id"] == stored.export.export_id
        provider.shutdown()

    run(tmp_path, headline(), body)


def test_export_published_event_matches_the_record(tmp_path: Path) -> None:
    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> None:
        record = await handler.handle(message)
        [event] = await backend.publisher.sent()
        assert record.export is not None
        assert event["type"] == "export.published" and event["version"] == 1
        for key in (
            "export_id",
            "format",
            "file_name",
            "blob",
            "row_count",
            "columns",
            "row_source",
            "truncated",
        ):
            assert event[key] == getattr(record.export, key)
        assert event["turn_id"] == record.turn_id and event["user_id"] == record.user_id

    run(tmp_path, headline(), body)


def test_published_record_says_why_its_rows_were_chosen(tmp_path: Path) -> None:
    async def body(backend: Backend, handler: TurnHandler, message: QueueMessage) -> None:
        record = await handler.handle(message)
        recorded = await backend.ledger.get("conv_headline_a", "turn_headline_a1")
        assert record.export is not None and record.export.selection is not None
        assert recorded is not None
        stored = recorded.model_dump()
        assert stored["export"]["selection"]["rule"] == "excerpt_replaced"
        groups = {g["action"]: g for g in stored["export"]["selection"]["groups"]}
        assert groups["list_parameter_history"]["rows"] == 900
        assert groups["list_parameter_history"]["chosen"] is True
        assert groups["list_instances"]["rows"] is None  # a lookup never read

    run(tmp_path, headline(), body)


def test_large_combined_groups_write_the_same_csv_with_batches_spooled_as_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two groups of over a batch (1,024 rows) each, combined: their spooled batches are
    written as CSV records and laid out under the file's columns with the source column;
    the file is the one the values would have written."""
    fixture = json.loads((PUBLIC / "two_small_groups.fixture.json").read_text())
    for artifact in fixture["artifacts"].values():
        result = artifact["result"]
        items = result["items"] if isinstance(result, dict) else result
        grown = [
            {key: f"{value}-{n}" if isinstance(value, str) else n for key, value in item.items()}
            for n in range(1500 + len(items))
            for item in items[n % len(items) : n % len(items) + 1]
        ]
        items[:] = grown

    def export(home: str) -> tuple[Any, bytes]:
        return exported(tmp_path / home, fixture)

    laid_out: list[int] = []
    records = PlainCsvBatch.records

    def counted(batch: PlainCsvBatch, names: Any, keys: Any) -> Any:
        laid_out.append(len(batch.constants))
        return records(batch, names, keys)

    monkeypatch.setattr(PlainCsvBatch, "records", counted)
    record, data = export("records")
    assert record.export.row_source == "action_rows" and record.export.row_count > 3000
    assert record.export.selection.rule == "combined"
    assert laid_out and set(laid_out) == {1}  # every batch took the source column
    header = data.decode("utf-8-sig").split("\r\n", 1)[0]
    assert header.endswith(",Source action")
    monkeypatch.setattr(RowSpool, "write_as", lambda spool, encode: None)
    assert export("values")[1] == data


@pytest.mark.parametrize(("fmt", "word"), [("csv", "a csv"), ("json", "a json file")])
def test_a_large_groups_repeats_found_after_its_last_page_leave_the_file_page_by_page_gave(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str, word: str
) -> None:
    """Two pages of 5,000 rows, the second repeating 1,000 of the first: the group's digests
    go to the turn's digest file, and the file written skips the repeats the log finds,
    byte for byte the file the in-memory de-duplication writes."""
    fixture = headline()
    fixture["messages"][0]["content"] = f"Retrieve the BatteryVoltage1 history and create {word}"
    first, second = (
        artifact["result"]["items"]
        for artifact in fixture["artifacts"].values()
        if artifact["name"] == "list_parameter_history"
    )
    grown = [
        {"timestamp": f"2026-11-{page + 20}T{n:05d}", "parameter": "P", "value": n, "unit": "V"}
        for page in range(2)
        for n in range(4550)
    ]
    first.extend(grown[:4550])
    second.extend(grown[4550 + 1000 :])
    second.extend(grown[1000:2000])  # repeats of the first page: dropped
    second.extend({"timestamp": f"x{n}", "note": "another shape"} for n in range(10))
    appended: list[int] = []
    append = DigestFile.append

    def spied(self: DigestFile, data: bytes) -> int:
        appended.append(len(data))
        return append(self, data)

    monkeypatch.setattr(DigestFile, "append", spied)

    def export(home: str) -> tuple[Any, bytes]:
        return exported(tmp_path / home, fixture)

    logged, data = export("logged")
    assert appended  # the group's digests went to the file
    assert logged.export.row_count == 450 + 4550 + 450 + 3550 + 10
    original = story.collector_for
    monkeypatch.setattr(
        story, "collector_for", lambda phase, running, store=None: original(phase, running)
    )
    appended.clear()
    in_memory, same_data = export("in-memory")
    assert not appended
    assert in_memory.export.row_count == logged.export.row_count
    assert same_data == data


def clock_at(at: str) -> Callable[[], datetime]:
    return lambda: datetime.fromisoformat(at)


@pytest.mark.parametrize("b_stops_after", [None, "after_record"])
def test_a_holder_whose_lock_lapsed_continues_from_the_record_another_holder_wrote(
    tmp_path: Path, b_stops_after: str | None
) -> None:
    """A stalls past its lock after writing the blob; B takes the message and writes the
    record (and finishes, or stops right after the record). A's first record must not
    replace B's: A announces B's record, or finds it announced, and never sets it back."""

    class Stopped(Exception):
        pass

    async def body(backend: Backend, _: TurnHandler, message: QueueMessage) -> None:
        settings = Settings(home=tmp_path / "home")
        b_went = asyncio.Event()

        async def a_stalls(name: str) -> None:
            if name == "after_blob":
                await b_went.wait()

        async def b_stops(name: str) -> None:
            if name == b_stops_after:
                raise Stopped

        a = TurnHandler(backend, settings, clock_at("2026-12-01T10:00:00+00:00"), a_stalls)
        b = TurnHandler(backend, settings, clock_at("2026-12-01T10:05:00+00:00"), b_stops)
        a_turn = asyncio.create_task(a.handle(message))
        await asyncio.sleep(0.2)
        assert not a_turn.done()
        with contextlib.suppress(Stopped):
            await b.handle(message)
        b_went.set()
        a_record = await a_turn
        stored = await backend.ledger.get("conv_headline_a", "turn_headline_a1")
        assert stored is not None and stored == a_record
        assert stored.processed_at == "2026-12-01T10:05:00.000000Z"  # B's
        assert stored.event_sent is True
        [event] = await backend.publisher.sent()
        assert event["occurred_at"] == stored.processed_at

    run(tmp_path, headline(), body)
