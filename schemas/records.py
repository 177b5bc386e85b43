"""The turn record: the ledger's one document per processed turn (docs/contract/turn-record.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, StrictStr

from schemas.vocabulary import Decision, ExportFormat, RequestFormat, RowSource, SelectionRule


class StateAfter(BaseModel):
    """The carry-forward state after a turn."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    state: Literal["idle", "awaiting"]
    format: RequestFormat | None = None


class CandidateGroup(BaseModel):
    """One group of action results the selection considered (docs/contract/turn-record.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    turn_id: StrictStr
    action: StrictStr
    estimate: StrictInt | None  # rows the compact citations stand for; None: no estimate
    rows: StrictInt | None  # real rows read; None for a group never read
    score: StrictInt  # relevance: distinct subject words of the request the group holds
    chosen: StrictBool  # its rows are in the file


class ExportSelection(BaseModel):
    """Why a published turn's rows were chosen: the deciding rule and every group considered."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    rule: SelectionRule
    groups: list[CandidateGroup]


class ExportEntry(BaseModel):
    """What was written for a published turn."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    export_id: StrictStr
    blob: StrictStr
    file_name: StrictStr
    format: ExportFormat
    row_count: StrictInt
    columns: list[StrictStr]
    row_source: RowSource
    source_artifacts: list[StrictStr]
    bytes: StrictInt
    sha256: StrictStr
    truncated: StrictBool
    # Always written for a new export; records written before it existed read as None.
    selection: ExportSelection | None = None


class TurnRecord(BaseModel):
    """One document per processed turn, id = turn_id, partition key conversation_id."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    id: StrictStr
    conversation_id: StrictStr
    turn_id: StrictStr
    user_id: StrictStr
    event_id: StrictStr
    seq: StrictInt | None
    decision: Decision
    format: RequestFormat | None
    carried: StrictBool
    state_after: StateAfter
    export: ExportEntry | None
    processed_at: StrictStr
    event_sent: StrictBool
