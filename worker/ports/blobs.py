"""Blob storage: artifacts are read, exports are written. Paths read `container/name`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Protocol

import msgspec

from worker.ports.calls import Effect, port_call


class BlobInfo(msgspec.Struct, frozen=True):
    """What is stored next to an export's bytes."""

    content_type: str
    file_name: str
    metadata: Mapping[str, str]


class BlobUpload(Protocol):
    """An export being written: nothing is visible at its path until `commit`."""

    # Never repeated in place: a chunk written twice would corrupt the file. The handler
    # starts the whole upload again instead.
    @port_call(Effect.ONCE)
    async def write(self, chunk: bytes) -> None:
        """Append bytes (staged, not yet visible)."""
        ...

    @port_call(Effect.ONCE)
    async def commit(self) -> None:
        """Make the whole blob visible at once."""
        ...

    @port_call(Effect.RELEASE)
    async def abort(self) -> None:
        """Drop what was staged; the path keeps whatever it held before."""
        ...


class Blobs(Protocol):
    """Reads artifacts, writes exports."""

    @port_call(Effect.READ)
    def read(self, path: str, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
        """Stream a blob's bytes; NotFound (raised on first iteration) when missing."""
        ...

    @port_call(Effect.READ)
    async def exists(self, path: str) -> bool:
        """Whether a blob is at `path`."""
        ...

    @port_call(Effect.ACQUIRE, opens=BlobUpload)
    async def upload(self, path: str, info: BlobInfo) -> BlobUpload:
        """Start writing a blob at `path` (replaced whole on commit)."""
        ...

    @port_call(Effect.READ)
    async def info(self, path: str) -> BlobInfo:
        """Content type, download file name and metadata; NotFound when missing."""
        ...

    @port_call(Effect.RELEASE)
    async def close(self) -> None:
        """Release connections."""
        ...
