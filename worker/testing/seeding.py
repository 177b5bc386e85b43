"""Loading fixtures into any backend: `dev seed`, the tests, and users' own tests.

A fixture is `{"conversations": [...], "messages": [...], "artifacts": {"path": value},
"events": [...]}` (docs/contract/cli.md). Events are enqueued in order exactly as given, invalid
ones included; a string event stands for a raw body (one that need not be JSON at all).

Writing the chat service's documents, writing a small blob in one call and listing the
events published are test and development roles, not the worker's: they are the Protocols
below, which the local and Azure adapters implement beside their production ports.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import msgspec

from worker.call_retries import retried
from worker.ports import Backend, Effect, Sender, port_call
from worker.retry_policy import RetryPolicy
from worker.sending import enqueue


@runtime_checkable
class SeedableStore(Protocol):
    """Writes the chat service's documents."""

    @port_call(Effect.IDEMPOTENT)
    async def put_conversation(self, document: Mapping[str, Any]) -> None:
        """Insert or replace a conversation."""
        ...

    @port_call(Effect.IDEMPOTENT)
    async def put_message(self, document: Mapping[str, Any]) -> None:
        """Insert or replace a message."""
        ...


@runtime_checkable
class SeedableBlobs(Protocol):
    """Writes a small blob (an artifact) in one call."""

    @port_call(Effect.IDEMPOTENT)
    async def put(self, path: str, data: bytes, content_type: str = "application/json") -> None:
        """Write a small blob, replacing what was there."""
        ...


@runtime_checkable
class PublishedEvents(Protocol):
    """Lists what the publisher sent (the local outbox; a Service Bus topic cannot)."""

    @port_call(Effect.READ)
    async def sent(self) -> list[dict[str, Any]]:
        """The events' JSON bodies, oldest first."""
        ...


class CannotSeed(TypeError):
    """An adapter of the backend has no seeding role."""


class Seeding(msgspec.Struct, frozen=True):
    """A backend's adapters in their test and development roles."""

    store: SeedableStore
    blobs: SeedableBlobs
    queue: Sender
    events: PublishedEvents


class Seeded(msgspec.Struct, frozen=True):
    """How much a fixture put where."""

    conversations: int
    messages: int
    artifacts: int
    events: int


def seeding(adapters: Backend, policy: RetryPolicy | None = None) -> Seeding:
    """The adapters in their seeding roles, their calls tried again in place by `policy`.

    Pass the adapters as opened (`open_adapters`, `open_local_backend`): the production
    wrappers answer production calls only. CannotSeed when an adapter lacks a role.
    """
    store, blobs, events = adapters.store, adapters.blobs, adapters.publisher
    if not isinstance(store, SeedableStore):
        raise CannotSeed(f"{type(store).__name__} cannot write conversations and messages")
    if not isinstance(blobs, SeedableBlobs):
        raise CannotSeed(f"{type(blobs).__name__} cannot write artifacts")
    if not isinstance(events, PublishedEvents):
        raise CannotSeed(f"{type(events).__name__} cannot list what it published")
    if policy is None:
        return Seeding(store, blobs, adapters.queue, events)
    return Seeding(
        store=retried(store, policy, SeedableStore),
        blobs=retried(blobs, policy, SeedableBlobs),
        queue=retried(adapters.queue, policy, Sender),
        events=retried(events, policy, PublishedEvents),
    )


def tool_result(call_id: str, name: str, result: Any, artifact: str) -> dict[str, Any]:
    """A successful call's entry in a `tool` message, as the chat service stores it
    (docs/contract/stored-data.md): its citation (a compact excerpt of `result`) and the
    path of the artifact holding the whole result."""
    # Imported here: the CLI imports this module at start-up, which needs no citations.
    from handlers.compaction import build_citation

    return {
        "call_id": call_id,
        "name": name,
        "success": True,
        "citation": build_citation(result),
        "artifact": artifact,
    }


def event_body(event: Any) -> bytes:
    """The queue body for a fixture event: a string is the raw body, anything else JSON."""
    return event.encode("utf-8") if isinstance(event, str) else json.dumps(event).encode("utf-8")


def artifact_bytes(value: Any) -> bytes:
    """An artifact's JSON as UTF-8; a string holding a lone surrogate (which UTF-8 cannot
    encode) is written as its `\\ud800` escape, as JavaScript's JSON.stringify writes it."""
    try:
        return json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value).encode("ascii")


async def seed(target: Seeding, fixture: dict[str, Any]) -> Seeded:
    """Write a fixture's documents and artifacts, then enqueue its events in order."""
    conversations = fixture.get("conversations") or []
    messages = fixture.get("messages") or []
    artifacts = fixture.get("artifacts") or {}
    events = fixture.get("events") or []
    for conversation in conversations:
        await target.store.put_conversation(conversation)
    for message in messages:
        await target.store.put_message(message)
    for path, value in artifacts.items():
        await target.blobs.put(path, artifact_bytes(value))
    for event in events:
        await enqueue(target.queue, event_body(event))
    return Seeded(len(conversations), len(messages), len(artifacts), len(events))
