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
# An id that names folders of the export's blob path; `path_folder_problem` checks the
# rest, which a JSON Schema cannot say simply, and the description tells the sender.
_PathId = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        description=(
            "Names folders of the export's blob path: '/' is allowed, but no part between"
            " slashes may be empty, '.' or '..', and no backslash or NUL may appear"
            " (checked when the event is read)."
        ),
    ),
]


class TurnCompleted(Model, frozen=True, kw_only=True):
    """`turn.completed` v1: the chat service persisted a turn (unknown fields ignored)."""

    type: Literal["turn.completed"]
    version: Annotated[
        Literal[1],
        msgspec.Meta(
            description="The number 1 written as an integer: JSON Schema also takes 1.0, "
            "which the worker refuses."
        ),
    ]
    event_id: _Id
    occurred_at: Annotated[
        str,
        msgspec.Meta(
            description="RFC 3339; stamps the download file name (a value that does not parse "
            "leaves the stamp to the worker's clock)."
        ),
    ]
    conversation_id: _PathId
    user_id: _Id
    turn_id: _PathId
    user_message_id: _Id
    reply_message_id: _Id
    history_limit: Annotated[
        Annotated[int, msgspec.Meta(ge=0)] | None,
        msgspec.Meta(
            description="Messages of history the window keeps, at most the worker's "
            "HISTORY_LIMIT_MAX (40 unless set); absent or null: its HISTORY_LIMIT_DEFAULT "
            "(10 unless set). Written as an integer: the worker refuses 10.0, which JSON "
            "Schema's integer type takes."
        ),
    ] = None

    def effective_history_limit(self, default: int, cap: int) -> int:
        """The history limit the window uses: the event's, else the default, capped."""
        limit = default if self.history_limit is None else self.history_limit
        return max(0, min(limit, cap))


class ExportPublished(Model, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`export.published` v1: a file is ready; message id = export_id."""

    type: Literal["export.published"]  # required: a consumer tells a v1 event by them
    version: Literal[1]
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
        event = TurnCompleted.model_validate(value)
    except msgspec.ValidationError as exc:
        raise InvalidEvent(first_error(exc, "body")) from None
    for field in _TEXT_FIELDS:
        try:
            getattr(event, field).encode("utf-8")
        except UnicodeEncodeError:
            # JSON lets "\ud800" stand alone; no store key, path or event can hold it.
            raise InvalidEvent(f"field {field!r}: holds a lone surrogate, not text") from None
    for field in PATH_ID_FIELDS:
        problem = path_folder_problem(getattr(event, field))
        if problem is not None:
            raise InvalidEvent(
                f"field {field!r}: {problem}, so it cannot name folders of the export's blob path"
            )
    return event


# The event's text fields: every one becomes a store key, a path, a log field or a field of
# the event out.
_TEXT_FIELDS = (
    "event_id",
    "occurred_at",
    "conversation_id",
    "user_id",
    "turn_id",
    "user_message_id",
    "reply_message_id",
)

# The ids that name folders of the export's blob path, `exports/{conversation_id}/{turn_id}/…`
# (docs/contract/files.md).
PATH_ID_FIELDS = ("conversation_id", "turn_id")


def path_folder_problem(value: str) -> str | None:
    """Why `value` cannot be one or more folders of a blob path, or None when it can.

    A `/` makes more folders, which is fine; each part between slashes must be a folder
    name that no store reads as something else: not empty (a leading, trailing or doubled
    `/`), not `.` or `..` (which a file system, and a URL, resolve to another folder), and
    without a backslash (a separator on Windows and to some Azure tools) or a NUL (which
    ends a path on the way to the operating system). The local blob store refuses exactly
    these paths (`worker/local/blobs.py`, `blob_parts`). The answer never quotes the value.
    """
    if "\\" in value:
        return "contains a backslash"
    if "\x00" in value:
        return "contains NUL"
    parts = value.split("/")
    if "" in parts:
        return "has an empty part between slashes"
    if any(part in (".", "..") for part in parts):
        return "has a part between slashes that is '.' or '..'"
    return None


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")
