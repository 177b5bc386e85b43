"""The turn handler shell: load, call the decision core, act on what it returns.

Order of effects (SPEC section 9), each idempotent so a crash between any two converges on
redelivery: ledger check → authorise → read → decide → fetch → blob at its deterministic
path → turn record (event_sent false) → export.published (message id = export id) →
event_sent true. The runtime completes the queue message only after `handle` returns.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import pydantic

from handlers import turn as story
from handlers.errors import PermanentError, RetryableError
from handlers.file_layout import action_cells, table_cells
from schemas.documents import Artifact, Conversation, Message, parse_message
from schemas.events import ExportPublished, InvalidEvent, TurnCompleted, parse_turn_completed
from schemas.records import ExportEntry, StateAfter, TurnRecord
from worker.crashpoints import crashpoint
from worker.export_file import TooLarge, content_type, write_export
from worker.logs import get_logger
from worker.ports import Backend, BlobInfo, NotFound, QueueMessage
from worker.retry import RetryPolicy
from worker.settings import Settings
from worker.spool import RowSpool

# A turn whose user message is not found within this many messages is not there (yet).
MAX_MESSAGES_READ = 5000
MAX_ARTIFACT_BYTES = 256 * 1024 * 1024

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The wall clock, in UTC."""
    return datetime.now(UTC)


