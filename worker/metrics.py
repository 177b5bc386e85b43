"""Prometheus metrics of the worker, behind plain recording methods the runtime calls.

The metrics live on a registry of their own (not prometheus-client's global one), so each
`Metrics` is isolated: a test, or a second runtime in one process, counts only its own turns.
Every label is a bounded enum (decision, format, dead-letter reason, outcome); a value
outside its enum is counted as `other`, so an id or a row value can never become a label.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Literal, get_args

from handlers.errors import DeadLetterReason
from schemas.vocabulary import EXPORT_FORMATS, Decision
from worker.ports.queue import seconds_since

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

OTHER = "other"

# How a delivery's handling ended; the label of the turn duration histogram.
Outcome = Literal["completed", "retried", "dead_lettered", "abandoned", "lock_lost"]

DECISIONS: tuple[str, ...] = get_args(Decision)
FORMATS: tuple[str, ...] = EXPORT_FORMATS
DEAD_LETTER_REASONS: tuple[str, ...] = get_args(DeadLetterReason)
OUTCOMES: tuple[str, ...] = get_args(Outcome)

# 1 row .. 10M rows, about three buckets a decade.
ROW_BUCKETS = (1, 10, 50, 100, 500, 1e3, 5e3, 1e4, 5e4, 1e5, 5e5, 1e6, 5e6, 1e7)
# 1 KiB .. 500 MiB (MAX_EXPORT_BYTES).
KB, MB = 1024, 1024 * 1024
BYTE_BUCKETS = (KB, 10 * KB, 100 * KB, MB, 5 * MB, 10 * MB, 50 * MB, 100 * MB, 250 * MB, 500 * MB)
# Handling: most turns take well under a second; a 1M-row xlsx takes about a minute.
HANDLING_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
# Waits that include backlog and retries with backoff: seconds to an hour.
WAIT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)


def bounded(value: str | None, allowed: Iterable[str]) -> str:
    """`value` when it is one of `allowed`, else `other`: labels stay a closed set."""
    return value if value is not None and value in allowed else OTHER


class Recorder:
    """What the runtime and the handler's observer record (`worker/operations.py`). Each
    method records nothing here; `Metrics` counts them."""

    def handling_started(self, enqueued_at: str, now: datetime) -> None:
        """A delivery's handling began."""

    def turn_settled(self, decision: str, seconds: float) -> None:
        """A delivery completed with a turn record of `decision`."""

    def export_published(
        self, export_format: str, rows: int, size_bytes: int, occurred_at: str, now: datetime
    ) -> None:
        """An export was announced."""

    def retry_scheduled(self, seconds: float) -> None:
        """A delivery failed retryably."""

    def dead_lettered(self, reason: str, seconds: float | None = None) -> None:
        """A message was dead-lettered."""

    def abandoned_on_shutdown(self, seconds: float) -> None:
        """The grace period ran out for a delivery."""

    def lock_lost(self, seconds: float | None = None) -> None:
        """A session or message lock was lost."""

    def session_acquired(self) -> None:
        """A session worker accepted a session."""

    def session_released(self) -> None:
        """A session worker released its session."""

    def queue_wait_failed(self) -> None:
        """A session accept or a receive failed (the queue did not answer)."""

    def message_skipped(self) -> None:
        """A stored message was skipped: it does not parse, and the turn did not need it."""


class Unexposed(Recorder):
    """The recorder of a worker that serves no /metrics (`http_port` 0): nothing could read
    what it counts, so it counts nothing, and prometheus-client is never imported (~40 ms of
    start-up)."""


