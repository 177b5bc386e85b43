"""Sending turn.completed bodies, each on its conversation's session (`send`, `dev seed`)."""

from __future__ import annotations

import hashlib
import json
import uuid

from worker.ports import MAX_MESSAGE_ID, Sender

# Marks a message id derived from an event id too long to be one.
DERIVED_PREFIX = "evt-sha256-"


def routing(body: bytes) -> tuple[str, str]:
    """(session id, message id) for a body: its conversation id and event id when it has them.

    An event id longer than a message id may be (the schema sets no length, so such an
    event is valid and must still be enqueued as given) yields a message id derived from
    it: the same event id gives the same message id on every send. So does one holding a
    lone surrogate, which no queue can hold; such a conversation id gives no session. The
    body is enqueued as given either way, for the worker to dead-letter it.
    """
    session_id, message_id = "", uuid.uuid4().hex
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, or nested too deeply to parse
        return session_id, message_id
    if isinstance(value, dict):
        if isinstance(value.get("conversation_id"), str) and _is_text(value["conversation_id"]):
            session_id = value["conversation_id"]
        if isinstance(value.get("event_id"), str) and value["event_id"]:
            message_id = _message_id(value["event_id"])
    return session_id, message_id


def _message_id(event_id: str) -> str:
    if len(event_id) <= MAX_MESSAGE_ID and _is_text(event_id):
        return event_id
    data = event_id.encode("utf-8", "surrogatepass")
    return DERIVED_PREFIX + hashlib.sha256(data).hexdigest()


def _is_text(value: str) -> bool:
    """Whether `value` encodes as UTF-8 (no lone surrogate)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


async def enqueue(sender: Sender, body: bytes) -> None:
    """Send one turn.completed body on its conversation's session."""
    session_id, message_id = routing(body)
    await sender.send(body, session_id, message_id=message_id)
