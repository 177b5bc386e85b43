"""Events that cross the queue and the topic (SPEC section 4, contract)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from schemas.records import ExportFormat, RowSource

DEFAULT_HISTORY_LIMIT = 10
MAX_HISTORY_LIMIT = 40


class TurnCompleted(BaseModel):
    """`turn.completed` v1: the chat service persisted a turn."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    type: Literal["turn.completed"]
    version: Literal[1]
    event_id: StrictStr = Field(min_length=1)
    occurred_at: StrictStr
    conversation_id: StrictStr = Field(min_length=1)
    user_id: StrictStr = Field(min_length=1)
    turn_id: StrictStr = Field(min_length=1)
    user_message_id: StrictStr = Field(min_length=1)
    reply_message_id: StrictStr = Field(min_length=1)
    history_limit: StrictInt | None = Field(default=None, ge=0)

    def effective_history_limit(self, default: int, cap: int) -> int:
        """The history limit the window uses: the event's, else the default, capped."""
        limit = default if self.history_limit is None else self.history_limit
        return max(0, min(limit, cap))


class ExportPublished(BaseModel):
    """`export.published` v1: a file is ready; message id = export_id."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["export.published"] = "export.published"
    version: Literal[1] = 1
    event_id: StrictStr
    occurred_at: StrictStr
    conversation_id: StrictStr
    user_id: StrictStr
    turn_id: StrictStr
    export_id: StrictStr
    format: ExportFormat
    file_name: StrictStr
    blob: StrictStr
    row_count: StrictInt
    columns: list[StrictStr]
    row_source: RowSource
    truncated: StrictBool
