"""Local blobs: files under a root folder, `container/name/with/slashes` -> `root/container/...`.

Writes are staged in `root/.staging/` and moved into place with `os.replace`, so a reader
sees the old bytes or the new, never a part. The info of a blob (content type, download
file name, metadata, and its path for whoever looks) is a JSON document kept with it, as
Blob Storage keeps a blob's properties on the blob:

- where the filesystem keeps extended attributes (Linux: ext4, XFS, Btrfs, tmpfs since 6.6),
  on the file itself, as `user.export_worker.info`, set on the staged file before it moves
  in: the content and its info appear in one rename, and a write makes one file, not two
  (~0.05 ms a headline turn on a quiet filesystem; far more where a new file is dear, as on
  ext4 without a journal soon after many deletions: benchmarks/PROFILE.md, rounds 21-22);
- elsewhere (another system, a filesystem without them, a document too large for one), in
  a sidecar in the one folder `root/.meta/`, named by the sha256 of the blob's path, written
  (atomically) before the content moves in, so it is there as soon as the content is. One
  flat folder, because a folder is the dearest thing a write can create. A home written
  before keeps its sidecars at `root/.meta/<path>.json`, where they are still read.

The attribute is read first; a blob written with one drops the sidecars an earlier write of
its path left (a home that holds none skips the look-ups). A blob with neither (a file
dropped in by hand, or copied by a tool that leaves extended attributes behind) reads as
`application/octet-stream`.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import hashlib
import json
import os
import stat
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

from worker.ports import BlobInfo, NotFound
from worker.scratch import process_alive, process_start

STAGING_DIR = ".staging"
META_DIR = ".meta"
# Opening LocalBlobs sweeps the staged files whose writer is gone. A staged file is named
# after its writer: `{pid}-t{start}-….part`, the process id and the process's start time
# (`process_start`). It is dropped at once when no process has that id (the writer was
# killed mid-upload), or when the process that has it started at another time (the id was
# reused). A file whose writer is running is kept however long its export takes. The local
# backend is one machine's, so a process id names the same writer for every process
# sharing the home.
# Only when the writer's start cannot be told (a name without one, as older workers wrote;
# a system without /proc) is a file of a running process id judged by its age: older than
# this, its writer is taken to be gone.
STALE_STAGING_SECONDS = 3600.0
# An upload gathers chunks up to this many bytes before a worker thread writes them: one
# hand-off per MiB instead of one per serialiser chunk, and none before `commit` for a small
# export. Nothing is visible before `commit` either way.
WRITE_BUFFER_BYTES = 1 << 20
# The extended attribute holding a blob's info (see the module's docstring).
INFO_XATTR = "user.export_worker.info"
# What setxattr answers on a filesystem that keeps no user attributes: stop trying there.
# Any other refusal (E2BIG, ENOSPC, ERANGE: this document is too large) is one blob's.
_NO_XATTRS = frozenset({errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM})
# What getxattr answers for a file without the attribute, or a filesystem without any.
_NO_ATTRIBUTE = frozenset({errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP})
# Linux: a read flag that refuses to wait for the disk (see _read_cached).
_NOWAIT: int | None = getattr(os, "RWF_NOWAIT", None)

_T = TypeVar("_T")


def blob_parts(path: str) -> list[str]:
    """The segments of a blob path; ValueError for anything that could leave the root."""
    if not isinstance(path, str) or "\\" in path or "\x00" in path:
        raise ValueError(f"invalid blob path {path!r}: backslash or NUL")
    if path.startswith("/"):
        raise ValueError(f"invalid blob path {path!r}: absolute")
    parts = path.split("/")
    if len(parts) < 2:
        raise ValueError(f"invalid blob path {path!r}: needs container/name")
    if any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"invalid blob path {path!r}: empty, '.' or '..' segment")
    if parts[0].startswith("."):
        # Container names never start with a dot; the root's own folders do.
        raise ValueError(f"invalid blob path {path!r}: container starts with '.'")
    return parts


class LocalBlobs:
    """Blob storage in a folder; stale staged writes are swept when it opens."""

    def __init__(self, root: Path, *, xattrs: bool = True) -> None:
        """`xattrs=False` keeps every blob's info in a sidecar (how a filesystem without
        extended attributes is served; the contract tests run both ways)."""
        self._root = Path(root)
        # Whether to try the attribute: off where the system or the filesystem has none.
        self._xattrs = xattrs and hasattr(os, "setxattr")
        self._staging = self._root / STAGING_DIR
        self._staging.mkdir(parents=True, exist_ok=True)
        meta = self._root / META_DIR
        meta.mkdir(exist_ok=True)
        # Whether a sidecar may be here for a write to drop (see _install): a home whose
        # info is all on its files spares each write the two look-ups.
        with os.scandir(meta) as entries:
            self._sidecars_here = next(entries, None) is not None
        _sweep_staging(self._staging, time.time() - STALE_STAGING_SECONDS)

    async def read(self, path: str, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
        """Stream the blob in chunks of at most `chunk_size`; NotFound when missing."""
        if chunk_size <= 0:
            raise ValueError("chunk_size must be positive")
        target = self._content(path)
        try:
            cached = _read_cached(target, chunk_size)
            if cached is not None:
                if cached:
                    yield cached
                return
            handle, chunk = await asyncio.to_thread(_open_and_read, target, chunk_size)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
            raise NotFound(f"blob {path!r} not found") from exc
        if handle is None:  # the whole blob came in the first read
            if chunk:
                yield chunk
            return
        try:
            while chunk:
                yield chunk
                chunk = await asyncio.to_thread(handle.read, chunk_size)
        finally:
            handle.close()

    async def exists(self, path: str) -> bool:
        """Whether a blob is at `path`."""
        return await asyncio.to_thread(self._content(path).is_file)

    async def upload(self, path: str, info: BlobInfo) -> LocalBlobUpload:
        """Start a staged write; nothing shows at `path` until `commit`."""
        self._content(path)  # reject a bad path before staging anything
        # Not on the loop: creating a file took ~1 ms here, longer than the hand-off.
        staging = _to_the_end(self._stage)
        try:
            fd, temp = await asyncio.shield(staging)
        except asyncio.CancelledError:
            # The thread cannot be stopped: the file it makes is nobody's, so it is
            # closed and removed when it comes (a long-running worker would keep both).
            staging.add_done_callback(_drop_staged)
            raise
        return LocalBlobUpload(self, path, info, fd, temp)

    async def put(self, path: str, data: bytes, content_type: str = "application/json") -> None:
        """Write a small blob in one call, atomically (file name: the last segment)."""
        target = self._content(path)
        info = BlobInfo(content_type=content_type, file_name=target.name, metadata={})

        def write() -> None:
            fd, temp = self._stage()
            self._finish(fd, temp, path, info, data, sync=False)

        await asyncio.to_thread(write)

    async def info(self, path: str) -> BlobInfo:
        """Content type, file name and metadata; NotFound when the blob is missing."""
        target, sidecar = self._content(path), self._sidecar(path)

        def load() -> BlobInfo:
            if not target.is_file():
                raise NotFound(f"blob {path!r} not found")
            try:
                doc = _info_attribute(target)
            except FileNotFoundError as exc:  # removed since it was looked at
                raise NotFound(f"blob {path!r} not found") from exc
            if doc is None:
                doc = _first_file((sidecar, self._sidecar_before(path)))
            if doc is None:
                return BlobInfo("application/octet-stream", target.name, {})
            raw = json.loads(doc)
            return BlobInfo(raw["content_type"], raw["file_name"], dict(raw["metadata"]))

        return await asyncio.to_thread(load)

    async def close(self) -> None:
        """Nothing to release: files are opened per call."""

    # ---- used by LocalBlobUpload -----------------------------------------------------
    def _content(self, path: str) -> Path:
        return self._root.joinpath(*blob_parts(path))

    def _sidecar(self, path: str) -> Path:
        blob_parts(path)  # a valid path: a path has one spelling, so one sidecar
        digest = hashlib.sha256(path.encode("utf-8", "surrogatepass")).hexdigest()
        return self._root / META_DIR / f"{digest}.json"

    def _sidecar_before(self, path: str) -> Path:
        """Where a home written before the flat folder keeps a blob's sidecar."""
        *folders, name = blob_parts(path)
        return self._root.joinpath(META_DIR, *folders, f"{name}.json")

    def _stage(self) -> tuple[int, Path]:
        """A new staged file, open for writing: its descriptor and its path. A bare
        descriptor, as every write is whole: a file object would cost three more system
        calls to open, each a trip out of and back into the interpreter's lock."""
        fd, name = tempfile.mkstemp(dir=self._staging, prefix=_writer_prefix(), suffix=".part")
        return fd, Path(name)

    def _finish(
        self, fd: int, temp: Path, path: str, info: BlobInfo, data: bytes, *, sync: bool
    ) -> None:
        """Write the last of a staged file's bytes, set its info on it, close it (synced
        first when `sync`) and move it into place; on failure nothing is left staged."""
        with _removed_on_failure(temp):
            try:
                _write_all(fd, data)
                on_file = self._info_on_file(fd, path, info)
                if sync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            self._install(temp, path, info, on_file)

    def _info_on_file(self, fd: int, path: str, info: BlobInfo) -> bool:
        """Set the blob's info on its staged file; False when it must go to a sidecar."""
        if not self._xattrs:
            return False
        try:
            os.setxattr(fd, INFO_XATTR, _info_document(path, info))
        except OSError as exc:
            if exc.errno in _NO_XATTRS:
                self._xattrs = False
            return False
        return True

    def _install(self, temp: Path, path: str, info: BlobInfo, on_file: bool) -> None:
        """Move the staged file into place: its info already on it (`on_file`), or in a
        sidecar moved into place first. A path written before may have left sidecars: with
        the info on the file they are stale, and are dropped once the content is in (when
        the home held any sidecar as it was opened, or this process wrote one since: a
        redelivered turn writes the same info to the same path, so a sidecar another
        process writes meanwhile is not stale)."""
        if not on_file:
            self._sidecars_here = True
            fd, sidecar_temp = self._stage()
            with _removed_on_failure(sidecar_temp):
                try:
                    _write_all(fd, _info_document(path, info))
                finally:
                    os.close(fd)
                os.replace(sidecar_temp, self._sidecar(path))
        target = self._content(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(temp, target)
        if on_file and self._sidecars_here:
            for stale in (self._sidecar(path), self._sidecar_before(path)):
                with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                    stale.unlink()


class LocalBlobUpload:
    """A staged write to one blob path."""

    def __init__(
        self,
        blobs: LocalBlobs,
        path: str,
        info: BlobInfo,
        fd: int,
        temp: Path,
    ) -> None:
        self._blobs = blobs
        self._path = path
        self._info = info
        self._fd = fd  # closed by commit or abort, whichever comes first
        self._temp = temp
        self._state = "open"  # open -> committed | aborted
        self._pending: list[bytes] = []  # written, not yet handed to the staged file
        self._pending_bytes = 0
        self._last_step: asyncio.Future[Any] | None = None  # see _step

    async def write(self, chunk: bytes) -> None:
        """Append bytes to the staged file."""
        self._require_open()
        self._pending.append(bytes(chunk))
        self._pending_bytes += len(chunk)
        if self._pending_bytes >= WRITE_BUFFER_BYTES:
            await self._step(_write_all, self._fd, self._take_pending())

    def _step(self, call: Callable[..., _T], *args: Any) -> asyncio.Future[_T]:
        """Run `call(*args)` on the staged file in a worker thread, after the upload's
        previous step has ended, and to its end even when the task awaiting it is cancelled.

        A turn is cancelled at whatever await it has reached (its session lock lost, the
        worker stopping). A thread's call cannot be stopped once started, and one that has
        not started yet is dropped without a word: a commit dropped so would leave its
        descriptor open and its file staged for the life of the process, and an abort that
        closed the descriptor while a cancelled write was still in its thread would send
        that write to a closed descriptor, or to whatever file took its number next. So
        each step waits for the one before it and is shielded from the caller's cancel."""
        self._last_step = step = _to_the_end(call, *args, after=self._last_step)
        return asyncio.shield(step)

    def _take_pending(self) -> bytes:
        data = b"".join(self._pending)
        self._pending.clear()
        self._pending_bytes = 0
        return data

    async def commit(self) -> None:
        """Move the staged bytes, with their info, into place."""
        self._require_open()
        self._state = "committed"
        rest = self._take_pending()

        def install() -> None:
            self._blobs._finish(self._fd, self._temp, self._path, self._info, rest, sync=True)

        # Once asked for, the commit completes even if its caller is cancelled: the blob
        # appears whole (a redelivered turn writes the same bytes to the same path).
        await self._step(install)

    async def abort(self) -> None:
        """Drop the staged bytes; the path keeps what it held. Idempotent."""
        if self._state != "open":
            return
        self._state = "aborted"
        self._take_pending()

        await self._step(_discard, self._fd, self._temp)

    def _require_open(self) -> None:
        if self._state != "open":
            raise RuntimeError(f"upload to {self._path!r} is already {self._state}")


def _to_the_end(
    call: Callable[..., _T], *args: Any, after: asyncio.Future[Any] | None = None
) -> asyncio.Future[_T]:
    """`call(*args)` in a worker thread once `after` (if any) has ended, as a task of its
    own: a caller awaiting it through `asyncio.shield` can be cancelled without the call
    being dropped before it starts (a thread's call cannot be stopped once it has)."""

    async def run() -> _T:
        if after is not None and not after.done():
            await asyncio.wait((after,))
        return await asyncio.to_thread(call, *args)

    return asyncio.ensure_future(run())


def _drop_staged(staging: asyncio.Future[tuple[int, Path]]) -> None:
    """Close and remove a staged file whose upload was cancelled while it was made."""
    if staging.cancelled() or staging.exception() is not None:
        return  # nothing was made (a loop shutting down cancels the step itself)
    _discard(*staging.result())


def _discard(fd: int, temp: Path) -> None:
    """Close a staged file and remove it."""
    os.close(fd)
    temp.unlink(missing_ok=True)


@contextlib.contextmanager
def _removed_on_failure(temp: Path) -> Iterator[None]:
    """Inside, a staged file is written and moved into place; if that fails, the staged
    file is removed (once moved into place, it is gone from the staging folder)."""
    try:
        yield
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def _info_document(path: str, info: BlobInfo) -> bytes:
    """A blob's info as it is kept, on the file or in a sidecar."""
    doc = {
        "path": path,
        "content_type": info.content_type,
        "file_name": info.file_name,
        "metadata": dict(info.metadata),
    }
    return json.dumps(doc).encode("utf-8")


def _info_attribute(target: Path) -> bytes | None:
    """The info attribute of a blob's file; None when it has none (or cannot have one)."""
    if not hasattr(os, "getxattr"):
        return None
    try:
        return os.getxattr(target, INFO_XATTR)
    except OSError as exc:
        if exc.errno in _NO_ATTRIBUTE:
            return None
        raise


def _first_file(places: tuple[Path, ...]) -> bytes | None:
    """The bytes of the first of `places` that is a file; None when none is."""
    for place in places:
        try:
            return place.read_bytes()
        except FileNotFoundError:
            continue
    return None


def _write_all(fd: int, data: bytes) -> None:
    """Write all of `data` to `fd` (a write to a regular file may take part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_cached(target: Path, chunk_size: int) -> bytes | None:
    """The whole blob when it fits in one chunk and the page cache holds all of it, read on
    the caller's thread: RWF_NOWAIT makes the read answer EAGAIN instead of waiting on the
    disk. None when the blob is larger, not all cached or not a file: the caller reads it
    in a worker thread then. A turn's artifacts were just written, so they are cached."""
    if _NOWAIT is None:
        return None
    fd = os.open(target, os.O_RDONLY | os.O_CLOEXEC)
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode) or status.st_size > chunk_size:
            return None
        buffer = bytearray(status.st_size + 1)  # one byte more: the end shows as a short read
        try:
            count = os.preadv(fd, [buffer], 0, _NOWAIT)
        except OSError:
            return None  # EAGAIN: not cached; or a file system without RWF_NOWAIT
        if count != status.st_size:
            return None
        del buffer[count:]
        return bytes(buffer)
    finally:
        os.close(fd)


