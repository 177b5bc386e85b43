"""Events that cross the queue and the topic (docs/contract/events.md)."""

from __future__ import annotations

import json
from typing import Annotated, Literal

import msgspec

from schemas.model import Model
from schemas.validation import first_error
from schemas.vocabulary import ExportFormat, RowSource

DEFAULT_HISTORY_LIMIT = 10
MAX_HISTORY_LIMIT = 40

_Id = Annotated[str, msgspec.Meta(min_length=1)]


class TurnCompleted(Model, frozen=True, kw_only=True):
    """`turn.completed` v1: the chat service persisted a turn (unknown fields ignored)."""

    type: Literal["turn.completed"]
    version: Literal[1]
    event_id: _Id
    occurred_at: str
    conversation_id: _Id
    user_id: _Id
    turn_id: _Id
    user_message_id: _Id
    reply_message_id: _Id
    history_limit: Annotated[int, msgspec.Meta(ge=0)] | None = None

    def effective_history_limit(self, default: int, cap: int) -> int:
        """The history limit the window uses: the event's, else the default, capped."""
        limit = default if self.history_limit is None else self.history_limit
        return max(0, min(limit, cap))


class ExportPublished(Model, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`export.published` v1: a file is ready; message id = export_id."""

    type: Literal["export.published"] = "export.published"
    version: Literal[1] = 1
    event_id: str
    occurred_at: str
    conversation_id: str
    user_id: str
    turn_id: str
    export_id: str
    format: ExportFormat
    file_name: str
    blob: str
    row_count: int
    columns: list[str]
    row_source: RowSource
    truncated: bool


class InvalidEvent(ValueError):
    """The body is not a valid `turn.completed` v1 event; the message names the field."""


MAX_EVENT_BYTES = 256 * 1024


def parse_turn_completed(body: bytes | str) -> TurnCompleted:
    """Validate a queue body as `turn.completed` v1, or raise InvalidEvent naming the field."""
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
    except msgspec.ValidationError as exc:
        raise InvalidEvent(first_error(exc, "body")) from None


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")
