"""The export.published topic."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from worker.ports.calls import Effect, port_call


class Publisher(Protocol):
    """Sends export.published; the same message id twice is one event (duplicate detection)."""

    @port_call(Effect.IDEMPOTENT)
    async def publish(
        self, message_id: str, body: bytes, properties: Mapping[str, Any] | None = None
    ) -> None:
        """Send one event with this message id and these application properties (strings
        and integers: subscription filters, the trace context)."""
        ...

    @port_call(Effect.RELEASE)
    async def close(self) -> None:
        """Release connections."""
        ...
