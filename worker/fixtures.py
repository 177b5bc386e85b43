"""Loading fixtures into any backend: `dev seed`, the tests, and users' own tests.

A fixture is `{"conversations": [...], "messages": [...], "artifacts": {"path": value},
"events": [...]}` (SPEC section 10). Events are enqueued in order exactly as given, invalid
ones included; a string event stands for a raw body (one that need not be JSON at all).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from worker.ports import Backend
from worker.sending import enqueue


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
        await enqueue(backend.queue, event_body(event))
    return Seeded(len(conversations), len(messages), len(artifacts), len(events))
