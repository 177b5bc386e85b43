"""Events that cross the queue and the topic (docs/contract/events.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from schemas.validation import first_error
from schemas.vocabulary import ExportFormat, RowSource

DEFAULT_HISTORY_LIMIT = 10
MAX_HISTORY_LIMIT = 40


class TurnCompleted(BaseModel):
    """`turn.completed` v1: the chat service persisted a turn."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

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

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

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


class InvalidEvent(ValueError):
    """The body is not a valid `turn.completed` v1 event; the message names the field."""


MAX_EVENT_BYTES = 256 * 1024


def parse_turn_completed(body: bytes | str) -> TurnCompleted:
    """Validate a queue body as `turn.completed` v1, or raise InvalidEvent naming the field."""
    import json

    from pydantic import ValidationError

    raw = body.encode("utf-8") if isinstance(body, str) else body
    if len(raw) > MAX_EVENT_BYTES:
        raise InvalidEvent(f"body is {len(raw)} bytes, over the {MAX_EVENT_BYTES} byte limit")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidEvent(f"body is not UTF-8 (byte {exc.start})") from None
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:
        raise InvalidEvent(f"body is not JSON: {exc}") from None
    except RecursionError:
        raise InvalidEvent("body is nested too deeply to parse") from None
    if not isinstance(value, dict):
        raise InvalidEvent(f"body is a JSON {type(value).__name__}, not an object")
    try:
        return TurnCompleted.model_validate(value)
    except ValidationError as exc:
        raise InvalidEvent(first_error(exc, "body")) from None


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")
