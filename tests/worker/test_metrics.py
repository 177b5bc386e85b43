"""Metrics: the names operators alert on, bounded labels, an isolated registry."""

from __future__ import annotations

from datetime import UTC, datetime

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.utils import floatToGoString

from worker.metrics import DEAD_LETTER_REASONS, DECISIONS, FORMATS, OUTCOMES, Metrics

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    """One sample's value (0 when the series does not exist)."""
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def exposed(metrics: Metrics) -> dict[str, list[tuple[str, dict[str, str], float]]]:
    """The exposition parsed back: family name -> samples."""
    body, _ = metrics.render()
    return {
        family.name: [(s.name, s.labels, s.value) for s in family.samples]
        for family in text_string_to_metric_families(body.decode())
    }


def test_every_metric_of_issue_11_is_exposed_under_its_name() -> None:
    names = set(exposed(Metrics()))
    assert {
        "export_worker_turns",
        "export_worker_exports",
        "export_worker_export_rows",
        "export_worker_export_bytes",
        "export_worker_dead_letters",
        "export_worker_retries",
        "export_worker_lock_lost",
        "export_worker_turn_duration_seconds",
        "export_worker_queue_wait_seconds",
        "export_worker_end_to_end_seconds",
        "export_worker_sessions_held",
        "export_worker_queue_errors",
        "export_worker_stored_messages_skipped",
    } <= names
    body, content_type = Metrics().render()
    assert b'export_worker_turns_total{decision="published"} 0.0' in body
    assert content_type.startswith("text/plain")


def test_turns_are_counted_by_decision_with_their_handling_time() -> None:
    m = Metrics()
    m.turn_settled("published", 0.3)
    m.turn_settled("published", 0.2)
    m.turn_settled("no_request", 0.01)
    assert sample(m, "export_worker_turns_total", decision="published") == 2
    assert sample(m, "export_worker_turns_total", decision="no_request") == 1
    assert sample(m, "export_worker_turn_duration_seconds_count", outcome="completed") == 3
    assert sample(m, "export_worker_turn_duration_seconds_sum", outcome="completed") == 0.51


def test_a_label_value_outside_its_enum_is_counted_as_other() -> None:
    m = Metrics()
    m.turn_settled("conv_8f2c41", 0.1)
    m.dead_lettered("MaxDeliveryCountExceeded")
    m.export_published("secret-row-value", 1, 10, "", NOW)
    assert sample(m, "export_worker_turns_total", decision="other") == 1
    assert sample(m, "export_worker_dead_letters_total", reason="other") == 1
    assert sample(m, "export_worker_exports_total", format="other") == 1
    allowed = {
        "decision": {*DECISIONS, "other"},
        "format": {*FORMATS, "other"},
        "reason": {*DEAD_LETTER_REASONS, "other"},
        "outcome": set(OUTCOMES),
    }
    for samples in exposed(m).values():
        for _, labels, _ in samples:
            for key, value in labels.items():
                if key != "le":
                    assert value in allowed[key], (key, value)


def test_each_metrics_object_counts_on_its_own_registry() -> None:
    a, b = Metrics(), Metrics()
    a.retry_scheduled(0.5)
    a.lock_lost()
    assert sample(a, "export_worker_retries_total") == 1
    assert sample(b, "export_worker_retries_total") == 0
    assert sample(b, "export_worker_lock_lost_total") == 0


def test_row_and_byte_histograms_cover_one_row_to_ten_million_and_1kb_to_500mb() -> None:
    m = Metrics()
    m.export_published("csv", 1, 1024, "", NOW)
    m.export_published("xlsx", 10_000_000, 500 * 1024 * 1024, "", NOW)

    def bucket(name: str, le: float) -> float:
        return sample(m, f"export_worker_export_{name}_bucket", le=floatToGoString(le))

    assert (bucket("rows", 1), bucket("rows", 10_000_000)) == (1, 2)
    assert (bucket("bytes", 1024), bucket("bytes", 500 * 1024 * 1024)) == (1, 2)
    assert sample(m, "export_worker_exports_total", format="csv") == 1
    assert sample(m, "export_worker_exports_total", format="xlsx") == 1


def test_queue_wait_and_end_to_end_are_measured_from_the_message_times() -> None:
    m = Metrics()
    m.handling_started("2026-03-01T11:59:58.500000Z", NOW)
    m.export_published("json", 3, 2000, "2026-03-01T11:59:30+00:00", NOW)
    assert sample(m, "export_worker_queue_wait_seconds_sum") == 1.5
    assert sample(m, "export_worker_end_to_end_seconds_sum") == 30.0


def test_times_that_are_missing_garbled_or_in_the_future_observe_nothing_negative() -> None:
    m = Metrics()
    m.handling_started("", NOW)
    m.handling_started("not a time", NOW)
    assert sample(m, "export_worker_queue_wait_seconds_count") == 0
    m.handling_started("2026-03-01T12:00:05Z", NOW)  # the producer's clock runs ahead
    assert sample(m, "export_worker_queue_wait_seconds_count") == 1
    assert sample(m, "export_worker_queue_wait_seconds_sum") == 0.0


def test_dead_letters_retries_and_lock_losses_record_their_handling_outcome() -> None:
    m = Metrics()
    m.dead_lettered("handler_error", 0.4)
    m.dead_lettered("artifact_missing")
    m.retry_scheduled(0.2)
    m.lock_lost(7.0)
    m.abandoned_on_shutdown(30.0)
    assert sample(m, "export_worker_dead_letters_total", reason="handler_error") == 1
    assert sample(m, "export_worker_dead_letters_total", reason="artifact_missing") == 1
    for outcome in ("dead_lettered", "retried", "lock_lost", "abandoned"):
        assert sample(m, "export_worker_turn_duration_seconds_count", outcome=outcome) == 1


def test_sessions_held_follows_acquire_and_release() -> None:
    m = Metrics()
    m.session_acquired()
    m.session_acquired()
    m.session_released()
    assert sample(m, "export_worker_sessions_held") == 1


def test_openmetrics_is_served_when_asked_for() -> None:
    body, content_type = Metrics().render("application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text")
    assert body.rstrip().endswith(b"# EOF")


def test_no_created_series_is_exposed_in_either_format() -> None:
    metrics = Metrics()
    metrics.turn_settled("published", 0.2)
    for accept in ("", "application/openmetrics-text; version=1.0.0"):
        body, _ = metrics.render(accept)
        assert b"_created" not in body
        assert b'export_worker_turns_total{decision="published"} 1.0' in body


def test_every_known_label_value_is_exposed_from_the_start_at_zero() -> None:
    # docs/operations.md: "Every known label value is exported from the start at 0", so a
    # rate() or an alert on a reason has a series before its first event.
    families = exposed(Metrics())
    for family, label, values in (
        ("export_worker_turns", "decision", (*DECISIONS, "other")),
        ("export_worker_exports", "format", (*FORMATS, "other")),
        ("export_worker_dead_letters", "reason", (*DEAD_LETTER_REASONS, "other")),
    ):
        totals = {s[1][label]: s[2] for s in families[family] if s[0].endswith("_total")}
        assert totals == dict.fromkeys(values, 0.0), family
    counts = {
        s[1]["outcome"]: s[2]
        for s in families["export_worker_turn_duration_seconds"]
        if s[0].endswith("_count")
    }
    assert counts == dict.fromkeys(OUTCOMES, 0.0)
