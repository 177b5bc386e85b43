"""The image is built from what the code declares: the lock satisfies pyproject.toml, and
the build context carries the sources but no local environment or secret."""

from __future__ import annotations

import fnmatch
import tomllib

from packaging.requirements import Requirement

from tests.infra.locks import IMAGE_LOCK, ROOT, assert_hashed, assert_locked_at_allowed_versions


def test_every_runtime_and_otel_dependency_is_locked_at_an_allowed_version() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wanted = [
        *project["project"]["dependencies"],
        *project["project"]["optional-dependencies"]["otel"],
        *project["build-system"]["requires"],
    ]
    assert_locked_at_allowed_versions([Requirement(line) for line in wanted], IMAGE_LOCK)


def test_every_locked_package_carries_hashes() -> None:
    assert_hashed(IMAGE_LOCK)


def ignored(path: str, patterns: list[str]) -> bool:
    """Whether .dockerignore's patterns (no exceptions used) exclude `path` or a parent."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pattern in patterns:
        bare = pattern.removeprefix("**/")
        for prefix in prefixes:
            tail = prefix.rsplit("/", 1)[-1]
            if fnmatch.fnmatch(prefix, pattern) or (
                pattern.startswith("**/") and fnmatch.fnmatch(tail, bare)
            ):
                return True
    return False


def test_the_build_context_keeps_sources_and_drops_local_state_and_secrets() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert not any(p.startswith("!") for p in patterns)
    for never in (
        ".venv/bin/python",
        ".venv-tools/bin/checkov",
        "node_modules/x/y.js",
        ".export-worker/queue.db",
        ".env",
        ".git/config",
        ".pytest_cache/v/x",
        ".mypy_cache/3.11/x.json",
        "worker/__pycache__/cli.cpython-311.pyc",
        "tests/worker/test_logs.py",
    ):
        assert ignored(never, patterns), never
    dockerfile = (ROOT / "infra" / "Dockerfile").read_text()
    copied = [
        source
        for line in dockerfile.splitlines()
        if line.startswith("COPY ") and "--from=" not in line
        for source in line.split()[1:-1]
    ]
    assert "infra/requirements.lock" in copied and "worker" in copied
    for source in copied:
        assert not ignored(source, patterns), source
        assert (ROOT / source).exists(), source
