"""The conversation store (the chat service's documents, read only) and the ledger."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Protocol

from worker.ports.calls import Effect, port_call

if TYPE_CHECKING:  # the record's struct is imported by the turns that build one
    from schemas.records import TurnRecord


class ConversationStore(Protocol):
    """Reads conversations and messages; the worker never writes them."""

    @port_call(Effect.READ)
    async def get_conversation(self, conversation_id: str) -> dict[str, Any]:
        """Point-read a conversation; NotFound when missing."""
        ...

    @port_call(Effect.READ)
    async def get_message(self, conversation_id: str, message_id: str) -> dict[str, Any]:
        """Point-read a message in the conversation's partition; NotFound when missing."""
        ...

    @port_call(Effect.READ)
    def history(self, conversation_id: str, max_seq: int) -> AsyncIterator[dict[str, Any]]:
        """Messages with seq <= max_seq, newest first, in pages from one partition query.

        The caller stops iterating once it has what it needs: the query is bounded by that.
        """
        ...

    @port_call(Effect.RELEASE)
    async def close(self) -> None:
        """Release connections."""
        ...


class Ledger(Protocol):
    """Turn records: one per processed turn, id = turn_id, partition conversation_id."""

    @port_call(Effect.READ)
    async def get(self, conversation_id: str, turn_id: str) -> TurnRecord | None:
        """The turn record, or None."""
        ...

    @port_call(Effect.IDEMPOTENT)
    async def create(self, record: TurnRecord) -> TurnRecord:
        """Write the turn's first record unless the turn has one; return the stored record.

        That is `record`, or the record another holder of the turn wrote first (a holder
        whose lock lapsed meets the new holder's record here): the caller goes on from the
        stored one, never replaces it. A repeat after a lost reply returns `record` itself.
        """
        ...

    @port_call(Effect.IDEMPOTENT)
    async def put(self, record: TurnRecord) -> None:
        """Insert or replace the turn record (the same turn, the same id), except that a
        stored record whose event went out (`event_sent` true) is kept over one whose did
        not: a late write never makes an announced export look unannounced."""
        ...

    @port_call(Effect.READ)
    async def list_turns(self, conversation_id: str) -> list[TurnRecord]:
        """The conversation's turn records ordered by seq."""
        ...

    @port_call(Effect.READ)
    async def list_exports(self, conversation_id: str | None = None) -> list[TurnRecord]:
        """Records with an export (decision `published`), optionally of one conversation."""
        ...

    @port_call(Effect.READ)
    async def find_export(self, export_id: str) -> TurnRecord | None:
        """The turn record holding this export id, or None."""
        ...

    @port_call(Effect.READ)
    async def latest_export(self) -> TurnRecord | None:
        """The published record processed last (by `processed_at`), or None: `status`'s
        `last_export_at`. One bounded read, whatever the ledger's size."""
        ...

    @port_call(Effect.RELEASE)
    async def close(self) -> None:
        """Release connections."""
        ...
