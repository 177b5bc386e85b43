"""The only errors adapters raise outward, so the handler and the runtime never see an SDK type.

- `NotFound` for a missing document, message or blob (the handler decides its fate);
- `TransientError` for throttling, timeouts, 5xx and lost connections (retryable);
- `Conflict` for an optimistic-concurrency loss (ETag mismatch, row already there);
- `LockLost` when a message or session lock expired or was taken.
"""

from __future__ import annotations


class PortError(Exception):
    """Base of the errors adapters raise."""


class NotFound(PortError):
    """The document, message or blob does not exist (or is not visible yet)."""


class TransientError(PortError):
    """Throttled, timed out, 5xx or connection lost: worth retrying."""


class Conflict(PortError):
    """Someone else wrote first (ETag 412, duplicate id)."""


class LockLost(PortError):
    """The message or session lock expired or was taken: another holder owns the work now."""
