"""What clients asked of the broker, counted by kind of operation, with the bytes of the
messages that crossed (for the Service Bus benchmark: benchmarks/azure_turns.py).

Counted where the broker handles each frame, so a count is what arrived on the wire,
whatever the client's code meant by it. The kinds:

- `connection`: a client connection opened; `cbs put-token`: an authorization.
- `attach <role> <node>`: a link attached; role `send` (the client sends: to an entity, a
  management or `$cbs` node) or `receive`; node `queue`, `topic`, `management`, `cbs`.
- `accept session (next available)` / `accept session (named)`: a session lock granted on
  a receiver's attach; `accept session timed out`: no session came within the wait.
- `flow (credit)`: a flow frame on an entity receiver: the client asks for messages.
- `deliver <entity>`: a message sent to a receiver (locked, or received and deleted).
- `send <entity>`: a message the client sent to a queue or topic.
- `settle <outcome>`: a disposition of a delivered message (complete, abandon, ...).
- `management <operation>`: a request on a `$management` node (renew-session-lock, ...).
- `detach`: a link the client closed.
"""

from __future__ import annotations

import threading
from collections import Counter


class Tally:
    """Operations counted by kind, with bytes; read with `snapshot` from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._bytes: Counter[str] = Counter()

    def note(self, kind: str, size: int = 0) -> None:
        """One operation of KIND, carrying SIZE bytes of message."""
        with self._lock:
            self._counts[kind] += 1
            self._bytes[kind] += size

    def snapshot(self) -> dict[str, dict[str, int]]:
        """`{kind: {"count": n, "bytes": b}}` so far."""
        with self._lock:
            return {k: {"count": n, "bytes": self._bytes[k]} for k, n in self._counts.items()}
