"""The test environment is pinned like the image: `scripts/test` installs infra/dev.lock,
which holds every declared dependency at an allowed version, with hashes, and at the
image's version wherever the image holds the same package."""

from __future__ import annotations

import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.infra.test_image_inputs import ROOT, hashed_blocks, locked

DEV_LOCK = ROOT / "infra" / "dev.lock"


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
    pins = locked(DEV_LOCK)
    wanted = declared()
    assert {canonicalize_name(r.name) for r in wanted} >= {"pytest", "msgspec", "py-spy"}
    for requirement in wanted:
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not in infra/dev.lock: run scripts/lock-deps"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"{name}=={pins[name]} does not satisfy {requirement}: run scripts/lock-deps"
        )


def test_every_package_locked_for_the_tests_carries_hashes() -> None:
    packages = hashed_blocks(DEV_LOCK)
    assert packages and all("--hash=sha256:" in block for block in packages)


def test_the_tests_run_the_versions_the_image_ships() -> None:
    image, tests = locked(), locked(DEV_LOCK)
    shared = image.keys() & tests.keys()
    assert {"azure-servicebus", "msgspec", "structlog"} <= shared
    differ = {name: (image[name], tests[name]) for name in shared if image[name] != tests[name]}
    assert not differ, f"image and test pins differ (image, tests): {differ}; run scripts/lock-deps"


def test_the_test_command_installs_the_lock_with_its_hashes() -> None:
    def words(script: str) -> str:
        return " ".join((ROOT / "scripts" / script).read_text().replace("\\\n", " ").split())

    assert "--require-hashes --no-deps -r infra/dev.lock" in words("dev-env")
    assert "scripts/dev-env" in words("test").split("== lint and types")[0]
