"""Local blobs: few trips to a worker thread per call (issue 10, per-turn cost), same bytes.

Each `asyncio.to_thread` hand-off costs the event loop a future, a wake-up and a GIL
round trip; a turn reads two small artifacts and writes one small export, so those calls
are counted here, and the bytes checked at the chunk boundaries the shortcuts rely on.
"""

from __future__ import annotations

import asyncio
import gc
import os
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from worker.local import blobs as local_blobs
from worker.local.blobs import WRITE_BUFFER_BYTES, LocalBlobs
from worker.ports import BlobInfo, NotFound

INFO = BlobInfo(content_type="text/csv; charset=utf-8", file_name="x.csv", metadata={})
CHUNK = 1024


@pytest.fixture
def handoffs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    seen: list[str] = []
    real = asyncio.to_thread

    async def counted(func: Any, /, *args: Any, **kwargs: Any) -> Any:
        seen.append(getattr(func, "__name__", repr(func)))
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(local_blobs.asyncio, "to_thread", counted)
    yield seen


def _would_wait(*_: Any) -> int:
    """`os.preadv` for a blob the page cache lacks: what RWF_NOWAIT answers then."""
    raise BlockingIOError("not in the page cache")


def _read(blobs: LocalBlobs, path: str) -> list[bytes]:
    async def main() -> list[bytes]:
        return [chunk async for chunk in blobs.read(path, CHUNK)]

    return asyncio.run(main())


def test_a_cached_blob_smaller_than_a_chunk_is_read_without_a_handoff(
    tmp_path: Path, handoffs: list[str]
) -> None:
    blobs = LocalBlobs(tmp_path)
    asyncio.run(blobs.put("artifacts/a.json", b"x" * (CHUNK - 1)))
    handoffs.clear()
    assert _read(blobs, "artifacts/a.json") == [b"x" * (CHUNK - 1)]
    assert handoffs == []


