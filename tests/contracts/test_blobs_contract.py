"""Blobs contract: streamed reads, staged uploads that appear whole on commit, NotFound."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from worker.ports import BlobInfo, Blobs, NotFound

MB = 1024 * 1024


def run(body: Callable[[Blobs], Awaitable[None]], factory: Any) -> None:
    """Open fresh blob storage from the factory and run `body` on it."""

    async def main() -> None:
        async with factory.open() as blobs:
            await body(blobs)

    asyncio.run(main())


def new_path(container: str = "exports") -> str:
    return f"{container}/conv-{uuid.uuid4().hex[:12]}/turn-1/export.csv"


def payload(size: int) -> bytes:
    pattern = bytes(range(256))
    return (pattern * (size // 256 + 1))[:size]


async def read_all(blobs: Blobs, path: str, chunk_size: int = 1 << 20) -> list[bytes]:
    return [chunk async for chunk in blobs.read(path, chunk_size)]


INFO = BlobInfo(
    content_type="text/csv; charset=utf-8",
    file_name="list_parameter_history_20260101_120000.csv",
    metadata={"conversation_id": "c1", "format": "csv", "row_count": "900"},
)


def test_a_3_mb_blob_round_trips_in_chunks(blobs_factory: Any) -> None:
    async def body(blobs: Blobs) -> None:
        path, data = new_path("artifacts"), payload(3 * MB)
        await blobs.put(path, data, content_type="application/json")
        chunks = await read_all(blobs, path, chunk_size=256 * 1024)
        assert b"".join(chunks) == data
        assert len(chunks) > 1
        assert all(len(chunk) <= 256 * 1024 for chunk in chunks)
        assert await blobs.exists(path)
        assert (await blobs.info(path)).content_type == "application/json"

    run(body, blobs_factory)


def test_a_missing_blob_is_not_found(blobs_factory: Any) -> None:
    async def body(blobs: Blobs) -> None:
        path = new_path("artifacts")
        assert not await blobs.exists(path)
        stream = blobs.read(path)  # NotFound comes on the first iteration
        with pytest.raises(NotFound):
            await anext(aiter(stream))
        with pytest.raises(NotFound):
            await blobs.info(path)

    run(body, blobs_factory)


def test_an_upload_appears_whole_on_commit_with_its_info(blobs_factory: Any) -> None:
    async def body(blobs: Blobs) -> None:
        path, data = new_path(), payload(3 * MB + 17)
        upload = await blobs.upload(path, INFO)
        for start in range(0, len(data), MB):
            await upload.write(data[start : start + MB])
        assert not await blobs.exists(path)
        await upload.commit()
        assert await blobs.exists(path)
        assert b"".join(await read_all(blobs, path)) == data
        info = await blobs.info(path)
        assert (info.content_type, info.file_name) == (INFO.content_type, INFO.file_name)
        assert dict(info.metadata) == dict(INFO.metadata)

    run(body, blobs_factory)


def test_a_commit_replaces_the_previous_blob(blobs_factory: Any) -> None:
    async def body(blobs: Blobs) -> None:
        path = new_path()
        await blobs.put(path, b"old", content_type="text/plain")
        upload = await blobs.upload(path, INFO)
        await upload.write(b"new ")
        await upload.write(b"bytes")
        assert b"".join(await read_all(blobs, path)) == b"old"  # staged, not visible
        await upload.commit()
        assert b"".join(await read_all(blobs, path)) == b"new bytes"
        assert (await blobs.info(path)).file_name == INFO.file_name

    run(body, blobs_factory)


def test_an_aborted_upload_leaves_nothing(blobs_factory: Any) -> None:
    async def body(blobs: Blobs) -> None:
        path = new_path()
        upload = await blobs.upload(path, INFO)
        await upload.write(payload(MB))
        await upload.abort()
        assert not await blobs.exists(path)
        with pytest.raises(NotFound):
            await blobs.info(path)

    run(body, blobs_factory)


def test_an_aborted_upload_keeps_the_previous_content(blobs_factory: Any) -> None:
    async def body(blobs: Blobs) -> None:
        path = new_path()
        await blobs.put(path, b"previous", content_type="text/plain")
        upload = await blobs.upload(path, INFO)
        await upload.write(b"half a file")
        await upload.abort()
        assert b"".join(await read_all(blobs, path)) == b"previous"
        assert (await blobs.info(path)).content_type == "text/plain"

    run(body, blobs_factory)


@pytest.mark.parametrize("finish", ["commit", "abort"])
def test_a_finished_upload_takes_no_more_bytes(blobs_factory: Any, finish: str) -> None:
    """After commit or abort, a write or a commit is a bug in the caller and says so; an
    abort after either is the clean-up a failing turn runs anyway, and changes nothing."""

    async def body(blobs: Blobs) -> None:
        path = new_path()
        upload = await blobs.upload(path, INFO)
        await upload.write(b"a,b\r\n")
        await getattr(upload, finish)()
        with pytest.raises(RuntimeError):
            await upload.write(b"late")
        with pytest.raises(RuntimeError):
            await upload.commit()
        await upload.abort()
        if finish == "commit":
            assert b"".join(await read_all(blobs, path)) == b"a,b\r\n"
        else:
            assert not await blobs.exists(path)

    run(body, blobs_factory)


def test_an_empty_blob_is_a_blob(blobs_factory: Any) -> None:
    async def body(blobs: Blobs) -> None:
        path = new_path()
        upload = await blobs.upload(path, INFO)
        await upload.commit()
        assert await blobs.exists(path)
        assert b"".join(await read_all(blobs, path)) == b""

    run(body, blobs_factory)


# ---- local adapter only --------------------------------------------------------------
INVALID_PATHS = [
    "/etc/passwd",
    "exports",
    "exports/",
    "exports//a.csv",
    "exports/./a.csv",
    "exports/../secrets/a.csv",
    "../outside/a.csv",
    "exports\\a.csv",
    "exports/a\x00.csv",
    ".staging/x.part",
    ".meta/exports/a.csv.json",
    "",
]


@pytest.mark.parametrize("path", INVALID_PATHS)
def test_local_blobs_reject_paths_that_could_leave_the_root(tmp_path: Path, path: str) -> None:
    from worker.local.blobs import LocalBlobs

    async def main() -> None:
        blobs = LocalBlobs(tmp_path / "blobs")
        with pytest.raises(ValueError):
            await blobs.put(path, b"x")
        with pytest.raises(ValueError):
            await blobs.upload(path, INFO)
        with pytest.raises(ValueError):
            await blobs.exists(path)
        with pytest.raises(ValueError):
            await blobs.info(path)
        with pytest.raises(ValueError):
            await anext(aiter(blobs.read(path)))

    asyncio.run(main())
    assert not (tmp_path / "outside").exists()
    assert [p.name for p in (tmp_path / "blobs" / ".staging").iterdir()] == []


def test_local_blobs_map_paths_under_the_root(tmp_path: Path) -> None:
    from worker.local.blobs import LocalBlobs

    async def main() -> None:
        blobs = LocalBlobs(tmp_path)
        await blobs.put("artifacts/c1/t1/call.json", b"{}")
        upload = await blobs.upload("exports/c1/t1/exp_1.csv", INFO)
        await upload.write(b"a,b\r\n")
        await upload.commit()
        dropped = await blobs.upload("exports/c1/t1/exp_2.csv", INFO)
        await dropped.abort()

    asyncio.run(main())
    assert (tmp_path / "artifacts/c1/t1/call.json").read_bytes() == b"{}"
    assert (tmp_path / "exports/c1/t1/exp_1.csv").read_bytes() == b"a,b\r\n"
    # The info sidecars: one flat folder, each named by its blob path's sha256.
    sidecars = {p.name: json.loads(p.read_text()) for p in (tmp_path / ".meta").iterdir()}
    digest = hashlib.sha256(b"exports/c1/t1/exp_1.csv").hexdigest()
    assert sidecars[f"{digest}.json"]["path"] == "exports/c1/t1/exp_1.csv"
    assert len(sidecars) == 2  # the artifact's and the export's; none for the aborted one
    assert list((tmp_path / ".staging").iterdir()) == []  # nothing staged is left behind


def test_local_blob_info_of_a_home_written_before_the_flat_sidecar_folder(tmp_path: Path) -> None:
    from worker.local.blobs import LocalBlobs

    blobs = LocalBlobs(tmp_path)
    (tmp_path / "exports/c1/t1").mkdir(parents=True)
    (tmp_path / "exports/c1/t1/exp_1.csv").write_bytes(b"a\r\n")
    (tmp_path / ".meta/exports/c1/t1").mkdir(parents=True)
    (tmp_path / ".meta/exports/c1/t1/exp_1.csv.json").write_text(
        json.dumps({"content_type": "text/csv", "file_name": "x.csv", "metadata": {"k": "v"}})
    )
    info = asyncio.run(blobs.info("exports/c1/t1/exp_1.csv"))
    assert info == BlobInfo("text/csv", "x.csv", {"k": "v"})


def test_local_blobs_sweep_stale_staged_files_when_opened(tmp_path: Path) -> None:
    from worker.local.blobs import LocalBlobs

    LocalBlobs(tmp_path)
    stale, fresh = tmp_path / ".staging/dead.part", tmp_path / ".staging/live.part"
    stale.write_bytes(b"from a writer that died")
    fresh.write_bytes(b"being written right now")
    two_hours_ago = time.time() - 7200
    os.utime(stale, (two_hours_ago, two_hours_ago))
    LocalBlobs(tmp_path)
    assert not stale.exists()
    assert fresh.exists()


def test_local_blob_without_sidecar_reads_as_octet_stream(tmp_path: Path) -> None:
    from worker.local.blobs import LocalBlobs

    blobs = LocalBlobs(tmp_path)
    (tmp_path / "artifacts/c1").mkdir(parents=True)
    (tmp_path / "artifacts/c1/by-hand.json").write_bytes(b"[]")
    info = asyncio.run(blobs.info("artifacts/c1/by-hand.json"))
    assert info == BlobInfo("application/octet-stream", "by-hand.json", {})


def test_local_blobs_refuse_a_chunk_size_that_reads_nothing(tmp_path: Path) -> None:
    """A chunk size of 0 would read every blob as empty: refused, not an export of no rows."""
    from worker.local.blobs import LocalBlobs

    async def main() -> None:
        blobs = LocalBlobs(tmp_path / "blobs")
        await blobs.put("artifacts/a.json", b"[1]")
        for size in (0, -1):
            with pytest.raises(ValueError, match="chunk_size"):
                await read_all(blobs, "artifacts/a.json", chunk_size=size)
        assert await read_all(blobs, "artifacts/a.json", chunk_size=1) == [b"[", b"1", b"]"]

    asyncio.run(main())
