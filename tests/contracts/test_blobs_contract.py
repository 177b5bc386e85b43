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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worker.ports import BlobInfo, Blobs, NotFound, TransientError

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


def test_of_two_uploads_of_one_path_each_commit_leaves_one_of_them_whole(
    blobs_factory: Any,
) -> None:
    # Two holders of one turn (the first one's lock lapsed) write its export at once. On Blob
    # Storage the first commit discards the other's staged blocks, and the other's commit is
    # refused (400 InvalidBlockList): transient, so that upload is written again whole. It
    # had reached settlement as a Conflict, which is a bug there (dead-lettered at once).
    async def body(blobs: Blobs) -> None:
        path = new_path()
        first, later = payload(5 * MB), payload(5 * MB)[::-1]  # past one 4 MB block each
        slow = await blobs.upload(path, INFO)
        await slow.write(later)
        fast = await blobs.upload(path, INFO)
        await fast.write(first)
        await fast.commit()
        assert b"".join(await read_all(blobs, path)) == first
        try:
            await slow.commit()
        except TransientError as refused:
            assert "the write was refused" in str(refused)
            assert b"".join(await read_all(blobs, path)) == first  # whole, not a mix
            again = await blobs.upload(path, INFO)
            await again.write(later)
            await again.commit()
        assert b"".join(await read_all(blobs, path)) == later
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


async def upload_whole(blobs: Blobs, path: str, info: BlobInfo, data: bytes = b"a\r\n") -> None:
    """Write `data` to `path` through a staged upload, committed."""
    upload = await blobs.upload(path, info)
    await upload.write(data)
    await upload.commit()


def _keeps_xattrs(folder: Path) -> bool:
    """Whether the filesystem under `folder` keeps user extended attributes."""
    probe = folder / "xattr-probe"
    probe.write_bytes(b"")
    try:
        os.setxattr(probe, "user.probe", b"1")
    except (AttributeError, OSError):
        return False
    finally:
        probe.unlink()
    return True


@pytest.mark.parametrize("xattrs", [True, False], ids=["info-on-file", "info-in-sidecars"])
def test_local_blobs_map_paths_under_the_root(tmp_path: Path, xattrs: bool) -> None:
    from worker.local.blobs import INFO_XATTR, LocalBlobs

    async def main() -> None:
        blobs = LocalBlobs(tmp_path, xattrs=xattrs)
        await blobs.put("artifacts/c1/t1/call.json", b"{}")
        upload = await blobs.upload("exports/c1/t1/exp_1.csv", INFO)
        await upload.write(b"a,b\r\n")
        await upload.commit()
        dropped = await blobs.upload("exports/c1/t1/exp_2.csv", INFO)
        await dropped.abort()

    asyncio.run(main())
    export = tmp_path / "exports/c1/t1/exp_1.csv"
    assert (tmp_path / "artifacts/c1/t1/call.json").read_bytes() == b"{}"
    assert export.read_bytes() == b"a,b\r\n"
    assert not (tmp_path / "exports/c1/t1/exp_2.csv").exists()
    sidecars = {p.name: json.loads(p.read_text()) for p in (tmp_path / ".meta").iterdir()}
    if xattrs and _keeps_xattrs(tmp_path):
        # The info rides on the file: no second file a write.
        assert json.loads(os.getxattr(export, INFO_XATTR))["path"] == "exports/c1/t1/exp_1.csv"
        assert json.loads(os.getxattr(export, INFO_XATTR))["file_name"] == INFO.file_name
        assert sidecars == {}
    else:
        # The info sidecars: one flat folder, each named by its blob path's sha256.
        digest = hashlib.sha256(b"exports/c1/t1/exp_1.csv").hexdigest()
        assert sidecars[f"{digest}.json"]["path"] == "exports/c1/t1/exp_1.csv"
        assert len(sidecars) == 2  # the artifact's and the export's; none for the aborted one
    assert list((tmp_path / ".staging").iterdir()) == []  # nothing staged is left behind


def _refusing_setxattr(monkeypatch: pytest.MonkeyPatch, code: int) -> list[str]:
    """Make os.setxattr refuse every blob's info with `code`; returns the blob paths it was
    called for, in order."""
    calls: list[str] = []

    def setxattr(target: Any, name: str, value: bytes, *args: Any) -> None:
        calls.append(json.loads(value)["path"])
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "setxattr", setxattr)
    return calls


