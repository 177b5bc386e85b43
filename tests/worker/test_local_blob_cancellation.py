"""Local blobs: a cancelled upload leaves no descriptor open, no file staged, no stray write.

A turn is cancelled when its session lock is lost or the worker shuts down, at whatever
await it has reached. An upload's steps each run in a worker thread, which a cancellation
cannot stop once started and drops silently if it has not started yet. These tests hold a
step in its thread (or hold the only thread) while the task awaiting it is cancelled, then
look at what the long-running process is left with.
"""

from __future__ import annotations

import asyncio
import gc
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from worker.local import blobs as local_blobs
from worker.local.blobs import WRITE_BUFFER_BYTES, LocalBlobs
from worker.ports import BlobInfo

INFO = BlobInfo(content_type="text/csv; charset=utf-8", file_name="x.csv", metadata={})
PATH = "exports/c/t/x.csv"
WAIT = 10.0  # seconds a test waits for a thread before it fails instead of hanging


def _open_on(fd: int, path: Path) -> bool:
    """Whether descriptor `fd` of this process is open on `path` (a number may be reused),
    removed or not: Linux names a descriptor on a removed file "PATH (deleted)"."""
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except FileNotFoundError:
        return False
    return target in (str(path), f"{path} (deleted)")


def _staged(root: Path) -> list[Path]:
    return sorted((root / ".staging").iterdir())


async def _until(check: Callable[[], bool]) -> None:
    """Yield to the loop until `check()` holds (a thread has reached its gate)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while not check():
        assert loop.time() < deadline, "the worker thread never got there"
        await asyncio.sleep(0.001)


@pytest.mark.parametrize("staging_fails", [False, True], ids=["staged", "staging-fails"])
def test_an_upload_cancelled_while_its_file_is_staged_closes_and_drops_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, staging_fails: bool
) -> None:
    """And when making the file fails (a full disk), there is nothing to drop: the failure
    reaches nobody, not even the loop's handler of errors nobody retrieved."""
    blobs = LocalBlobs(tmp_path)
    entered, gate, ended = threading.Event(), threading.Event(), threading.Event()
    staged: list[tuple[int, Path]] = []
    real_stage = LocalBlobs._stage

    def held_stage(self: LocalBlobs) -> tuple[int, Path]:
        entered.set()
        try:
            assert gate.wait(WAIT)
            if staging_fails:
                raise OSError(28, "No space left on device")
            made = real_stage(self)
            staged.append(made)
            return made
        finally:
            ended.set()

    monkeypatch.setattr(LocalBlobs, "_stage", held_stage)
    reported: list[dict[str, Any]] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(
            lambda _, context: reported.append(context)
        )
        task = asyncio.ensure_future(blobs.upload(PATH, INFO))
        await _until(entered.is_set)
        task.cancel()
        gate.set()  # the thread goes on and makes the file nobody will write
        with pytest.raises(asyncio.CancelledError):
            await task
        await _until(ended.is_set)
        await asyncio.sleep(0.05)  # let whatever follows the thread's end run

    asyncio.run(main())  # its end waits for the worker threads
    gc.collect()  # a task whose error nobody retrieved reports it when collected
    assert reported == []
    assert _staged(tmp_path) == []
    if staging_fails:
        assert staged == []
    else:
        [(fd, temp)] = staged
        assert not _open_on(fd, temp)


def test_a_commit_cancelled_before_its_thread_starts_still_closes_its_file(
    tmp_path: Path,
) -> None:
    blobs = LocalBlobs(tmp_path)
    gate = threading.Event()
    seen: dict[str, Any] = {}

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(max_workers=1))
        upload = await blobs.upload(PATH, INFO)
        seen["fd"], seen["temp"] = upload._fd, upload._temp
        await upload.write(b"a,b\r\n1,2\r\n")
        busy = loop.run_in_executor(None, gate.wait, WAIT)  # holds the only thread
        task = asyncio.ensure_future(upload.commit())
        await asyncio.sleep(0.01)  # the commit's step is queued behind it
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await upload.abort()  # what write_export does next
        gate.set()
        await busy
        await asyncio.sleep(0.05)

    asyncio.run(main())
    assert not _open_on(seen["fd"], seen["temp"])
    assert _staged(tmp_path) == []
    # A commit, once asked for, completes: the blob is there whole (a redelivered turn
    # writes the same bytes to the same path).
    assert (tmp_path / PATH).read_bytes() == b"a,b\r\n1,2\r\n"


def test_an_abort_after_a_cancelled_write_waits_for_that_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blobs = LocalBlobs(tmp_path)
    entered, gate = threading.Event(), threading.Event()
    failures: list[BaseException] = []
    real_write_all = local_blobs._write_all

    def held_write_all(fd: int, data: bytes) -> None:
        if len(data) >= WRITE_BUFFER_BYTES:  # the buffered write, not the sidecar's
            entered.set()
            assert gate.wait(WAIT)
        try:
            real_write_all(fd, data)
        except BaseException as exc:
            failures.append(exc)
            raise

    monkeypatch.setattr(local_blobs, "_write_all", held_write_all)
    seen: dict[str, Any] = {}

    async def main() -> None:
        loop = asyncio.get_running_loop()
        upload = await blobs.upload(PATH, INFO)
        seen["fd"], seen["temp"] = upload._fd, upload._temp
        task = asyncio.ensure_future(upload.write(b"x" * WRITE_BUFFER_BYTES))
        await _until(entered.is_set)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        loop.call_later(0.05, gate.set)  # the write finishes after the abort has begun
        await upload.abort()
        assert gate.is_set()  # the abort waited for it

    asyncio.run(main())
    assert failures == []  # the write never met a closed (or reused) descriptor
    assert not _open_on(seen["fd"], seen["temp"])
    assert _staged(tmp_path) == []
    assert not (tmp_path / PATH).exists()
