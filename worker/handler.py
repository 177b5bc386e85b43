"""The turn handler shell: load, call the decision core, perform the effects it names.

For one `turn.completed` message: parse it, check the ledger, then either decide (authorise,
read the turn, move it through its phases in `handlers/turn.py`, reading each fetch round's
artifacts) or, for a turn recorded before, decide nothing. What is decided is published by
one loop that performs the effects `handlers/publishing.py` names, in the order of
docs/contract/delivery.md. The runtime completes the queue message only after `handle`
returns.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

import msgspec
from msgspec.structs import replace
from structlog.contextvars import bind_contextvars

from handlers import publishing
from handlers import turn as story
from handlers.dataset import RowCollector
from handlers.errors import PermanentError, RetryableError
from handlers.file_layout import selection_cells, table_cells
from handlers.phases import (
    Ending,
    ExportPlan,
    FetchCurrentTurn,
    FetchDeferredGroups,
    FetchReachBack,
    Finished,
)
from handlers.publishing import (
    Done,
    MarkEventSent,
    Publication,
    PublishEvent,
    PutRecord,
    WriteBlob,
    Written,
)
from handlers.selection import ResultRef, Selection
from handlers.serialisers import Cells
from handlers.serialisers.csv_file import plain_text
from schemas.documents import Artifact, Conversation, Message, ToolMessage, parse_message
from schemas.events import InvalidEvent, TurnCompleted, parse_turn_completed
from schemas.records import TurnRecord
from schemas.validation import first_error
from worker.allocator import fix_malloc_thresholds
from worker.artifact_json import parse_artifact_json
from worker.checkpoints import Checkpoint, no_checkpoint
from worker.digest_file import DigestFile
from worker.export_file import TooLarge, content_type, write_export
from worker.logs import get_logger
from worker.observer import NO_OBSERVER, TurnObserver
from worker.ports import (
    Archived,
    Backend,
    BlobInfo,
    Conflict,
    NotFound,
    QueueMessage,
    TransientError,
)
from worker.retry_policy import RetryPolicy
from worker.settings import Settings
from worker.spool import RowSpool

log = get_logger()

# A turn whose user message is not found within this many messages is not there (yet),
# unless a point read finds it older still: the turn is then read on to it, up to
# MAX_TURN_MESSAGES_READ messages in all (an event naming an early message as the turn's
# must not load the whole conversation).
MAX_MESSAGES_READ = 5000
MAX_TURN_MESSAGES_READ = 100_000
MAX_ARTIFACT_BYTES = 256 * 1024 * 1024
# From this size on, an artifact's bytes and rows are what the process's peak RSS is made
# of: freed memory must then leave the process (worker/allocator.py).
LARGE_ARTIFACT_BYTES = 1 << 20
# How much of an artifact's path a dead-letter description shows: room for the usual
# `artifacts/{conversation}/{turn}/{call}.json` whole within the 480 characters of one.
MAX_SHOWN_PATH = 320

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The wall clock, in UTC."""
    return datetime.now(UTC)