class TurnHandler:
    """Handles one `turn.completed` message end to end."""

    def __init__(self, backend: Backend, settings: Settings, clock: Clock = utc_now) -> None:
        self.backend = backend
        self.settings = settings
        self.clock = clock

    async def handle(self, message: QueueMessage) -> TurnRecord:
        """Process one message; raise an ExportError (or a port error) to decide its fate."""
        try:
            event = parse_turn_completed(message.body)
        except InvalidEvent as exc:
            raise PermanentError("schema_invalid", str(exc)) from None
        log = get_logger(
            conversation_id=event.conversation_id, turn_id=event.turn_id, event_id=event.event_id
        )
        ledger = self.backend.ledger
        existing = await ledger.get(event.conversation_id, event.turn_id)
        if existing is not None:
            record = TurnRecord.model_validate(existing)
            if record.user_id != event.user_id:
                # Not a redelivery: another user names a recorded turn. A forged event must
                # meet authorisation (and its security warning) like any first delivery.
                await self._authorised(event, log)
            if record.decision != "published" or record.event_sent:
                log.info("turn_already_recorded", decision=record.decision)
                return record
            return await self._announce(record, log)

        conversation, access = await self._authorised(event, log)
        if access == "deleted":
            facts = story.TurnFacts(None, False, StateAfter(state="idle"), None)
            return await self._record(event, "conversation_deleted", facts, None, log)

        messages = await self._read_turn(event)
        inp = story.TurnInput(
            event=event,
            conversation=conversation,
            messages=messages,
            history_limit=event.effective_history_limit(
                self.settings.history_limit_default, self.settings.history_limit_max
            ),
            artifacts_container=self.settings.artifacts_container,
            exports_container=self.settings.exports_container,
            now=self.clock(),
        )
        outcome = story.decide(inp)
        with RowSpool() as spool:
            while isinstance(outcome, story.NeedRows):
                await self._fetch(outcome, spool)
                outcome = story.after_rows(outcome)
            if isinstance(outcome, story.Finished):
                return await self._record(event, outcome.decision, outcome.facts, None, log)
            return await self._export(event, outcome, spool, log)

    # ----------------------------------------------------------------------------------
    async def _authorised(
        self, event: TurnCompleted, log: Any
    ) -> tuple[Conversation, story.Authorisation]:
        """The conversation and the user's access to it; not_authorized for a stranger."""
        conversation = await self._conversation(event)
        access = story.authorise(conversation, event.user_id)
        if access == "forbidden":
            log.warning("export_not_authorized", user_id=event.user_id, security=True)
            raise PermanentError(
                "not_authorized", "the user is neither owner nor participant of the conversation"
            )
        return conversation, access

    async def _conversation(self, event: TurnCompleted) -> Conversation:
        try:
            document = await self.backend.store.get_conversation(event.conversation_id)
        except NotFound:
            raise RetryableError("conversation_not_found", "conversation not found") from None
        try:
            return Conversation.model_validate(document)
        except pydantic.ValidationError as exc:
            raise PermanentError("schema_invalid", _invalid("stored conversation", exc)) from None

    async def _read_turn(self, event: TurnCompleted) -> list[Message]:
        """The reply by point read, then one newest-first query bounded by what the core needs."""
        store = self.backend.store
        try:
            reply = _message(await store.get_message(event.conversation_id, event.reply_message_id))
        except NotFound:
            raise RetryableError("turn_not_found", "the turn's reply is not visible") from None
        newest_first: list[Message] = []
        enough = story.HistoryRead(event.user_message_id)
        async for document in store.history(event.conversation_id, reply.seq):
            try:
                newest_first.append(_message(document))
            except PermanentError:
                if document.get("id") in (event.user_message_id, event.reply_message_id):
                    raise
                get_logger(conversation_id=event.conversation_id).warning(
                    "stored_message_skipped", message_id=str(document.get("id"))[:128]
                )
                continue
            if enough.add(newest_first[-1]) or len(newest_first) >= MAX_MESSAGES_READ:
                break
        return list(reversed(newest_first))

    async def _fetch(self, need: story.NeedRows, spool: RowSpool) -> None:
        """Read exactly the planned artifacts, streaming their rows through the collector."""
        for ref in need.fetch:
            assert ref.artifact is not None
            artifact = await self._artifact(ref.artifact)
            try:
                for row in need.collector.feed(ref, artifact.result):
                    spool.append(ref.action, row)
            except RecursionError:  # parsed, but too deep to walk: bad input, not a bug
                too_deep = f"artifact {ref.artifact} is nested too deeply"
                raise PermanentError("artifact_invalid", too_deep) from None

    async def _artifact(self, path: str) -> Artifact:
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in self.backend.blobs.read(path):
                size += len(chunk)
                if size > MAX_ARTIFACT_BYTES:
                    raise PermanentError("artifact_invalid", f"artifact {path} is too large")
                chunks.append(chunk)
        except NotFound:
            raise RetryableError("artifact_missing", f"artifact {path} not found") from None
        try:
            return Artifact.model_validate(json.loads(b"".join(chunks)))
        except (ValueError, pydantic.ValidationError):
            raise PermanentError("artifact_invalid", f"artifact {path} is not JSON") from None
        except RecursionError:
            too_deep = f"artifact {path} is nested too deeply"
            raise PermanentError("artifact_invalid", too_deep) from None

    async def _export(
        self, event: TurnCompleted, plan: story.ExportPlan, spool: RowSpool, log: Any
    ) -> TurnRecord:
        shape = plan.layout
        info = BlobInfo(
            content_type=content_type(plan.format),
            file_name=plan.file_name,
            metadata={
                "conversation_id": event.conversation_id,
                "user_id": event.user_id,
                "turn_id": event.turn_id,
                "format": plan.format,
                "row_count": str(shape.row_count),
            },
        )
        try:
            # A write or commit is never repeated in place (a chunk written twice would
            # corrupt the file): an upload a transient error cut short starts again whole,
            # its rows read again from the spool.
            written = await RetryPolicy.from_settings(self.settings).call(
                lambda: write_export(
                    self.backend.blobs,
                    plan.blob,
                    info,
                    plan.format,
                    shape.header,
                    _cells(plan, spool),
                    shape.row_count,
                    max_bytes=self.settings.max_export_bytes,
                    csv_bom=self.settings.csv_bom,
                )
            )
        except TooLarge as exc:
            log.warning("export_too_large", reason=str(exc), row_count=shape.row_count)
            return await self._record(event, "too_large", plan.facts, None, log)
        crashpoint("after_blob")
        entry = ExportEntry(
            export_id=plan.export_id,
            blob=plan.blob,
            file_name=plan.file_name,
            format=plan.format,
            row_count=shape.row_count,
            columns=list(shape.header),
            row_source=plan.row_source,
            source_artifacts=list(shape.source_artifacts),
            bytes=written.bytes,
            sha256=written.sha256,
            truncated=shape.truncated,
            selection=plan.why,
        )
        record = await self._record(event, "published", plan.facts, entry, log)
        return await self._announce(record, log)

    async def _record(
        self,
        event: TurnCompleted,
        decision: Any,
        facts: story.TurnFacts,
        entry: ExportEntry | None,
        log: Any,
    ) -> TurnRecord:
        record = TurnRecord(
            id=event.turn_id,
            conversation_id=event.conversation_id,
            turn_id=event.turn_id,
            user_id=event.user_id,
            event_id=event.event_id,
            seq=facts.seq,
            decision=decision,
            format=facts.format,
            carried=facts.carried,
            state_after=facts.state_after,
            export=entry,
            processed_at=_rfc3339(self.clock()),
            event_sent=False,
        )
        await self.backend.ledger.put(record.model_dump(mode="json"))
        crashpoint("after_record")
        if decision != "published":
            log.info("turn_recorded", decision=decision, format=facts.format)
        return record

    async def _announce(self, record: TurnRecord, log: Any) -> TurnRecord:
        """Send export.published (message id = export id), then mark the record sent."""
        entry = record.export
        assert entry is not None
        event = ExportPublished(
            event_id="evt_" + hashlib.sha256(entry.export_id.encode()).hexdigest()[:24],
            occurred_at=record.processed_at,
            conversation_id=record.conversation_id,
            user_id=record.user_id,
            turn_id=record.turn_id,
            export_id=entry.export_id,
            format=entry.format,
            file_name=entry.file_name,
            blob=entry.blob,
            row_count=entry.row_count,
            columns=entry.columns,
            row_source=entry.row_source,
            truncated=entry.truncated,
        )
        await self.backend.publisher.publish(entry.export_id, event.model_dump_json().encode())
        crashpoint("after_publish")
        sent = record.model_copy(update={"event_sent": True})
        await self.backend.ledger.put(sent.model_dump(mode="json"))
        crashpoint("after_event_sent")
        log.info(
            "turn_published",
            export_id=entry.export_id,
            format=entry.format,
            row_count=entry.row_count,
            row_source=entry.row_source,
            bytes=entry.bytes,
        )
        return sent


# --------------------------------------------------------------------------------------
def _cells(plan: story.ExportPlan, spool: RowSpool) -> Iterator[Sequence[Any]]:
    """The file's rows aligned with its header: the table's, or each selected dataset's."""
    if plan.table is not None:
        yield from table_cells(plan.table, plan.layout)
        return
    selection = plan.selection
    assert selection is not None
    for action in selection.actions:  # one dataset after another, in first-call order
        for row in spool.rows(action):
            yield action_cells(row, action, selection, plan.layout)


def _message(document: Any) -> Message:
    try:
        return parse_message(document)
    except pydantic.ValidationError as exc:
        raise PermanentError("schema_invalid", _invalid("stored message", exc)) from None


def _invalid(what: str, exc: pydantic.ValidationError) -> str:
    first = exc.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or "document"
    return f"{what} invalid: field {field!r}: {first['msg']}"


def _rfc3339(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
