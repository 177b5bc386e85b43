"""The staging sweep: a staged file is dropped when its writer is gone, and never while its
writer may still be writing it, however long that takes (an xlsx of a million rows).

A staged file is named after its writer's process id. A process id is reused once its
process has exited, so a running process of that id is the writer only if it started when
the writer did: a file whose id now names a process that started at another time is swept.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from worker import scratch
from worker.local import blobs as local_blobs
from worker.local.blobs import STALE_STAGING_SECONDS, LocalBlobs
from worker.ports import BlobInfo

INFO = BlobInfo(content_type="text/csv; charset=utf-8", file_name="x.csv", metadata={})


def _dead_pid() -> int:
    """The id of a process that has exited (and been waited for)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.fixture
def other_process() -> Iterator[int]:
    """The id of a running process that is not this one (started after this test began)."""
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as child:
        try:
            yield child.pid
        finally:
            child.kill()


def _staged(root: Path) -> list[Path]:
    return sorted((root / ".staging").iterdir())


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def _renamed_to_pid(path: Path, pid: int) -> Path:
    """The staged file as if another process id had written it: its name starts with the
    writer's id, the rest stays."""
    _, rest = path.name.split("-", 1)
    moved = path.with_name(f"{pid}-{rest}")
    path.rename(moved)
    return moved


def _a_staged_file(root: Path) -> Path:
    """A file this process staged and then forgot (its upload never committed)."""

    async def main() -> None:
        upload = await LocalBlobs(root).upload("exports/c/t/x.csv", INFO)
        await upload.write(b"half a file")

    asyncio.run(main())
    [staged] = _staged(root)
    return staged


def test_a_live_writers_staged_file_survives_a_sweep_however_old(tmp_path: Path) -> None:
    async def main() -> None:
        blobs = LocalBlobs(tmp_path)
        upload = await blobs.upload("exports/c/t/x.csv", INFO)
        await upload.write(b"rows written for over an hour")
        [staged] = _staged(tmp_path)
        _age(staged, STALE_STAGING_SECONDS + 100)
        LocalBlobs(tmp_path)  # another process opening the home sweeps
        assert _staged(tmp_path) == [staged]
        await upload.commit()
        assert (tmp_path / "exports" / "c" / "t" / "x.csv").read_bytes().startswith(b"rows")
        assert _staged(tmp_path) == []

    asyncio.run(main())


def test_a_staged_file_whose_pid_now_names_another_process_is_swept_at_once(
    tmp_path: Path, other_process: int
) -> None:
    reused = _renamed_to_pid(_a_staged_file(tmp_path), other_process)
    assert reused.exists()
    LocalBlobs(tmp_path)
    assert _staged(tmp_path) == []


def test_a_staged_file_whose_writer_exited_is_swept_at_once(tmp_path: Path) -> None:
    _renamed_to_pid(_a_staged_file(tmp_path), _dead_pid())
    LocalBlobs(tmp_path)
    assert _staged(tmp_path) == []


def test_when_the_start_time_cannot_be_read_a_running_pid_leaves_the_age_rule(
    tmp_path: Path, other_process: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    young = _renamed_to_pid(_a_staged_file(tmp_path), other_process)
    old = young.with_name(f"{other_process}-before.part")  # a name without a start time
    old.write_bytes(b"staged by an older worker")
    _age(old, STALE_STAGING_SECONDS + 100)
    unnamed = young.with_name("by-hand.part")  # no writer's id at all
    unnamed.write_bytes(b"?")
    monkeypatch.setattr(local_blobs, "process_start", lambda pid: None)
    LocalBlobs(tmp_path)
    assert _staged(tmp_path) == sorted([young, unnamed])
    _age(young, STALE_STAGING_SECONDS + 100)
    _age(unnamed, STALE_STAGING_SECONDS + 100)
    LocalBlobs(tmp_path)
    assert _staged(tmp_path) == []


def test_an_older_workers_name_whose_random_part_starts_with_t_leaves_the_age_rule(
    tmp_path: Path, other_process: int
) -> None:
    """An older worker named its files `{pid}-` and a random part, which may start with a
    "t" as a start time does: without digits after it, it is no start time."""
    (tmp_path / ".staging").mkdir(parents=True)
    staged = tmp_path / ".staging" / f"{other_process}-tk3x_q9.part"
    staged.write_bytes(b"staged by an older worker")
    LocalBlobs(tmp_path)
    assert _staged(tmp_path) == [staged]
    _age(staged, STALE_STAGING_SECONDS + 100)
    LocalBlobs(tmp_path)
    assert _staged(tmp_path) == []


def test_a_process_start_time_is_read_for_running_processes_only(other_process: int) -> None:
    mine = scratch.process_start(os.getpid())
    assert isinstance(mine, int) and mine == scratch.process_start(os.getpid())
    other = scratch.process_start(other_process)
    assert isinstance(other, int) and other >= mine
    assert scratch.process_start(_dead_pid()) is None
