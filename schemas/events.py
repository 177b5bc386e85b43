"""Events that cross the queue and the topic (docs/contract/events.md)."""

from __future__ import annotations

import json
import re
from typing import Annotated, Literal

import msgspec

from schemas.model import Model
from schemas.text import utf16_units
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
            " slashes may be empty, '.' or '..' or over 255 bytes in UTF-8, no backslash,"
            " control character, private-use code point or noncharacter may appear, and"
            " with the other id it must fit Blob Storage's 1,024-character blob name and"
            " 254 path segments (checked when the event is read)."
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
            "leaves the stamp to the reply message's created_at, else the worker's clock)."
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
    problem = blob_name_problem(event.conversation_id, event.turn_id)
    if problem is not None:
        raise InvalidEvent(f"fields 'conversation_id' and 'turn_id': {problem}")
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
# What Blob Storage and a file system hold (docs/contract/events.md).
MAX_PART_BYTES = 255
MAX_BLOB_NAME_UNITS = 1024
MAX_BLOB_NAME_SEGMENTS = 254
# The export blob name past the ids: "/" between them, then "/exp_" + 20 hex digits + ".xlsx"
# (the longest extension; `handlers/export_paths.py`).
EXPORT_NAME_TAIL_UNITS = len("/") + len("/exp_") + 20 + len(".xlsx")
# C0 and C1 controls and DEL; private use (the BMP's, planes 15 and 16) and noncharacters.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_NOT_A_CHARACTER = re.compile(
    "[\ue000-\uf8ff\ufdd0-\ufdef\U000f0000-\U0010ffff"
    + "".join(chr(plane << 16 | 0xFFFE) + chr(plane << 16 | 0xFFFF) for plane in range(15))
    + "]"
)


def path_folder_problem(value: str) -> str | None:
    """Why `value` cannot be one or more folders of a blob path, or None when it can.

    A `/` makes more folders, which is fine; each part between slashes must be a folder
    name that every store holds as written: not empty (a leading, trailing or doubled `/`),
    not `.` or `..` (which a file system, and a URL, resolve to another folder), at most 255
    bytes in UTF-8 (the longest name a file system holds: the local blob store writes each
    part as a folder), and without a backslash (a separator on Windows and to some Azure
    tools), a control character (Blob Storage refuses them; a NUL ends a path on the way to
    the operating system) or a code point Blob Storage refuses as no valid character: one
    for private use or a noncharacter. The answer never quotes the value.
    """
    if "\\" in value:
        return "contains a backslash"
    if _CONTROL.search(value):
        return "contains a control character"
    if _NOT_A_CHARACTER.search(value):
        return "contains a private-use code point or a noncharacter"
    parts = value.split("/")
    if "" in parts:
        return "has an empty part between slashes"
    if any(part in (".", "..") for part in parts):
        return "has a part between slashes that is '.' or '..'"
    if any(len(part.encode()) > MAX_PART_BYTES for part in parts):
        return f"has a part between slashes over {MAX_PART_BYTES} bytes in UTF-8"
    return None


def blob_name_problem(conversation_id: str, turn_id: str) -> str | None:
    """Why the two ids cannot both name folders of one export blob's name, or None.

    Blob Storage holds a blob name (the path after the container) of at most 1,024
    characters, counted as UTF-16 code units, in at most 254 segments. The export's name is
    `{conversation_id}/{turn_id}/{export_id}.{ext}`: the ids' own lengths plus a fixed
    tail, the longest being `/` + `/exp_` + 20 hex digits + `.xlsx`.
    """
    units = utf16_units(conversation_id) + utf16_units(turn_id) + EXPORT_NAME_TAIL_UNITS
    if units > MAX_BLOB_NAME_UNITS:
        return (
            f"together they make an export blob name of {units} characters, over Blob"
            f" Storage's {MAX_BLOB_NAME_UNITS}"
        )
    segments = conversation_id.count("/") + turn_id.count("/") + 3
    if segments > MAX_BLOB_NAME_SEGMENTS:
        return (
            f"together they make an export blob name of {segments} path segments, over Blob"
            f" Storage's {MAX_BLOB_NAME_SEGMENTS}"
        )
    return None


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")
