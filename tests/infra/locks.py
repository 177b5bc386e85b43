"""Reading the hash-pinned locks of infra/ (written by scripts/lock-deps): the image's
(`requirements.lock`) and the test environment's (`dev.lock`)."""

from __future__ import annotations

import re
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
IMAGE_LOCK = ROOT / "infra" / "requirements.lock"
DEV_LOCK = ROOT / "infra" / "dev.lock"


def locked(lock: Path) -> dict[str, str]:
    """Package -> pinned version of a lock."""
    pins = re.findall(r"^([A-Za-z0-9_.\-]+)==([^\s;\\]+)", lock.read_text(), flags=re.MULTILINE)
    return {canonicalize_name(name): version for name, version in pins}


def assert_locked_at_allowed_versions(wanted: list[Requirement], lock: Path) -> None:
    """Each requirement is pinned in LOCK at a version its specifier allows."""
    pins = locked(lock)
    for requirement in wanted:
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not in infra/{lock.name}: run scripts/lock-deps"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"{name}=={pins[name]} does not satisfy {requirement}: run scripts/lock-deps"
        )


def assert_hashed(lock: Path) -> None:
    """Every pinned package's block (its line, its hashes, its `# via`) carries a hash."""
    blocks = re.split(r"\n(?=[A-Za-z0-9])", lock.read_text())
    packages = [b for b in blocks if "==" in b.split("\n", 1)[0]]
    assert packages and all("--hash=sha256:" in block for block in packages)
