"""Stored documents the worker reads: conversations, messages, artifacts.

The contract: docs/contract/stored-data.md.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, TypeAdapter


class _Stored(BaseModel):
    """Stored documents carry store metadata (`_etag`, `_ts`, ...): ignore what we do not know."""

    # defer_build: validators are built on first use, not at import (start-up time).
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)


class Conversation(_Stored):
    """A conversation: who owns it, who takes part, whether it is gone."""

    id: StrictStr
    user_id: StrictStr
    participants: list[StrictStr] = Field(default_factory=list)
    deleted: StrictBool = False


class ToolCall(_Stored):
    """One call the assistant made; parallel calls share one assistant message."""

    id: StrictStr | None
    name: StrictStr
    arguments: dict[str, Any] = Field(default_factory=dict)


class CompactCitation(_Stored):
    """The compacted copy of a tool result kept on the message (docs/contract/stored-data.md)."""

    result: Any = None
    row_count: StrictInt | None = None
    columns: list[StrictStr] = Field(default_factory=list)


class ToolResult(_Stored):
    """One result inside a tool message, answering the call with the same id."""

    call_id: StrictStr | None
    name: StrictStr
    success: StrictBool
    citation: CompactCitation | None = None
    artifact: StrictStr | None = None


class _MessageBase(_Stored):
    id: StrictStr
    conversation_id: StrictStr
    turn_id: StrictStr
    seq: StrictInt
    created_at: StrictStr
    deleted: StrictBool = False


class UserMessage(_MessageBase):
    """The user's message; it opens a turn."""

    role: Literal["user"]
    content: StrictStr = ""


class AssistantMessage(_MessageBase):
    """An assistant message: text, parallel tool calls, maybe a clarification flag."""

    role: Literal["assistant"]
    content: StrictStr | None = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    clarification: StrictBool | None = None


class ToolMessage(_MessageBase):
    """A tool message holding one or more results."""

    role: Literal["tool"]
    results: list[ToolResult] = Field(default_factory=list)


class SystemMessage(_MessageBase):
    """A system message: never part of the window."""

    role: Literal["system"]
    content: StrictStr | None = ""


Message = Annotated[
    UserMessage | AssistantMessage | ToolMessage | SystemMessage, Field(discriminator="role")
]


class Artifact(_Stored):
    """The full, uncompacted function result stored as a blob."""

    call_id: StrictStr | None = None
    name: StrictStr | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: Any = None


_MESSAGE_ADAPTER: TypeAdapter[UserMessage | AssistantMessage | ToolMessage | SystemMessage] = (
    TypeAdapter(Message, config=ConfigDict(defer_build=True))
)


def parse_message(document: Any) -> UserMessage | AssistantMessage | ToolMessage | SystemMessage:
    """A stored message document as its model; pydantic.ValidationError when malformed."""
    return _MESSAGE_ADAPTER.validate_python(document)
