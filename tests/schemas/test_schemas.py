"""The shapes that cross boundaries: validation errors name the field; schema files match."""

from __future__ import annotations

import json
from typing import get_args

import msgspec
import pytest

from handlers.export_paths import export_blob_path, export_id
from schemas.documents import (
    AssistantMessage,
    Conversation,
    SystemMessage,
    ToolMessage,
    UserMessage,
    parse_message,
)
from schemas.events import (
    EXPORT_NAME_TAIL_UNITS,
    ExportPublished,
    InvalidEvent,
    TurnCompleted,
    parse_turn_completed,
)
from schemas.generate import HERE, SCHEMA_FILES, render
from schemas.records import ExportEntry
from schemas.text import utf16_units
from schemas.validation import first_error
from schemas.vocabulary import ExportFormat

GOOD = {
    "type": "turn.completed",
    "version": 1,
    "event_id": "evt_1",
    "occurred_at": "2026-11-20T09:01:39Z",
    "conversation_id": "conv_a",
    "user_id": "user_a",
    "turn_id": "turn_1",
    "user_message_id": "m1",
    "reply_message_id": "m2",
    "history_limit": 10,
}


@pytest.mark.parametrize("field", ["type", "version"])
def test_export_published_without_its_type_or_version_is_no_v1_event(field: str) -> None:
    """A consumer tells a v1 event by them: the shipped schema and the model require both."""
    schema = json.loads((HERE / "export_published.v1.schema.json").read_text(encoding="utf-8"))
    definition = schema["$defs"]["ExportPublished"] if "$defs" in schema else schema
    assert field in definition["required"]
    body = {
        "type": "export.published",
        "version": 1,
        "event_id": "e",
        "occurred_at": "2026-11-20T09:00:00Z",
        "conversation_id": "c",
        "user_id": "u",
        "turn_id": "t",
        "export_id": "x",
        "format": "csv",
        "file_name": "f.csv",
        "blob": "exports/c/t/x.csv",
        "row_count": 1,
        "columns": ["a"],
        "row_source": "action_rows",
        "truncated": False,
    }
    ExportPublished.model_validate(body)
    del body[field]
    with pytest.raises(msgspec.ValidationError, match=field):
        ExportPublished.model_validate(body)


def test_schema_files_match_the_models() -> None:
    for name, model in SCHEMA_FILES.items():
        shipped = (HERE / name).read_text(encoding="utf-8")
        assert shipped == render(model), f"{name} drifted: run python -m schemas.generate"


def test_valid_event_parses_and_ignores_unknown_fields() -> None:
    event = parse_turn_completed(json.dumps({**GOOD, "extra": {"x": 1}}))
    assert event.turn_id == "turn_1"


def test_history_limit_defaults_to_10_and_is_capped_at_40() -> None:
    without = {k: v for k, v in GOOD.items() if k != "history_limit"}
    assert parse_turn_completed(json.dumps(without)).effective_history_limit(10, 40) == 10
    big = parse_turn_completed(json.dumps({**GOOD, "history_limit": 400}))
    assert big.effective_history_limit(10, 40) == 40


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"type": "turn.started"}, "type"),
        ({"version": 2}, "version"),
        ({"version": "1"}, "version"),
        ({"version": 1.0}, "version"),
        ({"history_limit": 10.0}, "history_limit"),
        ({"turn_id": 7}, "turn_id"),
        ({"conversation_id": None}, "conversation_id"),
        ({"history_limit": "10"}, "history_limit"),
        ({"history_limit": True}, "history_limit"),
        ({"user_id": ""}, "user_id"),
    ],
)
def test_invalid_event_error_names_the_field(change: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidEvent, match=field):
        parse_turn_completed(json.dumps({**GOOD, **change}))


@pytest.mark.parametrize("field", ["conversation_id", "turn_id"])
@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (".", "'.' or '..'"),
        ("..", "'.' or '..'"),
        ("conv/../other", "'.' or '..'"),
        ("a/.", "'.' or '..'"),
        ("back\\slash", "backslash"),
        ("nul\x00", "control character"),
        ("tab\there", "control character"),
        ("line\nbreak", "control character"),
        ("del\x7f", "control character"),
        ("c1\x81", "control character"),
        ("private\ue000", "private-use code point or a noncharacter"),
        ("private\U00100000", "private-use code point or a noncharacter"),
        ("non\ufdd0", "private-use code point or a noncharacter"),
        ("non\uffff", "private-use code point or a noncharacter"),
        ("non\U0001fffe", "private-use code point or a noncharacter"),
        ("a" * 256, "over 255 bytes in UTF-8"),
        ("conv/" + "\u00e9" * 128, "over 255 bytes in UTF-8"),
        ("/lead", "empty"),
        ("trail/", "empty"),
        ("a//b", "empty"),
    ],
)
def test_an_id_that_cannot_name_a_folder_of_the_blob_path_is_invalid(
    field: str, value: str, problem: str
) -> None:
    """The export goes to exports/{conversation_id}/{turn_id}/…: an id that cannot be
    folders there is refused when the event is read, not after the turn ran."""
    with pytest.raises(InvalidEvent, match=field) as caught:
        parse_turn_completed(json.dumps({**GOOD, field: value}))
    assert problem in str(caught.value)
    if value not in (".", ".."):  # the description names the kind of part, never the value
        assert value not in str(caught.value)


