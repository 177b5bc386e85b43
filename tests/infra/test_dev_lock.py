"""The test environment is pinned like the image: `scripts/test` installs infra/dev.lock,
which holds every declared dependency at an allowed version, with hashes, and at the
image's version wherever the image holds the same package."""

from __future__ import annotations

import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.infra.locks import (
    DEV_LOCK,
    IMAGE_LOCK,
    ROOT,
    assert_hashed,
    assert_locked_at_allowed_versions,
    locked,
)


def declared() -> list[Requirement]:
    """Every requirement scripts/test's environment must satisfy: the runtime's, each extra's
    (otel, dev, bench) and the build backend's. The dev extra's reference to the project
    itself is the project, not a package to lock."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    own = canonicalize_name(project["project"]["name"])
    lines = [
        *project["project"]["dependencies"],
        *(line for extra in project["project"]["optional-dependencies"].values() for line in extra),
        *project["build-system"]["requires"],
    ]
    return [r for r in map(Requirement, lines) if canonicalize_name(r.name) != own]


def test_every_declared_dependency_is_locked_for_the_tests_at_an_allowed_version() -> None:
    wanted = declared()
    assert {canonicalize_name(r.name) for r in wanted} >= {"pytest", "msgspec", "py-spy"}
    assert_locked_at_allowed_versions(wanted, DEV_LOCK)


def test_every_package_locked_for_the_tests_carries_hashes() -> None:
    assert_hashed(DEV_LOCK)


def test_the_tests_run_the_versions_the_image_ships() -> None:
    image, tests = locked(IMAGE_LOCK), locked(DEV_LOCK)
    shared = image.keys() & tests.keys()
    assert {"azure-servicebus", "msgspec", "structlog"} <= shared
    differ = {name: (image[name], tests[name]) for name in shared if image[name] != tests[name]}
    assert not differ, f"image and test pins differ (image, tests): {differ}; run scripts/lock-deps"


def test_the_test_command_installs_the_lock_with_its_hashes() -> None:
    def words(script: str) -> str:
        return " ".join((ROOT / "scripts" / script).read_text().replace("\\\n", " ").split())

    assert "--require-hashes --no-deps -r infra/dev.lock" in words("dev-env")
    assert "scripts/dev-env" in words("test").split("== lint and types")[0]