def _open_and_read(target: Path, chunk_size: int) -> tuple[IO[bytes] | None, bytes]:
    """Open `target` and read its first chunk in one trip to a worker thread. A read that
    comes back short has reached the end (a buffered read of a file fills its request
    unless the file ends first): the file is closed then, and None stands for the handle,
    so a blob smaller than a chunk costs one hand-off instead of three."""
    handle = target.open("rb")
    try:
        chunk = handle.read(chunk_size)
    except BaseException:
        handle.close()
        raise
    if len(chunk) < chunk_size:
        handle.close()
        return None, chunk
    return handle, chunk


def _writer_prefix() -> str:
    """How this process names its staged files (see STALE_STAGING_SECONDS)."""
    return _prefix_of(os.getpid())  # a forked child has an id, and a start, of its own


@functools.cache
def _prefix_of(pid: int) -> str:
    """`{pid}-t{start}-`, or `{pid}-` when the process's start time cannot be read."""
    start = process_start(pid)
    return f"{pid}-" if start is None else f"{pid}-t{start}-"


def _sweep_staging(staging: Path, older_than: float) -> None:
    for entry in staging.iterdir():
        try:
            if entry.is_file() and _writer_gone(entry, older_than):
                entry.unlink()
        except FileNotFoundError:
            continue  # another process swept it first


def _writer_gone(staged: Path, older_than: float) -> bool:
    """Whether the process that staged this file can no longer be writing it (see
    STALE_STAGING_SECONDS): its id names no running process, or one that started at
    another time; or, when that cannot be told, the file was last written before
    `older_than`."""
    pid_text, _, rest = staged.name.partition("-")
    if pid_text.isdigit():
        pid = int(pid_text)
        if not process_alive(pid):
            return True
        start_text = rest.partition("-")[0]
        if start_text.startswith("t") and start_text[1:].isdigit():
            started = process_start(pid)
            if started is not None:
                return started != int(start_text[1:])
    return staged.stat().st_mtime < older_than