class TurnHandler:
    """Handles one `turn.completed` message end to end."""

    def __init__(
        self,
        backend: Backend,
        settings: Settings,
        clock: Clock = utc_now,
        checkpoint: Checkpoint = no_checkpoint,
        observer: TurnObserver = NO_OBSERVER,
    ) -> None:
        self.backend = backend
        self.settings = settings
        self.clock = clock
        self.checkpoint = checkpoint  # passed at each named step of publishing
        self.observer = observer  # spans of the steps, exports announced (worker/observer.py)

    async def handle(self, message: QueueMessage) -> TurnRecord:
        """Process one message; raise an ExportError (or a port error) to decide its fate."""
        try:
            event = parse_turn_completed(message.body)
        except InvalidEvent as exc:
            raise PermanentError("schema_invalid", str(exc)) from None
        # Bound for the rest of this message: the runtime gives each message a context of its own.
        ids = {
            "conversation_id": event.conversation_id,
            "turn_id": event.turn_id,
            "event_id": event.event_id,
        }
        bind_contextvars(**ids)
        self.observer.annotate(**ids)
        with self.observer.step("read", source="ledger"):
            recorded = await self.backend.ledger.get(event.conversation_id, event.turn_id)
        try:
            with RowSpool() as spool, DigestFile() as digests:
                ending: Ending | None = None
                if recorded is None:
                    ending = await self._decide(event, spool, digests)
                elif recorded.user_id != event.user_id:
                    # Not a redelivery: another user names a recorded turn. A forged event
                    # must meet authorisation (and its security warning) like any first one.
                    await self._authorised(event)
                publication = Publication(event, ending, _rfc3339(self.clock()))
                return await self._publish(recorded, publication, spool)
        except OSError as exc:
            if exc.errno in _DISK_FULL:
                # The temporary disk (the row spool, the digest file, a workbook's scratch)
                # or the local backend's: other turns' files go, and every step is
                # idempotent, so the turn is tried again later, like a throttled store.
                raise TransientError("no space left on a disk the turn writes") from exc
            raise

    # ---- deciding --------------------------------------------------------------------
    async def _decide(self, event: TurnCompleted, spool: RowSpool, digests: DigestFile) -> Ending:
        """Authorise, read the turn, and move it through its phases to an ending."""
        conversation, access = await self._authorised(event)
        if access == "deleted":
            return story.conversation_deleted()
        history_limit = event.effective_history_limit(
            self.settings.history_limit_default, self.settings.history_limit_max
        )
        with self.observer.step("read", source="messages"):
            messages = await self._read_turn(event, history_limit)
        inp = story.TurnInput(
            event=event,
            conversation=conversation,
            messages=messages,
            history_limit=history_limit,
            artifacts_container=self.settings.artifacts_container,
            exports_container=self.settings.exports_container,
            now=self.clock(),
        )
        phase = story.start(inp)
        collector: RowCollector | None = None
        while True:
            match phase:
                case ExportPlan(selection=Selection() as selection):
                    assert collector is not None
                    for action in selection.actions:  # repeats found after the last page
                        spool.skip(action, collector.skipped(action))
                    return phase
                case Finished() | ExportPlan():
                    return phase
                case FetchCurrentTurn() | FetchDeferredGroups() | FetchReachBack():
                    if phase.request.format == "csv":
                        # Spooled batches are written as the file's records at once: the
                        # export copies them instead of reading values back to write them.
                        spool.write_as(plain_text)
                    collector = story.collector_for(phase, collector, digests)
                    with self.observer.step("fetch", artifacts=len(phase.fetch)):
                        await self._fetch(phase.fetch, collector, spool)
                    phase = story.after_fetch(inp, phase, collector)

    async def _authorised(self, event: TurnCompleted) -> tuple[Conversation, story.Authorisation]:
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
            with self.observer.step("read", source="conversation"):
                document = await self.backend.store.get_conversation(event.conversation_id)
        except NotFound:
            raise RetryableError("conversation_not_found", "conversation not found") from None
        try:
            return Conversation.model_validate(document)
        except msgspec.ValidationError as exc:
            raise PermanentError("schema_invalid", _invalid("stored conversation", exc)) from None

    async def _read_turn(self, event: TurnCompleted, history_limit: int) -> list[Message]:
        """The reply by point read, then one newest-first query bounded by what the core needs
        (and, for a turn longer than MAX_MESSAGES_READ, a point read of its user message)."""
        store = self.backend.store
        try:
            reply = _message(await store.get_message(event.conversation_id, event.reply_message_id))
        except NotFound:
            raise RetryableError("turn_not_found", "the turn's reply is not visible") from None
        newest_first: list[Message] = []
        in_turn = True  # until the turn's user message is read (newest first)
        answered: set[str] = set()  # the call ids the turn's visible results answer
        enough = story.HistoryRead(event.user_message_id, history_limit)
        cap = MAX_MESSAGES_READ
        async for document in store.history(event.conversation_id, reply.seq):
            try:
                newest_first.append(_message(document))
            except PermanentError:
                if _of_the_turn(document, event, in_turn, answered):
                    raise  # its calls or results would vanish and the turn reach back
                log.warning("stored_message_skipped", skipped_message_id=_shown_id(document))
                self.observer.message_skipped()
                continue
            if newest_first[-1].id == event.user_message_id:
                in_turn = False
            elif in_turn:
                _answered_by(newest_first[-1], answered)
            if enough.add(newest_first[-1]):
                break
            if len(newest_first) >= cap:
                if cap < MAX_TURN_MESSAGES_READ and await self._longer_turn(
                    event, enough, newest_first[-1].seq
                ):
                    cap = MAX_TURN_MESSAGES_READ
                    continue
                break
        return list(reversed(newest_first))

    async def _longer_turn(self, event: TurnCompleted, enough: story.HistoryRead, seq: int) -> bool:
        """Whether a reader past MAX_MESSAGES_READ should go on (to MAX_TURN_MESSAGES_READ):
        the turn's user message is stored, older than the message at `seq`, and not read yet
        (a turn of thousands of tool messages). One point read, only for such a turn:
        otherwise the cap stands for a user message that is not visible (yet)."""
        if enough.counted is not None:
            return False  # the user message was read: the cap ends the look-back
        try:
            document = await self.backend.store.get_message(
                event.conversation_id, event.user_message_id
            )
        except NotFound:
            return False
        user_seq = document.get("seq")
        return type(user_seq) is int and user_seq < seq

    async def _fetch(
        self, refs: Sequence[ResultRef], collector: RowCollector, spool: RowSpool
    ) -> None:
        """Read exactly the round's artifacts, streaming their rows through the collector."""
        for ref in refs:
            assert ref.artifact is not None
            artifact = await self._artifact(ref.artifact)
            try:
                spool.extend(ref.action, collector.feed(ref, artifact.result))
            except RecursionError:  # parsed, but too deep to walk: bad input, not a bug
                raise _too_deep(ref.artifact) from None
            finally:
                del artifact  # spooled: not alive while the next one is read and parsed

    async def _artifact(self, path: str) -> Artifact:
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in self.backend.blobs.read(path):
                size += len(chunk)
                if size > MAX_ARTIFACT_BYTES:
                    raise PermanentError(
                        "artifact_invalid", f"{_artifact_named(path)} is too large"
                    )
                chunks.append(chunk)
        except Archived:
            # Rehydration takes hours: retried as missing, then dead-lettered to replay.
            missing = f"{_artifact_named(path)} is archived: rehydrate it, then replay"
            raise RetryableError("artifact_missing", missing) from None
        except NotFound:
            raise RetryableError("artifact_missing", f"{_artifact_named(path)} not found") from None
        except Conflict as exc:
            # Replaced while read (the blob's ETag changed between its ranges): artifacts are
            # written once (stored-data.md), so this is a write in flight; read it again whole.
            raise TransientError(f"{_artifact_named(path)} changed while read") from exc
        if size >= LARGE_ARTIFACT_BYTES:
            fix_malloc_thresholds()
        data = b"".join(chunks)
        del chunks  # one copy of the bytes while parsing (msgspec makes no str of them)
        try:
            return Artifact.model_validate(parse_artifact_json(data))
        except msgspec.ValidationError as exc:  # JSON, but not an artifact (parsing raises none)
            raise PermanentError("artifact_invalid", _invalid(_artifact_named(path), exc)) from None
        except ValueError:
            raise PermanentError(
                "artifact_invalid", f"{_artifact_named(path)} is not JSON"
            ) from None
        except RecursionError:
            raise _too_deep(path) from None

    # ---- publishing ------------------------------------------------------------------
    async def _publish(
        self, record: TurnRecord | None, publication: Publication, spool: RowSpool
    ) -> TurnRecord:
        """Perform the effects `handlers/publishing.py` names, one at a time, until done."""
        performed = 0
        while True:
            match publishing.next_effect(record, publication):
                case WriteBlob(plan=plan):
                    self.observer.annotate(export_id=plan.export_id)
                    try:
                        self._announceable(plan, publication)
                        self._recordable(plan, publication)
                        with self.observer.step("upload", format=plan.format):
                            written = await self._write(plan, publication.event, spool)
                    except TooLarge as exc:
                        log.warning(
                            "export_too_large", reason=str(exc), row_count=plan.layout.row_count
                        )
                        publication = replace(publication, too_large=True)
                        continue
                    publication = replace(publication, written=written)
                    await self.checkpoint("after_blob")
                case PutRecord(record=new):
                    # Only a first record: a holder whose lock lapsed (a stalled loop, a
                    # paused process) may find the new holder's record here, and goes on
                    # from that one, announcing it if its event has not gone out.
                    record = await self.backend.ledger.create(new)
                    await self.checkpoint("after_record")
                    if record != new:
                        log.info("turn_recorded_by_another_holder", decision=record.decision)
                    elif new.decision != "published":
                        log.info("turn_recorded", decision=new.decision, format=new.format)
                case PublishEvent(message_id=message_id, event=event, properties=properties):
                    self.observer.annotate(export_id=event.export_id)
                    with self.observer.step("publish"):
                        # Inside the publish span: the event carries that span's context.
                        await self.backend.publisher.publish(
                            message_id,
                            event.model_dump_json(),
                            self.observer.outgoing(properties),
                        )
                    self._published(record, publication.event)
                    publication = replace(publication, announced=True)
                    await self.checkpoint("after_publish")
                case MarkEventSent(record=sent):
                    await self.backend.ledger.put(sent)
                    record = sent
                    await self.checkpoint("after_event_sent")
                    _log_published(sent)
                case Done(record=done):
                    if performed == 0:
                        log.info("turn_already_recorded", decision=done.decision)
                    return done
            performed += 1

    def _announceable(self, plan: ExportPlan, publication: Publication) -> None:
        """TooLarge when export.published could not carry the plan's export (thousands of
        long column names): decided before the file is written, as the size cap is."""
        size = publishing.announcement_bytes(publishing.announcement(plan, publication))
        cap = self.settings.max_event_bytes
        if size > cap:
            raise TooLarge(f"export.published would take {size} bytes, past the {cap} byte cap")

    def _recordable(self, plan: ExportPlan, publication: Publication) -> None:
        """TooLarge when the turn record could not hold the plan's export (thousands of
        groups, artifacts or columns): decided before the file is written. Past the store's
        item limit the record would fail after the upload, turn after turn."""
        cap = self.settings.max_record_bytes
        size = publishing.record_bytes(plan, publication, self.settings.max_export_bytes)
        if size > cap:
            raise TooLarge(f"the turn record would take {size} bytes, past the {cap} byte cap")

    def _published(self, record: TurnRecord | None, turn: TurnCompleted) -> None:
        """Report the export just announced: format, size, and the turn's event time."""
        entry = None if record is None else record.export
        if entry is not None:
            self.observer.export_published(
                entry.format, entry.row_count, entry.bytes, turn.occurred_at
            )

    async def _write(self, plan: ExportPlan, event: TurnCompleted, spool: RowSpool) -> Written:
        """Serialise the plan's rows into the export blob; TooLarge past a cap."""
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
        # A write or commit is never repeated in place (a chunk written twice would corrupt
        # the file): an upload a transient error cut short starts again whole, its rows read
        # again from the spool.
        return await RetryPolicy.from_settings(self.settings).call(
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
                checkpoint=self.checkpoint,
            )
        )


