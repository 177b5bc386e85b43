"""Turn records built for tests of the ledger and its callers."""

from __future__ import annotations

from schemas.records import StateAfter, TurnRecord


def a_turn_record(conversation_id: str, turn_id: str, *, seq: int | None = None) -> TurnRecord:
    """A valid record of a turn that requested nothing (`no_request`), for storage tests."""
    return TurnRecord(
        id=turn_id,
        conversation_id=conversation_id,
        turn_id=turn_id,
        user_id="user",
        event_id=f"evt_{turn_id}",
        seq=seq,
        decision="no_request",
        format=None,
        carried=False,
        state_after=StateAfter(state="idle"),
        export=None,
        processed_at="2026-01-01T00:00:00.000000Z",
        event_sent=False,
    )
