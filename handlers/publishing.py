"""Publishing a turn's ending, one effect at a time (docs/contract/delivery.md), as a pure function.

Exactly-once effect over at-least-once delivery rests on one order, each step idempotent:

    export blob at its deterministic path → turn record (event_sent false)
    → export.published (message id = export id) → event_sent true → done

`next_effect(record, publication)` names the next step from two things: what the ledger
holds for the turn (`record`, None when nothing is recorded) and what this delivery has
done that the ledger cannot show yet (`Publication`: the blob written, the event sent).
The shell performs the effect, updates one of the two, and asks again, until `Done`. A
delivery that finds the turn recorded decides nothing: a `published` record whose event
went out, or any other decision, is `Done` at once; a `published` record whose event did
not go out is announced again (a crash came between the record and `event_sent`). The same
holds within a delivery: when its first record finds another holder's stored (its lock
lapsed meanwhile), the next step is decided from the stored record, never from its own.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

import msgspec

from handlers.phases import Ending, ExportPlan, Finished, IllegalTransition, TurnFacts
from schemas.events import ExportPublished, TurnCompleted
from schemas.records import ExportEntry, TurnRecord
from schemas.vocabulary import Decision


class Written(msgspec.Struct, frozen=True):
    """What the export upload committed."""

    bytes: int
    sha256: str


class Publication(msgspec.Struct, frozen=True):
    """What this delivery makes of the turn, and how far it got beyond the ledger."""

    event: TurnCompleted
    ending: Ending | None  # None: the turn was recorded before; this delivery decided nothing
    processed_at: str  # RFC 3339: the time the turn record states
    written: Written | None = None  # the export blob is committed
    too_large: bool = False  # the export passed the size cap or the format's row limit
    announced: bool = False  # export.published went out in this delivery


class WriteBlob(msgspec.Struct, frozen=True):
    """Serialise the plan's rows and commit the export blob at its path."""

    plan: ExportPlan


class PutRecord(msgspec.Struct, frozen=True):
    """Write the turn's first record, unless another holder of the turn wrote one first:
    then the shell goes on from the stored record (`Ledger.create`)."""

    record: TurnRecord


class PublishEvent(msgspec.Struct, frozen=True):
    """Send export.published with the export id as its message id (a repeat is one event),
    with the application properties topic subscriptions filter on."""

    message_id: str
    event: ExportPublished
    properties: Mapping[str, str | int]


class MarkEventSent(msgspec.Struct, frozen=True):
    """Replace the record with the same one saying its event went out."""

    record: TurnRecord


class Done(msgspec.Struct, frozen=True):
    """Nothing left to do: the queue message may be completed."""

    record: TurnRecord


Effect = WriteBlob | PutRecord | PublishEvent | MarkEventSent | Done


def next_effect(record: TurnRecord | None, publication: Publication) -> Effect:
    """The one effect to perform next, given the ledger's record and this delivery's progress."""
    if record is None:
        return _first_record(publication)
    if record.decision == "published" and not record.event_sent:
        if not publication.announced:
            event = export_published(record)
            return PublishEvent(event.export_id, event, event_properties(event))
        return MarkEventSent(record.model_copy(update={"event_sent": True}))
    return Done(record)


def export_published(record: TurnRecord) -> ExportPublished:
    """The export.published event a published record announces (the same every time)."""
    entry = _export_of(record)
    return ExportPublished(
        type="export.published",
        version=1,
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


def announcement(plan: ExportPlan, publication: Publication) -> ExportPublished:
    """The export.published event the plan's export would be announced with, known before
    its file is written: the event holds nothing the upload decides (its bytes, its hash)."""
    entry = _entry(plan, Written(0, ""))
    return export_published(_record(publication, "published", plan.facts, entry))


def record_bytes(plan: ExportPlan, publication: Publication, max_file_bytes: int) -> int:
    """The size of the turn record the plan's export would be stored with, known before its
    file is written: the upload decides only its size, here at its largest
    (`max_file_bytes`), and its hash. Measured as the Cosmos DB SDK sends a document by
    default, compact JSON with non-ASCII text escaped: the larger of the record's two
    encodings (a character outside ASCII takes 6 or 12 bytes escaped, 2 to 4 in UTF-8), and
    one that takes any text a stored message held, lone surrogates included."""
    entry = _entry(plan, Written(max_file_bytes, "0" * 64))
    record = _record(publication, "published", plan.facts, entry)
    return len(json.dumps(record.model_dump(), separators=(",", ":")))


def announcement_bytes(event: ExportPublished) -> int:
    """The size of the event's message: its JSON body and its application properties."""
    properties = event_properties(event)
    return len(event.model_dump_json()) + sum(
        len(f"{name}{value}".encode("utf-8", "surrogatepass")) for name, value in properties.items()
    )


def event_properties(event: ExportPublished) -> dict[str, str | int]:
    """The message's application properties: what a topic subscription's SQL rule can
    filter on (`format = 'csv'`, `conversation_id = '…'`) without reading the body."""
    return {
        "type": event.type,
        "version": event.version,
        "conversation_id": event.conversation_id,
        "format": event.format,
    }


def _first_record(publication: Publication) -> Effect:
    """Nothing recorded yet: record the ending, writing the blob first when there is one."""
    match publication.ending:
        case None:
            raise IllegalTransition("nothing is recorded and nothing was decided")
        case Finished(decision=decision, facts=facts):
            return PutRecord(_record(publication, decision, facts, None))
        case ExportPlan(facts=facts) if publication.too_large:
            return PutRecord(_record(publication, "too_large", facts, None))
        case ExportPlan() as plan if publication.written is None:
            return WriteBlob(plan)
        case ExportPlan(facts=facts) as plan:
            assert publication.written is not None
            entry = _entry(plan, publication.written)
            return PutRecord(_record(publication, "published", facts, entry))


def _entry(plan: ExportPlan, written: Written) -> ExportEntry:
    shape = plan.layout
    return ExportEntry(
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


def _record(
    publication: Publication, decision: Decision, facts: TurnFacts, entry: ExportEntry | None
) -> TurnRecord:
    event = publication.event
    return TurnRecord(
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
        processed_at=publication.processed_at,
        event_sent=False,
    )


def _export_of(record: TurnRecord) -> ExportEntry:
    if record.export is None:
        raise IllegalTransition(
            f"a {record.decision} record of turn {record.turn_id} has no export"
        )
    return record.export
