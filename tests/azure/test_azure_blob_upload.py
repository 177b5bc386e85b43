"""The Azure export upload's block list and metadata, and how a refused write is raised
(worker/azure/blobs.py)."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any
from urllib.parse import quote

import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlockState
from hypothesis import example, given, settings
from hypothesis import strategies as st

from worker.azure.blobs import (
    _METADATA_SAFE,
    DIGEST_PREFIX,
    MAX_METADATA_BYTES,
    AzureBlobUpload,
    decode_metadata,
    encode_metadata,
    written,
)
from worker.azure.timeouts import BLOB_STORAGE
from worker.ports import BlobInfo, TransientError
from worker.settlement import where_raised


class Blob:
    """What an upload touches of a BlobClient, recording the blocks it commits."""

    def __init__(self) -> None:
        self.staged: list[str] = []
        self.committed: list[Any] = []

    async def stage_block(self, block_id: str, data: bytes, **kwargs: Any) -> None:
        self.staged.append(block_id)

    async def commit_block_list(self, blocks: list[Any], **kwargs: Any) -> None:
        self.committed = blocks


def test_the_block_list_names_the_latest_blocks_so_a_resent_commit_still_applies() -> None:
    # The SDK resends a commit whose reply was lost; its blocks are committed by then, and a
    # list that named them "uncommitted" would be refused for a blob already written whole.
    async def main() -> Blob:
        blob = Blob()
        info = BlobInfo(content_type="text/csv", file_name="a.csv", metadata={})
        upload = AzureBlobUpload(blob, info, timeout=5.0, block_size=4)  # type: ignore[arg-type]
        await upload.write(b"0123456789")
        await upload.commit()
        return blob

    blob = asyncio.run(main())
    assert [block.id for block in blob.committed] == blob.staged and len(blob.staged) == 3
    assert {block.state for block in blob.committed} == {BlockState.LATEST}


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (400, "InvalidBlockList"),  # another upload of the path committed first
        (412, "LeaseIdMissing"),  # someone leased the blob
        (409, "BlobImmutableDueToPolicy"),  # kept by an immutability policy
        (409, "ContainerBeingDeleted"),
        (409, "BlobArchived"),  # a write over an archived blob, refused all the same
    ],
)
def test_a_refused_write_is_transient_and_named_by_the_code_blob_storage_gave(
    status: int, code: str
) -> None:
    # The writes are unconditional: a refusal is another writer's or the deployment's, never
    # an ETag race nor a bug of the turn. Raised as a Conflict it reached settlement as a bug
    # (handler_error, dead-lettered at once); the caller now writes the export again whole.
    async def refused() -> None:
        error = HttpResponseError(message="refused: SECRET_ROW_VALUE")
        error.status_code = status
        error.error_code = code  # type: ignore[attr-defined]
        raise error

    with pytest.raises(TransientError) as caught:
        asyncio.run(written(refused(), 5.0, BLOB_STORAGE))
    assert str(caught.value) == (
        f"Blob Storage: HttpResponseError {status} {code}: the write was refused"
    )
    described = where_raised(caught.value)
    assert described.startswith("TransientError (Blob Storage) at blobs.py:")
    assert described.endswith(f" from HttpResponseError {status} {code}")
    assert "SECRET_ROW_VALUE" not in described


def test_a_write_to_a_missing_container_says_so() -> None:
    async def missing() -> None:
        error = HttpResponseError(message="The specified container does not exist.")
        error.status_code = 404
        error.error_code = "ContainerNotFound"  # type: ignore[attr-defined]
        raise error

    with pytest.raises(TransientError, match="the container to write to does not exist"):
        asyncio.run(written(missing(), 5.0, BLOB_STORAGE))


_VALUES = st.text(st.characters(exclude_categories=["Cs"]), max_size=4000)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(_VALUES, min_size=1, max_size=5))
@example(values=["conv_1", "user_" + "ü" * 2000, "turn_1", "csv", "900"])  # one digested
@example(values=["会" * 496, "ü" * 600, "話" * 497])  # the longest ids a blob name holds
def test_blob_metadata_stays_within_blob_storages_bound_and_names_each_value(
    values: list[str],
) -> None:
    # Past 8 KB Blob Storage refuses the write on every try. Each value is stored as it is,
    # percent-encoded, or, while the whole would pass the bound, as its digest.
    names = ["conversation_id", "user_id", "turn_id", "format", "row_count"][: len(values)]
    metadata = dict(zip(names, values, strict=True))
    encoded = encode_metadata(metadata)
    assert sum(len(name) + len(value) for name, value in encoded.items()) <= MAX_METADATA_BYTES
    assert all(value.isascii() and value.isprintable() for value in encoded.values())
    stored = decode_metadata(encoded)
    digested = {name for name, value in metadata.items() if stored[name] != value}
    for name in digested:
        assert encoded[name] == DIGEST_PREFIX + hashlib.sha256(metadata[name].encode()).hexdigest()
    whole = sum(len(n) + len(quote(v, safe=_METADATA_SAFE)) for n, v in metadata.items())
    assert (whole > MAX_METADATA_BYTES) == bool(digested)
