"""Entity configuration: what a namespace holds when the broker starts.

Defaults follow the documented Service Bus defaults (lock duration 60 s, max delivery
count 10, duplicate detection off); the dead-letter sub-queue of every queue and
subscription exists without being declared, as on Service Bus.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_LOCK_DURATION = 60.0
DEFAULT_MAX_DELIVERY_COUNT = 10


@dataclass(frozen=True)
class QueueConfig:
    """A queue; `duplicate_detection_window` in seconds, None for off; `max_size_bytes` the
    most its messages may take, dead letters included (None: no bound)."""

    name: str
    requires_session: bool = False
    lock_duration: float = DEFAULT_LOCK_DURATION
    max_delivery_count: int = DEFAULT_MAX_DELIVERY_COUNT
    duplicate_detection_window: float | None = None
    max_size_bytes: int | None = None


@dataclass(frozen=True)
class SubscriptionConfig:
    """A subscription of a topic; it takes every message sent to the topic (no rules)."""

    name: str
    requires_session: bool = False
    lock_duration: float = DEFAULT_LOCK_DURATION
    max_delivery_count: int = DEFAULT_MAX_DELIVERY_COUNT


@dataclass(frozen=True)
class TopicConfig:
    """A topic and its subscriptions; duplicate detection is a property of the topic, and so
    is `max_size_bytes`, the most the messages of all its subscriptions may take."""

    name: str
    subscriptions: tuple[SubscriptionConfig, ...] = field(default_factory=tuple)
    duplicate_detection_window: float | None = None
    max_size_bytes: int | None = None


EntityConfig = QueueConfig | TopicConfig