# --------------------------------------------------------------------------------------
def _cells(plan: ExportPlan, spool: RowSpool) -> Iterator[Cells]:
    """The file's rows aligned with its header: the table's, or each selected dataset's."""
    if plan.table is not None:
        yield from table_cells(plan.table, plan.layout)
        return
    assert plan.selection is not None
    yield from selection_cells(spool.batches, plan.selection, plan.layout)


def _log_published(record: TurnRecord) -> None:
    entry = record.export
    assert entry is not None
    log.info(
        "turn_published",
        export_id=entry.export_id,
        format=entry.format,
        row_count=entry.row_count,
        row_source=entry.row_source,
        bytes=entry.bytes,
    )


_DISK_FULL: Final = frozenset({errno.ENOSPC, errno.EDQUOT})


def _message(document: Any) -> Message:
    try:
        return parse_message(document)
    except msgspec.ValidationError as exc:
        what = f"stored message {_shown_id(document)}"  # the document an operator mends
        raise PermanentError("schema_invalid", _invalid(what, exc)) from None


def _shown_id(document: Any) -> str:
    """A stored document's id for a description or a log line (`_shown`)."""
    return _shown(document.get("id") if isinstance(document, Mapping) else None)


def _shown(value: Any, limit: int = 128) -> str:
    """A value from the store for a description or a log line, which are one line each: as
    it is when it is plain printable text, else its repr (a number, a newline, nothing); at
    most `limit` characters."""
    if isinstance(value, str) and value.isprintable() and value.strip() == value != "":
        return value[:limit]
    return repr(value)[:limit]


