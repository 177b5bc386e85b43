"""Blob Storage adapter of the `Blobs` port. Paths read `container/name` (stored-data.md).

Exports are written as block blobs: blocks are staged as bytes arrive and the whole blob
appears at once on `commit` (Put Block List). Until then readers see the previous blob or
nothing; an aborted upload leaves its uncommitted blocks to the service, which discards
them after a week (there is no call to drop them sooner) or at the next commit of the path.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import TypeVar
from urllib.parse import quote, unquote

from azure.storage.blob import BlobBlock, BlockState, ContentSettings
from azure.storage.blob.aio import BlobClient

from worker.azure.credentials import blob_service
from worker.azure.timeouts import BLOB_STORAGE, guarded, guarded_iter
from worker.ports import Archived, BlobInfo, Conflict, NotFound, TransientError
from worker.settings import Settings

BLOCK_SIZE = 4 * 1024 * 1024
# Download granularity: bounds what one read holds in memory, whatever the blob's size.
DOWNLOAD_CHUNK = 4 * 1024 * 1024
_T = TypeVar("_T")
# Blob Storage's bound on a blob's metadata, names and values (8 KB), and how a value is
# stored when the metadata would pass it (`encode_metadata`).
MAX_METADATA_BYTES = 8000
DIGEST_PREFIX = "sha256:"
DIGEST_LENGTH = len(DIGEST_PREFIX) + 64
_METADATA_KEY = re.compile(r"[^A-Za-z0-9_]")
# Printable ASCII minus '%' survives as itself; everything else is percent-encoded, so any
# string round-trips through an HTTP header.
_METADATA_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%")


def split_path(path: str) -> tuple[str, str]:
    """`container/name` as its two parts."""
    container, _, name = path.partition("/")
    if not container or not name:
        raise ValueError(f"blob path must read container/name: {path!r}")
    return container, name


class AzureBlobs:
    """Artifacts are read, exports are written, in Azure Blob Storage (or Azurite)."""

    def __init__(
        self,
        settings: Settings,
        *,
        create_containers: bool | None = None,
        block_size: int = BLOCK_SIZE,
    ) -> None:
        """Containers are created on first write when `create_containers` (default:
        `settings.cosmos_create_resources`, the one "create what is missing" switch)."""
        self._timeout = settings.sdk_timeout_seconds
        self._create = (
            settings.cosmos_create_resources if create_containers is None else create_containers
        )
        self._block_size = block_size
        self._service, self._credential = blob_service(
            settings, max_single_get_size=DOWNLOAD_CHUNK, max_chunk_get_size=DOWNLOAD_CHUNK
        )
        self._ready: set[str] = set()

    def _blob(self, path: str) -> BlobClient:
        container, name = split_path(path)
        return self._service.get_blob_client(container, name)

    async def _ensure_container(self, path: str) -> None:
        container, _ = split_path(path)
        if not self._create or container in self._ready:
            return
        with contextlib.suppress(Conflict):  # created meanwhile: fine
            container_client = self._service.get_container_client(container)
            await guarded(container_client.create_container(), self._timeout, BLOB_STORAGE)
        self._ready.add(container)

    async def read(self, path: str, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
        """Stream a blob's bytes in pieces of at most `chunk_size`; NotFound when missing."""
        downloader = await guarded(self._blob(path).download_blob(), self._timeout, BLOB_STORAGE)
        async for chunk in guarded_iter(downloader.chunks(), self._timeout, BLOB_STORAGE):
            for start in range(0, len(chunk), chunk_size):
                yield chunk[start : start + chunk_size]

    async def exists(self, path: str) -> bool:
        """Whether a blob is at `path` (a missing container means no)."""
        return bool(await guarded(self._blob(path).exists(), self._timeout, BLOB_STORAGE))

    async def upload(self, path: str, info: BlobInfo) -> AzureBlobUpload:
        """Start a staged upload; nothing is visible at `path` until `commit`."""
        await self._ensure_container(path)
        return AzureBlobUpload(self._blob(path), info, self._timeout, self._block_size)

    async def put(self, path: str, data: bytes, content_type: str = "application/json") -> None:
        """Write a small blob in one call, replacing what was there."""
        await self._ensure_container(path)
        await written(
            self._blob(path).upload_blob(
                data, overwrite=True, content_settings=ContentSettings(content_type=content_type)
            ),
            self._timeout,
            BLOB_STORAGE,
        )

    async def info(self, path: str) -> BlobInfo:
        """Content type, download file name and metadata; NotFound when missing."""
        props = await guarded(self._blob(path).get_blob_properties(), self._timeout, BLOB_STORAGE)
        settings = props.content_settings
        _, name = split_path(path)
        return BlobInfo(
            content_type=settings.content_type or "application/octet-stream",
            file_name=file_name_of(settings.content_disposition) or name.rsplit("/", 1)[-1],
            metadata=decode_metadata(props.metadata or {}),
        )

    async def close(self) -> None:
        """Release the HTTP session and the credential."""
        try:
            await self._service.close()
        finally:
            if self._credential is not None:
                await self._credential.close()


