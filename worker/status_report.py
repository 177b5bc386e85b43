"""How the worker stands, as `export-worker status` reports it (docs/contract/cli.md).

Pure: the queue's stats, the latest published record and the caller's clock in, one JSON
object (or its readable lines) out. Ages are measured on the caller's clock, so a clock
skewed against the queue's says so (ages are never negative).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from worker.ports import QueueStats
from worker.ports.queue import seconds_since

if TYPE_CHECKING:  # the record's struct is imported by the turns that build one
    from schemas.records import TurnRecord


def status_fields(
    stats: QueueStats, latest: TurnRecord | None, now: datetime, backend: str
) -> dict[str, Any]:
    """The object `status --json` prints: the contract's five fields, then a few more."""
    last_export_at = None if latest is None else latest.processed_at
    return {
        "queue_depth": stats.queue_depth,
        "dead_letter_depth": stats.dead_letter_depth,
        "dead_letters_by_reason": dict(stats.dead_letters_by_reason),
        "oldest_message_age_seconds": age_seconds(stats.oldest_enqueued_at, now),
        "last_export_at": last_export_at,
        "backend": backend,
        "oldest_enqueued_at": stats.oldest_enqueued_at,
        "last_export_age_seconds": age_seconds(last_export_at, now),
        "last_export_id": None
        if latest is None or latest.export is None
        else latest.export.export_id,
    }


def status_lines(fields: dict[str, Any]) -> Iterator[str]:
    """The readable lines `status` prints without --json."""
    yield f"backend          {fields['backend']}"
    yield f"queue depth      {fields['queue_depth']}"
    oldest = fields["oldest_message_age_seconds"]
    if oldest is None:
        unknown = fields["queue_depth"] and fields["oldest_enqueued_at"] is None
        yield f"oldest message   {'not reported by this queue' if unknown else '-'}"
    else:
        yield f"oldest message   {_duration(oldest)} old (enqueued {fields['oldest_enqueued_at']})"
    by_reason = fields["dead_letters_by_reason"]
    reasons = ", ".join(f"{reason} {count}" for reason, count in by_reason.items())
    yield f"dead letters     {fields['dead_letter_depth']}" + (f" ({reasons})" if reasons else "")
    if fields["last_export_at"] is None:
        yield "last export      none yet"
    else:
        ago = fields["last_export_age_seconds"]
        when = "" if ago is None else f", {_duration(ago)} ago"
        yield f"last export      {fields['last_export_at']} ({fields['last_export_id']}{when})"


def age_seconds(at: str | None, now: datetime) -> float | None:
    """`seconds_since`, rounded to milliseconds."""
    seconds = seconds_since(at, now)
    return None if seconds is None else round(seconds, 3)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"