def _of_the_turn(document: Any, event: TurnCompleted, in_turn: bool, answered: set[str]) -> bool:
    """Whether a stored document that does not parse is one the turn cannot be decided
    without: its user message, its reply, or a message between them (`in_turn`: read before
    the user message, newest first) of its turn id, not deleted (only a `deleted` of exactly
    true hides it), whose calls or results would otherwise vanish and the turn reach back:
    an assistant or tool message, or any message (an unknown role, a `deleted` that is no
    boolean) holding results or a call that a result of the turn answers (`answered`).
    Any other (a system message, an earlier turn's, a draft whose calls nothing answered)
    is skipped with a warning."""
    if not isinstance(document, Mapping):
        return False
    if document.get("id") in (event.user_message_id, event.reply_message_id):
        return True
    if not in_turn or document.get("turn_id") != event.turn_id:
        return False
    deleted = document.get("deleted", False)
    if deleted is True:
        return False  # invisible, whatever it holds
    if deleted is False and document.get("role") in ("assistant", "tool"):
        return True
    return bool(document.get("results")) or not answered.isdisjoint(_call_ids(document))


def _call_ids(document: Mapping[str, Any]) -> set[str]:
    """The ids of the calls a document that does not parse holds, as far as they read."""
    calls = document.get("tool_calls")
    if not isinstance(calls, list):
        return set()
    return {c["id"] for c in calls if isinstance(c, Mapping) and isinstance(c.get("id"), str)}


def _answered_by(message: Message, answered: set[str]) -> None:
    """Adds the call ids a visible tool message of the turn answers."""
    if isinstance(message, ToolMessage) and not message.deleted:
        answered.update(r.call_id for r in message.results if r.call_id is not None)


def _invalid(what: str, exc: msgspec.ValidationError) -> str:
    return f"{what} invalid: {first_error(exc, 'document')}"


def _too_deep(path: str) -> PermanentError:
    """Parsed, but nested past what can be walked: bad input, not a bug."""
    return PermanentError("artifact_invalid", f"{_artifact_named(path)} is nested too deeply")


def _artifact_named(path: str) -> str:
    """`artifact <path>` for a description: built only when one is, never per read."""
    return f"artifact {_shown(path, MAX_SHOWN_PATH)}"


def _rfc3339(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