@pytest.mark.parametrize("size", [0, 1, CHUNK - 1])
def test_a_small_blob_the_page_cache_lacks_is_read_in_one_handoff(
    tmp_path: Path, handoffs: list[str], monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    blobs = LocalBlobs(tmp_path)
    data = bytes(i % 251 for i in range(size))
    asyncio.run(blobs.put("artifacts/a.json", data))
    handoffs.clear()

    monkeypatch.setattr(os, "preadv", _would_wait)
    assert _read(blobs, "artifacts/a.json") == ([data] if data else [])
    assert handoffs == ["_open_and_read"]


def test_a_blob_the_page_cache_holds_only_part_of_is_read_whole(
    tmp_path: Path, handoffs: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    blobs = LocalBlobs(tmp_path)
    data = bytes(i % 251 for i in range(CHUNK - 1))
    asyncio.run(blobs.put("artifacts/a.json", data))
    handoffs.clear()
    real_preadv = os.preadv

    def cached_half(fd: int, buffers: list[bytearray], offset: int, flags: int = 0) -> int:
        # RWF_NOWAIT reads the cached pages it meets first and stops at the first it lacks.
        [buffer] = buffers
        half = memoryview(buffer)[: len(data) // 2]
        return real_preadv(fd, [half], offset, flags)

    monkeypatch.setattr(os, "preadv", cached_half)
    assert _read(blobs, "artifacts/a.json") == [data]
    assert handoffs == ["_open_and_read"]


def test_without_rwf_nowait_a_small_blob_is_read_in_one_handoff(
    tmp_path: Path, handoffs: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not Linux (or an older one): no read can refuse to wait, so none is tried."""
    blobs = LocalBlobs(tmp_path)
    asyncio.run(blobs.put("artifacts/a.json", b"[1, 2]"))
    handoffs.clear()
    monkeypatch.setattr(local_blobs, "_NOWAIT", None)
    assert _read(blobs, "artifacts/a.json") == [b"[1, 2]"]
    assert handoffs == ["_open_and_read"]


def _open_under(root: Path) -> list[str]:
    """The files under `root` this process holds open."""
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            names.append(os.readlink(f"/proc/self/fd/{fd}"))
        except FileNotFoundError:
            continue  # the listing's own descriptor, closed by now
    return [name for name in names if name.startswith(str(root))]


@pytest.mark.parametrize("cached", [True, False], ids=["cached", "from-disk"])
@pytest.mark.parametrize("size", [0, CHUNK - 1, 3 * CHUNK])
def test_reading_a_blob_leaves_no_file_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cached: bool, size: int
) -> None:
    """Whole or stopped after its first chunk: a long-running worker reads thousands."""
    blobs = LocalBlobs(tmp_path)
    asyncio.run(blobs.put("artifacts/a.json", b"x" * size))
    if not cached:
        monkeypatch.setattr(os, "preadv", _would_wait)

    async def first_chunk() -> None:
        stream = blobs.read("artifacts/a.json", CHUNK)
        async for _ in stream:
            break
        await stream.aclose()  # type: ignore[attr-defined]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        _read(blobs, "artifacts/a.json")
        asyncio.run(first_chunk())
        gc.collect()
    assert _open_under(tmp_path) == []
    # A file left to the garbage collector is closed too, late and with this warning.
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


@pytest.mark.parametrize("xattrs", [True, False], ids=["info-on-file", "info-in-sidecars"])
@pytest.mark.parametrize("size", [10, WRITE_BUFFER_BYTES + 10])
def test_writing_a_blob_leaves_no_file_open(tmp_path: Path, size: int, xattrs: bool) -> None:
    """Put, commit or abort: each closes what it opened, the info's sidecar included (a
    bare descriptor is never closed for it by the garbage collector)."""
    blobs = LocalBlobs(tmp_path, xattrs=xattrs)

    async def main() -> None:
        await blobs.put("artifacts/a.json", b"x" * size)
        for path, finish in (("exports/c/t/kept.csv", "commit"), ("exports/c/t/gone.csv", "abort")):
            upload = await blobs.upload(path, INFO)
            await upload.write(b"x" * size)
            await getattr(upload, finish)()

    asyncio.run(main())
    assert _open_under(tmp_path) == []
    assert (tmp_path / "exports/c/t/kept.csv").stat().st_size == size


def test_a_commit_syncs_the_export_before_moving_it_into_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bytes reach the disk before the name points at them: a machine that stops
    mid-commit never leaves an export under its name with bytes missing."""
    events: list[tuple[str, ...]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(source: Any, target: Any) -> None:
        events.append(("replace", str(source), str(target)))
        real_replace(source, target)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)

    async def main() -> None:
        upload = await LocalBlobs(tmp_path).upload("exports/c/t/x.csv", INFO)
        await upload.write(b"a,b\r\n")
        await upload.commit()

    asyncio.run(main())
    fsynced = [event[1] for event in events if event[0] == "fsync"]
    assert events[-1][0] == "replace"
    assert events[-1][2] == str(tmp_path / "exports/c/t/x.csv")
    assert fsynced == [events[-1][1]]  # the staged export, before it was moved


def test_a_folder_is_not_a_blob(tmp_path: Path) -> None:
    (tmp_path / "artifacts" / "a.json").mkdir(parents=True)
    blobs = LocalBlobs(tmp_path)
    with pytest.raises(NotFound):
        _read(blobs, "artifacts/a.json")
    with pytest.raises(NotFound):  # a folder has attributes too: not read as a blob's info
        asyncio.run(blobs.info("artifacts/a.json"))
    assert not asyncio.run(blobs.exists("artifacts/a.json"))


@pytest.mark.parametrize("size", [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK])
def test_reads_give_the_same_chunks_at_every_boundary(tmp_path: Path, size: int) -> None:
    blobs = LocalBlobs(tmp_path)
    data = bytes(i % 251 for i in range(size))
    asyncio.run(blobs.put("artifacts/a.json", data))
    expected = [data[i : i + CHUNK] for i in range(0, size, CHUNK)]
    assert _read(blobs, "artifacts/a.json") == expected


def test_a_missing_blob_is_still_not_found_on_the_first_iteration(tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        _read(LocalBlobs(tmp_path), "artifacts/missing.json")


def test_a_small_upload_writes_its_bytes_in_the_commits_handoff(
    tmp_path: Path, handoffs: list[str]
) -> None:
    blobs = LocalBlobs(tmp_path)

    async def main() -> None:
        upload = await blobs.upload("exports/c/t/x.csv", INFO)
        for _ in range(10):
            await upload.write(b"a,b\r\n" * 100)
        await upload.commit()

    asyncio.run(main())
    assert handoffs == ["_stage", "install"]
    assert (tmp_path / "exports/c/t/x.csv").read_bytes() == b"a,b\r\n" * 1000


def test_a_large_upload_is_written_a_buffer_at_a_time_in_order(tmp_path: Path) -> None:
    blobs = LocalBlobs(tmp_path)
    chunks = [bytes([i]) * 65536 for i in range(40)]  # 2.5 buffers

    async def main() -> None:
        upload = await blobs.upload("exports/c/t/x.csv", INFO)
        for chunk in chunks:
            await upload.write(chunk)
        await upload.commit()

    asyncio.run(main())
    assert sum(map(len, chunks)) > 2 * WRITE_BUFFER_BYTES
    assert (tmp_path / "exports/c/t/x.csv").read_bytes() == b"".join(chunks)


def test_an_aborted_upload_leaves_nothing_even_with_bytes_buffered(tmp_path: Path) -> None:
    blobs = LocalBlobs(tmp_path)

    async def main() -> None:
        upload = await blobs.upload("exports/c/t/x.csv", INFO)
        await upload.write(b"half a file")
        await upload.abort()

    asyncio.run(main())
    assert not (tmp_path / "exports/c/t/x.csv").exists()
    assert list((tmp_path / ".staging").iterdir()) == []


def test_a_commit_that_cannot_move_its_file_into_place_leaves_nothing_staged(
    tmp_path: Path,
) -> None:
    blobs = LocalBlobs(tmp_path)
    (tmp_path / "exports").mkdir()
    (tmp_path / "exports/c").write_bytes(b"a file where the folder would go")

    async def main() -> None:
        upload = await blobs.upload("exports/c/t/x.csv", INFO)
        await upload.write(b"a,b\r\n")
        with pytest.raises(OSError):
            await upload.commit()
        await upload.abort()  # what write_export does next: nothing left to drop
        with pytest.raises(OSError):
            await blobs.put("exports/c/t/y.json", b"{}")

    asyncio.run(main())
    assert list((tmp_path / ".staging").iterdir()) == []
    assert (tmp_path / "exports/c").read_bytes() == b"a file where the folder would go"


def test_a_commit_that_cannot_write_its_sidecar_leaves_nothing_staged(tmp_path: Path) -> None:
    blobs = LocalBlobs(tmp_path, xattrs=False)  # the info in a sidecar, as without attributes

    async def main() -> None:
        upload = await blobs.upload("exports/c/t/x.csv", INFO)
        await upload.write(b"a,b\r\n")
        shutil.rmtree(tmp_path / ".meta")  # the sidecar's move fails: no folder to hold it
        with pytest.raises(FileNotFoundError):
            await upload.commit()

    asyncio.run(main())
    assert list((tmp_path / ".staging").iterdir()) == []
    assert not (tmp_path / "exports/c/t/x.csv").exists()
