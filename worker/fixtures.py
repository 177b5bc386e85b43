"""Loading fixtures into any backend: `dev seed`, the tests, and users' own tests.

A fixture is `{"conversations": [...], "messages": [...], "artifacts": {"path": value},
"events": [...]}` (SPEC section 10). Events are enqueued in order exactly as given, invalid
ones included; a string event stands for a raw body (one that need not be JSON at all).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from worker.ports import Backend


@dataclass(frozen=True)
class Seeded:
    """How much a fixture put where."""

    conversations: int
    messages: int
    artifacts: int
    events: int


def event_body(event: Any) -> bytes:
    """The queue body for a fixture event: a string is the raw body, anything else JSON."""
    return event.encode("utf-8") if isinstance(event, str) else json.dumps(event).encode("utf-8")


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


async def enqueue(backend: Backend, body: bytes) -> None:
    """Send one turn.completed body on its conversation's session."""
    session_id, message_id = routing(body)
    await backend.queue.send(body, session_id, message_id=message_id)


async def seed(backend: Backend, fixture: dict[str, Any]) -> Seeded:
    """Write a fixture's documents and artifacts, then enqueue its events in order."""
    conversations = fixture.get("conversations") or []
    messages = fixture.get("messages") or []
    artifacts = fixture.get("artifacts") or {}
    events = fixture.get("events") or []
    for conversation in conversations:
        await backend.store.put_conversation(conversation)
    for message in messages:
        await backend.store.put_message(message)
    for path, value in artifacts.items():
        await backend.blobs.put(path, json.dumps(value, ensure_ascii=False).encode("utf-8"))
    for event in events:
        await enqueue(backend, event_body(event))
    return Seeded(len(conversations), len(messages), len(artifacts), len(events))
