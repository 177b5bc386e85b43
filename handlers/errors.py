"""Errors that carry their fate: the runtime maps each kind to one settlement, in one place.

- `PermanentError`: retrying cannot help; the message is dead-lettered at once with `reason`.
- `RetryableError`: may succeed later (not visible yet, throttled, I/O); the message is retried
  with backoff and dead-lettered with `reason` once `max_attempts` is spent.
- anything else is a bug: dead-lettered as `handler_error` with the type and a short message.

Descriptions never hold row data or secrets: say which field or path, never which value.
"""

from __future__ import annotations

from typing import Literal

DeadLetterReason = Literal[
    "schema_invalid",
    "not_authorized",
    "conversation_not_found",
    "turn_not_found",
    "artifact_missing",
    "artifact_invalid",
    "transient_failure",
    "handler_error",
]


class ExportError(Exception):
    """Base of the errors whose fate is known."""

    reason: DeadLetterReason

    def __init__(self, reason: DeadLetterReason, description: str) -> None:
        super().__init__(description)
        self.reason = reason
        self.description = description


class PermanentError(ExportError):
    """Dead-letter at once with `reason`."""


class RetryableError(ExportError):
    """Retry with backoff; after `max_attempts`, dead-letter with `reason`."""
