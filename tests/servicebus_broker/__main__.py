"""Run the test broker as a process: `python -m tests.servicebus_broker --port 0`.

Prints its connection string as the first line of stdout, then serves until SIGTERM or
SIGINT. Entities come from `--config FILE` (JSON, see README.md) or, without it, the
project's own: the session-enabled `turn-completed` queue and the `export-published`
topic (duplicate detection on, one subscription `all`). Time is the system clock.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from .broker import HOST, ServiceBusBroker
from .config import EntityConfig, QueueConfig, SubscriptionConfig, TopicConfig

PROJECT_ENTITIES: tuple[EntityConfig, ...] = (
    QueueConfig("turn-completed", requires_session=True),
    TopicConfig(
        "export-published",
        subscriptions=(SubscriptionConfig("all"),),
        duplicate_detection_window=600.0,
    ),
)


def entities_from(document: dict[str, Any]) -> tuple[EntityConfig, ...]:
    """Entities from `{"queues": [{...}], "topics": [{..., "subscriptions": [{...}]}]}`,
    each object holding the fields of QueueConfig / TopicConfig / SubscriptionConfig."""
    queues = [QueueConfig(**q) for q in document.get("queues", [])]
    topics = [
        TopicConfig(
            **{k: v for k, v in t.items() if k != "subscriptions"},
            subscriptions=tuple(SubscriptionConfig(**s) for s in t.get("subscriptions", [])),
        )
        for t in document.get("topics", [])
    ]
    return (*queues, *topics)


def main(argv: list[str]) -> int:
    """Serve until told to stop."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=HOST)
    parser.add_argument("--port", type=int, default=0, help="0: the kernel picks a free port")
    parser.add_argument("--config", type=Path, help="JSON file of queues and topics")
    args = parser.parse_args(argv)
    entities = (
        entities_from(json.loads(args.config.read_text())) if args.config else PROJECT_ENTITIES
    )
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    with ServiceBusBroker(entities, host=args.host, port=args.port) as broker:
        print(broker.connection_string, flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
