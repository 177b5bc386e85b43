"""The results header names the filesystem the benchmark ran on, and whether an ext4 one has
a journal: without one, files made soon after many deletions cost several times more
(benchmarks/PROFILE.md, twenty-second round), so a reader of results.md needs to know; and
it says when a run began soon after an earlier one deleted its scratch."""

from __future__ import annotations

import os
import tempfile
import time
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


def test_a_run_begun_soon_after_another_deleted_its_scratch_says_so(tmp_path: Path) -> None:
    run_all = benchmark_module("run_all")
    unjournaled = f"{tempfile.gettempdir()} (ext4 without a journal)"
    mark = tmp_path / "export-bench-deleted"
    assert run_all.earlier_deletions(mark) is None  # no run before: nothing to say
    assert run_all.deletions_warning(None, unjournaled) is None

    scratch = tmp_path / "scratch"
    (scratch / "home" / "blobs").mkdir(parents=True)
    for n in range(3):
        (scratch / "home" / "blobs" / f"{n}.json").write_bytes(b"{}")
    run_all.delete_scratch(scratch, mark)
    assert not scratch.exists()
    seconds, files = earlier = run_all.earlier_deletions(mark)
    assert files == 5  # two folders and three files
    assert 0 <= seconds < 60
    warning = run_all.deletions_warning(earlier, unjournaled)
    assert warning is not None and "5 scratch files" in warning
    # A journaled filesystem reuses freed inodes at once: nothing to warn of.
    assert run_all.deletions_warning(earlier, f"{tempfile.gettempdir()} (ext4)") is None

    settled = run_all.SETTLE_SECONDS
    assert run_all.deletions_warning((settled - 1, files), unjournaled) is not None
    assert run_all.deletions_warning((settled, files), unjournaled) is None
    old = time.time() - settled - 5
    os.utime(mark, (old, old))
    assert run_all.deletions_warning(run_all.earlier_deletions(mark), unjournaled) is None


def test_the_header_names_the_commit_a_run_began_at_and_the_one_it_ended_at_if_moved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A soak takes ~20 minutes and starts workers all along: a commit made meanwhile was
    # named as if the whole run had measured it.
    run_all = benchmark_module("run_all")
    monkeypatch.setattr(run_all, "code_commit", lambda report: "abc1234")
    assert run_all.commit_moved("benchmarks/soak.md", "abc1234") == "abc1234"
    assert (
        run_all.commit_moved("benchmarks/soak.md", "0ff1ce0")
        == "0ff1ce0 at the start, abc1234 at the end"
    )
