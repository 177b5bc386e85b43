"""Stored documents the worker reads: conversations, messages, artifacts.

The contract: docs/contract/stored-data.md. Stored documents carry store metadata (`_etag`,
`_ts`, ...): fields we do not know are ignored.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from schemas.model import Model


class Conversation(Model, frozen=True, kw_only=True):
    """A conversation: who owns it, who takes part, whether it is gone."""

    id: str
    user_id: str
    participants: list[str] = msgspec.field(default_factory=list)
    deleted: bool = False


class ToolCall(Model, frozen=True, kw_only=True):
    """One call the assistant made; parallel calls share one assistant message."""

    id: str | None
    name: str
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)


class CompactCitation(Model, frozen=True, kw_only=True):
    """The compacted copy of a tool result kept on the message (docs/contract/stored-data.md)."""

    result: Any = None
    row_count: int | None = None
    columns: list[str] = msgspec.field(default_factory=list)


class ToolResult(Model, frozen=True, kw_only=True):
    """One result inside a tool message, answering the call with the same id."""

    call_id: str | None
    name: str
    success: bool
    citation: CompactCitation | None = None
    artifact: str | None = None


class _MessageBase(Model, frozen=True, kw_only=True):
    id: str
    conversation_id: str
    turn_id: str
    seq: int
    created_at: str
    deleted: bool = False


class UserMessage(_MessageBase, frozen=True, kw_only=True):
    """The user's message; it opens a turn."""

    role: Literal["user"]
    content: str = ""


class AssistantMessage(_MessageBase, frozen=True, kw_only=True):
    """An assistant message: text, parallel tool calls, maybe a clarification flag."""

    role: Literal["assistant"]
    content: str | None = ""
    tool_calls: list[ToolCall] = msgspec.field(default_factory=list)
    clarification: bool | None = None


class ToolMessage(_MessageBase, frozen=True, kw_only=True):
    """A tool message holding one or more results."""

    role: Literal["tool"]
    results: list[ToolResult] = msgspec.field(default_factory=list)


class SystemMessage(_MessageBase, frozen=True, kw_only=True):
    """A system message: never part of the window."""

    role: Literal["system"]
    content: str | None = ""


Message = UserMessage | AssistantMessage | ToolMessage | SystemMessage

_BY_ROLE: dict[str, type[Message]] = {
    "user": UserMessage,
    "assistant": AssistantMessage,
    "tool": ToolMessage,
    "system": SystemMessage,
}


class Artifact(Model, frozen=True, kw_only=True):
    """The full, uncompacted function result stored as a blob (its result taken as it is)."""

    call_id: str | None = None
    name: str | None = None
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)
    result: Any = None


def parse_message(document: Any) -> Message:
    """A stored message document as the struct of its role; msgspec.ValidationError when
    malformed (an unknown or missing role too)."""
    if not isinstance(document, dict):
        return UserMessage.model_validate(document)  # fails, saying what was expected
    role = document.get("role")
    if role is None:
        raise msgspec.ValidationError("Object missing required field `role`")
    kind = _BY_ROLE.get(role) if isinstance(role, str) else None
    if kind is None:
        raise msgspec.ValidationError(
            "Expected `str` of 'user', 'assistant', 'tool' or 'system' - at `$.role`"
        )
    if role == "assistant" and "tool_calls" in document and document["tool_calls"] is None:
        # How chat APIs write an assistant message that called nothing: no calls.
        document = {k: v for k, v in document.items() if k != "tool_calls"}
    return kind.model_validate(document)