@pytest.mark.parametrize(
    "field", ["event_id", "conversation_id", "user_id", "turn_id", "reply_message_id"]
)
def test_an_id_holding_a_lone_surrogate_is_invalid_not_a_bug(field: str) -> None:
    """JSON may escape a lone surrogate; no store key or path can hold one, so the event
    is refused when read (schema_invalid) instead of failing the first store call."""
    body = json.dumps({**GOOD, field: "c\ud800"})  # the escape stays in the JSON text
    assert "\\ud800" in body
    with pytest.raises(InvalidEvent, match=f"'{field}'.*lone surrogate"):
        parse_turn_completed(body)


@pytest.mark.parametrize(
    "value",
    [
        "conv/a",
        "a/b/c",
        ".hidden",
        "a..b",
        "...",
        "x y",
        "a" * 255,  # the longest part a file system names
        "\u00e9" * 127 + "a",  # 255 bytes in UTF-8
        "\U0001f600" * 63,  # 252 bytes
        "\ud55c\uae00 \u00a0\u2028\ufffd",  # other letters and spaces are characters
    ],
)
def test_an_id_with_slashes_or_dots_inside_its_parts_stays_valid(value: str) -> None:
    event = parse_turn_completed(json.dumps({**GOOD, "conversation_id": value, "turn_id": value}))
    assert (event.conversation_id, event.turn_id) == (value, value)


@pytest.mark.parametrize("missing", ["event_id", "reply_message_id", "user_message_id", "type"])
def test_missing_required_field_is_invalid(missing: str) -> None:
    body = {k: v for k, v in GOOD.items() if k != missing}
    with pytest.raises(InvalidEvent, match=missing):
        parse_turn_completed(json.dumps(body))


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[1,2]", b"\xff\xfe", b'{"history_limit": NaN}', b"x" * 300_000],
)
def test_body_that_is_not_a_json_object_is_invalid(body: bytes) -> None:
    with pytest.raises(InvalidEvent):
        parse_turn_completed(body)


def test_stored_documents_parse_with_store_metadata() -> None:
    conv = Conversation.model_validate({"id": "c", "user_id": "u", "_etag": "x", "_ts": 1})
    assert conv.participants == [] and conv.deleted is False
    msg = AssistantMessage.model_validate(
        {
            "id": "m",
            "conversation_id": "c",
            "turn_id": "t",
            "seq": 2,
            "role": "assistant",
            "created_at": "2026-01-01T00:00:00Z",
            "content": "",
            "tool_calls": [{"id": "a", "name": "x", "arguments": {}}, {"id": "b", "name": "y"}],
        }
    )
    assert [c.id for c in msg.tool_calls] == ["a", "b"]
    tool = ToolMessage.model_validate(
        {
            "id": "m3",
            "conversation_id": "c",
            "turn_id": "t",
            "seq": 3,
            "role": "tool",
            "created_at": "2026-01-01T00:00:00Z",
            "results": [{"call_id": "a", "name": "x", "success": True, "artifact": None}],
        }
    )
    assert tool.results[0].citation is None


def test_turn_completed_is_frozen() -> None:
    event = TurnCompleted.model_validate(GOOD)
    with pytest.raises(AttributeError):
        event.turn_id = "other"  # type: ignore[misc]


def test_export_entry_written_before_selection_existed_still_reads() -> None:
    entry = {
        "export_id": "exp_1",
        "blob": "exports/c/t/exp_1.csv",
        "file_name": "export_20261120_090139.csv",
        "format": "csv",
        "row_count": 1,
        "columns": ["a"],
        "row_source": "action_rows",
        "source_artifacts": [],
        "bytes": 10,
        "sha256": "0" * 64,
        "truncated": False,
    }
    assert ExportEntry.model_validate(entry).selection is None
    group = {"turn_id": "t", "action": "a", "estimate": None, "rows": 1, "score": 0, "chosen": True}
    selected = ExportEntry.model_validate(
        {**entry, "selection": {"rule": "single_group", "groups": [group]}}
    )
    assert selected.selection is not None and selected.selection.groups[0].rows == 1
    with pytest.raises(ValueError):
        ExportEntry.model_validate({**entry, "selection": {"rule": "newest", "groups": []}})


