"""The image is built from what the code declares: the lock satisfies pyproject.toml, and
the build context carries the sources but no local environment or secret."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "infra" / "requirements.lock"


def locked(lock: Path = LOCK) -> dict[str, str]:
    """Package -> pinned version of a lock (infra/requirements.lock unless named)."""
    pins = re.findall(r"^([A-Za-z0-9_.\-]+)==([^\s;\\]+)", lock.read_text(), flags=re.MULTILINE)
    return {canonicalize_name(name): version for name, version in pins}


def hashed_blocks(lock: Path) -> list[str]:
    """Each pinned package's block of a lock (its line, its hashes, its `# via`)."""
    blocks = re.split(r"\n(?=[A-Za-z0-9])", lock.read_text())
    return [b for b in blocks if "==" in b.split("\n", 1)[0]]


def assert_locked_at_allowed_versions(wanted: list[Requirement], lock: Path) -> None:
    """Each requirement is pinned in LOCK at a version its specifier allows."""
    pins = locked(lock)
    for requirement in wanted:
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not in infra/{lock.name}: run scripts/lock-deps"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"{name}=={pins[name]} does not satisfy {requirement}: run scripts/lock-deps"
        )


def test_every_runtime_and_otel_dependency_is_locked_at_an_allowed_version() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wanted = [
        *project["project"]["dependencies"],
        *project["project"]["optional-dependencies"]["otel"],
        *project["build-system"]["requires"],
    ]
    assert_locked_at_allowed_versions([Requirement(line) for line in wanted], LOCK)


def assert_hashed(lock: Path) -> None:
    packages = hashed_blocks(lock)
    assert packages and all("--hash=sha256:" in block for block in packages)


def test_every_locked_package_carries_hashes() -> None:
    assert_hashed(LOCK)


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
