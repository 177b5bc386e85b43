"""infra/main.bicep deploys what the code ships: worker settings, queue lock and delivery
count agree with worker/settings.py, and the probes reach the port the image listens on."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bicep_values import UNKNOWN, Template

from worker.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
BICEP = ROOT / "infra" / "main.bicep"
DOCKERFILE = ROOT / "infra" / "Dockerfile"
PREFIX = "EXPORT_WORKER_"


def dockerfile_env() -> dict[str, str]:
    """The ENV the image sets (KEY=value pairs, continued lines joined)."""
    text = DOCKERFILE.read_text(encoding="utf-8").replace("\\\n", " ")
    pairs: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            pairs.update(re.findall(r"(\w+)=(\S+)", line))
    return pairs


# Where the template differs from the code's default on purpose, and what it must equal.
def deliberate() -> dict[str, Any]:
    return {
        "backend": "azure",  # the image runs against Azure
        "http_port": int(dockerfile_env()["EXPORT_WORKER_HTTP_PORT"]),  # as the image
        "log_level": "info",  # what `run` logs at when no level is set
    }


@pytest.fixture(autouse=True)
def no_worker_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Settings parsed here must not see the test process's own configuration."""
    for name in [n for n in os.environ if n.startswith(PREFIX)]:
        monkeypatch.delenv(name)
    yield


def app_settings(template: Template) -> dict[str, Any]:
    """EXPORT_WORKER_* variables the container gets: field name -> value as the template
    sets it (UNKNOWN for endpoints, known once the resources exist)."""
    (container,) = template.resource("worker")["properties"]["template"]["containers"]
    names = [entry["name"] for entry in container["env"]]
    assert len(names) == len(set(names)), f"a variable is set twice: {names}"
    return {
        entry["name"][len(PREFIX) :].lower(): entry["value"]
        for entry in container["env"]
        if entry["name"].startswith(PREFIX)
    }


def iso_seconds(duration: str) -> float | None:
    """Seconds of an ISO 8601 duration of minutes and seconds (PT1M, PT90S, PT1M30S)."""
    match = re.fullmatch(r"PT(?:(\d+)M)?(?:(\d+)S)?", duration)
    if not match or not any(match.groups()):
        return None
    return 60.0 * int(match.group(1) or 0) + int(match.group(2) or 0)


def mismatches(template: Template) -> list[str]:
    """Every way the template's worker settings, queue lock duration and delivery count
    disagree with worker/settings.py."""
    found: list[str] = []
    fields = Settings.fields()
    expected_differences = deliberate()
    settings = app_settings(template)
    for name, value in settings.items():
        if name not in fields:
            found.append(f"{PREFIX}{name.upper()} is not a worker setting")
            continue
        if value is UNKNOWN:
            continue
        parsed = getattr(Settings(env_file=None, **{name: value}), name)
        wanted = expected_differences.get(name, fields[name].default)
        if parsed != wanted:
            found.append(f"{PREFIX}{name.upper()}: template {value!r}, expected {wanted!r}")
    queue = template.resource("turnQueue")["properties"]
    lock_seconds = iso_seconds(str(queue["lockDuration"]))
    if lock_seconds != fields["lock_duration_seconds"].default:
        found.append(f"queue lockDuration {queue['lockDuration']} is not the worker's default")
    if lock_seconds is not None and float(settings.get("lock_duration_seconds", 0)) != lock_seconds:
        found.append("the queue's lockDuration and LOCK_DURATION_SECONDS differ")
    attempts = int(settings.get("max_attempts", fields["max_attempts"].default))
    if not queue["maxDeliveryCount"] > attempts:
        found.append(f"maxDeliveryCount {queue['maxDeliveryCount']} <= MAX_ATTEMPTS {attempts}")
    return found


def test_the_templates_worker_settings_lock_and_delivery_count_agree_with_the_code() -> None:
    assert mismatches(Template.read(BICEP)) == []