def test_an_invalid_value_is_named_by_its_field_never_quoted() -> None:
    with pytest.raises(InvalidEvent) as raised:
        parse_turn_completed(json.dumps({**GOOD, "type": "turn.SECRET-VALUE"}))
    assert str(raised.value).startswith("field 'type': ")
    assert "SECRET" not in str(raised.value)


def test_a_missing_field_is_named_with_the_path_to_it() -> None:
    body = {k: v for k, v in GOOD.items() if k != "event_id"}
    with pytest.raises(InvalidEvent) as raised:
        parse_turn_completed(json.dumps(body))
    assert str(raised.value) == "field 'event_id': Object missing required field `event_id`"


def test_a_nested_stored_document_error_names_the_path_with_list_positions() -> None:
    document = {
        "id": "m",
        "conversation_id": "c",
        "turn_id": "t",
        "seq": 3,
        "role": "tool",
        "created_at": "2026-01-01T00:00:00Z",
        "results": [{"call_id": "a", "name": "x", "success": "yes"}],
    }
    with pytest.raises(ValueError) as raised:
        parse_message(document)
    assert isinstance(raised.value, msgspec.ValidationError)
    assert first_error(raised.value, "document") == (
        "field 'results.0.success': Expected `bool`, got `str`"
    )


@pytest.mark.parametrize("role", ["wizard", 7, None])
def test_a_stored_message_of_no_known_role_is_invalid_naming_the_role(role: object) -> None:
    document = {"id": "m", "conversation_id": "c", "turn_id": "t", "seq": 1, "created_at": "x"}
    if role is not None:
        document["role"] = role
    with pytest.raises(msgspec.ValidationError) as raised:
        parse_message(document)
    described = first_error(raised.value, "document")
    assert described.startswith("field 'role': ") and "wizard" not in described


def test_messages_of_each_role_parse_to_their_struct_and_dump_back() -> None:
    common = {"id": "m", "conversation_id": "c", "turn_id": "t", "seq": 1, "created_at": "x"}
    for role, kind in [
        ("user", UserMessage),
        ("assistant", AssistantMessage),
        ("tool", ToolMessage),
        ("system", SystemMessage),
    ]:
        message = parse_message({**common, "role": role, "_etag": "ignored"})
        assert type(message) is kind
        dumped = message.model_dump()
        assert dumped["role"] == role and "_etag" not in dumped
        assert kind.model_validate(dumped) == message


def _with_ids(conversation_id: str, turn_id: str) -> str:
    return json.dumps({**GOOD, "conversation_id": conversation_id, "turn_id": turn_id})


def test_the_longest_export_blob_name_the_ids_allow_is_blob_storages_1024_characters() -> None:
    """Blob Storage holds a blob name of at most 1,024 characters: the ids' lengths plus the
    export's own tail, `/{export_id}.xlsx` at the longest, must fit."""
    conversation_id = "/".join(["c" * 200] * 3) + "/" + "c" * 97  # 700 characters
    turn_id = "t/" + "\U0001f600" * 60 + "/" + "b" * 170  # 293: an emoji counts two
    assert utf16_units(conversation_id) + utf16_units(turn_id) == 1024 - EXPORT_NAME_TAIL_UNITS
    event = parse_turn_completed(_with_ids(conversation_id, turn_id))
    fmt = max(get_args(ExportFormat), key=len)
    name = export_blob_path(
        "exports", conversation_id, turn_id, export_id(conversation_id, turn_id, fmt), fmt
    ).removeprefix("exports/")
    assert utf16_units(name) == 1024 and event.turn_id == turn_id
    with pytest.raises(InvalidEvent, match="'conversation_id' and 'turn_id'") as caught:
        parse_turn_completed(_with_ids(conversation_id + "a", turn_id))
    assert "1025 characters, over Blob Storage's 1024" in str(caught.value)


def test_an_export_blob_name_holds_at_most_254_path_segments() -> None:
    """The ids' parts, plus the export file's own name, are the blob name's segments."""
    conversation_id, turn_id = "/".join("c" * 126), "/".join("t" * 127)
    assert parse_turn_completed(_with_ids(conversation_id, turn_id)).turn_id == turn_id
    with pytest.raises(InvalidEvent, match="255 path segments, over Blob Storage's 254"):
        parse_turn_completed(_with_ids(conversation_id + "/c", turn_id))
