"""Sending turn.completed bodies, each on its conversation's session (`send`, `dev seed`)."""

from __future__ import annotations

import json
import uuid

from worker.ports import Sender


def routing(body: bytes) -> tuple[str, str]:
    """(session id, message id) for a body: its conversation id and event id when it has them."""
    session_id, message_id = "", uuid.uuid4().hex
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, or nested too deeply to parse
        return session_id, message_id
    if isinstance(value, dict):
        if isinstance(value.get("conversation_id"), str):
            session_id = value["conversation_id"]
        if isinstance(value.get("event_id"), str) and value["event_id"]:
            message_id = value["event_id"]
    return session_id, message_id


async def enqueue(sender: Sender, body: bytes) -> None:
    """Send one turn.completed body on its conversation's session."""
    session_id, message_id = routing(body)
    await sender.send(body, session_id, message_id=message_id)