class AzureBlobUpload:
    """One export being written as staged blocks of `block_size` bytes."""

    def __init__(self, blob: BlobClient, info: BlobInfo, timeout: float, block_size: int) -> None:
        self._blob = blob
        self._info = info
        self._timeout = timeout
        self._block_size = block_size
        # One prefix per upload: two writers of the same path never share a block id.
        self._prefix = uuid.uuid4().hex
        self._block_ids: list[str] = []
        self._buffer = bytearray()
        self._finished = False

    async def write(self, chunk: bytes) -> None:
        """Buffer bytes; stage a block each time a full block has arrived."""
        self._check_open()
        self._buffer.extend(chunk)
        while len(self._buffer) >= self._block_size:
            await self._stage(bytes(self._buffer[: self._block_size]))
            del self._buffer[: self._block_size]

    async def commit(self) -> None:
        """Stage the rest and commit the block list: the blob appears whole, with its settings.

        An export that never filled a block is one Put Blob instead (the same whole blob and
        settings, one write operation where staging and committing take two).
        """
        self._check_open()
        settings = ContentSettings(
            content_type=self._info.content_type,
            content_disposition=content_disposition(self._info.file_name),
        )
        metadata = encode_metadata(self._info.metadata)
        if not self._block_ids:
            await written(
                self._blob.upload_blob(
                    bytes(self._buffer),
                    overwrite=True,
                    content_settings=settings,
                    metadata=metadata,
                ),
                self._timeout,
                BLOB_STORAGE,
            )
            self._buffer.clear()
            self._finished = True
            return
        if self._buffer:
            await self._stage(bytes(self._buffer))
            self._buffer.clear()
        # LATEST, not UNCOMMITTED: the storage SDK resends a PUT whose reply was lost, and
        # after a commit the service applied the blocks are committed; a list naming them
        # "uncommitted" would then be refused (InvalidBlockList) for a blob written whole.
        # The block ids are this upload's own (`_prefix`), so the latest are ours either way.
        await written(
            self._blob.commit_block_list(
                [BlobBlock(block_id, BlockState.LATEST) for block_id in self._block_ids],
                content_settings=settings,
                metadata=metadata,
            ),
            self._timeout,
            BLOB_STORAGE,
        )
        self._finished = True

    async def abort(self) -> None:
        """Forget the staged blocks: never committed, the service discards them."""
        self._buffer.clear()
        self._block_ids.clear()
        self._finished = True

    async def _stage(self, data: bytes) -> None:
        raw = f"{self._prefix}-{len(self._block_ids):06d}".encode()
        block_id = base64.b64encode(raw).decode("ascii")  # same length for every block
        await written(
            self._blob.stage_block(block_id, data, length=len(data)), self._timeout, BLOB_STORAGE
        )
        self._block_ids.append(block_id)

    def _check_open(self) -> None:
        if self._finished:
            raise RuntimeError("upload already committed or aborted")


