"""Publishing one effect at a time (delivery.md): order, redelivery, and crash convergence.

`next_effect` is pure, so every interleaving of crashes and redeliveries is played here
without a store: a dict stands for the ledger, a list for the topic's distinct message ids.
"""

from __future__ import annotations

import hashlib
import json

import pytest
from msgspec.structs import replace

from handlers.file_layout import Layout
from handlers.phases import ExportPlan, Finished, IllegalTransition, TurnFacts
from handlers.publishing import (
    Done,
    Effect,
    MarkEventSent,
    Publication,
    PublishEvent,
    PutRecord,
    WriteBlob,
    Written,
    announcement,
    announcement_bytes,
    event_properties,
    export_published,
    next_effect,
    record_bytes,
)
from schemas.events import TurnCompleted
from schemas.records import CandidateGroup, ExportSelection, StateAfter, TurnRecord

EVENT = TurnCompleted.model_validate(
    {
        "type": "turn.completed",
        "version": 1,
        "event_id": "evt_1",
        "occurred_at": "2026-11-20T09:01:39Z",
        "conversation_id": "conv_1",
        "user_id": "user_1",
        "turn_id": "turn_1",
        "user_message_id": "m1",
        "reply_message_id": "m2",
    }
)
FACTS = TurnFacts(format="csv", carried=False, state_after=StateAfter(state="idle"), seq=1)
PLAN = ExportPlan(
    facts=FACTS,
    format="csv",
    row_source="action_rows",
    export_id="exp_0123456789abcdef0123",
    blob="exports/conv_1/turn_1/exp_0123456789abcdef0123.csv",
    file_name="history_20261120_090139.csv",
    table=None,
    selection=None,
    layout=Layout(("time", "value"), ("time", "value"), 900, ("artifacts/conv_1/a.json",), False),
    why=ExportSelection(
        rule="single_group",
        groups=[
            CandidateGroup(
                turn_id="turn_1", action="history", estimate=900, rows=900, score=0, chosen=True
            )
        ],
    ),
)
WRITTEN = Written(bytes=41338, sha256="ab" * 32)
AT = "2026-11-20T09:01:40.000000Z"


def fresh(ending: ExportPlan | Finished | None = PLAN) -> Publication:
    return Publication(EVENT, ending, AT)


def test_a_published_turn_goes_blob_record_event_event_sent_done() -> None:
    record: TurnRecord | None = None
    publication = fresh()
    kinds: list[str] = []
    while True:
        effect = next_effect(record, publication)
        kinds.append(type(effect).__name__)
        match effect:
            case WriteBlob():
                publication = replace(publication, written=WRITTEN)
            case PutRecord(record=new) | MarkEventSent(record=new):
                record = new
            case PublishEvent():
                publication = replace(publication, announced=True)
            case Done():
                break
    assert kinds == ["WriteBlob", "PutRecord", "PublishEvent", "MarkEventSent", "Done"]
    assert record is not None and record.event_sent and record.decision == "published"
    assert record.export is not None
    assert (record.export.bytes, record.export.sha256) == (WRITTEN.bytes, WRITTEN.sha256)
    assert record.export.columns == ["time", "value"] and record.export.row_count == 900


def test_the_record_is_written_before_its_event_and_says_not_sent() -> None:
    effect = next_effect(None, replace(fresh(), written=WRITTEN))
    assert isinstance(effect, PutRecord)
    assert effect.record.event_sent is False and effect.record.processed_at == AT


def test_the_event_names_the_export_as_its_message_id_and_matches_the_record() -> None:
    record = next_effect(None, replace(fresh(), written=WRITTEN))
    assert isinstance(record, PutRecord)
    effect = next_effect(record.record, fresh(None))
    assert isinstance(effect, PublishEvent)
    assert effect.message_id == PLAN.export_id == effect.event.export_id
    assert effect.event.occurred_at == AT and effect.event.turn_id == "turn_1"
    assert effect.event == export_published(record.record)  # the same event every time
    # Its id is the contract's (events.md), so a worker of another version announces a
    # redelivered turn's export under the same id too.
    digest = hashlib.sha256(PLAN.export_id.encode()).hexdigest()
    assert effect.event.event_id == f"evt_{digest[:24]}"


def test_the_announcement_known_before_the_file_is_the_event_sent_after_it() -> None:
    # The event size cap is checked before the upload, on this event: the one sent later.
    record = next_effect(None, replace(fresh(), written=WRITTEN))
    assert isinstance(record, PutRecord)
    sent = export_published(record.record)
    assert announcement(PLAN, fresh()) == sent
    body = len(sent.model_dump_json())
    properties = sum(len(f"{k}{v}".encode()) for k, v in event_properties(sent).items())
    assert announcement_bytes(sent) == body + properties