def test_local_blobs_on_a_filesystem_without_xattrs_keep_info_in_sidecars(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOTSUP: the filesystem keeps no attributes. The info goes to a sidecar, and the
    attribute is not tried again for the next blob."""
    import errno

    from worker.local.blobs import LocalBlobs

    calls = _refusing_setxattr(monkeypatch, errno.EOPNOTSUPP)

    async def main() -> None:
        blobs = LocalBlobs(tmp_path)
        for n in (1, 2):
            await upload_whole(blobs, f"exports/c1/t1/exp_{n}.csv", INFO)
        await blobs.put("artifacts/c1/t1/call.json", b"{}")
        assert await blobs.info("exports/c1/t1/exp_2.csv") == INFO
        assert (await blobs.info("artifacts/c1/t1/call.json")).content_type == "application/json"

    asyncio.run(main())
    assert calls == ["exports/c1/t1/exp_1.csv"]
    assert len(list((tmp_path / ".meta").iterdir())) == 3


def test_local_blob_rewritten_with_its_info_on_the_file_drops_older_sidecars(
    tmp_path: Path,
) -> None:
    """A path written before with a sidecar (or by a worker of the nested sidecar folders),
    then again with the info on the file: the sidecars are dropped, so a copy of the file
    that leaves its attributes behind never reads as the older write's info."""
    import shutil

    from worker.local.blobs import LocalBlobs

    if not _keeps_xattrs(tmp_path):
        pytest.skip("this filesystem keeps no extended attributes")
    path = "exports/c1/t1/exp_1.csv"
    older = BlobInfo("text/plain", "old.txt", {"k": "old"})

    asyncio.run(upload_whole(LocalBlobs(tmp_path, xattrs=False), path, older, b"old\r\n"))
    nested = tmp_path / ".meta/exports/c1/t1/exp_1.csv.json"
    nested.parent.mkdir(parents=True)
    nested.write_text(json.dumps({"content_type": "x/y", "file_name": "z", "metadata": {}}))
    assert len(list((tmp_path / ".meta").glob("*.json"))) == 1

    blobs = LocalBlobs(tmp_path)
    asyncio.run(upload_whole(blobs, path, INFO, b"new\r\n"))
    assert asyncio.run(blobs.info(path)) == INFO
    assert list((tmp_path / ".meta").glob("*.json")) == []
    assert not nested.exists()

    shutil.copyfile(tmp_path / path, tmp_path / "exports/c1/t1/copy.csv")  # no attributes
    copied = asyncio.run(blobs.info("exports/c1/t1/copy.csv"))
    assert copied == BlobInfo("application/octet-stream", "copy.csv", {})


_TEXTS = st.text(max_size=40) | st.text(max_size=6_000, alphabet="ab\u00e9\ud800")
_INFOS = st.builds(
    BlobInfo,
    content_type=st.text(max_size=40),
    file_name=st.text(min_size=1, max_size=40),
    metadata=st.dictionaries(st.text(max_size=20), _TEXTS, max_size=4),
)


@pytest.mark.parametrize("xattrs", [True, False], ids=["info-on-file", "info-in-sidecars"])
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(info=_INFOS, first=_INFOS)
def test_local_blob_info_round_trips_whatever_its_text(
    tmp_path: Path, xattrs: bool, info: BlobInfo, first: BlobInfo
) -> None:
    """Any info comes back as written, either way it is kept: non-ASCII text, lone
    surrogates, control characters, and documents past what one attribute holds (64 KiB
    on every Linux filesystem, one block on ext4), which go to a sidecar on this disk. A
    path written twice keeps only the last info. (`tmp_path` is shared by the examples:
    each writes a path of its own.)"""
    from worker.local.blobs import LocalBlobs

    blobs = LocalBlobs(tmp_path, xattrs=xattrs)
    path = f"exports/c1/t1/exp_{uuid.uuid4().hex}.csv"

    async def main() -> None:
        for written in (first, info):
            await upload_whole(blobs, path, written)
        assert await blobs.info(path) == info

    asyncio.run(main())
    assert list((tmp_path / ".staging").iterdir()) == []


def test_local_blob_writes_in_a_home_without_sidecars_look_for_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dropping stale sidecars costs two look-ups a write: a home that held none when it
    was opened, and has had none written since, spares them; once one is written, later
    writes look again."""
    from worker.local.blobs import LocalBlobs

    if not _keeps_xattrs(tmp_path):
        pytest.skip("this filesystem keeps no extended attributes")
    unlinked: list[str] = []
    real_unlink = os.unlink

    def unlink(path: Any, *args: Any, **kwargs: Any) -> None:
        unlinked.append(os.fspath(path))
        real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink)
    large = BlobInfo("text/csv", "x.csv", {"note": "n" * 70_000})

    async def main() -> None:
        blobs = LocalBlobs(tmp_path)
        await upload_whole(blobs, "exports/c1/t1/a.csv", INFO)
        await blobs.put("artifacts/c1/t1/call.json", b"{}")
        assert [p for p in unlinked if ".meta" in p] == []
        await upload_whole(blobs, "exports/c1/t1/large.csv", large)  # from now on, they look
        await upload_whole(blobs, "exports/c1/t1/b.csv", INFO)
        assert sum(".meta" in p for p in unlinked) == 2

    asyncio.run(main())


def test_local_blob_info_larger_than_an_attribute_holds_is_kept_in_a_sidecar(
    tmp_path: Path,
) -> None:
    """No mock: the filesystem itself refuses a 70 KB attribute (past XATTR_SIZE_MAX), the
    info goes to a sidecar, and the next blob's small info goes to its file again."""
    from worker.local.blobs import INFO_XATTR, LocalBlobs

    if not _keeps_xattrs(tmp_path):
        pytest.skip("this filesystem keeps no extended attributes")
    large = BlobInfo("text/csv", "x.csv", {"note": "n" * 70_000})

    async def main() -> None:
        blobs = LocalBlobs(tmp_path)
        for name, info in (("large", large), ("small", INFO)):
            await upload_whole(blobs, f"exports/c1/t1/{name}.csv", info)
        assert await blobs.info("exports/c1/t1/large.csv") == large
        assert await blobs.info("exports/c1/t1/small.csv") == INFO

    asyncio.run(main())
    digest = hashlib.sha256(b"exports/c1/t1/large.csv").hexdigest()
    assert [p.name for p in (tmp_path / ".meta").iterdir()] == [f"{digest}.json"]
    small = json.loads(os.getxattr(tmp_path / "exports/c1/t1/small.csv", INFO_XATTR))
    assert small["file_name"] == INFO.file_name


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
