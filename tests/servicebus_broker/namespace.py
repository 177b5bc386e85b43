"""The namespace: its queues, topics and subscriptions by AMQP node name, sending into them
(with duplicate detection), and the passing of time across all of them. No I/O.

Node names follow the protocol guide ("Links") and the request-response guide ("Service
Bus entity address"): `<queue>`, `<topic>`, `<topic>/Subscriptions/<subscription>`, each
with a `/$DeadLetterQueue` sub-queue ("Dead-letter queues: path to the dead-letter
queue") and a `/$management` node, plus the namespace's `$cbs` node. Entity names are
case-insensitive, as on Service Bus; clients may send the full `amqps://host/...` URI.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlparse

from .clock import Clock
from .config import EntityConfig, QueueConfig, TopicConfig
from .entity import Entity, EntitySettings, NotAllowed, QuotaExceeded, StoredMessage

MANAGEMENT_SUFFIX = "/$management"
DEAD_LETTER_SUFFIX = "/$deadletterqueue"
SUBSCRIPTIONS = "/subscriptions/"
CBS_NODE = "$cbs"


class DuplicateDetector:
    """Remembers message ids for a window; a repeat inside it is dropped, silently."""

    def __init__(self, window: float) -> None:
        self.window = window
        self._seen: dict[str, float] = {}

    def is_duplicate(self, message_id: str | None, now: float) -> bool:
        """True when the id was sent within the window (the send still succeeds)."""
        if message_id is None:
            return False
        self._seen = {k: t for k, t in self._seen.items() if now - t < self.window}
        if message_id in self._seen:
            return True
        self._seen[message_id] = now
        return False


@dataclass
class Topic:
    """A topic: what is sent to it goes to every subscription."""

    name: str
    subscriptions: dict[str, Entity]
    duplicates: DuplicateDetector | None
    max_size_bytes: int | None = None


@dataclass(frozen=True)
class Node:
    """What an AMQP address names: an entity (queue, subscription, dead-letter sub-queue),
    a topic, the management node of one of those, or `$cbs`."""

    kind: Literal["entity", "topic", "management", "cbs"]
    path: str
    entity: Entity | None = None
    topic: Topic | None = None


def entity_path(address: str) -> str:
    """The node name inside an address: `amqps://host:port/a/b` and `a/b` both give `a/b`."""
    if "://" in address:
        address = urlparse(address).path
    return address.strip("/")


class Namespace:
    """All entities of one broker."""

    def __init__(self, clock: Clock, entities: tuple[EntityConfig, ...] = ()) -> None:
        self.clock = clock
        self._nodes: dict[str, Node] = {}
        self._queue_duplicates: dict[str, DuplicateDetector] = {}
        self._queue_max_bytes: dict[str, int] = {}
        for config in entities:
            self.add(config)

    def add(self, config: EntityConfig) -> None:
        """Create a queue or a topic (with its subscriptions and every dead-letter queue)."""
        if config.name.lower() in self._nodes:
            raise ValueError(f"entity {config.name} already exists")
        if isinstance(config, QueueConfig):
            queue = Entity(
                config.name,
                EntitySettings(
                    config.lock_duration, config.max_delivery_count, config.requires_session
                ),
            )
            self._add_entity(queue)
            if config.max_size_bytes is not None:
                self._queue_max_bytes[queue.path] = config.max_size_bytes
            if config.duplicate_detection_window:
                self._queue_duplicates[queue.path] = DuplicateDetector(
                    config.duplicate_detection_window
                )
            return
        self._add_topic(config)

    def _add_topic(self, config: TopicConfig) -> None:
        subscriptions: dict[str, Entity] = {}
        for sub in config.subscriptions:
            entity = Entity(
                f"{config.name}/Subscriptions/{sub.name}",
                EntitySettings(sub.lock_duration, sub.max_delivery_count, sub.requires_session),
            )
            subscriptions[sub.name] = entity
            self._add_entity(entity)
        window = config.duplicate_detection_window
        topic = Topic(
            config.name,
            subscriptions,
            DuplicateDetector(window) if window else None,
            config.max_size_bytes,
        )
        self._nodes[config.name.lower()] = Node("topic", config.name, topic=topic)

    def _add_entity(self, entity: Entity) -> None:
        self._nodes[entity.path.lower()] = Node("entity", entity.path, entity=entity)
        if entity.dead_letters is not None:
            dlq = entity.dead_letters
            self._nodes[dlq.path.lower()] = Node("entity", dlq.path, entity=dlq)

    # ---- addressing ------------------------------------------------------------------
    def resolve(self, address: str | None) -> Node | None:
        """The node an address names, or None when there is no such entity."""
        if not address:
            return None
        path = entity_path(address)
        if path == CBS_NODE:
            return Node("cbs", CBS_NODE)
        lowered = path.lower()
        if lowered.endswith(MANAGEMENT_SUFFIX):
            target = self._nodes.get(lowered[: -len(MANAGEMENT_SUFFIX)])
            if target is None:
                return None
            return Node("management", target.path, entity=target.entity, topic=target.topic)
        return self._nodes.get(lowered)

    def entity(self, path: str) -> Entity:
        """The queue, subscription or dead-letter queue at `path` (KeyError when none)."""
        node = self.resolve(path)
        if node is None or node.kind != "entity" or node.entity is None:
            raise KeyError(path)
        return node.entity

    def entities(self) -> Iterator[Entity]:
        """Every entity, dead-letter sub-queues included."""
        for node in list(self._nodes.values()):
            if node.entity is not None:
                yield node.entity

    # ---- sending -----------------------------------------------------------------------
    def send(
        self, node: Node, payload: Any, message_id: str | None, session_id: str | None
    ) -> list[StoredMessage]:
        """Store a sent message in a queue, or in every subscription of a topic; a duplicate
        within the detection window is accepted and dropped (nothing stored). QuotaExceeded
        when the queue or topic already holds its maximum size."""
        now = self.clock.now()
        if node.kind == "entity" and node.entity is not None:
            if node.entity.is_dead_letter_queue:
                raise NotAllowed("a dead-letter queue takes messages only by dead-lettering")
            limit = self._queue_max_bytes.get(node.entity.path)
            _check_size("Queue", node.entity.path, [node.entity], payload, limit)
            detector = self._queue_duplicates.get(node.entity.path)
            if detector is not None and detector.is_duplicate(message_id, now):
                return []
            return [node.entity.enqueue(payload, message_id, session_id, now)]
        if node.kind == "topic" and node.topic is not None:
            topic = node.topic
            subscriptions = list(topic.subscriptions.values())
            _check_size("Topic", topic.name, subscriptions, payload, topic.max_size_bytes)
            if topic.duplicates is not None and topic.duplicates.is_duplicate(message_id, now):
                return []
            return [
                sub.enqueue(payload, message_id, session_id, now)
                for sub in topic.subscriptions.values()
            ]
        raise NotAllowed(f"{node.path} does not take messages")

    # ---- time --------------------------------------------------------------------------
    def expire(self) -> list[object]:
        """Expire the locks that ran out everywhere; the session holders that lost theirs."""
        now = self.clock.now()
        lost: list[object] = []
        for entity in self.entities():
            lost.extend(entity.expire(now).session_holders)
        return lost


def _check_size(
    kind: str, path: str, holders: list[Entity], payload: Any, limit: int | None
) -> None:
    """QuotaExceeded when the entity, whose messages the `holders` keep, cannot take the
    message, in the words Service Bus uses. Sized only when bounded: a send to an unbounded
    entity walks none of its messages."""
    if limit is None:
        return
    held = sum(holder.size_bytes() for holder in holders)
    if held + len(payload) > limit:
        raise QuotaExceeded(
            f"The maximum entity size has been reached or exceeded for {kind}: '{path}'."
            f" Size of entity in bytes:{held}, Max entity size in bytes: {limit}."
        )