async def written(operation: Awaitable[_T], timeout: float, service: str) -> _T:
    """`guarded` for a write, whose refusals are the deployment's or another writer's, never a
    bug of the turn. Each is raised as transient: the caller writes the export again whole,
    then the turn is retried and dead-lettered `transient_failure`, to replay once fixed.

    - 404: the container is missing (a write needs no blob to exist);
    - a conflict: the writes are unconditional, so it is no ETag race. Another upload of the
      same path committed first, which discards this one's staged blocks (400
      InvalidBlockList: a holder whose lock lapsed writing the same export), or the blob is
      leased (412 LeaseIdMissing), kept by an immutability policy (409), or its container is
      being deleted (409). The description names the code.
    """
    try:
        return await guarded(operation, timeout, service)
    except Archived as exc:  # a NotFound, but the blob is there: refused as a conflict is
        raise TransientError(f"{exc}: the write was refused") from exc
    except NotFound as exc:
        raise TransientError(
            f"{service}: the container to write to does not exist: create it, or set"
            " COSMOS_CREATE_RESOURCES=true"
        ) from exc
    except Conflict as exc:
        raise TransientError(f"{exc}: the write was refused") from exc


def content_disposition(file_name: str) -> str:
    """`attachment; filename="…"`, with an RFC 6266 `filename*` when the name is not ASCII."""
    fallback = "".join(c if " " <= c <= "~" and c not in '"\\' else "_" for c in file_name)
    header = f'attachment; filename="{fallback}"'
    if fallback != file_name:
        header += f"; filename*=UTF-8''{quote(file_name, safe='')}"
    return header


def file_name_of(disposition: str | None) -> str | None:
    """The download file name a Content-Disposition header carries, if any."""
    if not disposition:
        return None
    extended = re.search(r"filename\*\s*=\s*UTF-8''([^;\s]+)", disposition, re.IGNORECASE)
    if extended:
        return unquote(extended.group(1))
    plain = re.search(r'filename\s*=\s*"([^"]*)"', disposition, re.IGNORECASE)
    return plain.group(1) if plain else None


def encode_metadata(metadata: Mapping[str, str]) -> dict[str, str]:
    """Blob metadata must be ASCII: keys as identifiers, values percent-encoded.

    Blob Storage holds at most 8 KB of metadata, names and values together, and refuses a
    write past it on every try (400 MetadataTooLarge; Azurite drops the connection, or
    answers 431). The event bounds no user id, and percent-encoding triples each byte past
    ASCII, so while the metadata is past `MAX_METADATA_BYTES` its longest value is stored as
    `sha256:` and the hex digest of its UTF-8 (the turn record keeps every id whole).
    """
    encoded: dict[str, str] = {}
    texts: dict[str, str] = {}
    for key, value in metadata.items():
        name = _METADATA_KEY.sub("_", key) or "_"
        if name[0].isdigit():
            name = "_" + name
        texts[name] = str(value)
        encoded[name] = quote(texts[name], safe=_METADATA_SAFE)
    size = sum(len(name) + len(value) for name, value in encoded.items())
    for name in sorted(encoded, key=lambda n: len(encoded[n]), reverse=True):
        if size <= MAX_METADATA_BYTES or len(encoded[name]) <= DIGEST_LENGTH:
            break  # within the bound, or no value left that its digest would shorten
        size -= len(encoded[name]) - DIGEST_LENGTH
        encoded[name] = DIGEST_PREFIX + hashlib.sha256(texts[name].encode()).hexdigest()
    return encoded


def decode_metadata(metadata: Mapping[str, str]) -> dict[str, str]:
    """The inverse of `encode_metadata` for values (keys were already identifiers)."""
    return {key: unquote(value) for key, value in metadata.items()}
