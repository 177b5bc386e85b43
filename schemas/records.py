"""The turn record: the ledger's one document per processed turn (docs/contract/turn-record.md)."""

from __future__ import annotations

from typing import Literal

from schemas.model import Model
from schemas.vocabulary import Decision, ExportFormat, RequestFormat, RowSource, SelectionRule


class StateAfter(Model, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The carry-forward state after a turn."""

    state: Literal["idle", "awaiting"]
    format: RequestFormat | None = None


class CandidateGroup(Model, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One group of action results the selection considered (docs/contract/turn-record.md)."""

    turn_id: str
    action: str
    estimate: int | None  # rows the compact citations stand for; None: no estimate
    rows: int | None  # real rows read; None for a group never read
    score: int  # relevance: distinct subject words of the request the group holds
    chosen: bool  # its rows are in the file


class ExportSelection(Model, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Why a published turn's rows were chosen: the deciding rule and every group considered."""

    rule: SelectionRule
    groups: list[CandidateGroup]


class ExportEntry(Model, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What was written for a published turn."""

    export_id: str
    blob: str
    file_name: str
    format: ExportFormat
    row_count: int
    columns: list[str]
    row_source: RowSource
    source_artifacts: list[str]
    bytes: int
    sha256: str
    truncated: bool
    # Always written for a new export; records written before it existed read as None.
    selection: ExportSelection | None = None


class TurnRecord(Model, frozen=True, kw_only=True):
    """One document per processed turn, id = turn_id, partition key conversation_id
    (unknown fields, such as a store's own metadata, ignored)."""

    id: str
    conversation_id: str
    turn_id: str
    user_id: str
    event_id: str
    seq: int | None
    decision: Decision
    format: RequestFormat | None
    carried: bool
    state_after: StateAfter
    export: ExportEntry | None
    processed_at: str
    event_sent: bool