class Metrics(Recorder):
    """The worker's counters, histograms and gauge, on their own registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        from prometheus_client import (
            CollectorRegistry,
            Counter,
            Gauge,
            Histogram,
            disable_created_metrics,
        )

        # No `<name>_created` series: in the Prometheus text format each is a gauge series of
        # its own beside every counter and histogram series, holding when it was created,
        # which no alert or dashboard here reads and a managed Prometheus bills per sample.
        # The switch is prometheus-client's process-wide one; this process exposes only these.
        disable_created_metrics()  # type: ignore[no-untyped-call]  # untyped upstream
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self._turns = Counter(
            "export_worker_turns", "Turns completed, by decision.", ["decision"], registry=r
        )
        self._exports = Counter(
            "export_worker_exports", "Exports published, by format.", ["format"], registry=r
        )
        self._rows = Histogram(
            "export_worker_export_rows",
            "Rows per published export.",
            buckets=ROW_BUCKETS,
            registry=r,
        )
        self._bytes = Histogram(
            "export_worker_export_bytes",
            "Bytes per published export file.",
            buckets=BYTE_BUCKETS,
            registry=r,
        )
        self._dead_letters = Counter(
            "export_worker_dead_letters",
            "Messages the worker dead-lettered, by reason.",
            ["reason"],
            registry=r,
        )
        self._retries = Counter(
            "export_worker_retries", "Deliveries abandoned for a retry with backoff.", registry=r
        )
        self._lock_lost = Counter(
            "export_worker_lock_lost", "Session or message locks lost to expiry.", registry=r
        )
        self._duration = Histogram(
            "export_worker_turn_duration_seconds",
            "Handling time of one delivery, by how it ended.",
            ["outcome"],
            buckets=HANDLING_BUCKETS,
            registry=r,
        )
        self._queue_wait = Histogram(
            "export_worker_queue_wait_seconds",
            "From the message's enqueue time to the start of its handling.",
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self._end_to_end = Histogram(
            "export_worker_end_to_end_seconds",
            "From the turn event's occurred_at to export.published.",
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self._sessions = Gauge(
            "export_worker_sessions_held", "Sessions (conversations) held right now.", registry=r
        )
        # Nothing reaches the turn metrics while the queue does not answer: this does.
        self._queue_errors = Counter(
            "export_worker_queue_errors",
            "Session accepts and receives that failed (the queue did not answer).",
            registry=r,
        )
        # The chat service's malformed messages that a turn could do without: a log line
        # each, and this rate for an alert (they may hold rows a later reach-back needs).
        self._skipped = Counter(
            "export_worker_stored_messages_skipped",
            "Stored messages skipped: they do not parse, and the turn did not need them.",
            registry=r,
        )
        # Every known label value starts at 0, so a rate() has a series before the first event.
        for decision in (*DECISIONS, OTHER):
            self._turns.labels(decision=decision)
        for fmt in (*FORMATS, OTHER):
            self._exports.labels(format=fmt)
        for reason in (*DEAD_LETTER_REASONS, OTHER):
            self._dead_letters.labels(reason=reason)
        for outcome in OUTCOMES:
            self._duration.labels(outcome=outcome)

    # -- what the runtime records --------------------------------------------------------
    def handling_started(self, enqueued_at: str, now: datetime) -> None:
        """A delivery's handling began: observe how long it waited in the queue."""
        waited = seconds_since(enqueued_at, now)
        if waited is not None:
            self._queue_wait.observe(waited)

    def turn_settled(self, decision: str, seconds: float) -> None:
        """A delivery completed with a turn record of `decision` after `seconds` of handling."""
        self._turns.labels(decision=bounded(decision, DECISIONS)).inc()
        self._duration.labels(outcome="completed").observe(seconds)

    def export_published(
        self, export_format: str, rows: int, size_bytes: int, occurred_at: str, now: datetime
    ) -> None:
        """An export was announced: its format, size, and the time since the turn happened."""
        self._exports.labels(format=bounded(export_format, FORMATS)).inc()
        self._rows.observe(rows)
        self._bytes.observe(size_bytes)
        latency = seconds_since(occurred_at, now)
        if latency is not None:
            self._end_to_end.observe(latency)

    def retry_scheduled(self, seconds: float) -> None:
        """A delivery failed retryably after `seconds` of handling and will be retried."""
        self._retries.inc()
        self._duration.labels(outcome="retried").observe(seconds)

    def dead_lettered(self, reason: str, seconds: float | None = None) -> None:
        """A message was dead-lettered with `reason` (after `seconds` of handling, if any)."""
        self._dead_letters.labels(reason=bounded(reason, DEAD_LETTER_REASONS)).inc()
        if seconds is not None:
            self._duration.labels(outcome="dead_lettered").observe(seconds)

    def abandoned_on_shutdown(self, seconds: float) -> None:
        """The grace period ran out: the delivery was abandoned after `seconds`."""
        self._duration.labels(outcome="abandoned").observe(seconds)

    def lock_lost(self, seconds: float | None = None) -> None:
        """A session or message lock was lost (during a delivery of `seconds`, if any)."""
        self._lock_lost.inc()
        if seconds is not None:
            self._duration.labels(outcome="lock_lost").observe(seconds)

    def session_acquired(self) -> None:
        """A session worker accepted a session."""
        self._sessions.inc()

    def session_released(self) -> None:
        """A session worker released its session."""
        self._sessions.dec()

    def queue_wait_failed(self) -> None:
        """A session accept or a receive failed (the queue did not answer)."""
        self._queue_errors.inc()

    def message_skipped(self) -> None:
        """A stored message was skipped: it does not parse, and the turn did not need it."""
        self._skipped.inc()

    # -- exposition ----------------------------------------------------------------------
    def render(self, accept: str = "") -> tuple[bytes, str]:
        """The registry in the format `accept` asks for (Prometheus text by default), with
        its content type."""
        from prometheus_client.exposition import choose_encoder

        encode, content_type = choose_encoder(accept)
        return encode(self.registry), content_type
