"""The results header names the filesystem the benchmark ran on, and whether an ext4 one has
a journal: without one, files made soon after many deletions cost several times more
(benchmarks/PROFILE.md, twenty-second round), so a reader of results.md needs to know."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests.benchmarks.script_runs import benchmark_module


@pytest.mark.parametrize(
    ("fs", "journal", "named"),
    [
        ("ext4", "<none>\n", "ext4 without a journal"),
        ("ext4", "412\n", "ext4"),
        ("ext4", None, "ext4"),  # no sysfs entry: nothing is claimed
        ("xfs", "<none>\n", "xfs"),
    ],
)
def test_the_header_names_the_filesystem_and_an_ext4_without_a_journal(
    tmp_path: Path, fs: str, journal: str | None, named: str
) -> None:
    mounts = tmp_path / "mounts"
    mounts.write_text(
        f"/dev/vdz / {fs} rw,relatime 0 0\ntmpfs /dev/shm tmpfs rw 0 0\n", encoding="utf-8"
    )
    ext4 = tmp_path / "ext4"
    if journal is not None:
        (ext4 / "vdz").mkdir(parents=True)
        (ext4 / "vdz" / "journal_task").write_text(journal, encoding="utf-8")
    line = benchmark_module("run_all")._filesystem(str(mounts), str(ext4))
    assert line == f"{tempfile.gettempdir()} ({named})"