@pytest.mark.parametrize("file_bytes", [0, 41338, 500 * 1024 * 1024])
@pytest.mark.parametrize("action", ["history", "Verlauf_Spannung_äöü_電圧", "history\ud800"])
def test_the_record_size_known_before_the_file_bounds_the_record_stored_after_it(
    file_bytes: int, action: str
) -> None:
    # The record size cap is checked before the upload, with the file at its largest: the
    # record stored later is that size or smaller (its bytes figure has no more digits),
    # in UTF-8 and as the Cosmos SDK sends it (non-ASCII escaped), whatever text a tool's
    # name held (a lone surrogate kept from a stored message's "\ud800" escape).
    plan = replace(PLAN, why=replace(PLAN.why, groups=[replace(PLAN.why.groups[0], action=action)]))
    written = Written(bytes=file_bytes, sha256="ab" * 32)
    record = next_effect(None, replace(fresh(plan), written=written))
    assert isinstance(record, PutRecord)
    stored = record.record.model_dump()
    escaped = len(json.dumps(stored, separators=(",", ":")))
    utf8 = len(json.dumps(stored, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8", "surrogatepass"
    ))  # fmt: skip
    largest = record_bytes(plan, fresh(plan), 500 * 1024 * 1024)
    assert largest - escaped == 9 - len(str(file_bytes))
    assert record_bytes(plan, fresh(plan), file_bytes) == escaped >= utf8


def test_the_event_carries_the_properties_topic_subscriptions_filter_on() -> None:
    put = next_effect(None, replace(fresh(), written=WRITTEN))
    assert isinstance(put, PutRecord)
    effect = next_effect(put.record, fresh(None))
    assert isinstance(effect, PublishEvent)
    assert effect.properties == {
        "type": "export.published",
        "version": 1,
        "conversation_id": effect.event.conversation_id,
        "format": "csv",
    }


@pytest.mark.parametrize("decision", ["no_request", "clarification", "no_rows"])
def test_an_ending_without_a_file_is_recorded_and_done(decision: str) -> None:
    effect = next_effect(None, fresh(Finished(decision, FACTS)))  # type: ignore[arg-type]
    assert isinstance(effect, PutRecord) and effect.record.decision == decision
    assert effect.record.export is None
    assert next_effect(effect.record, fresh(None)) == Done(effect.record)


def test_too_large_is_recorded_without_an_export() -> None:
    effect = next_effect(None, replace(fresh(), too_large=True))
    assert isinstance(effect, PutRecord)
    assert effect.record.decision == "too_large" and effect.record.export is None
    assert effect.record.format == "csv"


def test_a_recorded_turn_is_done_at_once_unless_its_event_did_not_go_out() -> None:
    put = next_effect(None, replace(fresh(), written=WRITTEN))
    assert isinstance(put, PutRecord)
    sent = put.record.model_copy(update={"event_sent": True})
    assert next_effect(sent, fresh(None)) == Done(sent)
    again = next_effect(put.record, fresh(None))
    assert isinstance(again, PublishEvent)
    assert next_effect(put.record, replace(fresh(None), announced=True)) == MarkEventSent(sent)


def test_every_effect_and_its_inputs_are_frozen_values() -> None:
    # A crash-safety argument over values: an effect handed to the shell cannot be changed
    # on its way, and a replayed delivery sees what the first one saw.
    put = next_effect(None, replace(fresh(), written=WRITTEN))
    assert isinstance(put, PutRecord)
    publish = next_effect(put.record, fresh(None))
    assert isinstance(publish, PublishEvent)
    values = [
        WRITTEN,
        fresh(),
        next_effect(None, fresh()),
        put,
        publish,
        next_effect(put.record, replace(fresh(None), announced=True)),
        Done(put.record),
    ]
    assert [type(v).__name__ for v in values] == [
        "Written", "Publication", "WriteBlob", "PutRecord", "PublishEvent", "MarkEventSent", "Done"
    ]  # fmt: skip
    for value in values:
        field = type(value).__struct_fields__[0]
        with pytest.raises(AttributeError):
            setattr(value, field, None)


def test_nothing_recorded_and_nothing_decided_is_an_illegal_step() -> None:
    with pytest.raises(IllegalTransition):
        next_effect(None, fresh(None))


def test_a_published_record_without_its_export_is_an_illegal_step() -> None:
    # A ledger document edited by hand: announcing it would have no file to name.
    put = next_effect(None, replace(fresh(), written=WRITTEN))
    assert isinstance(put, PutRecord)
    broken = put.record.model_copy(update={"export": None})
    with pytest.raises(IllegalTransition, match=r"published record of turn .+ has no export"):
        next_effect(broken, fresh(None))


@pytest.mark.parametrize("crash_after", range(5))
def test_a_crash_between_any_two_steps_converges_on_redelivery(crash_after: int) -> None:
    """One record, one event (by message id), one blob path, whatever step the crash hit."""
    ledger: dict[str, TurnRecord] = {}
    topic: list[str] = []
    blobs: list[str] = []

    def deliver(crash_at: int | None) -> TurnRecord | None:
        record = ledger.get("turn_1")
        # A redelivery of a recorded turn decides nothing; otherwise it decides again.
        publication = fresh(None if record is not None else PLAN)
        for performed in range(10):
            if performed == crash_at:
                return None
            effect: Effect = next_effect(record, publication)
            match effect:
                case WriteBlob(plan=plan):
                    blobs.append(plan.blob)
                    publication = replace(publication, written=WRITTEN)
                case PutRecord(record=new) | MarkEventSent(record=new):
                    ledger["turn_1"] = record = new
                case PublishEvent(message_id=message_id):
                    if message_id not in topic:  # duplicate detection on the message id
                        topic.append(message_id)
                    publication = replace(publication, announced=True)
                case Done(record=done):
                    return done
        raise AssertionError("never done")

    assert deliver(crash_after) is None
    final = deliver(None)
    assert final is not None and final.event_sent and final.decision == "published"
    assert topic == [PLAN.export_id]
    assert set(blobs) == {PLAN.blob}
    assert deliver(None) == final  # a third delivery changes nothing