@pytest.mark.parametrize(
    ("original", "drifted", "complaint"),
    [
        (
            "param sessionIdleSeconds string = '0.2'",
            "param sessionIdleSeconds string = '1.0'",
            "SESSION_IDLE_SECONDS",
        ),
        (
            "maxDeliveryCount: max(maxDeliveryCount, maxAttempts + 1)",
            "maxDeliveryCount: maxAttempts",
            "maxDeliveryCount",
        ),
        ("lockDuration: 'PT${lockDurationSeconds}S'", "lockDuration: 'PT2M'", "lockDuration"),
        (
            "  MAX_ATTEMPTS: string(maxAttempts)",
            "  MAX_ATTEMPT: string(maxAttempts)",
            "not a worker setting",
        ),
        ("param httpPort int = 8080", "param httpPort int = 9090", "HTTP_PORT"),
    ],
)
def test_a_drifted_value_is_reported(original: str, drifted: str, complaint: str) -> None:
    text = BICEP.read_text(encoding="utf-8")
    assert text.count(original) == 1
    found = mismatches(Template(text.replace(original, drifted)))
    assert any(complaint in line for line in found), found


@pytest.mark.parametrize(("attempts", "limit", "deployed"), [(5, 10, 10), (12, 10, 13), (9, 2, 10)])
def test_the_queues_delivery_limit_stays_above_max_attempts_whatever_is_deployed(
    attempts: int, limit: int, deployed: int
) -> None:
    text = BICEP.read_text(encoding="utf-8")
    for original, changed in (
        ("param maxAttempts int = 5", f"param maxAttempts int = {attempts}"),
        ("param maxDeliveryCount int = 10", f"param maxDeliveryCount int = {limit}"),
    ):
        assert text.count(original) == 1
        text = text.replace(original, changed)
    assert Template(text).resource("turnQueue")["properties"]["maxDeliveryCount"] == deployed


def test_the_lock_duration_is_written_once_for_the_queue_and_the_worker() -> None:
    template = Template.read(BICEP)
    raw_queue = template.resources["turnQueue"]["config"]["properties"]
    assert raw_queue["lockDuration"] == "PT${lockDurationSeconds}S"
    raw_settings = template.variables["workerSettings"]["value"]
    assert raw_settings["LOCK_DURATION_SECONDS"] == {
        "function": {"type": "string", "parameters": {"value_to_convert": "lockDurationSeconds"}}
    }


def test_every_worker_setting_the_template_sets_comes_from_the_one_settings_object() -> None:
    template = Template.read(BICEP)
    from_object = {f"{PREFIX}{key}" for key in template.variable("workerSettings")}
    literal = {
        entry["name"]
        for entry in template.variable("workerEndpointsEnv")
        if entry["name"].startswith(PREFIX)
    }
    assert literal == {
        f"{PREFIX}SERVICEBUS_NAMESPACE",
        f"{PREFIX}BLOB_ACCOUNT_URL",
        f"{PREFIX}COSMOS_ENDPOINT",
    }
    assert {f"{PREFIX}{name.upper()}" for name in app_settings(template)} == from_object | literal


def test_probes_check_health_and_readiness_on_the_port_the_image_listens_on() -> None:
    (container,) = Template.read(BICEP).resource("worker")["properties"]["template"]["containers"]
    probes = {probe["type"]: probe["httpGet"] for probe in container["probes"]}
    port = int(dockerfile_env()["EXPORT_WORKER_HTTP_PORT"])
    assert probes == {
        "Liveness": {"path": "/healthz", "port": port},
        "Readiness": {"path": "/readyz", "port": port},
    }
    assert f"EXPOSE {port}" in DOCKERFILE.read_text(encoding="utf-8")
    # The code listens on loopback by default; probes come from outside the container.
    assert dockerfile_env()["EXPORT_WORKER_HTTP_HOST"] == "0.0.0.0"


def test_the_log_level_parameter_allows_exactly_the_levels_the_setting_accepts() -> None:
    decorators = Template.read(BICEP).parameters["logLevel"]["decorators"]
    (allowed,) = [d["argument"] for d in decorators if d["type"] == "allowed"]
    for level in allowed:
        assert Settings(env_file=None, log_level=level).log_level == level
    with pytest.raises(ValueError):
        Settings(env_file=None, log_level="verbose")


def test_the_termination_grace_period_stays_within_what_container_apps_allows() -> None:
    # Container Apps takes a terminationGracePeriodSeconds of 600 at most: the largest
    # shutdownGraceSeconds the template accepts must deploy.
    text = BICEP.read_text(encoding="utf-8")
    decorators = Template(text).parameters["shutdownGraceSeconds"]["decorators"]
    (largest,) = [d["argument"] for d in decorators if d["type"] == "max_value"]
    original = "param shutdownGraceSeconds int = 30"
    assert text.count(original) == 1
    text = text.replace(original, f"param shutdownGraceSeconds int = {largest}")
    template = Template(text).resource("worker")["properties"]["template"]
    assert template["terminationGracePeriodSeconds"] <= 600
