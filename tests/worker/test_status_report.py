"""`export-worker status`: the contract's five fields, ages on the caller's clock."""

from __future__ import annotations

from datetime import UTC, datetime

from schemas.records import TurnRecord
from worker.ports import QueueStats
from worker.status_report import status_fields, status_lines

NOW = datetime(2026, 11, 20, 9, 5, 0, tzinfo=UTC)


def published(processed_at: str) -> TurnRecord:
    return TurnRecord.model_validate(
        {
            "id": "t1",
            "conversation_id": "c1",
            "turn_id": "t1",
            "user_id": "u1",
            "event_id": "e1",
            "seq": 1,
            "decision": "published",
            "format": "csv",
            "carried": False,
            "state_after": {"state": "idle", "format": None},
            "export": {
                "export_id": "exp_1",
                "blob": "exports/c1/t1/exp_1.csv",
                "file_name": "x.csv",
                "format": "csv",
                "row_count": 3,
                "columns": ["a"],
                "row_source": "action_rows",
                "source_artifacts": [],
                "bytes": 10,
                "sha256": "0" * 64,
                "truncated": False,
            },
            "processed_at": processed_at,
            "event_sent": True,
        }
    )


def test_a_backlog_shows_its_depth_its_oldest_age_and_dead_letters_by_reason() -> None:
    stats = QueueStats(
        queue_depth=3,
        dead_letter_depth=2,
        dead_letters_by_reason={"not_authorized": 1, "schema_invalid": 1},
        oldest_enqueued_at="2026-11-20T09:04:30.250000Z",
    )
    fields = status_fields(stats, published("2026-11-20T09:00:00.000000Z"), NOW, "local")
    assert fields == {
        "queue_depth": 3,
        "dead_letter_depth": 2,
        "dead_letters_by_reason": {"not_authorized": 1, "schema_invalid": 1},
        "oldest_message_age_seconds": 29.75,
        "last_export_at": "2026-11-20T09:00:00.000000Z",
        "backend": "local",
        "oldest_enqueued_at": "2026-11-20T09:04:30.250000Z",
        "last_export_age_seconds": 300.0,
        "last_export_id": "exp_1",
    }
    assert list(status_lines(fields)) == [
        "backend          local",
        "queue depth      3",
        "oldest message   29.8 s old (enqueued 2026-11-20T09:04:30.250000Z)",
        "dead letters     2 (not_authorized 1, schema_invalid 1)",
        "last export      2026-11-20T09:00:00.000000Z (exp_1, 5.0 min ago)",
    ]


def test_an_empty_queue_and_no_export_yet_are_nulls() -> None:
    fields = status_fields(QueueStats(0, 0, {}, None), None, NOW, "local")
    assert fields["oldest_message_age_seconds"] is None and fields["last_export_at"] is None
    assert fields["last_export_id"] is None and fields["dead_letters_by_reason"] == {}
    assert list(status_lines(fields))[2:] == [
        "oldest message   -",
        "dead letters     0",
        "last export      none yet",
    ]


def test_a_queue_that_cannot_report_its_oldest_message_says_so() -> None:
    fields = status_fields(QueueStats(4, 0, {}, None), None, NOW, "azure")
    assert fields["oldest_message_age_seconds"] is None
    assert "oldest message   not reported by this queue" in list(status_lines(fields))


def test_a_clock_behind_the_queues_never_gives_a_negative_age() -> None:
    stats = QueueStats(1, 0, {}, "2026-11-20T09:06:00Z")
    assert status_fields(stats, None, NOW, "local")["oldest_message_age_seconds"] == 0.0


def test_ages_read_in_seconds_minutes_hours_then_days() -> None:
    def oldest_line(enqueued_at: str) -> str:
        fields = status_fields(QueueStats(1, 0, {}, enqueued_at), None, NOW, "local")
        return list(status_lines(fields))[2].split(" (enqueued")[0]

    assert oldest_line("2026-11-20T09:03:00.100Z") == "oldest message   119.9 s old"
    assert oldest_line("2026-11-20T09:03:00Z") == "oldest message   2.0 min old"
    assert oldest_line("2026-11-20T07:05:00.5Z") == "oldest message   120.0 min old"
    assert oldest_line("2026-11-20T07:05:00Z") == "oldest message   2.0 h old"
    assert oldest_line("2026-11-18T09:05:01Z") == "oldest message   48.0 h old"
    assert oldest_line("2026-11-18T09:05:00Z") == "oldest message   2.0 d old"


def test_ages_are_rounded_to_milliseconds() -> None:
    stats = QueueStats(1, 0, {}, "2026-11-20T09:04:30.250400Z")
    assert status_fields(stats, None, NOW, "local")["oldest_message_age_seconds"] == 29.75
