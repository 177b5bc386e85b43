"""What the runtime and the handler tell whoever watches them: the observer interfaces.

The runtime reports each point of a message's life (a session held or released, a wait for
the queue, a delivery handled and how it was settled); the handler reports the steps of a
turn (reads, fetches, the upload, the publish) and each export it announced. Neither knows
who listens: `worker/operations.py` turns the reports into metrics, liveness and spans; the
defaults here do nothing, so a test or a tool builds a runtime or a handler without them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any, Literal, Protocol

from worker.ports import QueueMessage

Step = Literal["read", "fetch", "upload", "publish"]
AttributeValue = str | int | float | bool


class Handling(Protocol):
    """One delivery, from the moment it is handed to the handler to its settlement."""

    def handled(self) -> None:
        """The handler is done (or was given up on): the handling time ends here."""
        ...

    def completed(self, decision: str) -> None:
        """The message was completed; its turn record says `decision`."""
        ...

    def retried(self) -> None:
        """The delivery failed retryably: abandoned for redelivery after a backoff."""
        ...

    def dead_lettered(self, reason: str) -> None:
        """The message was moved to the dead-letter queue with `reason`."""
        ...

    def abandoned(self) -> None:
        """The shutdown grace ran out: the delivery was abandoned unfinished."""
        ...

    def lock_lost(self) -> None:
        """The message's or the session's lock was lost: another holder owns it now."""
        ...


class RuntimeObserver(Protocol):
    """What the runtime reports (`worker/runtime.py`)."""

    def loop_started(self) -> None:
        """The receive loop runs: the adapters are open."""
        ...

    def waiting(self, bound: float) -> AbstractContextManager[None]:
        """Around a wait for the queue (accepting a session, receiving the next message of
        one) that should return within `bound` seconds. Leaving it with an exception says
        the queue did not answer."""
        ...

    def session_acquired(self) -> None:
        """A session (conversation) is held by this process."""
        ...

    def session_released(self) -> None:
        """A session held before is released."""
        ...

    def session_lock_lost(self) -> None:
        """A session's lock was lost between deliveries."""
        ...

    def handling(self, message: QueueMessage) -> AbstractContextManager[Handling]:
        """Around one delivery, from handling to settlement; the handler runs inside it."""
        ...


class TurnObserver(Protocol):
    """What the handler reports (`worker/handler.py`)."""

    def step(self, name: Step, **attributes: AttributeValue) -> AbstractContextManager[None]:
        """Around the reads, a fetch round, the upload or the publish of a turn."""
        ...

    def annotate(self, **attributes: AttributeValue | None) -> None:
        """Ids and enums learned during the turn (conversation, turn, event, export id)."""
        ...

    def outgoing(self, properties: Mapping[str, Any]) -> dict[str, Any]:
        """The application properties of export.published, plus the trace context."""
        ...

    def export_published(
        self, export_format: str, rows: int, size_bytes: int, occurred_at: str
    ) -> None:
        """An export was announced; `occurred_at` is the turn event's (end-to-end latency)."""
        ...

    def message_skipped(self) -> None:
        """A stored message that does not parse was skipped: the turn did not need it."""
        ...


class _NoHandling:
    def handled(self) -> None:
        """Nothing to do."""

    def completed(self, decision: str) -> None:
        """Nothing to do."""

    def retried(self) -> None:
        """Nothing to do."""

    def dead_lettered(self, reason: str) -> None:
        """Nothing to do."""

    def abandoned(self) -> None:
        """Nothing to do."""

    def lock_lost(self) -> None:
        """Nothing to do."""


class NoObserver:
    """Hears every report and does nothing: the default of the runtime and the handler."""

    def loop_started(self) -> None:
        """Nothing to do."""

    @contextlib.contextmanager
    def waiting(self, bound: float) -> Iterator[None]:
        """Nothing to do."""
        yield

    def session_acquired(self) -> None:
        """Nothing to do."""

    def session_released(self) -> None:
        """Nothing to do."""

    def session_lock_lost(self) -> None:
        """Nothing to do."""

    @contextlib.contextmanager
    def handling(self, message: QueueMessage) -> Iterator[Handling]:
        """Nothing to do."""
        yield _NoHandling()

    @contextlib.contextmanager
    def step(self, name: Step, **attributes: AttributeValue) -> Iterator[None]:
        """Nothing to do."""
        yield

    def annotate(self, **attributes: AttributeValue | None) -> None:
        """Nothing to do."""

    def outgoing(self, properties: Mapping[str, Any]) -> dict[str, Any]:
        """The properties unchanged."""
        return dict(properties)

    def export_published(
        self, export_format: str, rows: int, size_bytes: int, occurred_at: str
    ) -> None:
        """Nothing to do."""

    def message_skipped(self) -> None:
        """Nothing to do."""


NO_OBSERVER = NoObserver()
