"""An AMQP 1.0 test broker with Service Bus semantics, for tests only (see README.md).

The Azure Service Bus SDK connects to it with a development-emulator connection string;
its behaviour follows Service Bus's public protocol documentation.
"""

from .broker import EntityCounts, ServiceBusBroker
from .clock import Clock, ManualClock, SystemClock
from .config import QueueConfig, SubscriptionConfig, TopicConfig

__all__ = [
    "Clock",
    "EntityCounts",
    "ManualClock",
    "QueueConfig",
    "ServiceBusBroker",
    "SubscriptionConfig",
    "SystemClock",
    "TopicConfig",
]
